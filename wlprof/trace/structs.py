"""Typed decoding of trace events with msgspec: only the fields the parser reads are built.

A chunk of events decodes straight into structs picked by each event's phase (`ph`): `Event`
for complete events, `Begin`/`End` for B/E, field-less ones for the phases never read (every
other field is skipped in C, the op inputs stay raw JSON until a distinct one is seen),
several times faster than building every event's dicts. Where msgspec is not installed, or a
chunk holds events of another shape (an event that is not an object, `args` that is not an
object, a phase not listed or none), `decode` returns the plain dicts the parser also reads.
"""

from __future__ import annotations

from typing import Any, Union

from wlprof import jsonio

try:
    import msgspec
except ImportError:  # pragma: no cover - exercised only where msgspec is missing
    msgspec = None


class _Missing:
    """A field the event does not have (told apart from one that is null)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING = _Missing()
# the op inputs and the extras the costs read: kept as raw JSON, decoded once per distinct value
RAW_KEYS = ("Input Dims", "Input type", "Input Strides", "Concrete Inputs",
            "kernel_backend", "kernel_num_gb", "kernel_flop", "Collective name", "In msg nelems",
            "Out msg nelems", "In split size", "Out split size", "Group size", "dtype", "Process Group Name",
            "Process Group Ranks", "Process Group Description", "Global rank start", "Global rank stride", "Rank",
            "Input dims")  # the last: PyTorch 1.8-1.10's name of "Input Dims"
# the args read as values: (attribute, key, default when missing)
VALUE_KEYS = (("ext", "External id", None), ("ext_old", "external id", None), ("correlation", "correlation", None),
              ("stream", "stream", MISSING), ("device", "device", MISSING), ("grid", "grid", None),
              ("block", "block", None), ("regs", "registers per thread", None), ("smem", "shared memory", None),
              ("bps", "blocks per SM", None), ("wps", "warps per SM", None), ("nbytes", "bytes", None),
              ("size", "size", None))  # the last: an MTIA DMA copy's bytes
RAW_ATTRS = tuple(f"r{i}" for i in range(len(RAW_KEYS)))
# the phases besides X, B and E (instant, counter, async, flow, sample, object, metadata, memory dump,
# mark, clock sync, context, and the deprecated ones); an event of any other phase, or of none, makes
# its chunk decode as dicts
SKIPPED_PHASES = ("i", "I", "C", "b", "n", "e", "S", "T", "p", "F", "s", "t", "f", "P", "N", "O", "D", "M",
                  "V", "v", "R", "c", "(", ")")

if msgspec is not None:
    _EMPTY = msgspec.Raw(b"")
    Args = msgspec.defstruct(
        "Args", [(a, Any, d) for a, _, d in VALUE_KEYS] + [(a, msgspec.Raw, _EMPTY) for a in RAW_ATTRS],
        rename={**{a: k for a, k, _ in VALUE_KEYS}, **dict(zip(RAW_ATTRS, RAW_KEYS, strict=True))},
        gc=False, module=__name__)
    _FIELDS = [("cat", Any, MISSING), ("name", Any, None), ("pid", Any, None), ("tid", Any, None),
               ("ts", Any, None), ("dur", Any, MISSING), ("args", Args | None, None)]

    def _event(name: str, ph: str, fields: list):
        """A struct for the events of phase `ph` (the `ph` field picks it; `ph` is a class attribute)."""
        return msgspec.defstruct(name, fields, gc=False, module=__name__, tag_field="ph", tag=ph,
                                 namespace={"ph": ph})

    Event = _event("Event", "X", _FIELDS)  # a complete event
    Begin = _event("Begin", "B", _FIELDS)
    End = _event("End", "E", _FIELDS)
    # the other phases of the Trace Event Format: never read, so none of their fields is decoded
    _SKIPPED = tuple(_event(f"Skipped{ord(ph)}", ph, []) for ph in SKIPPED_PHASES)
    EVENT_TYPES = frozenset({Event, Begin, End, *_SKIPPED})
    _DECODER = msgspec.json.Decoder(list[Union[(Event, Begin, End, *_SKIPPED)]])
    NO_ARGS = Args()  # an event without args
    ABSENT = _EMPTY  # the raw field of an arg the event does not have
    fields = msgspec.structs.astuple  # an Args struct's fields, in VALUE_KEYS then RAW_KEYS order
    DecodeError: tuple = (msgspec.DecodeError, *jsonio.JSONDecodeError)
else:  # pragma: no cover
    Event = Begin = End = None
    EVENT_TYPES = frozenset()
    NO_ARGS = None
    ABSENT = None
    fields = None
    _DECODER = None
    DecodeError = jsonio.JSONDecodeError


def available() -> bool:
    return _DECODER is not None


def decode(view, copy: bool = True) -> list:
    """A JSON array of events as `Event` structs, or as dicts where they do not fit the struct.

    The raw fields refer to a copy of `view`'s bytes, never to a buffer the caller resizes or
    overwrites; `copy=False` decodes `view` itself, for a caller that keeps its bytes as they are
    while the events live. Raises a JSON decode error (`DecodeError`) when `view` is not valid JSON.
    """
    if _DECODER is None:
        return jsonio.loads(view)
    data = bytes(view) if copy else view
    try:
        return _DECODER.decode(data)
    except msgspec.ValidationError:
        return jsonio.loads(data)


def as_dicts(view, copy: bool = True) -> list:
    """`decode` without the structs: every event a dict, as where msgspec is not installed."""
    return jsonio.loads(view)


def complete(ev, dur):
    """The complete event (`Event`) a B event with duration `dur` stands for."""
    return Event(ev.cat, ev.name, ev.pid, ev.tid, ev.ts, dur, ev.args)


def raw_value(raw) -> Any:
    """A raw field's value (None where the event has no such field)."""
    if not raw:
        return None
    return jsonio.loads(memoryview(raw))

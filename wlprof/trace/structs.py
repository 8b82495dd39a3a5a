"""Typed decoding of trace events with msgspec: only the fields the parser reads are built.

A chunk of events decodes straight into `Event` structs (every other field is skipped in C,
the op inputs stay raw JSON until a distinct one is seen), several times faster than
building every event's dicts. Where msgspec is not installed, or a chunk holds events of
another shape (an event that is not an object, `args` that is not an object), `decode`
returns the plain dicts the parser also reads.
"""

from __future__ import annotations

from typing import Any

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

if msgspec is not None:
    _EMPTY = msgspec.Raw(b"")
    Args = msgspec.defstruct(
        "Args", [(a, Any, d) for a, _, d in VALUE_KEYS] + [(a, msgspec.Raw, _EMPTY) for a in RAW_ATTRS],
        rename={**{a: k for a, k, _ in VALUE_KEYS}, **dict(zip(RAW_ATTRS, RAW_KEYS, strict=True))},
        gc=False, module=__name__)
    Event = msgspec.defstruct("Event", [("ph", Any, None), ("cat", Any, MISSING), ("name", Any, None),
                                        ("pid", Any, None), ("tid", Any, None), ("ts", Any, None), ("dur", Any, 0),
                                        ("args", Args | None, None)], gc=False, module=__name__)
    _DECODER = msgspec.json.Decoder(list[Event])
    NO_ARGS = Args()  # an event without args
    ABSENT = _EMPTY  # the raw field of an arg the event does not have
    fields = msgspec.structs.astuple  # an Args struct's fields, in VALUE_KEYS then RAW_KEYS order
    DecodeError: tuple = (msgspec.DecodeError, *jsonio.JSONDecodeError)
else:  # pragma: no cover
    Event = None
    NO_ARGS = None
    ABSENT = None
    fields = None
    _DECODER = None
    DecodeError = jsonio.JSONDecodeError


def available() -> bool:
    return _DECODER is not None


def decode(view) -> list:
    """A JSON array of events as `Event` structs, or as dicts where they do not fit the struct.

    Raises a JSON decode error (`DecodeError`) when `view` is not valid JSON.
    """
    if _DECODER is None:
        return jsonio.loads(view)
    data = bytes(view)  # the raw fields refer to this copy, never to a buffer the caller resizes
    try:
        return _DECODER.decode(data)
    except msgspec.ValidationError:
        return jsonio.loads(data)


def raw_value(raw) -> Any:
    """A raw field's value (None where the event has no such field)."""
    if not raw:
        return None
    return jsonio.loads(memoryview(raw))

"""Read a torch.profiler Chrome trace into typed event tables (ops, annotations, launches, device).

One parser for wlprof's own runs and foreign traces; large files are parsed in chunks
with no event kept. Times are integer nanoseconds. Formats: `docs/trace-formats.md`.
"""

from __future__ import annotations

import gc
import gzip
import itertools
import json
import operator
import re
import sys
import zlib
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from wlprof import jsonio
from wlprof.columns import NAME_CODE
from wlprof.errors import TraceFormatError
from wlprof.trace import structs

if TYPE_CHECKING:
    import pandas as pd

DEVICE_CATS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
NO_ID = -1
CHUNK_BYTES = 1 << 20  # a few thousand events: a chunk's bytes and decoded events stay in a core's L2 cache
LARGEST_EVENT = 64 << 20  # an event longer than this: the file is parsed whole
INPUT_KEYS = ("Input Dims", "Input type", "Input Strides", "Concrete Inputs")
# Other args an op's or a kernel's cost can need: Inductor's metadata on a Triton launch, and a
# collective's message (on `record_param_comms` and, in recent traces, on the NCCL kernel itself).
EXTRA_KEYS = ("kernel_backend", "kernel_num_gb", "kernel_flop", "Collective name", "In msg nelems",
              "Out msg nelems", "In split size", "Out split size", "Group size", "dtype", "Process Group Name",
              "Process Group Ranks", "Process Group Description", "Global rank start", "Global rank stride", "Rank")
ARG_KEYS = INPUT_KEYS + EXTRA_KEYS


@dataclass
class RawTrace:
    """The tables of one trace file; its raw events only when asked to keep them."""

    path: str
    meta: dict[str, Any]
    events: list[dict] | None  # None unless read with keep_events=True
    ops: pd.DataFrame  # cpu_op (with args_id into args_table)
    annotations: pd.DataFrame  # user_annotation (args_id: a gloo collective's tensor, else -1)
    launches: pd.DataFrame  # cuda_runtime / cuda_driver
    device: pd.DataFrame  # kernel / gpu_memcpy / gpu_memset (args_id: a collective's message, else -1)
    args_table: list[dict] = field(default_factory=list)  # distinct recorded op inputs and extras
    warnings: list[str] = field(default_factory=list)
    event_count: int = 0
    legacy_device_events: int = 0  # the legacy autograd profiler's "CUDA functions" intervals (not read)
    foreign_events: int = 0  # complete events of a category torch.profiler does not write
    mtia_events: int = 0  # device rows of MTIA (mtia_ccp_events): the device is an MTIA, not a GPU
    untimed_example: str | None = None  # the first skipped event with a non-numeric ts/dur, described
    distinct_names: dict[str, np.ndarray] = field(default_factory=dict)  # per table, its names once each

    def names_in(self, table: str) -> np.ndarray:
        """The distinct names of `table` (ops, annotations, launches or device), in no set order."""
        got = self.distinct_names.get(table)
        if got is None:
            import pandas as pd

            df = getattr(self, table)
            got = pd.unique(df["name"].to_numpy(dtype=object)) if "name" in df else np.array([], dtype=object)
        return got

    @property
    def has_device_activity(self) -> bool:
        return len(self.device) > 0

    @property
    def gpu_work_without_device(self) -> str | None:
        """Why the trace ran GPU work although it holds no device activity (kernel launches, or ops
        only a GPU runs: cuDNN, MIOpen), or None. Such a trace lost its device events (a CUPTI
        buffer dropped, a profile without ProfilerActivity.CUDA): its ops' host times are not the
        work, so it has no kernel rows rather than CPU rows."""
        if self.has_device_activity:
            return None
        import pandas as pd

        if self.legacy_device_events:
            return f"{self.legacy_device_events:,} per-op CUDA intervals of the legacy autograd profiler"
        names = self.launches["name"] if "name" in self.launches else pd.Series([], dtype=object)
        n = int(names.astype(str).str.contains(GPU_WORK_API).sum()) if len(names) else 0
        if n:
            return f"{n:,} kernel launches or copies (cuda_runtime/cuda_driver events)"
        ops = self.ops["name"] if "name" in self.ops else pd.Series([], dtype=object)
        m = int(ops.astype(str).str.contains(GPU_ONLY_OPS).sum()) if len(ops) else 0
        if m:
            return f"{m:,} calls of GPU-only ops (cuDNN, MIOpen)"
        return None

    @property
    def device_work_without_ops(self) -> str | None:
        """What device work the trace holds although it recorded no CPU op, or None. A profile without
        ProfilerActivity.CPU records kernels and their launches but no op: nothing names the work its
        kernels do, so none of them can be costed."""
        if not self.has_device_activity or len(self.ops):
            return None
        return f"{len(self.device):,} kernels, copies and memsets, and no CPU op"


@contextmanager
def _gc_paused():
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _read(path: Path) -> bytes:
    try:
        data = jsonio.read_bytes(path)
    except FileNotFoundError:
        raise TraceFormatError(str(path), "no such file") from None
    except IsADirectoryError:
        raise TraceFormatError(str(path), "is a folder, not a trace file") from None
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise TraceFormatError(str(path), f"not a readable gzip file ({exc})") from None
    except OSError as exc:
        raise TraceFormatError(str(path), f"cannot be read ({exc.strerror or exc})") from None
    data = _as_utf8(path, data)
    if not data[:4096].strip() and not data.strip():  # the whole-file strip only for a blank start
        raise TraceFormatError(str(path), "is empty")
    if data.startswith(LFS_POINTER):
        raise TraceFormatError(str(path), "is a Git LFS pointer, not the trace: its content was never downloaded "
                                          "(`git lfs pull` in its repository fetches it)")
    return data


UTF8_BOM = b"\xef\xbb\xbf"
LFS_POINTER = b"version https://git-lfs.github.com/spec/"
# byte-order marks, longest first (UTF-32 LE begins with UTF-16 LE's)
_BOMS = ((b"\xff\xfe\x00\x00", "utf-32-le"), (b"\x00\x00\xfe\xff", "utf-32-be"),
         (b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be"))


def _text_encoding(head: bytes) -> str | None:
    """The UTF-16 or UTF-32 encoding of a JSON text from its first four bytes, None for UTF-8.

    By its byte-order mark, else by where the zero bytes of its first (ASCII) characters fall
    (RFC 4627's rule): `{` in UTF-16 LE is 7B 00.
    """
    for bom, encoding in _BOMS:
        if head.startswith(bom):
            return encoding
    if len(head) < 4 or 0 not in head:
        return None
    zeros = tuple(b == 0 for b in head[:4])
    return {(True, True, True, False): "utf-32-be", (False, True, True, True): "utf-32-le",
            (True, False, True, False): "utf-16-be", (False, True, False, True): "utf-16-le"}.get(zeros)


def _as_utf8(path: Path, data: bytearray) -> bytearray:
    """The document as UTF-8 bytes: a UTF-8 byte-order mark dropped, UTF-16 or UTF-32 text
    re-encoded (Windows PowerShell's `>` and `Out-File` write UTF-16 with a mark)."""
    if data.startswith(UTF8_BOM):
        del data[:len(UTF8_BOM)]
        return data
    encoding = _text_encoding(bytes(data[:4]))
    if encoding is None:
        return data
    try:
        text = bytes(data).decode(encoding)
    except UnicodeDecodeError as exc:
        raise TraceFormatError(str(path), f"not valid {encoding.upper()} text at byte {exc.start}") from None
    return bytearray(text.lstrip("\ufeff").encode("utf-8"))


# NaN, Infinity and -Infinity as values: not JSON, but what Python's json.dump writes for such floats
_NONFINITE = re.compile(rb"[\[:,]\s*-?(?:NaN|Infinity)\s*[,\]}]")


def _nonfinite(data, start: int = 0) -> bool:
    """Whether `data[start:]` holds a NaN or Infinity literal (the expression runs only where a plain search
    finds one of the words: it would cost more than parsing a file that holds none)."""
    start = max(0, start)
    return ((data.find(b"NaN", start) >= 0 or data.find(b"Infinity", start) >= 0)
            and _NONFINITE.search(data, start) is not None)


def _loads(path: Path, data: bytes, offset: int = 0) -> Any:
    """The document; NaN and Infinity literals (a trace re-saved by Python's json) are read as null."""
    try:
        return jsonio.loads(data)
    except jsonio.JSONDecodeError as exc:
        if _nonfinite(data):
            try:
                return json.loads(data, parse_constant=lambda _: None)
            except (ValueError, RecursionError):
                pass
        pos = getattr(exc, "pos", None)
        if offset == 0 and pos and _json_lines(data, pos):
            raise TraceFormatError(str(path), "holds one JSON document per line (JSON Lines, as `nsys export --type "
                                              "json` writes), not a Chrome trace: export the trace with "
                                              "torch.profiler (export_chrome_trace or tensorboard_trace_handler)"
                                   ) from None
        where = f" at byte {offset + pos}" if pos is not None else ""
        raise TraceFormatError(str(path), f"invalid JSON{where} ({exc})") from None
    except UnicodeDecodeError as exc:
        raise TraceFormatError(str(path), f"not UTF-8 text at byte {offset + exc.start}") from None


def _json_lines(data, pos: int) -> bool:
    """Whether `data`, which stopped parsing at `pos`, is JSON Lines: a whole object before `pos`, a line
    break after it, and another object or array from `pos` on."""
    head = bytes(data[:pos])
    body = head.rstrip()
    if b"\n" not in head[len(body):] or not body.startswith(b"{") or bytes(data[pos:pos + 1]) not in (b"{", b"["):
        return False
    try:
        return isinstance(jsonio.loads(body), dict)
    except (jsonio.JSONDecodeError, UnicodeDecodeError):
        return False


def _split(doc: Any, path: Path) -> tuple[dict, list]:
    if isinstance(doc, list):  # the JSON Array Format of the Trace Event spec
        return {}, doc
    if isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list):
        return {k: v for k, v in doc.items() if k != "traceEvents"}, doc["traceEvents"]
    if isinstance(doc, dict) and isinstance(doc.get("nodes"), list) and "schema" in doc:
        raise TraceFormatError(str(path), "is a PyTorch execution trace (ExecutionTraceObserver's 'nodes'), not a "
                                          "Chrome trace: ingest the Kineto trace recorded beside it (the profiler's "
                                          "export_chrome_trace or tensorboard_trace_handler file)")
    raise TraceFormatError(str(path), "not a Chrome trace: expected an object with a 'traceEvents' list")


def load_events(path: str | Path) -> tuple[dict, list]:
    """The trace's top-level metadata and its whole event list (small traces)."""
    path = Path(path)
    data = _read(path)
    with _gc_paused():
        return _split(_loads(path, data), path)


class _NotStreamable(Exception):
    """The file's layout is not one event per indented block: parse it whole instead."""


HEAD_LIMIT = 64 << 20  # the metadata before "traceEvents" is small; past this, parse whole


def _open_stream(path: Path):
    """The file as a byte stream (gunzipped), past a UTF-8 byte-order mark; UTF-16 and UTF-32
    text is not streamed (the whole parse re-encodes it)."""
    fh = open(path, "rb")
    head = fh.read(2)
    fh.seek(0)
    stream = gzip.GzipFile(fileobj=fh) if head == b"\x1f\x8b" else fh
    try:
        start = stream.peek(4)[:4]
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        stream.close()
        raise TraceFormatError(str(path), f"not a readable gzip file ({exc})") from None
    if start.startswith(UTF8_BOM):
        stream.read(len(UTF8_BOM))
    elif _text_encoding(start):
        stream.close()
        raise _NotStreamable()
    return stream


def _list_start(head) -> tuple[int, int, int, int, bool]:
    """(key, colon, bracket, first, array) of a trace's first bytes: where "traceEvents", its colon and the
    event list's `[` are (-1: not within `head`), and the first non-blank byte after the `[` (`len(head)`
    or more: not within it); for a document that is an event array (the Trace Event spec's array
    format, `array`), key, colon and bracket are its opening bracket."""
    start = next((i for i, c in enumerate(head[:64]) if c not in b" \t\r\n"), -1)
    if start >= 0 and head[start] == ord("["):  # the Trace Event spec's array format
        key, colon, bracket, array = start, start, start, True
    else:
        array = False
        key = head.find(b'"traceEvents"')
        colon = head.find(b":", key + 13) if key >= 0 else -1
        bracket = head.find(b"[", colon + 1) if colon >= 0 else -1
    first = bracket + 1
    while 0 < first < len(head) and head[first] in b" \t\r\n":
        first += 1
    return key, colon, bracket, first, array


def _list_layout(head, key: int, colon: int, bracket: int, first: int, array: bool) -> tuple[bytes | None, bytes | None]:
    """(fixed, prefix) of a trace whose event list `_list_start` found in `head`: the bytes between two
    events where the writer put each on its own line (None: minified), and the document's text before
    "traceEvents" (None for an event array). Raises _NotStreamable where the list is not one of events
    under the key."""
    if not array and (head[key + 13:colon].strip() or head[colon + 1:bracket].strip()):
        raise _NotStreamable()
    if head[first] != ord("{"):
        raise _NotStreamable()  # an empty list, or not a list of events
    indent = bytes(head[bracket + 1:first])
    newline = b"\r\n" if b"\r\n" in indent else b"\n"  # a file saved with Windows line ends too
    fixed = b"}," + newline + indent[indent.rfind(b"\n") + 1:] + b"{" if b"\n" in indent else None
    return fixed, None if array else bytes(head[:key])


def _stream_events(path: Path, on_meta, decode=jsonio.loads):
    """Yield (byte offset, event list) chunk by chunk, reading the file as it goes.

    Memory stays near one chunk: the file is never held whole. Events are split where
    one ends and the next begins: at a newline and the first event's indentation when
    the writer put each event on its own line (one `rfind`), else at any `}`, `,`, `{`
    (minified JSON), where a split inside an event is told apart by not parsing. Calls
    `on_meta(meta)` with the top-level metadata at the end. Raises _NotStreamable,
    before yielding anything, when the file is not a trace object or array. `decode` turns
    a chunk's bytes (a JSON array) into its events.
    """
    try:
        stream = _open_stream(path)
    except OSError as exc:
        raise TraceFormatError(str(path), f"cannot be read ({exc.strerror or exc})") from None
    with stream:
        try:
            head = bytearray()
            while True:
                block = stream.read(1 << 20)
                head += block
                key, colon, bracket, first, array = _list_start(head)
                if bracket >= 0 and first < len(head):
                    break
                if not block or len(head) > HEAD_LIMIT:
                    raise _NotStreamable()
            fixed, prefix = _list_layout(head, key, colon, bracket, first, array)
            consumed = first - 1  # file offset of buf[0] (the spare byte before the first event)
            buf = bytearray(b" ") + head[first:]  # buf[0]: a spare byte that becomes "["
            del head
            eof = False
            # NaN/Infinity are looked for only where no split parses, each byte once: buf[:checked] was
            # searched (a chunk that parses holds none, so a search of every block read is not needed)
            checked = 1
            while True:
                if not eof:
                    block = stream.read(CHUNK_BYTES)
                    if block:
                        buf += block
                    else:
                        eof = True
                if eof:
                    chunk, meta = _last_chunk(path, buf, prefix, consumed, decode)
                    yield consumed, chunk
                    on_meta(meta)
                    return
                if len(buf) < CHUNK_BYTES // 2:
                    continue
                got = _whole_events(buf, fixed, decode)
                if got is None:
                    searched, checked = checked, len(buf)
                    if _nonfinite(buf, searched - 16):
                        raise _NotStreamable()  # NaN or Infinity: no split parses; the whole parse reads them
                    if len(buf) > max(8 * CHUNK_BYTES, LARGEST_EVENT):
                        raise _NotStreamable()  # no split found in a large buffer: parse the file whole
                    continue  # read on until a chunk's worth of whole events is buffered
                stop, chunk = got
                yield consumed, chunk
                del chunk
                del buf[1:stop + 1]  # keep the spare byte; the next chunk starts after the comma
                consumed += stop  # buf[1] was at consumed + 1, now buf[stop + 1] is there
                checked = max(1, checked - stop)
        except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
            raise TraceFormatError(str(path), f"not a readable gzip file ({exc})") from None


class _Unmapped(Exception):
    """The file is not read where it lies (`_mapped_events`): read it as a stream, from its start."""


def _mapped_events(path: Path, on_meta, decode):
    """`_stream_events` for an uncompressed trace written one event per line (Kineto's layout), read
    where it lies: the file is mapped copy-on-write and each chunk of whole events is decoded from the
    mapping, its first byte and the comma after it overwritten as the array's brackets while it is
    decoded. The stream reader's copies of every byte (the read into a block, the block into its buffer,
    the buffer into the decoder's input) each cost about as much as the decoding's own pass over them.
    `decode(view)` may keep references into `view`: the mapping's bytes are left as they are, and the
    pages behind the chunk being read are given back as it goes (what is read again faults in the same
    bytes), so that about one chunk of the file stays resident.

    Raises _Unmapped, before or after yielding chunks, wherever the stream reader would do anything but
    split the events at the line between them and decode them (a compressed, minified or unusual file, an
    event longer than a chunk, a chunk that does not decode): the caller reads the file as a stream
    instead, from its start, and so gets what that reader gives.
    """
    import mmap

    try:
        with open(path, "rb") as fh:
            if fh.read(2) == b"\x1f\x8b":
                raise _Unmapped()
            mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_COPY)
    except (OSError, ValueError):  # unreadable (the stream reader says why), empty, or not mappable
        raise _Unmapped() from None
    dontneed = getattr(mmap, "MADV_DONTNEED", None) if hasattr(mm, "madvise") else None
    try:
        n = len(mm)
        if mm[:3] == UTF8_BOM or _text_encoding(mm[:4]):
            raise _Unmapped()
        key, colon, bracket, first, array = _list_start(mm)
        if bracket < 0 or first >= min(n, HEAD_LIMIT):
            raise _Unmapped()
        try:
            fixed, prefix = _list_layout(mm, key, colon, bracket, first, array)
        except _NotStreamable:
            raise _Unmapped() from None
        if fixed is None:
            raise _Unmapped()
        lo, kept = first, 0  # the next event's first byte; the first page not given back
        while n - lo > CHUNK_BYTES:
            k = mm.rfind(fixed, lo, lo + CHUNK_BYTES)
            if k < 0:
                raise _Unmapped()
            comma = k + 1
            before, after = mm[lo - 1], mm[comma]
            mm[lo - 1], mm[comma] = 0x5B, 0x5D
            try:
                events = decode(memoryview(mm)[lo - 1:comma + 1])
            except (*structs.DecodeError, UnicodeDecodeError):
                raise _Unmapped() from None
            finally:
                mm[lo - 1], mm[comma] = before, after
            if not isinstance(events, list):
                raise _Unmapped()
            yield lo - 1, events
            del events
            lo = k + len(fixed) - 1
            done = (lo - 1) // mmap.PAGESIZE * mmap.PAGESIZE
            if dontneed is not None and done > kept:
                mm.madvise(dontneed, kept, done - kept)
                kept = done
        try:
            chunk, meta = _last_chunk(path, bytearray(mm[lo - 1:]), prefix, lo - 1, decode)
        except TraceFormatError:
            raise _Unmapped() from None
        yield lo - 1, chunk
        on_meta(meta)
    finally:
        try:
            mm.close()
        except BufferError:  # events that refer to it still live: it is unmapped when they are freed
            pass


_BOUNDARY = re.compile(rb"\}\s*,\s*\{")
_TRIES = 64  # candidate splits tried per chunk before reading on


def _whole_events(buf: bytearray, fixed: bytes | None, decode=jsonio.loads) -> tuple[int, list] | None:
    """(position of the comma after the last whole event, the events before it), or None.

    `buf[0]` is a spare byte; the events start at `buf[1]`.
    """
    if fixed is not None:
        k = buf.rfind(fixed)
        candidates = [k] if k > 0 else []
    else:
        candidates = _last_boundaries(buf, max(1, len(buf) - CHUNK_BYTES))
    for k in candidates:
        comma = buf.index(b",", k)
        saved0, saved = buf[0], buf[comma]
        buf[0], buf[comma] = 0x5B, 0x5D
        try:
            events = decode(memoryview(buf)[:comma + 1])
        except (*structs.DecodeError, UnicodeDecodeError):
            continue
        finally:
            buf[0], buf[comma] = saved0, saved
        if isinstance(events, list):
            return comma, events
    return None


def _last_boundaries(buf: bytearray, tail: int) -> list[int]:
    """The starts of the last `_TRIES` matches of `_BOUNDARY` at or after `tail`, last first.

    Searched from the end in growing windows, so that a chunk's thousands of boundaries are not
    all matched. A match cannot begin inside another (it starts with `}`, which no match holds
    past its start), so a window finds the same matches as the whole span from `tail` does."""
    size = 64 << 10
    while True:
        start = max(tail, len(buf) - size)
        found = [m.start() for m in _BOUNDARY.finditer(buf, start)]
        if len(found) >= _TRIES or start == tail:
            return found[::-1][:_TRIES]
        size *= 8


_CLOSE = re.compile(rb"\}\s*\]")


def _last_chunk(path: Path, buf: bytearray, prefix: bytes | None, consumed: int,
                decode=jsonio.loads) -> tuple[list, dict]:
    """The last events and the metadata, from the buffer that holds the end of the file.

    The event list closes at the first `}` + whitespace + `]` after which both the events
    and the rest of the document are valid JSON: wherever a writer put the bracket
    (Kineto at the events' indentation, early Kineto at column 0, `json.dump(indent=N)`
    one level out). `prefix` None: the file is an event array (nothing may follow it).
    None such: the file ends inside its event list.
    """
    for m in _CLOSE.finditer(buf):
        stop = m.end() - 1  # the position of "]"
        saved = buf[0]
        buf[0] = 0x5B
        try:
            events = decode(memoryview(buf)[:stop + 1])
            rest = bytes(buf[stop + 1:])
            if prefix is None:
                if rest.strip():
                    continue
                doc = {}
            else:
                doc = jsonio.loads(prefix + b'"traceEvents": []' + rest)
        except (*structs.DecodeError, UnicodeDecodeError):
            continue
        finally:
            buf[0] = saved
        if isinstance(events, list) and isinstance(doc, dict):
            return events, {k: v for k, v in doc.items() if k != "traceEvents"}
    raise TraceFormatError(str(path), f"ends at byte {consumed + len(buf) - 1} before its event list is closed "
                                      "(truncated)")


NOTHING_KEY = b"o" + b"\x00" * (len(INPUT_KEYS) - 1)  # the args key of an op that records no input or extra


class _Tables:
    """Column accumulators for one trace: each chunk's dicts become numpy arrays, then are dropped.

    Per event only the fields are picked out (one pass, local names bound once);
    conversions (microseconds to integer nanoseconds, ids to int64) run vectorized
    per chunk, and names are kept as codes into one list of distinct names.
    """

    def __init__(self):
        self.parts: dict[str, dict[str, list[np.ndarray]]] = {"ops": {}, "ann": {}, "lau": {}, "dev": {}}
        self.args_ids: dict[bytes, int] = {}
        self.args_table: list[dict] = []
        self.names: dict[str, int] = {}
        self.threads: dict[str, int] = {}  # non-numeric pid/tid strings -> negative codes
        self.skipped = 0
        self.no_dur = 0  # complete events without a `dur`: read as lasting 0
        self.untimed_example: str | None = None  # the first skipped event, described
        self.count = 0
        self.legacy_cuda = 0  # the legacy profiler's per-op CUDA intervals (not kernels): not read
        self.foreign = 0  # complete events of a category Kineto does not write
        self.mtia = 0  # device rows read from MTIA's mtia_ccp_events
        self.begin_end: list[tuple[int, Any]] = []  # (index, event) of B/E events, paired in `pair_begin_end`
        self.unpaired = 0  # B events without their E, E events without their B
        self.paired = False  # rows were added from B/E pairs, out of file order
        self.paired_at: list[np.ndarray] = []  # the file positions of the rows read from B/E pairs
        self.duplicates = 0  # rows dropped by `frames` as exact repeats of an earlier event

    def add(self, events: list, base: int) -> None:
        if events and type(events[0]) in structs.EVENT_TYPES:
            self._add_structs(events, base)
            return
        self.count += len(events)
        names = self.names
        o_rows: list[tuple] = []
        a_rows: list[tuple] = []
        l_rows: list[tuple] = []
        d_rows: list[tuple] = []
        o_add, a_add, l_add, d_add = o_rows.append, a_rows.append, l_rows.append, d_rows.append
        args_ids, args_table = self.args_ids, self.args_table
        dumps = jsonio.dumps_fast
        empty: dict = {}
        number = (float, int)
        for i, ev in enumerate(events, base):
            # one tuple per event, columns transposed per chunk in C (zip): far fewer calls
            if type(ev) is not dict:
                continue
            get = ev.get
            ph = get("ph")
            if ph != "X":
                if ph == "B" or ph == "E":
                    self.begin_end.append((i, ev))
                continue
            raw_cat = get("cat")
            cat = _CATEGORY.get(raw_cat) if type(raw_cat) is str else None
            if cat is None:
                if "cat" in ev:
                    self.foreign += type(raw_cat) is not str or raw_cat not in KINETO_CATEGORIES
                    continue
                pid = get("pid")  # the legacy autograd profiler writes no category (LEGACY_CPU_PID)
                if pid == LEGACY_CPU_PID:
                    cat = "cpu_op"
                else:
                    self.legacy_cuda += pid == LEGACY_CUDA_PID
                    continue
            ts = get("ts")
            dur = get("dur")
            if type(ts) not in number or type(dur) not in number:
                timed = self._timed(ts, dur, "dur" in ev, raw_cat or cat)
                if timed is None:
                    continue
                ts, dur = timed
            args = get("args")
            if type(args) is not dict:
                args = empty
            name = get("name")
            if type(name) is not str:
                name = str(name)
            code = names.get(name)
            if code is None:
                code = names[name] = len(names)
            g = args.get
            ext = g("External id")
            if ext is None:
                ext = g("external id")  # PyTorch 1.8-1.10 runtime and device events
            if cat == "cpu_op":
                if name.startswith("ProfilerStep#"):  # PyTorch 1.8-1.10 record the step as an op
                    a_add((i, code, get("pid"), get("tid"), ts, dur, -1))
                    continue
                if "Input dims" in args and "Input Dims" not in args:  # PyTorch 1.8-1.10
                    args = {**args, "Input Dims": args["Input dims"]}
                    g = args.get
                key = dumps([g(k) for k in ARG_KEYS])
                aid = args_ids.get(key)
                if aid is None:
                    aid = args_ids[key] = len(args_table)
                    args_table.append({k: g(k) for k in ARG_KEYS if g(k) is not None})
                o_add((i, code, get("pid"), get("tid"), ts, dur, ext, aid))
            elif cat == "launch":
                l_add((i, code, get("pid"), get("tid"), ts, dur, g("correlation"), ext))
            elif cat == "user_annotation":
                aid = -1
                if name.startswith("gloo:"):  # a gloo collective's work: its tensor's dims and dtype
                    key = dumps([g(k) for k in INPUT_KEYS])
                    aid = args_ids.get(key)
                    if aid is None:
                        aid = args_ids[key] = len(args_table)
                        args_table.append({k: g(k) for k in INPUT_KEYS if g(k) is not None})
                a_add((i, code, get("pid"), get("tid"), ts, dur, aid))
            else:
                nbytes = g("bytes")
                if raw_cat == "mtia_ccp_events":
                    if name in MTIA_SYNC:
                        continue
                    self.mtia += 1
                    if name == MTIA_DMA:
                        cat, nbytes = "gpu_memcpy", g("size")
                aid = -1
                if g("Collective name") is not None:  # a collective's message, recorded on its kernel
                    key = dumps([g(k) for k in EXTRA_KEYS])
                    aid = args_ids.get(key)
                    if aid is None:
                        aid = args_ids[key] = len(args_table)
                        args_table.append({k: g(k) for k in EXTRA_KEYS if g(k) is not None})
                d_add((i, cat, code, get("pid"), get("tid"), ts, dur, g("correlation"), ext,
                       g("stream", get("tid")), g("device", get("pid")), g("grid"), g("block"),
                       g("registers per thread"), g("shared memory"), g("blocks per SM"), g("warps per SM"),
                       nbytes, aid))
        self._store_rows(o_rows, a_rows, l_rows, d_rows)

    def _add_structs(self, events: list, base: int) -> None:
        """`add` for a chunk decoded into `structs.Event`: the same rows, read as attributes."""
        self.count += len(events)
        names = self.names
        o_rows: list[tuple] = []
        a_rows: list[tuple] = []
        l_rows: list[tuple] = []
        d_rows: list[tuple] = []
        o_add, a_add, l_add, d_add = o_rows.append, a_rows.append, l_rows.append, d_rows.append
        args_ids = self.args_ids
        number = (float, int)
        missing = structs.MISSING
        no_args = structs.NO_ARGS
        join = b"\x00".join
        fields = structs.fields  # an Args struct's fields as one tuple: the values, then the raw fields
        inputs = len(structs.VALUE_KEYS)  # where the raw fields start: the inputs, then the extras
        extras, end = inputs + len(INPUT_KEYS), inputs + len(ARG_KEYS)
        rest = len(structs.RAW_KEYS) - len(INPUT_KEYS)  # the extras and PyTorch 1.8-1.10's "Input dims"
        absent = structs.ABSENT
        nothing = (absent,) * len(structs.RAW_KEYS)  # an op that records no raw field
        input_raw = operator.attrgetter(*structs.RAW_ATTRS[:len(INPUT_KEYS)])
        extra_raw = operator.attrgetter(*structs.RAW_ATTRS[len(INPUT_KEYS):len(ARG_KEYS)])
        complete, begin_type, end_type = structs.Event, structs.Begin, structs.End
        for i, ev in enumerate(events, base):
            if type(ev) is not complete:
                if type(ev) is begin_type or type(ev) is end_type:
                    self.begin_end.append((i, ev))
                continue
            raw_cat = ev.cat
            cat = _CATEGORY.get(raw_cat) if type(raw_cat) is str else None
            if cat is None:
                if raw_cat is not missing:
                    self.foreign += type(raw_cat) is not str or raw_cat not in KINETO_CATEGORIES
                    continue
                if ev.pid == LEGACY_CPU_PID:  # the legacy autograd profiler writes no category
                    cat = "cpu_op"
                else:
                    self.legacy_cuda += ev.pid == LEGACY_CUDA_PID
                    continue
            ts = ev.ts
            dur = ev.dur
            if type(ts) not in number or type(dur) not in number:
                timed = self._timed(ts, dur, dur is not missing, raw_cat if type(raw_cat) is str else cat)
                if timed is None:
                    continue
                ts, dur = timed
            a = ev.args
            if a is None:
                a = no_args
            name = ev.name
            if type(name) is not str:
                name = str(name)
            code = names.get(name)
            if code is None:
                code = names[name] = len(names)
            ext = a.ext
            if ext is None:
                ext = a.ext_old  # PyTorch 1.8-1.10 runtime and device events
            if cat == "cpu_op":
                if name.startswith("ProfilerStep#"):  # PyTorch 1.8-1.10 record the step as an op
                    a_add((i, code, ev.pid, ev.tid, ts, dur, -1))
                    continue
                t = fields(a)
                if a.r0 is absent and t[inputs:] == nothing:  # no shapes, no extras: one key for all
                    key = NOTHING_KEY
                elif t[extras:].count(absent) == rest:  # most ops record no extras: their inputs are the key
                    key = b"o" + join(t[inputs:extras])
                else:
                    key = b"O" + join(t[inputs:])
                aid = args_ids.get(key)
                if aid is None:
                    raws = t[inputs:end]
                    if not raws[0] and a.r20:  # PyTorch 1.8-1.10's "Input dims"
                        raws = (a.r20, *raws[1:])
                    aid = self._raw_args(key, ARG_KEYS, raws)
                o_add((i, code, ev.pid, ev.tid, ts, dur, ext, aid))
            elif cat == "launch":
                l_add((i, code, ev.pid, ev.tid, ts, dur, a.correlation, ext))
            elif cat == "user_annotation":
                aid = -1
                if name.startswith("gloo:"):  # a gloo collective's work: its tensor's dims and dtype
                    raws = input_raw(a)
                    aid = self._raw_args(b"g" + join(raws), INPUT_KEYS, raws)
                a_add((i, code, ev.pid, ev.tid, ts, dur, aid))
            else:
                nbytes = a.nbytes
                if raw_cat == "mtia_ccp_events":
                    if name in MTIA_SYNC:
                        continue
                    self.mtia += 1
                    if name == MTIA_DMA:
                        cat, nbytes = "gpu_memcpy", a.size
                aid = -1
                if a.r7 and bytes(a.r7) != b"null":  # a collective's message, recorded on its kernel
                    raws = extra_raw(a)
                    aid = self._raw_args(b"e" + join(raws), EXTRA_KEYS, raws)
                stream = a.stream
                device = a.device
                d_add((i, cat, code, ev.pid, ev.tid, ts, dur, a.correlation, ext,
                       ev.tid if stream is missing else stream, ev.pid if device is missing else device,
                       a.grid, a.block, a.regs, a.smem, a.bps, a.wps, nbytes, aid))
        self._store_rows(o_rows, a_rows, l_rows, d_rows)

    def _timed(self, ts, dur, has_dur: bool, cat: str) -> tuple | None:
        """(ts, dur) of a complete event whose ts or dur is no number: a number written as a string
        ("123.5") read as the number, a missing dur as 0 (counted); None where the event has no time
        (counted, the first one described)."""
        number = (float, int)
        ts, dur = _number(ts), _number(dur)
        if type(ts) in number and not has_dur:
            self.no_dur += 1
            return ts, 0
        if type(ts) in number and type(dur) in number:
            return ts, dur
        self.skipped += 1
        if self.untimed_example is None:
            bad, value = ("ts", ts) if type(ts) not in number else ("dur", dur)
            self.untimed_example = f"a {cat} event's {bad} is {type(value).__name__} {value!r:.40}"
        return None

    def pair_begin_end(self) -> None:
        """Read Chrome's other duration form: each B event closed by the next E on its pid and tid
        becomes the complete event it stands for. Pairs are taken in file order, or in time order
        (file order among equal times) where file order would end an event before it began."""
        if not self.begin_end:
            return
        by_thread: dict[tuple, list[tuple[Any, int, Any]]] = {}
        for i, ev in self.begin_end:
            key = (_field(ev, "pid"), _field(ev, "tid"))
            by_thread.setdefault(key, []).append((_number(_field(ev, "ts")), i, ev))
        self.begin_end = []
        dicts: tuple[list, list] = ([], [])
        structs_: tuple[list, list] = ([], [])
        for items in by_thread.values():
            pairs, unpaired = _pairs(items)
            if pairs is None:
                items.sort(key=lambda t: (t[0] if type(t[0]) in (float, int) else float("inf"), t[1]))
                pairs, unpaired = _pairs(items, strict=False)
            self.unpaired += unpaired
            for b_i, b, e, dur in pairs:
                if type(b) is dict:
                    x = {**b, "ph": "X", "dur": dur}
                    if type(e.get("args")) is dict:  # an E event's args add to its B event's
                        x["args"] = {**(b.get("args") if type(b.get("args")) is dict else {}), **e["args"]}
                    out = dicts
                else:
                    x = structs.complete(b, dur)
                    out = structs_
                out[0].append(x)
                out[1].append(b_i)
        for events, indices in (dicts, structs_):
            if events:
                self._add_at(events, indices)
                self.paired = True
                self.paired_at.append(np.asarray(indices, dtype=np.int64))

    def _add_at(self, events: list, indices: list[int]) -> None:
        """`add` for events that are not consecutive in the file: their rows keep the file positions `indices`."""
        counts = {t: len(p.get("idx", ())) for t, p in self.parts.items()}
        count = self.count
        self.add(events, 0)
        self.count = count
        where = np.asarray(indices, dtype=np.int64)
        for t, p in self.parts.items():
            idx = p.get("idx", [])
            for j in range(counts[t], len(idx)):
                idx[j] = where[idx[j]]

    def _raw_args(self, key: bytes, keys: tuple, raws: tuple) -> int:
        """The args_table index of the args whose raw fields are `raws` (named `keys`), added when new."""
        aid = self.args_ids.get(key)
        if aid is None:
            aid = self.args_ids[key] = len(self.args_table)
            values = {k: structs.raw_value(r) for k, r in zip(keys, raws, strict=True)}
            self.args_table.append({k: v for k, v in values.items() if v is not None})
        return aid

    def _store_rows(self, o_rows: list, a_rows: list, l_rows: list, d_rows: list) -> None:
        """One chunk's rows of the four tables, as numpy columns."""
        d_cols = _columns(d_rows, 19)
        d_cols[1] = [DEVICE_CATS[c] for c in d_cols[1]]
        self._store_columns(_columns(o_rows, 8), _columns(a_rows, 7), _columns(l_rows, 8), d_cols)

    def _store_columns(self, o_cols: list, a_cols: list, l_cols: list, d_cols: list) -> None:
        """One chunk's columns of the four tables (sequences of the events' values, the device rows'
        kind as the table's names: kernel, memcpy, memset), as numpy columns."""
        thr = self._thread_ids
        (o_idx, o_name, o_pid, o_tid, o_ts, o_dur, o_ext, o_args) = o_cols
        (a_idx, a_name, a_pid, a_tid, a_ts, a_dur, a_args) = a_cols
        (l_idx, l_name, l_pid, l_tid, l_ts, l_dur, l_corr, l_ext) = l_cols
        (d_idx, d_kind, d_name, d_pid, d_tid, d_ts, d_dur, d_corr, d_ext, d_stream, d_dev, d_grid, d_block,
         d_regs, d_smem, d_bps, d_wps, d_bytes, d_args) = d_cols
        self._store("ops", idx=_ints(o_idx), name=np.asarray(o_name, np.int64), pid=thr(o_pid),
                    tid=thr(o_tid), ts_ns=_ns(o_ts), dur_ns=_ns(o_dur), ext_id=_ids(o_ext),
                    args_id=np.asarray(o_args, np.int64))
        self._store("ann", idx=_ints(a_idx), name=np.asarray(a_name, np.int64), pid=thr(a_pid), tid=thr(a_tid),
                    ts_ns=_ns(a_ts), dur_ns=_ns(a_dur), args_id=np.asarray(a_args, np.int64))
        self._store("lau", idx=_ints(l_idx), name=np.asarray(l_name, np.int64), pid=thr(l_pid), tid=thr(l_tid),
                    ts_ns=_ns(l_ts), dur_ns=_ns(l_dur), correlation=_ids(l_corr), ext_id=_ids(l_ext))
        gx, gy, gz = _triples(d_grid)
        bx, by, bz = _triples(d_block)
        self._store("dev", idx=_ints(d_idx), kind=np.asarray(d_kind, dtype=object),
                    name=np.asarray(d_name, np.int64), pid=thr(d_pid), tid=thr(d_tid), ts_ns=_ns(d_ts),
                    dur_ns=_ns(d_dur), correlation=_ids(d_corr), ext_id=_ids(d_ext), stream=_ids(d_stream),
                    device_index=_ids(d_dev), grid_x=gx, grid_y=gy, grid_z=gz, block_x=bx, block_y=by, block_z=bz,
                    registers_per_thread=_ids(d_regs, 0), shared_memory_bytes=_ids(d_smem, 0),
                    blocks_per_sm=_floats(d_bps), warps_per_sm=_floats(d_wps), transfer_bytes=_ids(d_bytes),
                    args_id=np.asarray(d_args, np.int64))

    def _thread_ids(self, values: list) -> np.ndarray:
        """pid/tid as int64 (Kineto writes ints); any other value gets a stable negative code."""
        try:
            arr = np.asarray(values, dtype=np.int64)
            if arr.ndim == 1 and len(arr) == len(values):
                return arr
        except (TypeError, ValueError, OverflowError):
            pass
        codes = self.threads
        return np.asarray([v if type(v) is int and abs(v) < 2**62 else -1 - codes.setdefault(str(v), len(codes))
                           for v in values], dtype=np.int64)

    def _store(self, table: str, **cols: np.ndarray) -> None:
        part = self.parts[table]
        for k, v in cols.items():
            part.setdefault(k, []).append(v)

    def frames(self, events_at=None) -> dict[str, Any]:
        """The four tables, and under "distinct_names" each table's names once each (from the codes).

        Rows that repeat an earlier event are dropped (counted in `duplicates`): equal in every column
        kept, and, where `events_at` is given (file positions -> {position: event}), in every field of
        the events themselves (the args the reader does not keep too)."""
        import pandas as pd

        names = np.array(list(self.names), dtype=object)
        out: dict = {"distinct_names": {}}
        tables = {}
        for table, key in (("ops", "ops"), ("ann", "annotations"), ("lau", "launches"), ("dev", "device")):
            cols = {k: np.concatenate(v) if v else np.array([]) for k, v in self.parts[table].items()}
            if self.paired and len(cols.get("idx", ())):  # rows of B/E pairs were added last: file order
                order = np.argsort(cols["idx"], kind="stable")
                cols = {k: v[order] for k, v in cols.items()}
            tables[key] = cols
        paired = np.concatenate(self.paired_at) if self.paired_at else None
        groups = {key: g for key, cols in tables.items()
                  if (g := _equal_rows(cols, paired, self.args_table)) is not None}
        if groups:
            wanted = {i for key, (rows, _) in groups.items() for i in tables[key]["idx"][rows].tolist()}
            events = events_at(wanted) if events_at is not None else None
            for key, (rows, group) in groups.items():
                cols = tables[key]
                repeat = _repeats(cols["idx"], rows, group, events)
                self.duplicates += int(repeat.sum())
                tables[key] = {k: v[~repeat] for k, v in cols.items()}
        for key, cols in tables.items():
            if "name" in cols:
                codes = cols["name"].astype(np.int64)
                cols["name"] = names[codes] if len(codes) else np.array([], dtype=object)
                cols[NAME_CODE] = codes  # kept for the tests per distinct name that follow (columns.coded_names)
                out["distinct_names"][key] = names[np.flatnonzero(np.bincount(codes, minlength=len(names)))]
            # object columns stay object (pandas would otherwise convert every string to Arrow); the
            # arrays are the frame's own, not copied into one block per dtype
            out[key] = pd.DataFrame({k: pd.Series(v, dtype=object) if v.dtype == object else v
                                     for k, v in cols.items()}, copy=False)
        return out


# columns that tell rows apart in most traces: hashed together, the rows whose hash no other row
# shares are no repeat, and only the few others are compared column by column
_HASHED = ("ts_ns", "dur_ns", "name", "tid", "pid", "ext_id", "correlation", "stream")


def _equal_rows(cols: dict[str, np.ndarray], paired: np.ndarray | None,
                args_table: list[dict]) -> tuple[np.ndarray, np.ndarray] | None:
    """(rows, group): the rows of a table equal to another row in every column but the file position
    (in file order), each with a number shared by the rows equal to it; None where no two are equal.

    The columns are what the reader keeps of an event: its category as the table and kind, name,
    pid, tid, ts, dur and the args read (ids, stream, launch shape, the recorded inputs); `paired`
    (the file positions of rows read from B/E pairs) keeps their phase apart from complete events'.
    Recorded args are compared by their values in `args_table` (two ids can name equal args: one
    written with other spacing, or read by the other decoder)."""
    n = len(cols.get("idx", ()))
    if n < 2:
        return None
    h = np.zeros(n, dtype=np.uint64)
    for k in _HASHED:
        v = cols.get(k)
        if v is not None:
            h = h * np.uint64(0x9E3779B97F4A7C15) + v.astype(np.int64, copy=False).view(np.uint64)
    s = np.sort(h)
    same = s[1:] == s[:-1]
    if not same.any():
        return None
    rows = np.flatnonzero(np.isin(h, s[1:][same]))
    import pandas as pd

    keys = {k: v[rows] for k, v in cols.items() if k != "idx"}
    if paired is not None:
        keys["paired"] = np.isin(cols["idx"][rows], paired)
    if "args_id" in keys:
        ids = keys["args_id"]
        distinct = np.unique(ids)
        spelled = [jsonio.dumps(args_table[i]) if i >= 0 else b"" for i in distinct.tolist()]
        first: dict[bytes, int] = {}
        canonical = np.array([first.setdefault(x, len(first)) for x in spelled], dtype=np.int64)
        keys["args_id"] = canonical[np.searchsorted(distinct, ids)]
    frame = pd.DataFrame(keys)
    group = frame.groupby(list(frame.columns), sort=False, dropna=False).ngroup().to_numpy()
    shared = np.bincount(group)[group] > 1
    if not shared.any():
        return None
    return rows[shared], group[shared]


def _repeats(idx: np.ndarray, rows: np.ndarray, group: np.ndarray, events: dict | None) -> np.ndarray:
    """A mask of a table's rows that repeat an earlier row of their group (`_equal_rows`): where `events`
    (file position -> event) is given, only those whose event equals an earlier one's in every field.
    An event written twice (a trace joined to itself, a tool that appended its events twice) is such a
    repeat; two distinct events differ in a field (a kernel's correlation or stream, an op's External id
    or name, an arg no table keeps)."""
    out = np.zeros(len(idx), dtype=bool)
    seen: dict[int, list] = {}
    for r, g in zip(rows.tolist(), group.tolist(), strict=True):
        event = events.get(int(idx[r])) if events is not None else None
        earlier = seen.setdefault(g, [])
        if earlier and (events is None or any(event == e for e in earlier)):
            out[r] = True
        else:
            earlier.append(event)
    return out


def _pairs(items: list[tuple[Any, int, Any]], strict: bool = True) -> tuple[list | None, int]:
    """B/E events of one thread, in the order given, paired by a stack: (B index, B, E, duration) each,
    and the count of halves left without the other. `strict`: None instead where an E comes before its B."""
    number = (float, int)
    stack: list[tuple[Any, int, Any]] = []
    pairs = []
    unpaired = 0
    for ts, i, ev in items:
        if _field(ev, "ph") == "B":
            stack.append((ts, i, ev))
            continue
        if not stack:
            unpaired += 1
            continue
        b_ts, b_i, b = stack.pop()
        dur = ts - b_ts if type(ts) in number and type(b_ts) in number else None  # None: skipped as untimed
        if strict and dur is not None and dur < 0:
            return None, 0
        pairs.append((b_i, b, ev, dur))
    return pairs, unpaired + len(stack)


def _field(ev, name: str):
    """An event's field, from a dict or an `Event` struct (None where it has none)."""
    if type(ev) is dict:
        return ev.get(name)
    value = getattr(ev, name, None)
    return None if value is structs.MISSING else value


# a number written as a JSON string: digits with an optional point and fraction (".5" and "5." too) and
# exponent, as Perfetto's JSON importer reads a string `ts` (its json_utils' CoerceToTs)
_NUMBER_TEXT = re.compile(r"\s*[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?\s*")


def _number(value):
    """A string that spells a finite number ("123.5") as that number (an int where it has no point or
    exponent); any other value as it is."""
    if type(value) is not str or _NUMBER_TEXT.fullmatch(value) is None:
        return value
    try:
        return int(value)
    except ValueError:
        number = float(value)
        return number if number - number == 0 else value  # "1e999": past float64, not a time


def _columns(rows: list[tuple], width: int) -> list:
    """Rows of a table as its columns (tuples; empty ones when there are no rows).

    Every row is built `width` long, so the transposition checks no lengths (a check that
    doubles its time)."""
    return list(zip(*rows, strict=False)) if rows else [() for _ in range(width)]


def _ints(values: list) -> np.ndarray:
    return np.asarray(values, dtype=np.int64)


def _ns(values: list) -> np.ndarray:
    """Microseconds (float or int) to integer nanoseconds.

    Whole microseconds and their fraction are scaled apart: a timestamp in µs since the epoch
    (1.7e15, written by converters and some exporters) times 1000 is past float64's exact
    integers, and rounding it to 256 ns would make back-to-back events overlap."""
    us = np.asarray(values, dtype=np.float64)
    whole = np.floor(us)
    return whole.astype(np.int64) * 1000 + np.rint((us - whole) * 1000.0).astype(np.int64)


def _numbers(values: list) -> np.ndarray:
    """One float per value (None and non-numbers: NaN), fast when the values are plain numbers."""
    try:
        arr = np.asarray(values, dtype=np.float64)  # None -> nan
        if arr.ndim == 1 and len(arr) == len(values):
            return arr
    except (TypeError, ValueError, OverflowError):
        pass
    return np.array([_num(v) for v in values], dtype=np.float64).reshape(len(values))


def _ids(values: list, default: int = NO_ID) -> np.ndarray:
    """Integer ids; None, non-numbers and ids past 64 bits become `default`.

    An id past float64's exact integers (2**53) is read from its value exactly, and one of
    2**63 or more (an unsigned 64-bit id) as the int64 of the same bits: ids are only compared
    for equality, and as floats ids 2**60 and 2**60 + 1 would be one id."""
    try:  # the usual column, every id a number that fits int64: converted at once, exactly
        out = np.asarray(values, dtype=np.int64)
        if out.ndim == 1 and len(out) == len(values):
            return out
    except (TypeError, ValueError, OverflowError):  # a null, NaN, a string that is no integer, 2**63 or more
        pass
    arr = _numbers(values)
    big = np.abs(arr) >= 2**53  # NaN compares False
    out = np.where(~np.isfinite(arr) | big, default, arr).astype(np.int64)
    for i in np.flatnonzero(big):
        out[i] = _exact_id(values[i], default)
    return out


def _exact_id(v, default: int) -> int:
    """One id of 2**53 or more, exactly, as int64 (an unsigned 64-bit id wraps to the same bits)."""
    if type(v) is str:
        try:
            v = int(v)
        except ValueError:
            return default
    elif type(v) is float:
        v = int(v)  # already rounded by the writer or reader: as close as it can be told
    if type(v) is not int or not -2**63 <= v < 2**64:
        return default
    return v - 2**64 if v >= 2**63 else v


def _num(v) -> float:
    if v is None or isinstance(v, bool) or not isinstance(v, (int, float, str)):
        return np.nan
    try:
        return float(v)
    except (TypeError, ValueError, OverflowError):
        return np.nan


def _floats(values: list) -> np.ndarray:
    return np.nan_to_num(_numbers(values), nan=0.0, posinf=0.0, neginf=0.0)


def _triples(values: list) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """grid/block [x, y, z] as three int64 columns (0 where absent); a list written as a string
    ("[128, 1, 1]") too."""
    out = np.zeros((len(values), 3), dtype=np.int64)
    lists = [v if type(v) is list else v.strip("[]").split(",") if type(v) is str and v[:1] == "[" else None
             for v in values]
    at = [i for i, v in enumerate(lists) if v is not None and len(v) == 3]
    try:  # one flat pass: numpy converts a flat run of numbers faster than a list of lists
        out[at] = np.fromiter(itertools.chain.from_iterable([lists[i] for i in at]), dtype=np.int64,
                              count=3 * len(at)).reshape(len(at), 3)
    except (TypeError, ValueError, OverflowError):  # a value that is not an integer: read one by one
        for i in at:
            v = lists[i]
            try:
                out[i] = (int(v[0]), int(v[1]), int(v[2]))
            except (TypeError, ValueError, OverflowError):
                pass
    return out[:, 0], out[:, 1], out[:, 2]


# The legacy autograd profiler's export_chrome_trace (torch <= 1.7, and to this day
# `prof.function_events.export_chrome_trace`) writes no `cat`: ops under the pid "CPU functions",
# and, in torch <= 1.7 with use_cuda, one interval per op under "CUDA functions", timed by CUDA
# events around the op (a parent's interval covers its children's): not kernels, so they are not
# read as device rows.
LEGACY_CPU_PID = "CPU functions"
LEGACY_CUDA_PID = "CUDA functions"
# runtime calls that put work on the device, and ops that run only on a GPU
GPU_WORK_API = r"Launch|Memcpy|Memset"
# Ops only a GPU runs. `cudnn_is_acceptable` is a query every backend's RNN and convolution dispatch
# calls (nn.LSTM on the CPU asks it): it runs no GPU work.
GPU_ONLY_OPS = r"^aten::_?(?:cudnn|miopen)_(?!is_acceptable$)"

# The categories Kineto writes that are not read (Python frames, the profiler's own spans, GPU-side
# annotations, synchronization and CUDA-event records, counters, host-side collectives of XPU's oneCCL):
# an event of any other category is no torch.profiler event.
KINETO_CATEGORIES = frozenset({
    "python_function", "Trace", "overhead", "gpu_user_annotation", "cpu_instant_event", "cuda_sync",
    "cuda_event", "external_correlation", "cuda_profiler_range", "mtia_insight", "mtia_counters",
    "glow_runtime", "hpu_op", "collective_comm", "xpu_sync", "xpu_scope_profiler", "hardware_counters",
    "gpu_pm_counter", "Python", "User annotation", "cuda_runtime_api", "ac2g", "fwdbwd", "async_cpu_to_gpu",
    "gpu_user_Annotation", "mtia_workloadd", "mtia_collective_comm"})  # the last three: older Kineto's names
# MTIA's on-device events (`mtia_ccp_events`) are kernels, DMA copies (their bytes in `size`) and event
# records and waits, which are synchronization, not work: those are skipped
MTIA_DMA = "dma_request"
MTIA_SYNC = frozenset({"event_record", "event_wait"})
# Event category -> the table it goes to: torch.profiler's names, PyTorch 1.8-1.10's capitalized ones.
# Every device's host-side runtime and driver calls are launches (XPU's urEnqueueKernelLaunch, a
# PrivateUse1 backend's, MTIA's), its device work kernels (MTIA's on-device events, but for the above).
_CATEGORY = {"cpu_op": "cpu_op", "Operator": "cpu_op", "user_annotation": "user_annotation",
             "cuda_runtime": "launch", "cuda_driver": "launch", "Runtime": "launch",
             "xpu_runtime": "launch", "xpu_driver": "launch", "privateuse1_runtime": "launch",
             "privateuse1_driver": "launch", "mtia_runtime": "launch",
             "kernel": "kernel", "Kernel": "kernel", "mtia_ccp_events": "kernel",
             "gpu_memcpy": "gpu_memcpy", "Memcpy": "gpu_memcpy",
             "gpu_memset": "gpu_memset", "Memset": "gpu_memset"}
def _decode_in_place(view) -> list:
    """`structs.decode` of a mapped file's chunk, which `_mapped_events` keeps as it is: not copied."""
    return structs.decode(view, copy=False)


def parse_events(path: str | Path, keep_events: bool = True) -> tuple[_Tables, dict, list | None]:
    """The events of a trace as column arrays (numpy, no pandas), its metadata, and its events where kept:
    what `read_trace` makes its tables of, in a form that can be sent to another process.

    `keep_events=False` (ingesting large traces) parses the event array chunk by
    chunk and keeps no event dicts; `True` keeps them for writing an enriched copy.
    """
    path = Path(path)
    tables = _Tables()
    meta: dict = {}
    events = None
    with _gc_paused():
        streamed = False
        stream_error = None
        if not keep_events:
            # an uncompressed file read where it lies, else (or where that reader declines) as a stream
            for reader, decode in ((_mapped_events, _decode_in_place), (_stream_events, structs.decode)):
                tables_s = _Tables()
                got: list[dict] = []
                try:
                    base = 0
                    for _offset, chunk in reader(path, got.append, decode):
                        tables_s.add(chunk, base)
                        base += len(chunk)
                    streamed = True
                    tables, meta = tables_s, got[0]
                except _Unmapped:
                    continue
                except _NotStreamable:
                    pass
                except TraceFormatError as exc:  # a layout the chunker misread: the whole parse decides
                    stream_error = exc
                break
            del tables_s, got
        if not streamed:
            data = _read(path)
            try:
                meta, events = _split(_loads(path, data), path)
            except TraceFormatError:
                raise stream_error or sys.exc_info()[1] from None
            del data
            tables.add(events, 0)
        tables.pair_begin_end()
    return tables, meta, events


def read_trace(path: str | Path, keep_events: bool = True,
               parsed: tuple[_Tables, dict, list | None] | None = None) -> RawTrace:
    """Parse a Chrome trace written by torch.profiler into event tables.

    `keep_events=False` (ingesting large traces) parses the event array chunk by
    chunk and keeps no event dicts; `True` keeps them for writing an enriched copy.
    `parsed`: the file's `parse_events`, already read (by another process).
    """
    path = Path(path)
    tables, meta, events = parsed if parsed is not None else parse_events(path, keep_events)
    with _gc_paused():
        frames = tables.frames(
            (lambda wanted: {i: events[i] for i in wanted}) if events is not None
            else (lambda wanted: dict(_events_where(path, lambda e, i: i in wanted)[1])))
    warnings = []
    if _link_by_external_id(frames):
        warnings.append(LINKED_BY_EXTERNAL_ID)
    if tables.duplicates:
        warnings.append(f"{tables.duplicates} events were dropped as exact repeats of an earlier event (the same "
                        "phase, category, name, pid, tid, ts, dur and args: a trace joined to itself, or events "
                        "written twice)")
    if tables.no_dur:
        warnings.append(f"{tables.no_dur} complete events without a dur were read as lasting 0 µs")
    if tables.skipped:
        warnings.append(f"{tables.skipped} complete events without a usable ts/dur were skipped")
    if tables.unpaired:
        warnings.append(f"{tables.unpaired} begin/end (ph B/E) events without their other half were skipped")
    if tables.legacy_cuda:
        warnings.append(f"{tables.legacy_cuda} 'CUDA functions' events of the legacy autograd profiler were not read: "
                        "they time each op with CUDA events (nested ops overlap), they are not kernels")
    raw = RawTrace(path=str(path), meta=meta, events=events if keep_events else None,
                   args_table=tables.args_table, warnings=warnings, event_count=tables.count,
                   legacy_device_events=tables.legacy_cuda, foreign_events=tables.foreign, mtia_events=tables.mtia,
                   untimed_example=tables.untimed_example, **frames)
    lost = raw.gpu_work_without_device
    if lost:
        warnings.append(f"GPU work ({lost}) but no kernel, memcpy or memset events: the trace's device activity "
                        "is missing (profile with torch.profiler and ProfilerActivity.CUDA; a CUPTI buffer may "
                        "have overflowed), so it has no kernel rows; its ops' host times are in the ops table")
    return raw


LINKED_BY_EXTERNAL_ID = ("no correlation ids: each kernel is linked to the launch that shares its External id, "
                         "and the launch to the op it lies in")


def _link_by_external_id(frames: dict[str, pd.DataFrame]) -> bool:
    """Where neither launches nor device rows carry a `correlation` but most device rows share an
    External id with a launch (traces converted from other profilers, e.g. rocprofv3's kernel and
    HIP API records), in place: that External id becomes both sides' correlation. The id then names
    no op (`join.external_ids_name_ops` sees ids equal to correlations), so launches find their op
    by time. Returns whether it did."""
    lau, dev = frames.get("launches"), frames.get("device")
    if lau is None or dev is None or not len(lau) or not len(dev) or "correlation" not in lau:
        return False
    if (lau.correlation.to_numpy() != NO_ID).any() or (dev.correlation.to_numpy() != NO_ID).any():
        return False
    l_ext, d_ext = lau.ext_id.to_numpy(), dev.ext_id.to_numpy()
    shared = np.isin(d_ext, l_ext[l_ext != NO_ID]) & (d_ext != NO_ID)
    if shared.sum() <= 0.5 * len(dev):
        return False
    lau["correlation"] = l_ext
    dev["correlation"] = np.where(shared, d_ext, NO_ID)
    return True


def select_events(path: str | Path, wanted: set[int]) -> tuple[dict, list[dict]]:
    """The trace's metadata and the events at positions `wanted` (in file order), chunk by chunk.

    Used to write a small enriched trace of a large one (`wlprof ingest --chrome-top`)
    without holding every event at once. Metadata events (`ph` "M") are kept too, so
    viewers name the processes and threads.
    """
    meta, picked = _events_where(Path(path), lambda e, i: i in wanted or (isinstance(e, dict) and e.get("ph") == "M"))
    return meta, [e for _, e in picked]


def _events_where(path: Path, keep) -> tuple[dict, list[tuple[int, Any]]]:
    """The trace's metadata and (position, event) of the events for which `keep(event, position)` holds,
    in file order, read chunk by chunk (the whole file where it cannot be streamed)."""
    with _gc_paused():
        got: list[dict] = []
        try:
            base = 0
            out: list[tuple[int, Any]] = []
            for _offset, chunk in _stream_events(path, got.append):
                out.extend((i, e) for i, e in enumerate(chunk, base) if keep(e, i))
                base += len(chunk)
            return got[0], out
        except (_NotStreamable, TraceFormatError):
            meta, events = _split(_loads(path, _read(path)), path)
            return meta, [(i, e) for i, e in enumerate(events) if keep(e, i)]

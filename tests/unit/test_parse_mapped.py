"""An uncompressed trace read where it lies (`parse._mapped_events`) gives what the stream reader gives.

Each file is read twice, once with the mapped reader and once with it declining (the stream reader
alone), and every table, count, warning and error compared; the chunks are made small so that a
file of a few thousand events spans many.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math

import pytest

from wlprof.trace import parse


def _ev(cat, name, ts, dur, pid=1, tid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": pid, "tid": tid, "args": args}


def _events(n: int) -> list[dict]:
    """n ops with recorded inputs, each launching one kernel, a step annotation and flow events."""
    events = [_ev("user_annotation", "ProfilerStep#0", 0, 100 * n)]
    for k in range(n):
        t = 100 * k
        events += [_ev("cpu_op", f"aten::op{k % 7}", t + 1, 50, **{"External id": k + 1, "Input Dims": [[k % 5, 3]],
                                                                   "Input type": ["float"]}),
                   _ev("cuda_runtime", "cudaLaunchKernel", t + 2, 5, correlation=10_000 + k, **{"External id": k + 1}),
                   {"ph": "s", "id": 10_000 + k, "pid": 1, "tid": 1, "ts": t + 2, "cat": "ac2g", "name": "ac2g"},
                   _ev("kernel", f"k{k % 11}", t + 10, 20, pid=0, tid=7, correlation=10_000 + k, stream=7, device=0,
                       grid=[k % 3 + 1, 1, 1], block=[128, 1, 1])]
    return events


def _kineto(events: list[dict], newline: str = "\n", array: bool = False) -> bytes:
    """The layout Kineto writes: one event per line after two spaces, the metadata around the list."""
    body = f",{newline}".join("  " + json.dumps(e) for e in events)
    if array:
        return f"[{newline}{body}{newline}]{newline}".encode()
    return (f'{{{newline}  "schemaVersion": 1,{newline}  "traceEvents": [{newline}{body}{newline}  ],'
            f'{newline}  "traceName": "t.json"{newline}}}{newline}').encode()


def _read(path, monkeypatch, mapped: bool):
    """The trace (or the error it raises) with the mapped reader, or with it declining every file."""
    with monkeypatch.context() as m:
        used = []
        if mapped:
            real = parse._decode_in_place
            m.setattr(parse, "_decode_in_place", lambda view: used.append(1) or real(view))
        else:
            def decline(path, on_meta, decode):
                raise parse._Unmapped()
                yield  # a generator, as the reader is

            m.setattr(parse, "_mapped_events", decline)
        try:
            return parse.read_trace(path, keep_events=False), len(used)
        except parse.TraceFormatError as exc:
            return str(exc), len(used)


def _assert_same(a, b) -> None:
    if isinstance(a, str) or isinstance(b, str):
        assert a == b
        return
    for table in ("ops", "annotations", "launches", "device"):
        assert getattr(a, table).equals(getattr(b, table)), table
    assert a.args_table == b.args_table
    assert a.meta == b.meta and a.warnings == b.warnings
    assert (a.event_count, a.foreign_events, a.untimed_example) == (b.event_count, b.foreign_events,
                                                                   b.untimed_example)


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
@pytest.mark.parametrize("array", [False, True])
def test_a_kineto_file_is_read_in_place_as_the_stream_reads_it_and_left_unchanged(tmp_path, monkeypatch, newline,
                                                                                   array):
    monkeypatch.setattr(parse, "CHUNK_BYTES", 16 << 10)
    path = tmp_path / "t.json"
    path.write_bytes(_kineto(_events(2000), newline, array))  # ~0.9 MB: ~55 chunks
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    mapped, chunks = _read(path, monkeypatch, mapped=True)
    streamed, _ = _read(path, monkeypatch, mapped=False)
    _assert_same(mapped, streamed)
    assert chunks > 40  # read in place, chunk by chunk (the last chunk too)
    assert list(mapped.ops.name[:3]) == ["aten::op0", "aten::op1", "aten::op2"] and len(mapped.device) == 2000
    assert mapped.meta == ({} if array else {"schemaVersion": 1, "traceName": "t.json"})
    # the brackets written over each chunk's ends went to the process's copy of the pages, not to the file
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest


def _long_event(events):
    events[3001]["args"]["note"] = "x" * (40 << 10)  # longer than a chunk: no line between events in it
    return events


def _nan(events):
    events[3001]["args"]["score"] = math.nan  # not JSON: the chunk holding it does not decode
    return events


def _truncated(events):
    return events  # cut below


@pytest.mark.parametrize("change", [_long_event, _nan, _truncated], ids=lambda f: f.__name__)
def test_where_the_mapped_reader_declines_midway_the_stream_reader_decides_alone(tmp_path, monkeypatch, change):
    """An event longer than a chunk, a NaN literal in a later chunk, a file cut short: the mapped reader
    has read chunks before it meets them; the file is then read as a stream from its start, and the result
    (or the refusal) is the stream reader's."""
    monkeypatch.setattr(parse, "CHUNK_BYTES", 16 << 10)
    data = _kineto(change(_events(1500)))
    if change is _truncated:
        data = data[:len(data) * 3 // 4]
    path = tmp_path / "t.json"
    path.write_bytes(data)
    mapped, chunks = _read(path, monkeypatch, mapped=True)
    streamed, _ = _read(path, monkeypatch, mapped=False)
    _assert_same(mapped, streamed)
    assert chunks > 20  # the mapped reader had read past the start before it declined
    if change is _truncated:
        assert "truncated" in mapped
    else:
        assert len(mapped.launches) == 1500


@pytest.mark.parametrize("kind", ["gzip", "minified", "bom", "empty"])
def test_files_the_mapped_reader_does_not_take_are_read_as_before(tmp_path, monkeypatch, kind):
    monkeypatch.setattr(parse, "CHUNK_BYTES", 16 << 10)
    events = _events(500)
    path = tmp_path / "t.json"
    if kind == "gzip":
        path.write_bytes(gzip.compress(_kineto(events)))
    elif kind == "minified":
        path.write_bytes(json.dumps({"traceEvents": events}, separators=(",", ":")).encode())
    elif kind == "bom":
        path.write_bytes(b"\xef\xbb\xbf" + _kineto(events))
    else:
        path.write_bytes(b"")
    mapped, chunks = _read(path, monkeypatch, mapped=True)
    streamed, _ = _read(path, monkeypatch, mapped=False)
    _assert_same(mapped, streamed)
    assert chunks == 0
    assert mapped == f"{path}: is empty" if kind == "empty" else len(mapped.ops) == 500

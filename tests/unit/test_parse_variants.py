"""Rewrites a real trace file can have, read as the original: hand-written traces, every value by hand.

`benchmarks/trace_variants.py` makes these rewrites of the real fixtures; each case here is one it found
read wrongly, in a trace small enough to check by hand.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from wlprof.columns import NAME_CODE
from wlprof.trace import parse
from wlprof.trace.parse import read_trace


def _ev(cat, name, ts, dur, pid=1, tid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": pid, "tid": tid, "args": args}


def _gpu_trace(n: int = 3) -> list[dict]:
    """n ops, each launching one kernel (External ids 1..n, correlations 101..)."""
    events = [_ev("user_annotation", "ProfilerStep#0", 0, 100 * n)]
    for k in range(n):
        t = 100 * k
        events += [_ev("cpu_op", f"aten::op{k}", t + 1, 50, **{"External id": k + 1}),
                   _ev("cuda_runtime", "cudaLaunchKernel", t + 2, 5, correlation=101 + k, **{"External id": k + 1}),
                   _ev("kernel", f"k{k}", t + 10, 20 + k, pid=0, tid=7, correlation=101 + k, stream=7, device=0)]
    return events


@pytest.mark.parametrize("indent", [None, 2])
@pytest.mark.parametrize("keep", [False, True])
def test_nan_and_infinity_literals_are_read_as_null(tmp_path, monkeypatch, indent, keep):
    # Python's json.dump writes float('nan') and float('inf') as NaN and Infinity, which are not JSON: such a
    # file was refused as truncated ("ends at byte N before its event list is closed")
    monkeypatch.setattr(parse, "CHUNK_BYTES", 2 << 10)  # many chunks: the NaN is met by the streaming reader
    events = _gpu_trace(40)
    events[4]["args"]["score"] = [math.nan, math.inf, -math.inf]  # op 1's args: an arg nobody reads
    events[3 + 3 * 20]["ts"] = math.nan  # kernel 20's start: NaN, so it has no time
    path = tmp_path / "nan.json"
    text = json.dumps({"traceEvents": events, "note": math.inf}, indent=indent)
    assert "NaN" in text and "-Infinity" in text
    path.write_text(text)
    trace = read_trace(path, keep_events=keep)
    assert list(trace.ops.name) == [f"aten::op{k}" for k in range(40)]
    assert len(trace.launches) == 40
    assert list(trace.device.name) == [f"k{k}" for k in range(40) if k != 20]  # the NaN start: skipped, told
    assert list(trace.device.dur_ns)[:3] == [20_000, 21_000, 22_000]
    assert "1 complete events without a usable ts/dur were skipped" in trace.warnings
    assert trace.meta["note"] is None


@pytest.mark.parametrize("indent", [None, 2])
def test_the_nan_search_reads_each_byte_at_most_once_and_only_where_a_split_fails(tmp_path, monkeypatch, indent):
    # the streaming reader looks for NaN/Infinity only where no split of its buffer parses; a long event
    # past the first megabyte (the head it reads at once) with 40 kB of arg (20 chunks) makes every split
    # fail while the buffer grows, and each search covers only the bytes no earlier search covered (16
    # bytes of overlap each), not the whole buffer again
    monkeypatch.setattr(parse, "CHUNK_BYTES", 2 << 10)
    events = _gpu_trace(3000)
    events[-30]["args"]["note"] = "x" * (40 << 10)
    path = tmp_path / "long.json"
    text = json.dumps({"traceEvents": events}, indent=indent)
    assert len(text) > 1.2 * (1 << 20) and text.index("xxx") > (1 << 20)
    path.write_text(text)
    searched = []
    real = parse._nonfinite

    def spy(data, start=0):
        searched.append(len(data) - max(0, start))
        return real(data, start)

    monkeypatch.setattr(parse, "_nonfinite", spy)
    trace = read_trace(path, keep_events=False)
    assert list(trace.ops.name) == [f"aten::op{k}" for k in range(3000)]
    assert len(searched) > 10  # the long event made splits fail as the buffer grew
    assert sum(searched) <= len(text) + 16 * len(searched)
    # a file whose every split parses is never searched
    searched.clear()
    path.write_text(json.dumps({"traceEvents": _gpu_trace(3000)}, indent=indent))
    assert len(read_trace(path, keep_events=False).ops) == 3000
    assert searched == []


def test_a_file_that_is_not_json_for_another_reason_is_still_refused_as_such(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{"traceEvents": [{"ph": "X", "ts": NaN, "dur": 1}, oops]}')
    with pytest.raises(parse.TraceFormatError, match=r"bad\.json.*invalid JSON at byte"):
        read_trace(path, keep_events=True)


@pytest.mark.parametrize("typed", [True, False])
def test_complete_events_without_dur_last_0_and_are_counted(tmp_path, monkeypatch, typed):
    # a kernel without `dur` was read as lasting 0 with nothing said; a null dur stays unusable (skipped)
    from wlprof.trace import structs

    if not typed:
        monkeypatch.setattr(structs, "decode", structs.as_dicts)
    events = _gpu_trace(3)
    del events[3]["dur"]  # kernel k0
    events[9]["dur"] = None  # kernel k2
    path = tmp_path / "nodur.json"
    path.write_text(json.dumps({"traceEvents": events}, indent=1))
    trace = read_trace(path, keep_events=False)
    assert list(trace.device.name) == ["k0", "k1"]
    assert list(trace.device.dur_ns) == [0, 21_000]
    assert "1 complete events without a dur were read as lasting 0 µs" in trace.warnings
    assert "1 complete events without a usable ts/dur were skipped" in trace.warnings


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_a_file_with_windows_line_ends_is_streamed_event_by_line_as_with_unix_ones(tmp_path, monkeypatch, newline):
    # with CRLF the one-event-per-line split ("},\n  {") never matched: the whole file was buffered, then
    # parsed whole (holding it all in memory) where LF files are read a chunk at a time
    monkeypatch.setattr(parse, "CHUNK_BYTES", 64 << 10)
    chunks = []
    add = parse._Tables.add
    monkeypatch.setattr(parse._Tables, "add", lambda self, events, base: chunks.append(base) or add(self, events, base))
    events = _gpu_trace(4000)  # ~1.7 MB: past the 1 MB the reader takes first
    text = "{\n  \"traceEvents\": [\n" + ",\n".join("  " + json.dumps(e) for e in events) + "\n  ]\n}\n"
    path = tmp_path / "t.json"
    path.write_bytes(text.replace("\n", newline).encode())
    trace = read_trace(path, keep_events=False)
    assert list(trace.device.name) == [f"k{k}" for k in range(4000)]
    assert len(chunks) > 5  # read 64 kB at a time


def _mm_trace() -> list[dict]:
    """Two aten::mm ops of [64,32]x[32,16] fp32, each launching two kernels on streams 7 and 8."""
    events = [_ev("user_annotation", "ProfilerStep#0", 0, 400)]
    for k in range(2):
        t = 200 * k
        ext = k + 1
        events += [_ev("cpu_op", "aten::mm", t + 1, 100, **{"External id": ext, "Input Dims": [[64, 32], [32, 16]],
                                                           "Input type": ["float", "float"]})]
        for j, stream in enumerate((7, 8)):
            corr = 100 + 10 * k + j
            events += [_ev("cuda_runtime", "cudaLaunchKernel", t + 2 + j, 5, correlation=corr, **{"External id": ext}),
                       _ev("kernel", "gemm", t + 10, 30, pid=0, tid=stream, correlation=corr, stream=stream,
                           device=0, grid=[4, 1, 1], block=[128, 1, 1], **{"External id": ext})]
    return events


@pytest.mark.parametrize("typed", [True, False])
@pytest.mark.parametrize("keep", [False, True])
def test_a_trace_whose_every_event_is_written_twice_reads_as_the_original_with_one_warning(
        tmp_path, monkeypatch, typed, keep):
    # every event twice (a trace joined to itself): each kernel row came twice, and its op's FLOPs and
    # bytes were split over twice the kernels (each row's half the original's, the sums unchanged)
    from wlprof import pipeline
    from wlprof.trace import structs

    if not typed:
        monkeypatch.setattr(structs, "decode", structs.as_dicts)
    events = _mm_trace()
    once, twice = tmp_path / "once.json", tmp_path / "twice.json"
    once.write_text(json.dumps({"traceEvents": events}, indent=1))
    twice.write_text(json.dumps({"traceEvents": [e for ev in events for e in (ev, dict(ev))]}, indent=1))
    a, b = read_trace(once, keep_events=keep), read_trace(twice, keep_events=keep)
    for table in ("ops", "annotations", "launches", "device"):
        x, y = getattr(a, table).drop(columns="idx"), getattr(b, table).drop(columns="idx")
        assert x.reset_index(drop=True).equals(y.reset_index(drop=True)), table
    # 1 annotation + 2 ops + 4 launches + 4 kernels written a second time
    assert [w for w in b.warnings if "repeat" in w] == [
        "11 events were dropped as exact repeats of an earlier event (the same phase, category, name, pid, tid, "
        "ts, dur and args: a trace joined to itself, or events written twice)"]
    assert not [w for w in a.warnings if "repeat" in w]
    ka, kb = pipeline.costed(a).kernels, pipeline.costed(b).kernels
    # each mm: 2*64*32*16 = 65,536 FLOPs, split over its two kernels of equal time: 32,768 each
    assert list(kb.flops) == list(ka.flops) == [32_768.0] * 4
    assert list(kb.bytes) == list(ka.bytes)


@pytest.mark.parametrize("typed", [True, False])
@pytest.mark.parametrize("keep", [False, True])
def test_distinct_events_that_share_a_start_are_never_dropped_as_repeats(tmp_path, monkeypatch, typed, keep):
    from wlprof.trace import structs

    if not typed:
        monkeypatch.setattr(structs, "decode", structs.as_dicts)
    events = [
        _ev("cpu_op", "aten::linear", 10, 50, **{"External id": 1}),
        _ev("cpu_op", "aten::t", 10, 50, **{"External id": 1}),  # its child: same start, another name
        _ev("cpu_op", "aten::add", 100, 5, **{"External id": 2, "Input Dims": [[4], [4]]}),
        _ev("cpu_op", "aten::add", 100, 5, **{"External id": 2, "Input Dims": [[8], [8]]}),  # other inputs
        _ev("kernel", "k", 20, 9, pid=0, tid=7, correlation=5, stream=7, device=0),
        _ev("kernel", "k", 20, 9, pid=0, tid=8, correlation=6, stream=8, device=0),  # another stream
        _ev("kernel", "k", 40, 9, pid=0, tid=7, correlation=7, stream=7, device=0, grid=[1, 1, 1]),
        _ev("kernel", "k", 40, 9, pid=0, tid=7, correlation=7, stream=7, device=0, grid=[2, 1, 1]),  # other args
        _ev("gpu_memcpy", "k", 60, 9, pid=0, tid=7, correlation=8, stream=7, device=0),
        _ev("gpu_memset", "k", 60, 9, pid=0, tid=7, correlation=8, stream=7, device=0),  # another category
        _ev("kernel", "g", 80, 9, pid=0, tid=7, rank=0),
        _ev("kernel", "g", 80, 9, pid=0, tid=7, rank=1),  # another value of an arg no table keeps
        {"ph": "B", "cat": "user_annotation", "name": "step", "ts": 0, "pid": 1, "tid": 1},
        {"ph": "E", "cat": "user_annotation", "name": "step", "ts": 200, "pid": 1, "tid": 1},
        _ev("user_annotation", "step", 0, 200),  # the same span, as a complete event: another phase
    ]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    trace = read_trace(path, keep_events=keep)
    assert len(trace.ops) == 4 and len(trace.device) == 8 and len(trace.annotations) == 2
    assert not [w for w in trace.warnings if "repeat" in w]


@pytest.mark.parametrize("typed", [True, False])
@pytest.mark.parametrize("keep", [False, True])
def test_ts_and_dur_written_as_numeric_strings_read_as_the_numbers(tmp_path, monkeypatch, typed, keep):
    # Ascend's torch_npu writes "ts": "1704161511420306.491" and Perfetto's JSON importer reads such strings
    # as numbers; such a trace was refused ("none with a number for its ts and dur")
    from wlprof.trace import structs

    if not typed:
        monkeypatch.setattr(structs, "decode", structs.as_dicts)
    events = _mm_trace()
    base = 1704161511420306.491  # µs since the epoch, as torch_npu writes them

    def as_text(e):
        return {**e, "ts": repr(base + e["ts"]), "dur": str(e["dur"])}

    strings = [as_text(e) for e in events]
    strings[0] = {k: v for k, v in strings[0].items() if k not in ("ph", "dur")}  # the step as a B/E pair
    strings[0]["ph"] = "B"
    strings.append({"ph": "E", "cat": "user_annotation", "name": "ProfilerStep#0", "pid": 1, "tid": 1,
                    "ts": f"{base + 400:.3f}"})
    numbers = [{**e, "ts": base + e["ts"]} for e in events]
    a_path, b_path = tmp_path / "numbers.json", tmp_path / "strings.json"
    a_path.write_text(json.dumps({"traceEvents": numbers}, indent=1))
    b_path.write_text(json.dumps({"traceEvents": strings}, indent=1))
    a, b = read_trace(a_path, keep_events=keep), read_trace(b_path, keep_events=keep)
    for table in ("ops", "annotations", "launches", "device"):  # file positions and name codes aside
        x, y = getattr(a, table).drop(columns=["idx", NAME_CODE]), getattr(b, table).drop(columns=["idx", NAME_CODE])
        assert x.reset_index(drop=True).equals(y.reset_index(drop=True)), table
    assert list(b.device.dur_ns) == [30_000] * 4
    assert list(b.annotations.dur_ns) == [400_000]
    # (base + 1) µs: float64 holds µs since the epoch to 1/4 µs, as it does a JSON number's
    assert int(b.ops.ts_ns.iloc[0]) == 1704161511420307_500
    assert not b.warnings or all("skipped" not in w for w in b.warnings)


@pytest.mark.parametrize("typed", [True, False])
@pytest.mark.parametrize("value", ["12 us", "0x10", "1e999", "nan", ""])
def test_a_ts_string_that_is_no_number_is_still_skipped_and_named(tmp_path, monkeypatch, typed, value):
    from wlprof.trace import structs

    if not typed:
        monkeypatch.setattr(structs, "decode", structs.as_dicts)
    events = _gpu_trace(2)
    events[3]["ts"] = value  # kernel k0
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    trace = read_trace(path, keep_events=False)
    assert list(trace.device.name) == ["k1"]
    assert "1 complete events without a usable ts/dur were skipped" in trace.warnings
    assert trace.untimed_example == f"a kernel event's ts is str {value!r}"


def test_ids_are_read_exactly_whether_or_not_a_column_holds_a_null():
    # a column of ids is converted at once where every value fits int64, else value by value; both ways
    # give each id the same int64: here each value alone (the whole column fits) and beside a None (it does not)
    expected = {
        5: 5, -3: -3, 2**53 + 1: 2**53 + 1,  # past float64's exact integers: still exact
        2**63 - 1: 2**63 - 1, 2**63: -2**63, 2**64 - 1: -1,  # unsigned 64-bit ids: the int64 of the same bits
        2**64: -1,  # past 64 bits: no id
        5.7: 5, 1e16: 10**16, True: 1,  # numbers as numbers
        "7": 7, "1e3": 1000, "12.0": 12, "abc": -1, "nan": -1,  # ids written as strings
    }
    for value, want in expected.items():
        assert parse._ids([value]).tolist() == [want], value
        assert parse._ids([value, None]).tolist() == [want, -1], value
    assert parse._ids([None], default=0).tolist() == [0]
    column = parse._ids([1, 2**62, -7])
    assert column.dtype == np.int64 and column.tolist() == [1, 2**62, -7]

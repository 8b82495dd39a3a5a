"""The typed (msgspec) decoding of trace events reads exactly what the dict path reads.

Every table, the distinct op inputs each row points to, the counts and the warnings are
compared between the two decoders, on real traces of every format the fixtures hold and on
a hand-written trace of the odd events a writer produces.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from wlprof.trace import parse, structs

FIX = Path(__file__).resolve().parents[1] / "fixtures"
REAL = sorted([*(FIX / "public").glob("*.json.gz"), *(FIX / "public" / "hta_2023_two_ranks").glob("*.json*"),
               FIX / "h200_probe_ops.json.gz", *(FIX / "h200_training").glob("*.json.gz")])

pytestmark = pytest.mark.skipif(not structs.available(), reason="msgspec is not installed")


def _read_both(path: Path, monkeypatch) -> tuple[parse.RawTrace, parse.RawTrace]:
    typed = parse.read_trace(path, keep_events=False)
    with monkeypatch.context() as m:
        m.setattr(structs, "decode", structs.as_dicts)
        plain = parse.read_trace(path, keep_events=False)
    return typed, plain


def _assert_same(typed: parse.RawTrace, plain: parse.RawTrace) -> None:
    for table in ("ops", "annotations", "launches", "device"):
        a, b = getattr(typed, table), getattr(plain, table)
        assert list(a.columns) == list(b.columns), table
        assert a.drop(columns=["args_id"], errors="ignore").equals(b.drop(columns=["args_id"], errors="ignore")), table
        if "args_id" in a:  # the ids may differ, the args they name may not
            def named(t, ids):
                return [t.args_table[i] if i >= 0 else None for i in ids]
            assert named(typed, a.args_id) == named(plain, b.args_id), table
    assert typed.meta == plain.meta
    assert typed.warnings == plain.warnings
    assert (typed.event_count, typed.foreign_events, typed.legacy_device_events, typed.untimed_example) == \
        (plain.event_count, plain.foreign_events, plain.legacy_device_events, plain.untimed_example)


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_typed_decoding_reads_real_traces_as_the_dicts_do(path, monkeypatch):
    typed, plain = _read_both(path, monkeypatch)
    assert len(typed.ops) + len(typed.device) + len(typed.launches) > 0
    _assert_same(typed, plain)


def _odd_events() -> list:
    return [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 2, "ts": 10, "dur": 5,
         "args": {"External id": 7, "Input Dims": [[4, 8], [8, 16]], "Input type": ["float", "float"],
                  "Concrete Inputs": ["", ""], "Record function id": 3}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 2, "ts": 20, "dur": 5,
         "args": {"External id": 8, "Input Dims": [[4, 8], [8, 16]], "Input type": ["float", "float"],
                  "Concrete Inputs": ["", ""]}},
        {"ph": "X", "cat": "Operator", "name": "aten::add", "pid": 1, "tid": "thread 3", "ts": 30.5, "dur": 1.25,
         "args": {"Input dims": [[3], [3]], "Input type": None}},  # PyTorch 1.8-1.10
        {"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#4", "pid": 1, "tid": 2, "ts": 1, "dur": 100},
        {"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce", "pid": 1, "tid": 2, "ts": 40, "dur": 3,
         "args": {"Input Dims": [[1024]], "Input type": ["float"]}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 2, "ts": 11, "dur": 2,
         "args": {"correlation": 99, "external id": 7}},
        {"ph": "X", "cat": "kernel", "name": "ncclKernel", "pid": 0, "tid": 7, "ts": 12, "dur": 4,
         "args": {"correlation": 99, "stream": 7, "device": None, "grid": [8, 1, 1], "block": [128, 1, 1],
                  "Collective name": "allreduce", "In msg nelems": 1024, "dtype": "Float", "Group size": 2}},
        {"ph": "X", "cat": "Memcpy", "name": "Memcpy HtoD", "pid": 0, "tid": "stream 7", "ts": 13, "dur": 1,
         "args": {"bytes": 4096, "blocks per SM": 0.5}},
        {"ph": "X", "cat": "kernel", "name": 12345, "pid": 0, "tid": 7, "ts": "14", "dur": "1.5"},  # as numbers
        {"ph": "X", "cat": "kernel", "name": "late", "pid": 0, "tid": 7, "ts": "14 us", "dur": 1},  # untimed
        {"ph": "X", "cat": None, "name": "x", "pid": 1, "tid": 2, "ts": 15, "dur": 1},  # foreign category
        {"ph": "X", "cat": "made_up", "name": "y", "pid": 1, "tid": 2, "ts": 15, "dur": 1},
        {"ph": "X", "name": "aten::relu", "pid": "CPU functions", "tid": 2, "ts": 50, "dur": 2},  # legacy
        {"ph": "X", "name": "aten::relu", "pid": "CUDA functions", "tid": 2, "ts": 50, "dur": 2},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 60, "args": None},  # no dur: 0
        {"ph": "s", "cat": "ac2g", "id": 99, "pid": 1, "tid": 2, "ts": 11},
        {"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "GPU 0"}},
    ]


def _count_typed_chunks(monkeypatch) -> list:
    seen = []
    add = parse._Tables._add_structs
    monkeypatch.setattr(parse._Tables, "_add_structs", lambda self, events, base: seen.append(base) or add(
        self, events, base))
    return seen


@pytest.mark.parametrize("indent", [None, 1, 4])
def test_typed_decoding_reads_odd_events_as_the_dicts_do(tmp_path, monkeypatch, indent):
    path = tmp_path / "odd.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": _odd_events(), "displayTimeUnit": "ms"},
                               indent=indent))
    seen = _count_typed_chunks(monkeypatch)
    typed, plain = _read_both(path, monkeypatch)
    assert len(seen) == 1
    _assert_same(typed, plain)
    # by hand: two mm calls with the same inputs share one args entry; the 1.8 name is read as "Input Dims"
    assert list(typed.ops.name) == ["aten::mm", "aten::mm", "aten::add", "aten::relu"]
    ids = typed.ops.args_id.tolist()
    assert ids[0] == ids[1] and typed.args_table[ids[0]]["Input Dims"] == [[4, 8], [8, 16]]
    assert typed.args_table[ids[2]] == {"Input Dims": [[3], [3]]}
    assert "1 complete events without a usable ts/dur were skipped" in typed.warnings
    assert typed.untimed_example == "a kernel event's ts is str '14 us'"
    assert typed.device[typed.device.name == "12345"][["ts_ns", "dur_ns"]].values.tolist() == [[14_000, 1_500]]
    assert (typed.foreign_events, typed.legacy_device_events) == (2, 1)
    kernel = typed.device[typed.device.name == "ncclKernel"].iloc[0]
    assert (kernel.device_index, kernel.stream, kernel.grid_x, kernel.block_x) == (-1, 7, 8, 128)
    assert typed.args_table[kernel.args_id]["Collective name"] == "allreduce"
    memcpy = typed.device[typed.device.kind == "memcpy"].iloc[0]
    assert (memcpy.transfer_bytes, memcpy.device_index) == (4096, 0)


def test_chunks_of_other_shapes_fall_back_to_dicts(tmp_path, monkeypatch):
    """An event that is not an object, or args that are not one, do not fit the struct: that chunk is
    read as dicts (the event skipped, the args read as none), the rest of the file as structs."""
    monkeypatch.setattr(parse, "CHUNK_BYTES", 64 << 10)
    odd = [42, {"ph": "X", "cat": "cpu_op", "name": "aten::zero_", "pid": 1, "tid": 2, "ts": 70, "dur": 1,
                "args": ["not", "an", "object"]}]
    assert type(structs.decode(json.dumps(odd).encode())[0]) is int  # that array fell back to plain values
    events = _odd_events() * 600  # ~1.5 MB: many chunks
    events[len(events) // 2:len(events) // 2] = odd
    path = tmp_path / "shapes.json.gz"
    with gzip.open(path, "wt") as fh:
        json.dump({"traceEvents": events}, fh, indent=1)
    seen = _count_typed_chunks(monkeypatch)
    typed, plain = _read_both(path, monkeypatch)
    _assert_same(typed, plain)
    assert len(seen) > 3 and typed.event_count == len(events)  # typed chunks before and after the odd one
    assert list(typed.ops.name).count("aten::zero_") == 1


def test_flow_and_metadata_events_decode_without_fields_and_unknown_phases_fall_back(tmp_path, monkeypatch):
    """The phases never read decode as field-less structs (still counted); an event of an unlisted
    phase, or with none, makes its chunk decode as dicts, read the same."""
    flow = structs.decode(b'[{"ph": "s", "cat": "ac2g", "id": 9, "pid": 1, "tid": 2, "ts": 3}, {"ph": "M"}]')
    assert [type(e) in structs.EVENT_TYPES for e in flow] == [True, True] and flow[0].ph == "s"
    assert type(structs.decode(b'[{"ph": "Z"}]')[0]) is dict
    assert type(structs.decode(b'[{"name": "no phase"}]')[0]) is dict
    for extra in ({"ph": "Z", "name": "z", "pid": 1, "tid": 2, "ts": 1}, {"name": "no phase", "ts": 2}):
        path = tmp_path / "phases.json"
        path.write_text(json.dumps({"traceEvents": [*_odd_events(), extra]}))
        typed, plain = _read_both(path, monkeypatch)
        _assert_same(typed, plain)
        assert typed.event_count == len(_odd_events()) + 1

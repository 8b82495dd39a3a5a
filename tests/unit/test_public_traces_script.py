"""benchmarks/public_traces.py: raw device events counted from the JSON, and one row per trace."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import public_traces  # noqa: E402

PUBLIC = Path(__file__).resolve().parents[1] / "fixtures" / "public"


def test_raw_device_events_by_kind_with_begin_end_pairs_and_mtia(tmp_path):
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "k", "ts": 0, "dur": 2.5},
        {"ph": "X", "cat": "Memset", "name": "m", "ts": 0, "dur": 1},
        {"ph": "B", "cat": "gpu_memcpy", "name": "c", "pid": 0, "tid": 7, "ts": 10},
        {"ph": "E", "cat": "gpu_memcpy", "name": "c", "pid": 0, "tid": 7, "ts": 14},
        {"ph": "X", "cat": "mtia_ccp_events", "name": "dma_request", "ts": 0, "dur": 3},
        {"ph": "X", "cat": "mtia_ccp_events", "name": "event_wait", "ts": 0, "dur": 100},
        {"ph": "X", "cat": "mtia_ccp_events", "name": "fc-dtype_Float", "ts": 0, "dur": 5},
        {"ph": "X", "cat": "cuda_event", "name": "e", "ts": 0, "dur": 1}]}))
    # kernel 2.5 + 5, memset 1, memcpy 4 (the pair) + 3 (MTIA's DMA): 15.5 us; the wait and the CUDA event left out
    assert public_traces.raw_device_events(p) == ({"kernel": 2, "memset": 1, "memcpy": 2}, 15.5)


def test_rows_of_a_folder_check_ingest_against_the_raw_events(tmp_path):
    for name in ("hta_2024_mi250_rocm62.json.gz", "hta_2026_mtia_inference_event_wait.json.gz"):
        shutil.copy(PUBLIC / name, tmp_path / name)
    (tmp_path / "config.json").write_text('{"lr": 0.1}')
    rows = {r.trace: r for r in map(public_traces.check, public_traces.trace_paths(tmp_path))}
    assert rows["config.json"].status.startswith("TraceFormatError")
    rocm = rows["hta_2024_mi250_rocm62.json.gz"]
    # 14 kernels and 2 copies, 149.042 us, each joined by its launch's External id
    assert (rocm.rows, rocm.raw, rocm.joins) == ({"kernel": 14, "memcpy": 2}, {"kernel": 14, "memcpy": 2},
                                                 {"external_id": 16})
    assert rocm.rows_us == pytest.approx(149.042) and public_traces.equal(rocm)
    assert rocm.device == "cuda: AMD Radeon Graphics" and rocm.has_op == 1.0
    mtia = rows["hta_2026_mtia_inference_event_wait.json.gz"]
    assert mtia.rows == {"kernel": 1, "memcpy": 1} and public_traces.equal(mtia) and mtia.has_op == 0.0
    table = public_traces.render(list(rows.values()))
    assert table.count("\n") == 2 + 3 - 1 and "| yes |" in table and "**no**" not in table


def test_rows_equal_raw_to_half_a_nanosecond_per_event():
    # TraceLens' MI300 SDPA eval writes ten durations such as 124.75987589205187 us (summing to
    # 1,080.4680025870114); wlprof keeps whole nanoseconds (1,080.470): 0.002 us apart, within
    # 10 x 0.0005 us. A row missing a microsecond is not.
    row = public_traces.Row(trace="t", raw={"kernel": 10}, raw_us=1080.4680025870114, rows={"kernel": 10},
                            rows_us=1080.470)
    assert public_traces.equal(row)
    row.rows_us = 1079.470
    assert not public_traces.equal(row)

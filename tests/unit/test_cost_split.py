"""How an op's cost reaches its device rows (wlprof.cost.annotate): split over its kernels by duration,
nothing for the memsets beside them, everything for a copy-only op, the trace's bytes for copies
without a formula, and a workload's stated cost split per step over the ops it names.

Every expected value is worked out by hand in a comment from `aten::mm`'s formula:
[m, k] @ [k, n] in float32 is 2mkn FLOPs, (mk + kn + mn) * 4 bytes, of which mn * 4 are written.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from wlprof import pipeline
from wlprof.cost.registry import MATRIX, VECTOR, Cost
from wlprof.trace.parse import read_trace
from wlprof.workloads.base import Stated


def _x(cat, name, ts, dur, tid=1, pid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": pid, "tid": tid, "args": args}


def mm(ts, dur, ext, m, k, n, name="aten::mm"):
    return _x("cpu_op", name, ts, dur, **{"External id": ext, "Input Dims": [[m, k], [k, n]],
                                          "Input type": ["float", "float"],
                                          "Input Strides": [[k, 1], [n, 1]]})


def other(ts, dur, ext, name):
    return _x("cpu_op", name, ts, dur, **{"External id": ext, "Input Dims": [[4, 4]], "Input type": ["float"]})


def launch(ts, corr, ext, name="cudaLaunchKernel"):
    return _x("cuda_runtime", name, ts, 1, correlation=corr, **({"External id": ext} if ext else {}))


def device(cat, name, ts, dur, corr, nbytes=None):
    extra = {"bytes": nbytes} if nbytes is not None else {"grid": [1, 1, 1], "block": [128, 1, 1]}
    return _x(cat, name, ts, dur, tid=7, pid=0, correlation=corr, stream=7, device=0, **extra)


def kernel(name, ts, dur, corr):
    return device("kernel", name, ts, dur, corr)


EVENTS = [
    _x("user_annotation", "ProfilerStep#1", 0, 500),
    _x("user_annotation", "ProfilerStep#2", 600, 400),
    # step 1: mm 4x8x16 -> 1024 FLOPs, (32 + 128 + 64) * 4 = 896 bytes, 256 written; two kernels of 3 and
    # 1 us (shares 0.75 and 0.25) and a 4 us memset of its workspace (share 0: overhead, not work)
    mm(10, 30, 1, 4, 8, 16), launch(11, 1, 1), launch(12, 2, 1), launch(13, 3, 1),
    kernel("gemm_a", 100, 3, 1), kernel("gemm_b", 104, 1, 2), device("gpu_memset", "Memset (Device)", 106, 4, 3, 100),
    # an op without a formula that runs a device-to-device copy only: the copy has the trace's bytes,
    # read and written (2 * 64 = 128 bytes, 64 written)
    other(50, 10, 2, "myext::shuffle"), launch(51, 4, 2, "cudaMemcpyAsync"),
    device("gpu_memcpy", "Memcpy DtoD (Device -> Device)", 120, 2, 4, 64),
    # mm 2x2x2 -> 16 FLOPs, 48 bytes, 16 written; its two kernels last 0 us: half each
    mm(70, 10, 3, 2, 2, 2), launch(71, 5, 3), launch(72, 6, 3),
    kernel("gemm_c", 130, 0, 5), kernel("gemm_d", 130, 0, 6),
    # a copy to the host under an op without a formula: 1000 bytes read, none written on the device
    other(90, 10, 4, "myext::fetch"), launch(91, 7, 4, "cudaMemcpyAsync"),
    device("gpu_memcpy", "Memcpy DtoH (Device -> Pinned)", 140, 5, 7, 1000),
    # launches outside every op: a kernel with no op (unknown) and a copy to the device (its bytes)
    launch(300, 8, None), launch(301, 9, None, "cudaMemcpyAsync"),
    kernel("orphan", 310, 2, 8), device("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", 320, 3, 9, 512),
    # the stated region: two bmm calls in step 1, one in step 2; an mm beside them keeps its formula
    _x("user_annotation", "wl/experts", 400, 90),
    mm(401, 10, 10, 1, 4, 4, "aten::bmm"), launch(402, 20, 10), kernel("bmm_a", 410, 3, 20),
    mm(420, 10, 11, 1, 4, 4, "aten::bmm"), launch(421, 21, 11), kernel("bmm_b", 430, 1, 21),
    mm(440, 10, 12, 2, 2, 2), launch(441, 22, 12), kernel("gemm_e", 450, 2, 22),
    _x("user_annotation", "wl/experts", 610, 100),
    mm(611, 10, 13, 1, 4, 4, "aten::bmm"), launch(612, 23, 13), kernel("bmm_c", 620, 2, 23),
]
STATED = [Stated("wl/experts", Cost(flops=1000.0, bytes=2000.0, unit=MATRIX, dtype="float32", written=400.0),
                 ops=("aten::bmm",))]


@pytest.fixture
def tables(tmp_path):
    """Built for each test, not once per module: mutation testing runs only the tests that call the split."""
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": EVENTS}))
    c = pipeline.costed(read_trace(path), stated=STATED)
    return c.kernels.set_index("name"), c.ops


def _row(k, name):
    r = k.loc[name]
    return [r.cost_share, r.flops, r["bytes"], r.bytes_written, r.flops_source, r.cost_unit]


def test_an_ops_cost_is_split_over_its_kernels_by_duration_and_its_memset_gets_none(tables):
    k, _ = tables
    assert _row(k, "gemm_a") == [0.75, 768.0, 672.0, 192.0, "formula", MATRIX]
    assert _row(k, "gemm_b") == [0.25, 256.0, 224.0, 64.0, "formula", MATRIX]
    assert _row(k, "Memset (Device)") == [0.0, 0.0, 0.0, 0.0, "formula", MATRIX]
    assert k.loc[["gemm_a", "gemm_b", "Memset (Device)"], "op_kernel_count"].tolist() == [3, 3, 3]


def test_kernels_of_zero_duration_share_their_ops_cost_equally(tables):
    k, _ = tables
    assert _row(k, "gemm_c") == [0.5, 8.0, 24.0, 8.0, "formula", MATRIX]
    assert _row(k, "gemm_d") == [0.5, 8.0, 24.0, 8.0, "formula", MATRIX]


def test_copies_without_a_formula_carry_the_bytes_the_trace_records(tables):
    k, _ = tables
    dtod, dtoh, htod = "Memcpy DtoD (Device -> Device)", "Memcpy DtoH (Device -> Pinned)", "Memcpy HtoD (Pinned -> Device)"
    # share 1: the copy is all its op ran (or it has no op)
    assert _row(k, dtod) == [1.0, 0.0, 128.0, 64.0, "formula", VECTOR]
    assert _row(k, dtoh) == [1.0, 0.0, 1000.0, 0.0, "formula", VECTOR]
    assert _row(k, htod) == [1.0, 0.0, 512.0, 512.0, "formula", VECTOR]
    assert not k.loc[htod, "has_op"] and k.loc[dtod, "op_name"] == "myext::shuffle"


def test_a_kernel_without_an_op_is_unknown(tables):
    k, _ = tables
    r = k.loc["orphan"]
    assert r.cost_share == 1.0 and np.isnan(r.flops) and np.isnan(r["bytes"]) and r.flops_source == "unknown"
    assert pd.isna(r.op_name) and pd.isna(r.cost_unit) and r.op_kernel_count == 1


def test_a_stated_cost_is_split_per_step_over_the_ops_it_names(tables):
    k, _ = tables
    # step 1: these bmm's 2-D inputs fit no bmm formula, so their kernels of 3 and 1 us share the
    # stated 1000 FLOPs, 2000 bytes, 400 written per step by duration
    assert _row(k, "bmm_a") == [0.75, 750.0, 1500.0, 300.0, "workload", MATRIX]
    assert _row(k, "bmm_b") == [0.25, 250.0, 500.0, 100.0, "workload", MATRIX]
    # step 2: its one bmm has all of it
    assert _row(k, "bmm_c") == [1.0, 1000.0, 2000.0, 400.0, "workload", MATRIX]
    assert k.loc["bmm_c", "cost_dtype"] == "float32" and k.loc["bmm_c", "step"] == 2
    # the mm in the region keeps its own formula: 16 FLOPs, 48 bytes, 16 written
    assert _row(k, "gemm_e") == [1.0, 16.0, 48.0, 16.0, "formula", MATRIX]


def test_the_ops_table_sums_each_ops_rows(tables):
    k, ops = tables
    o = ops.set_index("external_id")
    # mm 4x8x16: three rows of 3 + 1 + 4 = 8 us, the op's whole cost
    assert o.loc[1, ["kernel_count", "dur_us", "flops", "bytes", "bytes_written"]].tolist() == [3, 8.0, 1024.0,
                                                                                                  896.0, 256.0]
    assert o.loc[1, "cpu_dur_us"] == 30.0 and o.loc[1, "ts_us"] == 10.0 and o.loc[1, "step"] == 1
    assert o.loc[3, ["kernel_count", "flops", "bytes"]].tolist() == [2, 16.0, 48.0]
    assert o.loc[2, ["kernel_count", "flops", "bytes", "bytes_written", "flops_source"]].tolist() == [
        1, 0.0, 128.0, 64.0, "formula"]
    # the bmm ops of the region: the workload's share of each step's statement
    assert o.loc[[10, 11, 13], "flops"].tolist() == [750.0, 250.0, 1000.0]
    assert o.loc[[10, 11, 13], "flops_source"].tolist() == ["workload"] * 3
    assert set(o.index) == {1, 2, 3, 4, 10, 11, 12, 13}
    assert o.flops.sum() == 1024 + 16 + 1000 + 1000 + 16  # every op's cost once; the orphan kernel has no op
    assert len(k) == 13 and k.flops.sum() == o.flops.sum()


def grouped(ts, ext, m, k, g, n):
    return _x("cpu_op", "aten::_grouped_mm", ts, 10, **{
        "External id": ext, "Input Dims": [[m, k], [g, k, n], [g]], "Input type": ["float", "float", "int"],
        "Input Strides": [[k, 1], [k * n, 1, k], [1]]})


def test_a_stated_cost_follows_the_named_ops_formulas_and_the_others_keep_theirs(tmp_path):
    events = [
        _x("user_annotation", "ProfilerStep#1", 0, 500),
        _x("user_annotation", "wl/experts", 1, 200),
        # _grouped_mm [8, 4] @ [2, 4, 4], offs [2]: 2*8*4*4 = 256 FLOPs; 4*(32 + 32 + 32) + 2*4 = 392 bytes,
        # 128 written; its kernel takes 3 us
        grouped(10, 1, 8, 4, 2, 4), launch(11, 1, 1), kernel("gmm_small", 100, 3, 1),
        # [8, 4] @ [2, 4, 12]: 768 FLOPs; 4*(32 + 96 + 96) + 8 = 904 bytes, 384 written; 1 us
        grouped(30, 2, 8, 4, 2, 12), launch(31, 2, 2), kernel("gmm_large", 110, 1, 2),
        # a silu over [8, 12] between them is not named: its own formula
        _x("cpu_op", "aten::silu", 50, 5, **{"External id": 3, "Input Dims": [[8, 12]], "Input type": ["float"],
                                             "Input Strides": [[12, 1]]}), launch(51, 3, 3),
        kernel("silu", 120, 1, 3),
    ]
    st = Stated("wl/experts", Cost(flops=1000.0, bytes=1296.0, unit=MATRIX, dtype="float32", written=1024.0),
                ops=("aten::_grouped_mm",))
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    k = pipeline.costed(read_trace(path), stated=[st]).kernels.set_index("name")
    # the statement is split 1 : 3 as the formulas' FLOPs are (not 3 : 1 as the durations), the bytes
    # 392 : 904 and the written bytes 128 : 384 as theirs
    assert _row(k, "gmm_small") == [0.25, 250.0, 392.0, 256.0, "workload", MATRIX]
    assert _row(k, "gmm_large") == [0.75, 750.0, 904.0, 768.0, "workload", MATRIX]
    silu = pipeline.costed(read_trace(path)).kernels.set_index("name").loc["silu"]
    assert k.loc["silu", ["flops", "bytes", "flops_source"]].tolist() == [silu.flops, silu["bytes"], "formula"]
    assert silu.flops > 0

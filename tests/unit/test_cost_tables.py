"""The kernels and ops tables that wlprof.cost.annotate builds from a hand-made trace: every column of a
kernel's row, the roofline under given ceilings (TF32 on), a trace without ops, stated costs that name
ops outside their region or match nothing, kernels of no duration, and NCCL collectives
(wlprof.cost.comm). Every expected value is worked out by hand in a comment.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd

from wlprof import pipeline
from wlprof.ceilings import Ceilings
from wlprof.cost.registry import MATRIX, VECTOR, Cost
from wlprof.trace.parse import read_trace
from wlprof.workloads.base import Stated


def _x(cat, name, ts, dur, tid=1, pid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": pid, "tid": tid, "args": args}


def op(name, ts, dur, ext, **args):
    return _x("cpu_op", name, ts, dur, **{"External id": ext, **args})


def mm(ts, dur, ext, m, k, n, name="aten::mm", **extra):
    return op(name, ts, dur, ext, **{"Input Dims": [[m, k], [k, n]], "Input type": ["float", "float"],
                                     "Input Strides": [[k, 1], [n, 1]], **extra})


def launch(ts, corr, ext, name="cudaLaunchKernel"):
    return _x("cuda_runtime", name, ts, 1, correlation=corr, **({"External id": ext} if ext else {}))


def kernel(name, ts, dur, corr, stream=7, **args):
    args = {"grid": [1, 1, 1], "block": [128, 1, 1], **args}
    return _x("kernel", name, ts, dur, tid=stream, pid=0, correlation=corr, stream=stream, device=0, **args)


def memset(ts, dur, corr, nbytes):
    return _x("gpu_memset", "Memset (Device)", ts, dur, tid=7, pid=0, correlation=corr, stream=7, device=0,
              bytes=nbytes)


def _costed(tmp_path, events, meta=None, **kw):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events, **(meta or {})}))
    return pipeline.costed(read_trace(path), **kw)


CEILINGS = Ceilings("cuda", "test GPU", {"float32": 50.0, "tf32": 400.0}, 20.0, 1000.0, "measured", "", "")


def test_every_column_of_a_kernels_row_and_its_op(tmp_path):
    # mm [4, 8] @ [8, 16] in float32 in region wl/block of step 1: 1024 FLOPs, (32 + 128 + 64) * 4 = 896 bytes,
    # 256 written, on one kernel of 4 us with its whole launch configuration recorded
    events = [
        _x("user_annotation", "ProfilerStep#1", 0, 500), _x("user_annotation", "wl/block", 5, 100),
        mm(10, 20, 1, 4, 8, 16, **{"Concrete Inputs": ["", ""]}), launch(11, 1, 1),
        kernel("gemm", 100, 4, 1, grid=[2, 3, 4], block=[32, 2, 1], **{
            "registers per thread": 40, "shared memory": 1024, "blocks per SM": 0.5, "warps per SM": 2.0}),
        launch(200, 2, None), kernel("orphan", 300, 1, 2),  # a launch outside every op
    ]
    c = _costed(tmp_path, events, ceilings=CEILINGS, tf32=True)
    k, o = c.kernels, c.ops
    assert len(k) == 2 and len(o) == 1
    r = k.set_index("name").loc["gemm"]
    assert (r.step, r.kind, r.name, r.stream, r.device_index, r.ts_us, r.dur_us) == (1, "kernel", "gemm", 7, 0,
                                                                                       100.0, 4.0)
    assert [r.grid_x, r.grid_y, r.grid_z, r.block_x, r.block_y, r.block_z] == [2, 3, 4, 32, 2, 1]
    assert (r.registers_per_thread, r.shared_memory_bytes, r.blocks_per_sm, r.warps_per_sm) == (40, 1024, 0.5, 2.0)
    # joined by time: the launch lies inside the mm (one op's External id is not trusted alone)
    assert (r.correlation, r.has_op, r.launch_api, r.join_method, r.external_id) == (1, True, "cudaLaunchKernel",
                                                                                    "time", 1)
    assert (r.op_name, r.op_input_dims, r.op_input_types, r.op_input_strides, r.op_concrete_inputs) == (
        "aten::mm", "[[4,8],[8,16]]", '["float","float"]', "[[8,1],[16,1]]", '["",""]')
    assert (r.region, r.op_kernel_count, r.cost_share) == ("wl/block", 1, 1.0)
    assert (r.flops, r["bytes"], r.bytes_written, r.flops_source, r.cost_unit, r.cost_dtype) == (
        1024.0, 896.0, 256.0, "formula", MATRIX, "float32")
    assert (r._op_pos, r._event_idx) == (0, 4)  # the mm is op 0; the kernel is the trace's 5th event (index 4)
    # the integer columns keep their widths
    for col in ("step", "device_index", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z",
                "registers_per_thread", "op_kernel_count"):
        assert k[col].dtype == np.int32, col
    for col in ("stream", "shared_memory_bytes", "correlation", "external_id", "_op_pos"):
        assert k[col].dtype == np.int64, col
    for col in ("cost_share", "flops", "bytes", "bytes_written"):
        assert k[col].dtype == np.float64, col
    # the launch outside every op: no op columns, no cost, a share of 1 of nothing
    x = k.set_index("name").loc["orphan"]
    assert (x.has_op, x._op_pos, x.op_kernel_count, x.cost_share, x.flops_source) == (False, -1, 1, 1.0, "unknown")
    assert [x.op_name, x.op_input_dims, x.op_input_types, x.op_input_strides, x.op_concrete_inputs] == [None] * 5
    assert np.isnan(x.flops) and np.isnan(x["bytes"]) and x.cost_dtype is None
    # TF32 on: a float32 matrix op is under the 400 TFLOP/s roof; 1024 FLOPs / 896 bytes = 8/7 FLOP/byte,
    # ridge 400e12 / 1000e9 = 400 FLOP/byte: memory bound, 896 B / 1000 GB/s = 0.000896 us
    assert r.ceiling_tflops == 400.0 and r.compute_roof == "compute:tf32" and r.bound == "memory"
    assert r.roofline_us == np.float64(896 / 1000e9 * 1e6)
    # the op: its one kernel's numbers, its own time on the CPU (10 us, 20 us long)
    p = o.iloc[0]
    assert (p.step, p.external_id, p.op_name, p.op_input_dims, p.op_input_types, p.op_input_strides,
            p.op_concrete_inputs, p.region) == (1, 1, "aten::mm", "[[4,8],[8,16]]", '["float","float"]',
                                                "[[8,1],[16,1]]", '["",""]', "wl/block")
    assert (p.ts_us, p.cpu_dur_us, p.kernel_count, p.dur_us) == (10.0, 20.0, 1, 4.0)
    assert (p.flops, p["bytes"], p.bytes_written, p.flops_source, p.cost_unit, p.cost_dtype) == (
        1024.0, 896.0, 256.0, "formula", MATRIX, "float32")
    assert o.kernel_count.dtype == np.int32
    assert p.ceiling_tflops == 400.0 and p.compute_roof == "compute:tf32"


def test_a_kernel_named_for_tf32_is_placed_under_tf32_with_the_runs_setting_off(tmp_path):
    # a trace recorded elsewhere with TF32 on: the run's own setting (tf32=False) does not know it, the kernel
    # names do. cuBLAS's `..._tf32f32_...` and CUTLASS's `tensorop_s1688` ran TF32; `ampere_sgemm` (SIMT) and
    # `3xtf32` (float32 accuracy from three TF32 products) did not
    names = ["sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_cublas",
             "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_16x6_nn_align4>(Params)",
             "ampere_sgemm_128x64_nn", "cutlass_80_tensorop_f32_s1688gemm_3xtf32_64x64_nn"]
    events = [_x("user_annotation", "ProfilerStep#1", 0, 1000)]
    for i, name in enumerate(names):
        t = 10 + 100 * i
        events += [mm(t, 20, i + 1, 4, 8, 16), launch(t + 1, i + 1, i + 1), kernel(name, 500 + 100 * i, 4, i + 1)]
    c = _costed(tmp_path, events, ceilings=CEILINGS, tf32=False)
    roofs = c.kernels.set_index("name").compute_roof
    assert [roofs[n] for n in names] == ["compute:tf32", "compute:tf32", "compute:float32", "compute:float32"]
    # each op takes its kernel's roof: 400 TFLOP/s under TF32, 50 without
    assert list(c.ops.sort_values("ts_us").ceiling_tflops) == [400.0, 400.0, 50.0, 50.0]


def test_a_hipblaslt_xf32_kernel_is_placed_under_tf32(tmp_path):
    # a ROCm trace: hipBLASLt's Tensile kernels name their problem type; float32 operands with the xf32 math op
    # (`S_MX`, MI300's TF32 counterpart) ran at the TF32 rate, plain float32 (`S` then `B`, `SB` in older names) did not
    names = ["Cijk_Alik_Bljk_S_MX_B_UserArgs_MT128x128x32_MI16x16x1_SN_LDSB0",
             "Cijk_Ailk_Bjlk_SB_Bias_AS_SAV_UserArgs_MT64x64x16_MI32x32x2x1_SN",
             "Cijk_Alik_Bljk_S_B_Bias_HA_S_SAV_UserArgs_MT128x128x32_MI32x32x2x1_SN"]
    events = [_x("user_annotation", "ProfilerStep#1", 0, 1000)]
    for i, name in enumerate(names):
        t = 10 + 100 * i
        events += [mm(t, 20, i + 1, 4, 8, 16), launch(t + 1, i + 1, i + 1), kernel(name, 500 + 100 * i, 4, i + 1)]
    c = _costed(tmp_path, events, ceilings=CEILINGS, tf32=False)
    roofs = c.kernels.set_index("name").compute_roof
    assert [roofs[n] for n in names] == ["compute:tf32", "compute:float32", "compute:float32"]


OPS_COLUMNS = ["step", "external_id", "op_name", "op_input_dims", "op_input_types", "op_input_strides",
               "op_concrete_inputs", "op_input_dims_source", "region", "ts_us", "cpu_dur_us", "kernel_count", "transfer",
               "dur_us", "flops", "bytes",
               "bytes_written", "flops_source", "cost_unit", "cost_dtype"]


def test_a_trace_without_ops_gets_an_empty_ops_table_and_its_stated_cost(tmp_path):
    # launches outside every op in region wl/r: a 3 us kernel and a 1 us copy to the device of 64 bytes
    events = [
        _x("user_annotation", "ProfilerStep#1", 0, 500), _x("user_annotation", "wl/r", 5, 100),
        launch(10, 1, None), launch(20, 2, None, "cudaMemcpyAsync"), kernel("k1", 100, 3, 1),
        _x("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 110, 1, tid=7, pid=0, correlation=2, stream=7,
           device=0, bytes=64),
        launch(30, 3, None, "cudaMemsetAsync"), memset(120, 1, 3, 100),  # and a 1 us memset of 100 bytes
    ]
    c = _costed(tmp_path, events)
    k = c.kernels.set_index("name")
    # without a statement the kernel is unknown and the copy has the trace's 64 bytes, all written
    assert np.isnan(k.loc["k1", "flops"]) and k.loc["k1", "flops_source"] == "unknown"
    assert pd.isna(k.loc["k1", "cost_unit"]) and pd.isna(k.loc["k1", "cost_dtype"])
    cp = k.loc["Memcpy HtoD (Pageable -> Device)"]
    assert [cp.flops, cp["bytes"], cp.bytes_written, cp.flops_source, cp.cost_unit] == [0.0, 64.0, 64.0, "formula",
                                                                                       VECTOR]
    ms = k.loc["Memset (Device)"]
    assert [ms.flops, ms["bytes"], ms.bytes_written, ms.flops_source, ms.cost_unit] == [0.0, 100.0, 100.0, "formula",
                                                                                       VECTOR]
    assert k.flops.dtype == np.float64 and k["bytes"].dtype == np.float64 and k.bytes_written.dtype == np.float64
    assert list(c.ops.columns[:len(OPS_COLUMNS)]) == OPS_COLUMNS and len(c.ops) == 0
    # a statement over the whole region (no ops named): 10 FLOPs, 20 bytes, 5 written, split 3 : 1 : 1 by duration
    st = Stated("wl/r", Cost(flops=10.0, bytes=20.0, unit=VECTOR, dtype="float32", written=5.0))
    k = _costed(tmp_path, events, stated=[st]).kernels.set_index("name")
    assert k.loc["k1", ["cost_share", "flops", "bytes", "bytes_written"]].tolist() == [0.6, 6.0, 12.0, 3.0]
    assert k.loc["k1", ["flops_source", "cost_unit", "cost_dtype"]].tolist() == ["workload", VECTOR, "float32"]
    assert cp.name in k.index and k.loc[cp.name, ["flops", "bytes", "bytes_written"]].tolist() == [2.0, 4.0, 1.0]


def test_stated_costs_name_ops_in_their_region_only_and_split_kernels_of_no_time_evenly(tmp_path):
    events = [
        _x("user_annotation", "ProfilerStep#1", 0, 500),
        # a bmm outside the region keeps its formula: [1, 1, 4] @ [1, 4, 4] -> 32 FLOPs, (4 + 16 + 4) * 4 = 96 bytes
        op("aten::bmm", 1, 3, 9, **{"Input Dims": [[1, 1, 4], [1, 4, 4]], "Input type": ["float", "float"]}), launch(2, 9, 9), kernel("bmm_out", 50, 2, 9),
        _x("user_annotation", "wl/x", 5, 100),
        # an mm whose two kernels take no time and whose memset takes 2 us: the kernels share the op's cost
        # (2 * 2 * 2 * 2 = 16 FLOPs, 48 bytes, 16 written), the memset gets none
        mm(10, 5, 3, 2, 2, 2), launch(11, 3, 3), launch(12, 4, 3), launch(13, 5, 3, "cudaMemsetAsync"),
        kernel("gemm_a", 120, 0, 3), kernel("gemm_b", 120, 0, 4), memset(121, 2, 5, 100),
        # two bmm in the region whose kernels take no time: half the statement each
        mm(20, 5, 1, 1, 4, 4, "aten::bmm"), launch(21, 1, 1), kernel("bmm_a", 100, 0, 1),
        mm(30, 5, 2, 1, 4, 4, "aten::bmm"), launch(31, 2, 2), kernel("bmm_b", 100, 0, 2),
        # a launch of no op in the region: no op the statement names, so it stays unknown
        launch(40, 6, None), kernel("orphan", 140, 2, 6),
    ]
    stated = [Stated("wl/none", Cost(flops=1.0, bytes=1.0, unit=MATRIX, dtype="float32", written=1.0)),
              Stated("wl/x", Cost(flops=100.0, bytes=None, unit=MATRIX, dtype="float32", written=None),
                     ops=("aten::bmm",))]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no 0/0 warning from the shares
        k = _costed(tmp_path, events, stated=stated).kernels.set_index("name")
    assert k.loc["bmm_out", ["flops", "bytes", "flops_source"]].tolist() == [32.0, 96.0, "formula"]
    for name in ("bmm_a", "bmm_b"):
        r = k.loc[name]
        assert [r.cost_share, r.flops, r.flops_source, r.cost_unit] == [0.5, 50.0, "workload", MATRIX]
        assert np.isnan(r["bytes"]) and np.isnan(r.bytes_written)  # the statement gives no bytes
    assert k.loc["gemm_a", ["cost_share", "flops", "bytes", "bytes_written"]].tolist() == [0.5, 8.0, 24.0, 8.0]
    assert k.loc["Memset (Device)", ["cost_share", "flops", "bytes"]].tolist() == [0.0, 0.0, 0.0]
    assert k.loc["orphan", "flops_source"] == "unknown" and np.isnan(k.loc["orphan", "flops"])


def _nccl(ts, corr, ext, coll, n_in, n_out, group, dtype="Float", pg="0"):
    args = {"Collective name": coll, "In msg nelems": n_in, "Out msg nelems": n_out, "dtype": dtype}
    if group is not None:
        args["Group size"] = group
    if pg is not None:
        args["Process Group Name"] = pg
    return op("record_param_comms", ts, 5, ext, **args)


def test_nccl_collectives_from_their_ops_and_kernels(tmp_path):
    events = [
        _x("user_annotation", "ProfilerStep#1", 0, 500),
        # all_reduce of 1,024 floats over 4 ranks in 8 us, its message on record_param_comms under
        # c10d::allreduce_: S = 4,096 bytes, algbw 4096 / 8 us = 0.512 GB/s, busbw x 2 * 3/4 = 0.768 GB/s;
        # FLOPs 3/4 * 1024 = 768, bytes 4096 read + 4096 written
        op("c10d::allreduce_", 10, 20, 1), _nccl(11, 2, 2, "allreduce", 1024, 1024, 4), launch(12, 1, 2),
        kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 100, 8, 1),
        # all_gather of 256 bf16 per rank, no group size or group on the op: the trace's one process group
        # (4 ranks, "pg7"): S = 4 * 256 * 2 = 2,048 bytes in 4 us = 0.512 GB/s, busbw x 3/4 = 0.384 GB/s
        op("c10d::_allgather_base_", 40, 20, 3), _nccl(41, 4, 4, "_allgather_base", 256, 1024, None,
                                                       "BFloat16", None),
        launch(42, 2, 4), kernel("ncclDevKernel_AllGather_RING_LL", 120, 4, 2),
        # a send of 100 int64 that takes no time: p2p, 800 bytes, no rate; and a kernel of no op, its
        # message on the kernel itself: a broadcast of 10 floats over 2 ranks (40 bytes in 1 us), and a recv
        op("c10d::send", 70, 10, 5), _nccl(71, 6, 6, "send", 100, None, 2, "Long", "1"), launch(72, 3, 6),
        kernel("ncclDevKernel_SendRecv", 130, 0, 3),
        launch(80, 4, None), kernel("ncclDevKernel_Broadcast_RING_LL", 140, 1, 4, **{
            "Collective name": "broadcast", "In msg nelems": 10, "Out msg nelems": 10, "Group size": 2,
            "dtype": "Float", "Process Group Name": "2"}),
        launch(85, 6, None), kernel("ncclDevKernel_Recv_1", 145, 1, 6, **{
            "Collective name": "recv", "Out msg nelems": 5, "Group size": 2, "dtype": "Float",
            "Process Group Name": "2"}),
        # a memcpy is classed, not costed here
        launch(90, 5, None, "cudaMemcpyAsync"),
        _x("gpu_memcpy", "Memcpy DtoD (Device -> Device)", 150, 1, tid=7, pid=0, correlation=5, stream=7, device=0,
           bytes=8),
    ]
    meta = {"distributedInfo": {"world_size": 8, "pg_config": [{"pg_name": "pg7", "pg_size": 4}]}}
    k = _costed(tmp_path, events, meta).kernels.set_index("name")
    cols = ["comm_class", "collective", "process_group", "comm_dtype", "group_size", "comm_bytes", "algbw_gbps",
            "busbw_factor", "busbw_gbps"]
    ar = k.loc["ncclDevKernel_AllReduce_Sum_f32_RING_LL"]
    assert ar[cols].tolist() == ["collective", "all_reduce", "0", "float32", 4.0, 4096.0, 0.512, 1.5,
                                 0.512 * 1.5]
    assert ar[["flops", "bytes", "bytes_written", "flops_source"]].tolist() == [768.0, 8192.0, 4096.0, "formula"]
    ag = k.loc["ncclDevKernel_AllGather_RING_LL"]
    assert ag[cols].tolist() == ["collective", "all_gather", "pg7", "bfloat16", 4.0, 2048.0, 0.512, 0.75,
                                 0.512 * 0.75]
    sr = k.loc["ncclDevKernel_SendRecv"]
    assert sr[cols[:6]].tolist() == ["p2p", "send", "1", "int64", 2.0, 800.0]
    assert np.isnan(sr.algbw_gbps) and np.isnan(sr.busbw_gbps)
    bc = k.loc["ncclDevKernel_Broadcast_RING_LL"]
    assert bc[cols[:6]].tolist() == ["collective", "broadcast", "2", "float32", 2.0, 40.0]
    assert bc.algbw_gbps == 0.04  # 40 B / 1 us
    # no formula (no op) and no arithmetic: 0 FLOPs from the communication itself
    assert (bc.flops, bc.flops_source) == (0.0, "comm")
    rv = k.loc["ncclDevKernel_Recv_1"]  # p2p: 5 floats received, 20 bytes
    assert (rv.comm_class, rv.collective, rv.comm_bytes, rv.flops, rv.flops_source) == ("p2p", "recv", 20.0, 0.0,
                                                                                       "comm")
    cp = k.loc["Memcpy DtoD (Device -> Device)"]
    assert cp.comm_class == "memcpy" and cp.collective is None and np.isnan(cp.comm_bytes)
    for col in ("comm_class", "collective", "process_group", "comm_dtype"):
        assert k[col].dtype == object, col


def test_a_kernel_launched_by_a_dispatcher_is_unknown_and_the_ops_after_it_costed(tmp_path):
    # aten::sum holding an aten::sum (an overload dispatching to another) launches a kernel of its own
    # before the inner one: only the inner sum does the work, so the outer's kernel has no cost
    sum_args = {"Input Dims": [[4, 4]], "Input type": ["float"]}
    events = [
        _x("user_annotation", "ProfilerStep#1", 0, 500),
        op("aten::sum", 10, 20, 1, **sum_args), launch(11, 1, 1), kernel("outer", 100, 1, 1),
        op("aten::sum", 15, 5, 2, **sum_args), launch(16, 2, 2), kernel("inner", 110, 1, 2),
        mm(40, 10, 3, 4, 8, 16), launch(41, 3, 3), kernel("gemm", 120, 1, 3),
    ]
    k = _costed(tmp_path, events).kernels.set_index("name")
    assert k.loc["outer", "flops_source"] == "unknown" and np.isnan(k.loc["outer", "flops"])
    assert k.loc["inner", "flops_source"] == "formula"
    # mm [4, 8] @ [8, 16]: 1024 FLOPs, 896 bytes, 256 written
    assert k.loc["gemm", ["flops", "bytes", "bytes_written", "flops_source"]].tolist() == [1024.0, 896.0, 256.0,
                                                                                          "formula"]


def test_a_cpu_trace_with_gloo_work_beside_its_c10d_op(tmp_path):
    # the c10d op is a working op of the CPU trace (kind cpu_op) and enqueues gloo's all_reduce of
    # [4, 8] floats, its own row (kind comm) 10 us long; the process group of 2 ranks is the trace's only one
    events = [
        _x("user_annotation", "ProfilerStep#1", 0, 500),
        op("c10d::allreduce_", 10, 20, 1, **{"Input Dims": [[[4, 8]]], "Input type": ["TensorList"]}),
        _x("user_annotation", "gloo:all_reduce", 12, 10, tid=2, **{"Input Dims": [[4, 8]], "Input type": ["float"]}),
        mm(40, 10, 2, 4, 8, 16),
    ]
    meta = {"distributedInfo": {"world_size": 8, "pg_config": [{"pg_name": "0", "pg_size": 2}]}}
    k = _costed(tmp_path, events, meta).kernels.set_index("name")
    host, work = k.loc["c10d::allreduce_"], k.loc["gloo:all_reduce"]
    assert (host.kind, work.kind, work.op_name) == ("cpu_op", "comm", "c10d::allreduce_")
    # the op's own row is its work: the gloo row beside it gets no share of its (unknown) cost
    assert (host.cost_share, work.cost_share, host.op_kernel_count) == (1.0, 0.0, 2)
    # the host op is classed, not costed as communication
    assert (host.comm_class, host.collective, host.process_group) == ("collective", "all_reduce", None)
    assert np.isnan(host.comm_bytes) and np.isnan(host.group_size)
    # the gloo work: S = 32 floats = 128 bytes in 10 us = 0.0128 GB/s; busbw x 2 * 1/2 = 1
    cols = ["comm_class", "collective", "process_group", "comm_dtype", "group_size", "comm_bytes", "algbw_gbps",
            "busbw_factor", "busbw_gbps"]
    assert work[cols].tolist() == ["collective", "all_reduce", "0", "float32", 2.0, 128.0, 0.0128, 1.0, 0.0128]
    # an all_reduce adds: its FLOPs stay unknown without a formula
    assert np.isnan(work.flops) and work.flops_source == "unknown"
    assert k.loc["aten::mm", ["kind", "flops", "cost_share"]].tolist() == ["cpu_op", 1024.0, 1.0]
    assert k.loc["aten::mm", "comm_class"] is None


def test_a_collective_named_only_by_the_op_that_launched_its_kernel(tmp_path):
    # c10d's op (the trace's first op) launches an NCCL kernel whose name names no collective, with no
    # message recorded and no process group anywhere: the collective is the op's, the rest unknown
    events = [_x("user_annotation", "ProfilerStep#1", 0, 500), op("c10d::allreduce_", 10, 20, 1),
              launch(11, 1, 1), kernel("ncclDevKernel_Generic_1", 100, 2, 1)]
    r = _costed(tmp_path, events).kernels.iloc[0]
    assert (r.op_name, r.comm_class, r.collective, r.process_group, r.comm_dtype) == (
        "c10d::allreduce_", "collective", "all_reduce", None, None)
    assert np.isnan(r.group_size) and np.isnan(r.comm_bytes) and np.isnan(r.busbw_factor)


def test_an_inductor_launch_keeps_its_source(tmp_path):
    # a Triton launch with Inductor's byte estimate: 1e-7 GB = 100 bytes, no FLOPs recorded, source inductor
    events = [_x("user_annotation", "ProfilerStep#1", 0, 500),
              op("triton_poi_fused_add_0", 10, 5, 1, **{"Input Dims": [[4]], "Input type": ["float"],
                                                        "kernel_backend": "triton", "kernel_num_gb": 1e-7}),
              launch(11, 1, 1), kernel("triton_poi_fused_add_0", 100, 1, 1)]
    r = _costed(tmp_path, events).kernels.iloc[0]
    assert (r["bytes"], r.flops_source, r.cost_unit, r.cost_dtype) == (100.0, "inductor", VECTOR, "float32")
    assert np.isnan(r.flops)


def test_the_ops_table_in_op_order_when_kernels_run_out_of_order(tmp_path):
    # an op without a formula launches first but its kernel runs last (on another stream), after the
    # kernel of the mm launched after it: the ops table keeps op order, each op with its own numbers
    events = [_x("user_annotation", "ProfilerStep#1", 0, 500),
              op("myext::late", 10, 5, 1), launch(11, 1, 1), mm(20, 5, 2, 4, 8, 16), launch(21, 2, 2),
              kernel("gemm", 100, 1, 2), kernel("late", 200, 3, 1, stream=9)]
    o = _costed(tmp_path, events).ops
    assert o.op_name.tolist() == ["myext::late", "aten::mm"] and o.ts_us.tolist() == [10.0, 20.0]
    assert o.flops_source.tolist() == ["unknown", "formula"] and o.dur_us.tolist() == [3.0, 1.0]
    assert np.isnan(o.flops[0]) and o.flops[1] == 1024.0  # mm [4, 8] @ [8, 16]: 2 * 4 * 8 * 16


def _chain(names, t0, ext0):
    """Ops nested one in the next from names[0] outwards in, starting at t0 (each 1 us inside the last)."""
    return [op(nm, t0 + i, 100 - 2 * i, ext0 + i) for i, nm in enumerate(names)]


def test_a_collective_named_by_an_enclosing_op_within_eight_levels(tmp_path):
    # NCCL kernels whose names name no collective, launched by record_param_comms ops that record a
    # message but no collective name: the collective is the nearest enclosing c10d op's, looked up at
    # most 8 levels up
    msg = {"In msg nelems": 8, "Out msg nelems": 8, "dtype": "Float", "Group size": 2, "Process Group Name": "0"}
    events = [
        _x("user_annotation", "ProfilerStep#1", 0, 2000),
        # the first op of the trace encloses record_param_comms directly: all_gather
        *_chain(["c10d::allgather_", "record_param_comms"], 10, 1), launch(12, 1, 2),
        kernel("ncclDevKernel_Generic_1", 1000, 1, 1),
        # c10d's op 9 levels up: beyond the lookup, no collective
        *_chain(["c10d::allreduce_", *[f"myext::w{i}" for i in range(8)], "record_param_comms"], 200, 10),
        launch(211, 2, 19), kernel("ncclDevKernel_Generic_2", 1010, 1, 2),
        # record_param_comms at the top, no op around it; a c10d op without a kernel comes last
        _x("cpu_op", "record_param_comms", 400, 10, **{"External id": 30, **msg}), launch(401, 3, 30),
        kernel("ncclDevKernel_Generic_3", 1020, 1, 3), op("c10d::broadcast_", 500, 10, 31),
    ]
    events[2]["args"].update(msg)
    events[14]["args"].update(msg)
    k = _costed(tmp_path, events).kernels.set_index("name")
    assert k.loc["ncclDevKernel_Generic_1", ["collective", "comm_dtype", "group_size", "comm_bytes"]].tolist() == [
        "all_gather", "float32", 2.0, 32.0]  # all_gather's S: its output, 8 floats = 32 bytes
    assert k.loc["ncclDevKernel_Generic_2", ["op_name", "comm_dtype"]].tolist() == ["record_param_comms", "float32"]
    assert k.loc["ncclDevKernel_Generic_2", "collective"] is None
    assert k.loc["ncclDevKernel_Generic_3", "collective"] is None
    assert k.loc["ncclDevKernel_Generic_3", ["comm_class", "comm_dtype", "group_size"]].tolist() == [
        "collective", "float32", 2.0]
    # the message read from the trace's first op: record_param_comms alone
    k = _costed(tmp_path, [events[0], *events[17:20]]).kernels.iloc[0]
    assert (k.op_name, k.comm_dtype, k.group_size, k.process_group) == ("record_param_comms", "float32", 2.0, "0")


def test_an_ops_whole_cost_on_its_one_nanosecond_kernel(tmp_path):
    # mm [4, 8] @ [8, 16] with kernels of 1 ns and of none: the share is by duration, 1 and 0
    events = [_x("user_annotation", "ProfilerStep#1", 0, 500), mm(10, 5, 1, 4, 8, 16), launch(11, 1, 1),
              launch(12, 2, 1), kernel("one_ns", 100, 0.001, 1), kernel("none", 101, 0, 2)]
    k = _costed(tmp_path, events).kernels.set_index("name")
    assert k.loc[["one_ns", "none"], "cost_share"].tolist() == [1.0, 0.0]
    assert k.loc[["one_ns", "none"], "flops"].tolist() == [1024.0, 0.0]
    # the same under a region whose statement gives bytes but no FLOPs: split 1 : 0 the same way
    events.insert(1, _x("user_annotation", "wl/ns", 5, 50))
    st = Stated("wl/ns", Cost(flops=None, bytes=8.0, unit=VECTOR, dtype="float32", written=4.0))
    k = _costed(tmp_path, events, stated=[st]).kernels.set_index("name")
    assert k.loc[["one_ns", "none"], "cost_share"].tolist() == [1.0, 0.0]
    assert k.loc[["one_ns", "none"], "bytes"].tolist() == [8.0, 0.0]
    assert k.loc[["one_ns", "none"], "bytes_written"].tolist() == [4.0, 0.0]
    assert k.flops.isna().all() and (k.flops_source == "workload").all()


def test_process_groups_by_name_from_the_traces_distributed_info(tmp_path):
    # kernels with their messages on the kernel: a group named but not sized takes that group's size;
    # a group sized but not named stays unnamed when the trace has several groups, as does the world
    def coll(name, ts, corr, **extra):
        return [launch(ts, corr, None), kernel(name, 100 + ts, 1, corr, **{
            "Collective name": "allreduce", "In msg nelems": 4, "Out msg nelems": 4, "dtype": "Float", **extra})]

    events = [_x("user_annotation", "ProfilerStep#1", 0, 500),
              *coll("ncclDevKernel_AllReduce_a", 10, 1, **{"Process Group Name": "pgA"}),
              *coll("ncclDevKernel_AllReduce_b", 20, 2, **{"Group size": 3}),
              *coll("ncclDevKernel_AllReduce_c", 30, 3)]
    meta = {"distributedInfo": {"world_size": 8, "pg_config": [{"pg_name": "pg7", "pg_size": 4},
                                                               {"pg_name": "pgA", "pg_size": 2}]}}
    k = _costed(tmp_path, events, meta).kernels.set_index("name")
    assert k.loc["ncclDevKernel_AllReduce_a", ["process_group", "group_size"]].tolist() == ["pgA", 2.0]
    assert k.loc["ncclDevKernel_AllReduce_b", "process_group"] is None
    assert k.loc["ncclDevKernel_AllReduce_b", "group_size"] == 3.0
    assert k.loc["ncclDevKernel_AllReduce_c", "process_group"] is None
    assert k.loc["ncclDevKernel_AllReduce_c", "group_size"] == 8.0  # the world
    # one group only: a sized, unnamed message is taken to be that group
    meta = {"distributedInfo": {"world_size": 8, "pg_config": [{"pg_name": "pg7", "pg_size": 4}]}}
    k = _costed(tmp_path, events, meta).kernels.set_index("name")
    assert k.loc["ncclDevKernel_AllReduce_b", ["process_group", "group_size"]].tolist() == ["pg7", 3.0]


ROOFLINE_COLUMNS = ["intensity_flop_per_byte", "achieved_tflops", "achieved_gbps", "ceiling_tflops", "ceiling_gbps",
                    "ridge_flop_per_byte", "roofline_us", "roofline_fraction", "working_set_bytes", "bound", "roof",
                    "compute_roof", "memory_roof", "roof_note"]


def test_an_op_whose_copy_has_trace_bytes_but_whose_kernel_has_no_formula_is_unknown(tmp_path):
    # an op without a formula copies 64 bytes device to device (the trace's bytes, 2 * 64 = 128 touched),
    # then runs a kernel: the op is only as known as its least known row
    events = [_x("user_annotation", "ProfilerStep#1", 0, 500), op("myext::mix", 10, 10, 1),
              launch(11, 1, 1, "cudaMemcpyAsync"), launch(12, 2, 1),
              _x("gpu_memcpy", "Memcpy DtoD (Device -> Device)", 100, 1, tid=7, pid=0, correlation=1, stream=7,
                 device=0, bytes=64),
              kernel("mix", 110, 1, 2)]
    c = _costed(tmp_path, events)
    k, o = c.kernels.set_index("name"), c.ops
    assert k.loc["Memcpy DtoD (Device -> Device)", ["bytes", "flops_source"]].tolist() == [128.0, "formula"]
    assert k.loc["mix", "flops_source"] == "unknown"
    assert list(o.columns) == OPS_COLUMNS + ROOFLINE_COLUMNS
    r = o.iloc[0]
    assert (r.op_name, r.kernel_count, r.dur_us, r.flops_source) == ("myext::mix", 2, 2.0, "unknown")
    assert np.isnan(r.flops) and np.isnan(r["bytes"]) and np.isnan(r.bytes_written)



def test_an_op_with_one_row_of_unknown_flops_has_unknown_flops():
    """An op's FLOPs are NaN when any of its rows has none, even if no row is marked unknown."""
    from wlprof.cost.annotate import _ops_table

    # op 0: a formula row of 768 FLOPs and one whose formula gave bytes but no FLOPs (an all_reduce
    # of unknown group): FLOPs NaN, bytes 100 + 50 = 150; op 1: its one row, 10 FLOPs
    k = pd.DataFrame({"_op_pos": [0, 0, 1], "step": [1, 1, 1], "external_id": [5, 5, 6],
                      "op_name": ["c10d::allreduce_", "c10d::allreduce_", "aten::add"],
                      "op_input_dims": [None] * 3, "op_input_types": [None] * 3, "op_input_strides": [None] * 3,
                      "op_concrete_inputs": [None] * 3, "op_input_dims_source": ["trace"] * 3, "region": [None] * 3,
                      "dur_us": [1.0, 2.0, 3.0],
                      "flops": [768.0, np.nan, 10.0], "bytes": [100.0, 50.0, 12.0],
                      "bytes_written": [40.0, 20.0, 4.0], "flops_source": ["formula"] * 3,
                      "cost_unit": ["vector"] * 3, "cost_dtype": ["float32"] * 3})
    ops = pd.DataFrame({"ts_ns": [1000, 2000], "dur_ns": [500, 500]})
    o = _ops_table(k, ops)
    assert np.isnan(o.flops[0]) and o.flops[1] == 10.0
    assert o["bytes"].tolist() == [150.0, 12.0] and o.bytes_written.tolist() == [60.0, 4.0]
    assert o.flops_source.tolist() == ["formula", "formula"] and o.kernel_count.tolist() == [2, 1]


def test_an_ops_first_values_are_pandas_groupby_first():
    """The ops table takes each op's first non-null value of a column over its rows (`_first_valid`), as
    pandas' groupby first does: None for an object column whose rows of an op are all null (None or NaN),
    NaN for a float column's, the first row's for an int column; on 200 random tables."""
    from wlprof.cost.annotate import _first_valid

    rng = np.random.default_rng(3)
    for _ in range(200):
        n = int(rng.integers(1, 300))
        ops_of_rows = rng.integers(0, max(1, n // 3), n)
        pos, group = np.unique(ops_of_rows, return_inverse=True)
        text = np.array([None if r < 0.3 else np.nan if r < 0.4 else f"v{int(r * 10)}" for r in rng.uniform(size=n)],
                        dtype=object)
        real = np.where(rng.uniform(size=n) < 0.4, np.nan, rng.uniform(size=n))
        whole = rng.integers(0, 9, n)
        frame = pd.DataFrame({"op": ops_of_rows, "text": pd.Series(text, dtype=object), "real": real, "whole": whole})
        first = frame.groupby("op", sort=True)[["text", "real", "whole"]].first()
        for col, values in (("text", text), ("real", real), ("whole", whole)):
            mine = _first_valid(values, group.reshape(-1), len(pos))
            assert mine.dtype == first[col].dtype
            assert list(mine) == list(first[col]) if col == "text" else np.array_equal(mine, first[col], equal_nan=True)


def test_the_parsers_name_codes_give_what_the_names_give():
    """Where the trace tables keep the parser's name codes (columns.NAME_CODE), the tests per distinct name
    read them instead of hashing every row's name (flag_ops, the list ops, the costs); with the codes
    dropped the same ops are flagged and costed: a training step with foreach optimizer ops, and a rank of
    an NCCL trace."""
    from pathlib import Path

    from wlprof.columns import NAME_CODE, coded_names
    from wlprof.cost.attribution import flag_ops
    from wlprof.cost.tensor_lists import _is_list_op
    from wlprof.trace.join import join

    fixtures = Path(__file__).resolve().parents[1] / "fixtures"
    for path in (fixtures / "h200_training" / "transformer_eager.pt.trace.json.gz",
                 fixtures / "public" / "hta_2024_nccl.json.gz"):
        trace = read_trace(path, keep_events=False)
        assert NAME_CODE in trace.ops and NAME_CODE in trace.device
        joined = join(trace)
        coded = flag_ops(joined.ops, trace.args_table)
        named = flag_ops(joined.ops.drop(columns=NAME_CODE), trace.args_table)
        assert coded.drop(columns=NAME_CODE).equals(named)
        names = coded.name.to_numpy(dtype=object)
        assert (_is_list_op(names, coded_names(coded)) == _is_list_op(names)).all()
        with_codes = pipeline.costed(trace)
        trace.ops = trace.ops.drop(columns=NAME_CODE)
        without = pipeline.costed(trace)
        assert with_codes.kernels.equals(without.kernels) and with_codes.ops.equals(without.ops)
        assert _is_list_op(names).any()  # both have foreach ops: the list-op path is taken

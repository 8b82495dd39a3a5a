"""The join (wlprof.trace.join) on small hand-written Chrome traces, every value by hand: ops nested in
their parent op, region and step by time on their own thread; each device activity joined to its op
by its launch's External id, the kernel's own, or time; CUDA-graph replays and unlaunched activity.

Times in the traces are microseconds; the tables hold nanoseconds. Op positions are the order of
the ops in the trace file.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wlprof.trace.join import NO_STEP_MARKERS, _enclosing, _nearest, external_ids_name_ops, join, op_rows
from wlprof.trace.parse import NO_ID, read_trace


def _ev(cat, name, ts, dur, pid=1, tid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": pid, "tid": tid, "args": args}


def op(name, ts, dur, ext=None, tid=1, pid=1):
    return _ev("cpu_op", name, ts, dur, pid, tid, **({"External id": ext} if ext is not None else {}))


def ann(name, ts, dur, tid=1, pid=1):
    return _ev("user_annotation", name, ts, dur, pid, tid)


def launch(ts, corr, ext=None, name="cudaLaunchKernel", dur=1, tid=1, pid=1):
    return _ev("cuda_runtime", name, ts, dur, pid, tid, correlation=corr,
               **({"External id": ext} if ext is not None else {}))


def kernel(name, ts, corr, ext=None, dur=2, stream=7, device=0):
    return _ev("kernel", name, ts, dur, device, stream, correlation=corr, stream=stream, device=device,
               grid=[1, 1, 1], block=[128, 1, 1], **({"External id": ext} if ext is not None else {}))


def _trace(tmp_path, events, name="t.json"):
    path = tmp_path / name
    path.write_text(json.dumps({"traceEvents": events}))
    return read_trace(path)


def _txt(col):
    """A text column as a list, None for missing (pandas 3 may hold it as NaN in a str column)."""
    return [None if pd.isna(v) else v for v in col]


def _ops_of(j):
    o = j.ops
    return (o.parent.tolist(), _txt(o.region), o.step.tolist(), o.has_children.tolist(), o.self_ns.tolist())


# One step of a GPU trace (thread 1 launches, thread 2 runs one op of its own):
#   ProfilerStep#3 [0, 200); region 'fwd' [5, 105)
#   A aten::linear [10, 40) ext 1 > B aten::mm [12, 20) ext 2 > launch corr 100 ext 2 -> k_ext
#   C aten::add [40, 50) ext 3 (starts where A ends: not inside it) > launch corr 101 ext 99 (no such op) -> k_time
#   D aten::copy_ [120, 130) ext 4 (outside 'fwd') > cudaGraphLaunch corr 102, no ext -> k_graph
#   k_kernel_ext: corr 103, no launch in the trace, the kernel's own External id 3 (C)
#   k_alone: corr 104, no launch, no External id
#   launch corr 105 at 150: in the step, outside every op -> k_outside
#   E aten::empty on thread 2 [10, 15) ext 5: no parent or region (its thread has no annotation); its
#     step is the one whose span holds its start (a backward op on the autograd thread)
STEP_TRACE = [
    ann("ProfilerStep#3", 0, 200), ann("fwd", 5, 100),
    op("aten::linear", 10, 30, ext=1), op("aten::mm", 12, 8, ext=2), launch(14, 100, ext=2),
    op("aten::add", 40, 10, ext=3), launch(42, 101, ext=99),
    op("aten::copy_", 120, 10, ext=4), launch(125, 102, name="cudaGraphLaunch"),
    launch(150, 105),
    op("aten::empty", 10, 5, ext=5, tid=2),
    kernel("k_ext", 20, 100), kernel("k_time", 45, 101), kernel("k_graph", 130, 102),
    kernel("k_kernel_ext", 60, 103, ext=3), kernel("k_alone", 70, 104), kernel("k_outside", 155, 105),
]


def test_ops_nest_in_their_parent_region_and_step_on_their_own_thread(tmp_path):
    j = join(_trace(tmp_path, STEP_TRACE))
    parent, region, step, has_children, self_ns = _ops_of(j)
    assert j.ops.name.tolist() == ["aten::linear", "aten::mm", "aten::add", "aten::copy_", "aten::empty"]
    assert parent == [-1, 0, -1, -1, -1]
    assert region == ["fwd", "fwd", "fwd", None, None]
    assert step == [3, 3, 3, 3, 3]
    assert has_children == [True, False, False, False, False]
    # A: 30 us less its child's 8; the others have no children
    assert self_ns == [22_000, 8_000, 10_000, 10_000, 5_000]


def test_an_op_on_a_thread_without_steps_takes_the_step_that_holds_its_start(tmp_path):
    # the autograd thread (2) runs backward ops inside step 1 and step 2; one starts after both
    j = join(_trace(tmp_path, [ann("ProfilerStep#1", 0, 100), ann("ProfilerStep#2", 100, 100),
                               op("aten::mm", 10, 5, ext=1), op("aten::mm", 150, 5, ext=2),
                               op("aten::mm", 20, 5, ext=3, tid=2), op("aten::mm", 100, 5, ext=4, tid=2),
                               op("aten::mm", 250, 5, ext=5, tid=2)]))
    assert j.ops.step.tolist() == [1, 2, 1, 2, -1]


def test_each_device_row_finds_its_op_by_launch_kernel_id_or_time(tmp_path):
    trace = _trace(tmp_path, STEP_TRACE)
    assert external_ids_name_ops(trace)  # 2 launches give an External id, neither equal to its correlation
    rows = join(trace).device_rows
    assert rows.name.tolist() == ["k_ext", "k_time", "k_graph", "k_kernel_ext", "k_alone", "k_outside"]
    assert rows.join_method.tolist() == ["external_id", "time", "graph", "kernel_external_id", "none", "none"]
    assert _txt(rows.launch_api) == ["cudaLaunchKernel", "cudaLaunchKernel", "cudaGraphLaunch", None, None,
                                     "cudaLaunchKernel"]
    assert rows.op_pos.tolist() == [1, 2, -1, 2, -1, -1]
    assert rows.has_op.tolist() == [True, True, False, True, False, False]
    assert rows.ext_id.tolist() == [2, 3, NO_ID, 3, NO_ID, NO_ID]
    # region and step from the launch where there is one (the graph replay's and the outside launch's too),
    # else from the op; nothing for a kernel with neither
    assert _txt(rows.region) == ["fwd", "fwd", None, "fwd", None, None]
    assert rows.step.tolist() == [3, 3, 3, 3, -1, 3]
    assert rows.step.dtype == np.int64 and rows.index.tolist() == list(range(6))


def test_untrusted_external_ids_are_ignored_and_launches_placed_by_time(tmp_path):
    # a 2022-style trace: each launch's External id is its own correlation. Op D's id 100 equals the
    # first launch's by chance: trusting it would join k0 to D; by time it is B's (innermost around it)
    events = [
        op("aten::linear", 10, 30, ext=1), op("aten::mm", 12, 8, ext=2), launch(14, 100, ext=100),
        op("aten::copy_", 50, 10, ext=100), launch(52, 101, ext=101),
        kernel("k0", 20, 100), kernel("k1", 55, 101), kernel("k2", 70, 102, ext=1),
    ]
    trace = _trace(tmp_path, events)
    assert not external_ids_name_ops(trace)
    j = join(trace)
    rows = j.device_rows
    assert rows.join_method.tolist() == ["time", "time", "none"]  # k2: no launch, its id not trusted either
    assert rows.op_pos.tolist() == [1, 2, -1] and rows.ext_id.tolist() == [2, 100, NO_ID]
    # no step annotation: the whole trace is step 0, its ops, launches and device rows (k2 too, though
    # neither a launch nor an op places it)
    assert j.ops.step.tolist() == [0, 0, 0] and rows.step.tolist() == [0, 0, 0]
    assert _txt(j.ops.region) == [None, None, None]


@pytest.mark.parametrize(("exts", "corrs", "trusted"), [
    ([NO_ID, NO_ID], [1, 2], False),  # no launch gives an External id
    ([5, 6], [1, 2], True),
    ([1, 6], [1, 2], True),  # one of two equal to its correlation: half, still trusted
    ([1, 2, 7], [1, 2, 3], False),  # two of three
    ([1, NO_ID, NO_ID, 9], [1, 2, 3, 4], True),  # one of the two that give one
])
def test_external_ids_are_op_ids_unless_most_equal_their_correlation(tmp_path, exts, corrs, trusted):
    events = [launch(10 * i, c, ext=(e if e != NO_ID else None)) for i, (e, c) in enumerate(zip(exts, corrs, strict=True))]
    assert external_ids_name_ops(_trace(tmp_path, events)) is trusted


def test_nesting_ties_outer_first_longer_first_and_annotation_op_launch(tmp_path):
    events = [
        # listed inner first: at the same start the longer is the outer
        op("aten::inner", 60, 5, ext=11), op("aten::outer", 60, 20, ext=10),
        # an annotation and an op of the same start and length: the op is in the region
        op("aten::same", 100, 10, ext=12), ann("region/r2", 100, 10),
        # an op and a launch of the same start and length: the launch is the op's (by time: no External id)
        launch(200, 300, dur=4), op("aten::host", 200, 4, ext=13),
        # a launch starting where an op ends is not inside it
        op("aten::before", 300, 10, ext=14), launch(310, 301),
        kernel("k_host", 205, 300), kernel("k_after", 315, 301),
    ]
    j = join(_trace(tmp_path, events))
    parent, region, step, _, self_ns = _ops_of(j)
    assert j.ops.name.tolist() == ["aten::inner", "aten::outer", "aten::same", "aten::host", "aten::before"]
    assert parent == [1, -1, -1, -1, -1] and region == [None, None, "region/r2", None, None]
    assert self_ns == [5_000, 15_000, 10_000, 4_000, 10_000]
    rows = j.device_rows
    assert rows.op_pos.tolist() == [3, -1] and rows.join_method.tolist() == ["time", "none"]


def test_threads_are_told_apart_by_process_and_thread(tmp_path):
    # the same tid in two processes: the second process's op is not inside the first's
    events = [ann("wlprof/step#1", 0, 100, pid=1), op("aten::a", 0, 50, ext=1, pid=1, tid=1),
              op("aten::b", 10, 5, ext=2, pid=2, tid=1), op("aten::c", 10, 5, ext=3, pid=1, tid=1),
              ann("wlprof/step#2", 0, 100, pid=2)]
    j = join(_trace(tmp_path, events))
    assert j.ops.parent.tolist() == [-1, -1, 0] and j.ops.step.tolist() == [1, 2, 1]


def test_a_child_longer_than_its_parent_leaves_no_negative_self_time(tmp_path):
    # a child recorded to end after its parent (clock skew): the parent's self time is 0, not negative
    events = [op("aten::p", 0, 10, ext=1), op("aten::c", 2, 20, ext=2), op("aten::d", 3, 4, ext=3)]
    j = join(_trace(tmp_path, events))
    assert j.ops.parent.tolist() == [-1, 0, 1] and j.ops.self_ns.tolist() == [0, 16_000, 4_000]
    assert j.ops.has_children.tolist() == [True, True, False] and j.device_rows is None


def test_duplicate_ids_first_one_wins(tmp_path):
    # two launches with one correlation: the first names the API call; two ops with one External id: the first
    events = [ann("ProfilerStep#0", 0, 100), ann("r/a", 0, 20), op("aten::x", 5, 5, ext=7), ann("r/b", 30, 20),
              op("aten::y", 35, 5, ext=7), launch(6, 50, ext=7), launch(36, 50, name="cudaMemcpyAsync"),
              kernel("k", 40, 50)]
    rows = join(_trace(tmp_path, events)).device_rows
    assert rows.launch_api.tolist() == ["cudaLaunchKernel"] and rows.op_pos.tolist() == [0]
    assert _txt(rows.region) == ["r/a"] and rows.join_method.tolist() == ["external_id"]


def test_a_launch_whose_id_names_no_op_outside_every_op(tmp_path):
    # trusted ids, a launch naming no op and inside none, in a region of step 4: no op, its region and step
    events = [ann("ProfilerStep#4", 0, 100), ann("r", 0, 50), op("aten::x", 1, 2, ext=1), launch(2, 9, ext=1),
              launch(20, 10, ext=77), kernel("k1", 5, 9), kernel("k2", 25, 10)]
    rows = join(_trace(tmp_path, events)).device_rows
    assert rows.join_method.tolist() == ["external_id", "none"] and rows.op_pos.tolist() == [0, -1]
    assert _txt(rows.region) == ["r", "r"] and rows.step.tolist() == [4, 4]


def test_op_rows_are_the_kept_ops_with_their_self_time(tmp_path):
    j = join(_trace(tmp_path, [ann("wlprof/step#2", 0, 100), ann("r", 0, 100), op("aten::linear", 10, 30, ext=1),
                                op("aten::addmm", 12, 20, ext=2), op("aten::relu", 50, 5, ext=3)]))
    rows = op_rows(j.ops, np.array([False, True, True]))
    assert rows.name.tolist() == ["aten::addmm", "aten::relu"] and rows.op_pos.tolist() == [1, 2]
    assert rows.dur_ns.tolist() == [20_000, 5_000] and rows.ts_ns.tolist() == [12_000, 50_000]
    assert rows.ext_id.tolist() == [2, 3] and rows.idx.tolist() == j.ops.idx.tolist()[1:]
    assert rows.kind.tolist() == ["cpu_op"] * 2 and rows.join_method.tolist() == ["op"] * 2
    assert rows.has_op.all() and rows.launch_api.isna().all()
    assert _txt(rows.region) == ["r", "r"] and rows.step.tolist() == [2, 2]
    assert (rows.correlation == NO_ID).all() and (rows.stream == NO_ID).all() and (rows.device_index == NO_ID).all()
    assert (rows.grid_x == 0).all() and (rows.transfer_bytes == 0).all() and rows.warps_per_sm.isna().all()
    assert rows.index.tolist() == [0, 1]


def test_tables_keep_their_dtypes_and_columns(tmp_path):
    trace = _trace(tmp_path, STEP_TRACE)
    j = join(trace)
    assert j.trace is trace
    o = j.ops
    assert (o.parent.dtype, o.step.dtype, o.has_children.dtype, o.self_ns.dtype) == (np.int64, np.int64, bool,
                                                                                     np.int64)
    rows = j.device_rows
    assert list(rows.columns) == list(trace.device.columns) + ["launch_api", "join_method", "op_pos", "has_op",
                                                               "region", "step"]
    assert (rows.op_pos.dtype, rows.has_op.dtype, rows.step.dtype, rows.ext_id.dtype) == (np.int64, bool, np.int64,
                                                                                          np.int64)
    cpu = op_rows(o, o.name.isin(["aten::mm", "aten::empty"]).to_numpy())
    assert list(cpu.columns) == ["idx", "kind", "name", "pid", "tid", "ts_ns", "dur_ns", "correlation", "ext_id",
                                 "stream", "device_index", "grid_x", "grid_y", "grid_z", "block_x", "block_y",
                                 "block_z", "registers_per_thread", "shared_memory_bytes", "transfer_bytes",
                                 "blocks_per_sm", "warps_per_sm", "launch_api", "join_method", "op_pos", "has_op",
                                 "region", "step"]
    assert cpu.pid.tolist() == [1, 1] and cpu.tid.tolist() == [1, 2] and cpu.op_pos.tolist() == [1, 4]
    assert cpu.blocks_per_sm.dtype == np.float64 and cpu.warps_per_sm.dtype == np.float64
    # no step annotation: the zero steps are integers too
    j0 = join(_trace(tmp_path, [op("aten::x", 0, 5, ext=1)], name="nostep.json"))
    assert j0.ops.step.tolist() == [0] and j0.ops.step.dtype == np.int64


def test_joining_raises_no_floating_point_warning(tmp_path):
    # kernels without a launch, or whose launch names no op, look up ids that are not there: no NaN cast to int
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        rows = join(_trace(tmp_path, STEP_TRACE)).device_rows
    assert rows.op_pos.tolist() == [1, 2, -1, 2, -1, -1]


def test_a_trace_of_device_activity_only(tmp_path):
    # no ops, annotations or launches (a device-only trace): every row on its own
    trace = _trace(tmp_path, [kernel("k0", 10, 1), kernel("k1", 20, 2, ext=5),
                              {**kernel("m", 30, 3), "cat": "gpu_memcpy", "name": "Memcpy DtoD"}])
    j = join(trace)
    assert len(j.ops) == 0
    rows = j.device_rows
    assert rows.kind.tolist() == ["kernel", "kernel", "memcpy"]
    assert rows.join_method.tolist() == ["none"] * 3 and rows.op_pos.tolist() == [-1] * 3
    assert _txt(rows.launch_api) == [None] * 3 and _txt(rows.region) == [None] * 3
    # no step marker: the whole trace is one step, so every row is in step 0
    assert rows.step.tolist() == [0] * 3 and rows.ext_id.tolist() == [NO_ID] * 3 and not rows.has_op.any()


@pytest.mark.parametrize(("kernel_ext", "method"), [
    (1, "kernel_external_id"),  # the kernel names its op: trusted, though no launch gives an id
    (10, "none"),  # the kernel's External id is its own correlation (2022-2023 style): names no op
])
def test_without_runtime_events_kernels_are_joined_by_their_own_external_id(tmp_path, kernel_ext, method):
    # a trace with ops and kernels but no cuda_runtime events (trimmed, or its CUPTI callbacks lost):
    # the kernels' own External ids decide whether ids are op ids
    events = [op("aten::addmm", 10, 20, ext=1), op("aten::relu", 40, 5, ext=10),
              kernel("gemm", 12, 10, ext=kernel_ext), kernel("gemm2", 42, 11, ext=kernel_ext + 1)]
    trace = _trace(tmp_path, events)
    assert external_ids_name_ops(trace) is (kernel_ext == 1)
    rows = join(trace).device_rows
    assert rows.join_method.tolist() == [method, "none"]
    assert rows.op_pos.tolist() == ([0, -1] if method != "none" else [-1, -1])
    assert rows.step.tolist() == [0, 0]  # no step marker: one step, joined or not


@pytest.mark.parametrize("how", ["external_id", "kernel_external_id", "time"])
def test_the_first_op_of_the_trace_is_joined_like_any_other(tmp_path, how):
    # the op at position 0 (ext 1) launches the kernel; a second launch (corr 11, ext 2, op 1) keeps the ids trusted
    events = [ann("ProfilerStep#5", 0, 100), op("aten::first", 10, 20, ext=1), op("aten::second", 50, 20, ext=2),
              launch(55, 11, ext=2), kernel("k_second", 60, 11)]
    events += {"external_id": [launch(12, 10, ext=1), kernel("k", 20, 10)],
               "kernel_external_id": [kernel("k", 20, 10, ext=1)],  # no launch for it in the trace
               "time": [launch(12, 10, ext=99), kernel("k", 20, 10)],  # its id names no op: inside op 0
               }[how]
    rows = join(_trace(tmp_path, events)).device_rows.set_index("name")
    k = rows.loc["k"]
    assert (k.join_method, k.op_pos, k.has_op, k.ext_id, k.step) == (how, 0, True, 1, 5)
    assert rows.loc["k_second", "op_pos"] == 1


def test_a_graph_replay_whose_launch_names_the_op_around_it_stays_a_graph_replay(tmp_path):
    # torch.compile(mode="reduce-overhead") replays its CUDA graph from inside the compiled region: the
    # cudaGraphLaunch carries the region's External id (1), but the region ran none of the replayed
    # kernels (they were captured from ops before the trace); an ordinary launch in the region (ext 2)
    # still finds its op
    trace = _trace(tmp_path, [
        op("Torch-Compiled Region: 8/0", 10, 50, ext=1), launch(12, 200, ext=1, name="cudaGraphLaunch"),
        op("aten::add", 30, 10, ext=2), launch(32, 201, ext=2),
        kernel("triton_poi_fused_mul_0", 20, 200), kernel("sm90_xmma_gemm_bf16", 23, 200),
        kernel("elementwise_add", 40, 201)])
    rows = join(trace).device_rows
    assert rows.join_method.tolist() == ["graph", "graph", "external_id"]
    assert rows.has_op.tolist() == [False, False, True]
    assert rows.op_pos.tolist() == [-1, -1, 1]
    assert rows.ext_id.tolist() == [NO_ID, NO_ID, 2]


def test_a_kernel_joined_by_external_id_takes_its_ops_region(tmp_path):
    # a region opened inside the op (a compiled graph's annotation) around its launch: the kernel's region and
    # step are its op's, as for every kernel joined through an External id; ops without an External id and
    # launches without one (a synchronize) are placed by time beside them
    events = [ann("ProfilerStep#2", 0, 200), ann("model/fwd", 0, 100), op("CompiledFunction", 10, 50, ext=1),
              ann("## Call CompiledFxGraph ##", 15, 30), launch(20, 30, ext=1),
              op("aten::no_id", 70, 10), launch(72, 31, name="cudaStreamSynchronize"),
              launch(150, 32, ext=1), kernel("triton_k", 25, 30), kernel("after", 160, 32)]
    j = join(_trace(tmp_path, events))
    assert _txt(j.ops.region) == ["model/fwd", "model/fwd"] and j.ops.ext_id.tolist() == [1, NO_ID]
    rows = j.device_rows
    assert rows.join_method.tolist() == ["external_id", "external_id"] and rows.op_pos.tolist() == [0, 0]
    # the second launch naming op 0 was recorded after it ended (at 150): still the op's region and step
    assert _txt(rows.region) == ["model/fwd", "model/fwd"] and rows.step.tolist() == [2, 2]


def test_epoch_timestamps_nest_to_the_nanosecond(tmp_path):
    # Kineto writes microseconds since 1970 (~1.6e15): as nanoseconds (~1.6e18) they are past float64's exact
    # integers (a 256 ns grid), so whole microseconds and their fraction are scaled apart. The op starts at
    # T = 1621401187223197 us and lasts 0.8 us (800 ns); the launch at T + 0.75 us (exact in float64 µs) is
    # 750 ns after the op's start: inside it, 50 ns before its end
    t = 1621401187223197.0
    events = [op("aten::mm", t, 0.8, ext=1), launch(t + 0.75, 10, ext=99, dur=0.1), kernel("k", t + 2, 10)]
    j = join(_trace(tmp_path, events))
    assert j.ops.ts_ns[0] == 1621401187223197000
    assert j.trace.launches.ts_ns[0] - j.ops.ts_ns[0] == 750 and j.ops.dur_ns[0] == 800
    rows = j.device_rows
    assert rows.join_method.tolist() == ["time"] and rows.op_pos.tolist() == [0]


def test_a_trace_without_step_markers_is_one_step_and_says_so(tmp_path):
    # two ops, one kernel, no ProfilerStep#N: every row is step 0 and the trace's warnings say why, once
    t = _trace(tmp_path, [op("aten::mm", 0, 10, ext=1), launch(2, 5, ext=1), kernel("gemm", 20, 5),
                          op("aten::relu", 30, 5, ext=2)])
    j = join(t)
    assert j.ops.step.tolist() == [0, 0] and j.device_rows.step.tolist() == [0]
    assert t.warnings.count(NO_STEP_MARKERS) == 1
    join(t)
    assert t.warnings.count(NO_STEP_MARKERS) == 1
    marked = _trace(tmp_path, [ann("ProfilerStep#3", 0, 50), op("aten::mm", 1, 10)], "m.json")
    join(marked)
    assert NO_STEP_MARKERS not in marked.warnings
    # ops only (a CPU trace) or kernels only: each is one step too, and says so
    cpu = _trace(tmp_path, [op("aten::mm", 0, 10), op("aten::relu", 30, 5)], "cpu.json")
    join(cpu)
    assert cpu.warnings.count(NO_STEP_MARKERS) == 1
    bare = _trace(tmp_path, [kernel("gemm", 20, 5)], "bare.json")
    join(bare)
    assert bare.warnings.count(NO_STEP_MARKERS) == 1


def test_without_step_markers_a_kernel_with_no_launch_or_op_is_in_the_one_step(tmp_path):
    # yuguo-Jack/HCU-TrainFlow's examples/trace.json: two kernel events and nothing else (no op, no
    # launch, no pid or tid). The whole trace is one step, so both rows are step 0, not -1 ("outside
    # every step"), which made `show` say there were no kernel rows in a profiled step
    bare = {"ph": "X", "cat": "kernel", "name": "synthetic_gemm", "ts": 0, "dur": 95}
    t = _trace(tmp_path, [{**bare, "args": {"rank": 0}}, {**bare, "args": {"rank": 1}}])
    rows = join(t).device_rows
    assert rows.step.tolist() == [0, 0] and rows.has_op.tolist() == [False, False]
    assert rows.step.dtype == np.int64  # as in a trace with markers: step numbers, not floats
    assert rows.join_method.tolist() == ["none", "none"]
    # with a marker, a kernel nothing places stays outside the steps
    marked = _trace(tmp_path, [ann("ProfilerStep#3", 0, 50), op("aten::mm", 1, 10),
                               kernel("k", 100, 5)], "m.json")
    assert join(marked).device_rows.step.tolist() == [-1]


def test_gloo_work_annotations_are_not_regions(tmp_path):
    # A gloo P2P exchange on the calling thread, as torch 2.13 records it: the region 'halo/exchange' [0, 3900)
    # holds c10d::recv_ [130, 3360) and c10d::send [3430, 3830); gloo:recv's work annotation opens at 3290 and
    # runs to 32000, past the region; gloo:send's from 3825. An aten::mm at [5000, 5100) is outside the region.
    t = _trace(tmp_path, [ann("ProfilerStep#0", 0, 40000), ann("halo/exchange", 0, 3900),
                          op("c10d::recv_", 130, 3230), ann("gloo:recv", 3290, 28710), op("c10d::send", 3430, 400),
                          ann("gloo:send", 3825, 28175), op("aten::mm", 5000, 100)])
    j = join(t)
    # the send was in region 'gloo:recv' (the annotation enclosing it), the mm in 'halo/exchange'
    assert dict(zip(j.ops.name, _txt(j.ops.region), strict=True)) == {
        "c10d::recv_": "halo/exchange", "c10d::send": "halo/exchange", "aten::mm": None}
    assert j.ops.step.tolist() == [0, 0, 0]


def _stack_sweep(thread, start, end, holds, target):
    """The reference: one stack per thread, popped while its top has ended; for each interval the
    innermost open interval that holds children (`top`) and the nearest enclosing `target` one."""
    top, nearest, stack = [], [], []
    for i in range(len(start)):
        if i and thread[i] != thread[i - 1]:
            stack = []
        while stack and start[i] >= end[stack[-1][0]]:
            stack.pop()
        top.append(stack[-1][0] if stack else -1)
        nearest.append(stack[-1][1] if stack else -1)
        if holds[i]:
            stack.append((i, i if target[i] else nearest[-1]))
    return top, nearest


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 40), st.integers(-3, 30), st.booleans(),
                          st.booleans()), max_size=60))
def test_enclosing_and_nearest_equal_a_stack_sweep(intervals):
    # partial overlaps, ties, zero and negative durations, several threads: what real traces hold
    intervals.sort(key=lambda v: (v[0], v[1], -v[2]))
    thread, start, dur, holds, target = (np.array(c) for c in zip(*intervals, strict=True)) if intervals else \
        (np.zeros(0, np.int64),) * 3 + (np.zeros(0, bool),) * 2
    end = start + dur
    top, nearest = _stack_sweep(thread.tolist(), start.tolist(), end.tolist(), holds.tolist(), target.tolist())
    got_top = _enclosing(thread.astype(np.int64), start.astype(np.int64), end.astype(np.int64), holds.astype(bool))
    assert got_top.tolist() == top
    assert _nearest(got_top, (target & holds).astype(bool)).tolist() == nearest


@pytest.mark.parametrize("base", [2**60, 2**64 - 10, 2**53 - 2])
def test_ids_past_float64s_exact_integers_join_each_kernel_to_its_own_op(tmp_path, base):
    # ids 2**60 + 1 and 2**60 + 2 are one float64: read as floats, kernel k1 would take k2's op (or none).
    # 2**64 - 10 ... are unsigned 64-bit ids (past int64): read as the int64 of the same bits
    events = [ann("ProfilerStep#0", 0, 100)]
    for k in range(4):
        events += [op(f"aten::op{k}", 10 * k + 1, 8, ext=base + k), launch(10 * k + 2, base + 5 + k, ext=base + k),
                   kernel(f"k{k}", 10 * k + 3, base + 5 + k)]
    for layout in (None, 1):  # one line (streamed as minified), and one event per line
        path = tmp_path / f"ids{layout}.json"
        path.write_text(json.dumps({"traceEvents": events}, indent=layout))
        for keep in (False, True):
            rows = join(read_trace(path, keep_events=keep)).device_rows
            assert rows.join_method.tolist() == ["external_id"] * 4, (layout, keep)
            assert rows.op_pos.tolist() == [0, 1, 2, 3], (layout, keep)
            want = [(base + k) - (2**64 if base + k >= 2**63 else 0) for k in range(4)]
            assert rows.ext_id.tolist() == want

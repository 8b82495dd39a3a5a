"""Edges of the cost registry, the matrix product and the op attribution: malformed recorded args,
inputs past the recorded ones, empty products, Cost's checks, empty op tables, same-name nesting at
the first op, the ancestors' depth limit, and an op whose formula reads its kernels' names."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import wlprof.cost  # noqa: F401  (registers every formula)
from wlprof import pipeline
from wlprof.cost import MATRIX, VECTOR, cost_of, dtypes
from wlprof.cost.attribution import ancestors, flag_ops
from wlprof.cost.comm import zero_comm_flops
from wlprof.cost.elementwise import _broadcast
from wlprof.cost.gemm import _mm
from wlprof.cost.registry import Cost, OpCall, TensorArg, parse_scalar, uses_kernels
from wlprof.trace.parse import read_trace


def test_recorded_args_of_the_wrong_shape_are_ignored():
    call = OpCall.from_args("aten::x", {"Input Dims": "2x3", "Input type": ["float", 7], "Input Strides": 5,
                                        "Concrete Inputs": [1, "2"], "k": 1, "l": [1], "d": {"a": 1}})
    # dims and strides that are not lists are none; a type or concrete value that is not a string is ''
    assert (call.dims, call.types, call.strides, call.concrete) == ((), ("float", ""), (), ("", "2"))
    # extra: the args beside the inputs that are not lists or dicts
    assert call.extra == (("k", 1),)
    assert call.tensor(0) == TensorArg((), "float", None)  # no dims recorded for input 0: a 0-d tensor
    assert call.tensor(1) is None  # '' is no tensor type
    assert call.scalar(1) == 2 and call.scalar(2) is None  # past the recorded values: None
    call = OpCall.from_args("aten::x", {"Input type": "float", "Concrete Inputs": "12"})
    assert (call.types, call.concrete) == ((), ())  # strings where lists belong: nothing


def test_a_tensor_past_its_dims_or_with_unreadable_strides():
    call = OpCall.from_args("aten::x", {"Input Dims": [[2, 3]], "Input type": ["float", "float", "float"],
                                        "Input Strides": [[3, 1], ["x", 1], 4]})
    assert call.tensor(0) == TensorArg((2, 3), "float", (3, 1))
    assert call.tensor(1) == TensorArg((), "float", None)  # no dims past the first; strides not all ints
    assert call.tensor(2) == TensorArg((), "float", None)  # strides not a list
    assert len(call.tensors) == 3


def test_parse_scalar_of_values_that_are_not_json():
    assert parse_scalar(5) == 5.0  # not a string: read as a number
    assert parse_scalar(" [1, True]") == " [1, True]"  # a list only when the text starts with '['
    assert parse_scalar("[1, True]") == [1, True]


def test_the_formulas_that_read_kernel_names():
    assert uses_kernels("aten::cat") and not uses_kernels("aten::mm") and not uses_kernels("no::such_op")


def test_cost_checks_name_what_is_wrong():
    with pytest.raises(ValueError, match=r"^Cost.unit must be 'matrix' or 'vector' \(got 'tensor'\)$"):
        Cost(1, 2, "tensor")
    with pytest.raises(ValueError, match=r"^Cost.written must be at most bytes \(got 10 > 5\)$"):
        Cost(0, 5, VECTOR, None, written=10)
    assert Cost(0, None, VECTOR, None, written=5).written == 5  # written bytes without a total are allowed


def test_empty_and_one_element_matrix_products():
    def mm(m, k, n):
        return cost_of(OpCall.from_args("aten::mm", {"Input Dims": [[m, k], [k, n]], "Input type": ["float"] * 2}))

    # no rows or no columns: nothing to read or write (a group with no rows of a grouped mm)
    assert mm(0, 8, 16) == Cost(0, 0, MATRIX, "float32", written=0)
    assert mm(4, 8, 0) == Cost(0, 0, MATRIX, "float32", written=0)
    # [1, 8] @ [8, 1]: 2 * 8 = 16 FLOPs, (8 + 8 + 1) * 4 = 68 bytes, 4 written
    assert mm(1, 8, 1) == Cost(16, 68, MATRIX, "float32", written=4)
    with pytest.raises(ValueError, match="^inner dimensions differ$"):
        _mm(TensorArg((2, 3), "float"), TensorArg((4, 5), "float"))


def _ops(names, parents, args_ids=None):
    d = {"name": pd.Series(names, dtype=object), "parent": np.array(parents, dtype=np.int64)}
    if args_ids is not None:
        d["args_id"] = np.array(args_ids, dtype=np.int64)
    return pd.DataFrame(d)


def test_flag_ops_of_no_ops():
    out = flag_ops(_ops([], []), [])
    assert len(out) == 0
    for col in ("is_view", "is_wrapper", "has_formula", "dispatcher"):
        assert out[col].dtype == bool, col


def test_flag_ops_at_the_first_op_and_args_ids_outside_the_table():
    # op 0 holds an op of its own name (an overload dispatching to another): op 0 is the dispatcher,
    # formula or not
    out = flag_ops(_ops(["myext::op", "myext::op"], [-1, 0]))
    assert out.dispatcher.tolist() == [True, False]
    # args id 0 chooses a formula (a Triton launch); args id 2 is past the table of 2: none
    out = flag_ops(_ops(["triton_poi_0", "triton_poi_1"], [-1, -1], [0, 2]),
                   [{"kernel_backend": "triton"}, {}])
    assert out.has_formula.tolist() == [True, False]


def test_an_op_with_auxiliary_ops_and_an_unknown_op_nested_stays_costed():
    # addmm's nested copy_ is its own work; an op without a formula inside it is no costed descendant
    out = flag_ops(_ops(["aten::addmm", "aten::copy_", "myext::noop"], [-1, 0, 0]))
    assert out.dispatcher.tolist() == [False, False, False]
    # the softmax backward names its nested mul auxiliary: beside it, an op without a formula (and not
    # a support op such as copy_) does not make it a dispatcher either
    out = flag_ops(_ops(["aten::_softmax_backward_data", "aten::mul", "myext::noop"], [-1, 0, 0]))
    assert out.dispatcher.tolist() == [False, False, False]


def test_ancestors_innermost_first_up_to_the_limit():
    names = np.array([f"op{i}" for i in range(20)], dtype=object)
    parent = np.arange(-1, 19)  # op i nested in op i - 1
    assert ancestors(names, parent, 0) == ()
    assert ancestors(names, parent, 2) == ("op1", "op0")
    assert ancestors(names, parent, 19) == tuple(f"op{i}" for i in range(18, 2, -1))  # 16 of them
    assert len(ancestors(names, parent, 19, limit=3)) == 3


def _x(cat, name, ts, dur, tid=1, pid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": pid, "tid": tid, "args": args}


def test_a_cat_reads_its_element_size_from_its_kernels_name(tmp_path):
    # cat of [2, 3] and [4, 3]: 18 elements; CUDA's batched copy kernel names 4-byte elements in the
    # first cat (2 * 18 * 4 = 144 bytes, 72 written) and 2-byte ones in the second, recorded with the
    # same inputs (72 bytes, 36 written)
    dims = {"Input Dims": [[[2, 3], [4, 3]], []], "Input type": ["TensorList", "Scalar"],
            "Concrete Inputs": ["", "0"]}
    events = [_x("user_annotation", "ProfilerStep#1", 0, 500)]
    for i, size in enumerate((4, 2)):
        t = 10 + 20 * i
        events += [_x("cpu_op", "aten::cat", t, 10, **{"External id": i + 1, **dims}),
                   _x("cuda_runtime", "cudaLaunchKernel", t + 1, 1, correlation=i + 1, **{"External id": i + 1}),
                   _x("kernel", f"void at::native::CatArrayBatchedCopy<at::native::OpaqueType<{size}u>, unsigned "
                      "int, 2, 128, 1>(...)", 100 + 10 * i, 2, tid=7, pid=0, correlation=i + 1, stream=7, device=0,
                      grid=[1, 1, 1], block=[128, 1, 1])]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    o = pipeline.costed(read_trace(path)).ops
    assert o[["flops", "bytes", "bytes_written"]].values.tolist() == [[0.0, 144.0, 72.0], [0.0, 72.0, 36.0]]


def test_dtype_names_and_broadcasts_at_their_edges():
    assert dtypes.element_size("NotAType") is None
    with pytest.raises(KeyError, match="unknown dtype name 'nope'"):
        dtypes.size_of_dtype("nope")
    assert _broadcast([]) == ()  # no tensors: a 0-d result
    assert _broadcast([(1, 3), (1, 1)]) == (1, 3)  # a dimension of 1 everywhere stays 1
    with pytest.raises(ValueError, match=r"^shapes do not broadcast: \[\(2,\), \(3,\)\]$"):
        _broadcast([(2,), (3,)])


def test_elementwise_inputs_read_by_arity():
    from wlprof.cost.elementwise import _make_binary, _make_unary

    def call(name, n):
        return OpCall.from_args(name, {"Input Dims": [[4]] * n, "Input type": ["float"] * n})

    # clamp_min(x, min) with a tensor min: both [4] floats read, 16 + 16, and 16 written; 1 FLOP each
    assert cost_of(call("aten::clamp_min", 2)) == Cost(4, 48, VECTOR, "float32", written=16)
    assert _make_unary("clamp_min", 1)(call("aten::clamp_min", 2)) == Cost(4, 48, VECTOR, "float32", written=16)
    # mul(a, b, out=c): the out tensor is not read: 16 + 16 read, 16 written (the factories built here, so
    # that a mutation of them is reached)
    assert cost_of(call("aten::mul", 3)) == Cost(4, 48, VECTOR, "float32", written=16)
    assert _make_binary("mul", 1)(call("aten::mul", 3)) == Cost(4, 48, VECTOR, "float32", written=16)


def test_zero_comm_flops_leaves_a_table_without_communication_columns():
    k = pd.DataFrame({"flops": [np.nan], "flops_source": ["unknown"]})
    zero_comm_flops(k)
    assert np.isnan(k.flops[0]) and k.flops_source[0] == "unknown"


def test_reduction_result_sizes_at_their_edges():
    from wlprof.cost.reductions import _out_itemsize, _reduced_out

    f32 = TensorArg((4,), "float")
    # a dtype argument only counts as an int ScalarType code it knows: 5 is float16 (2 bytes); 99, True
    # and 5.0 leave the input's 4 bytes
    assert [_out_itemsize(f32, c, False) for c in (5, 99, True, 5.0)] == [2, 4, 4, 4]
    # a complex input is not integral: no widening to int64 (16 bytes stay 16)
    assert _out_itemsize(TensorArg((4,), "c10::complex<double>"), None, True) == 16
    assert _out_itemsize(TensorArg((4,), "int"), None, True) == 8  # an int32 input accumulates in int64
    assert _reduced_out(TensorArg((), "float"), [0]) == 1  # a 0-d tensor reduced over dim 0: one element


def test_written_from_shapes_goes_on_past_a_row_without_a_formula():
    from wlprof.cost.annotate import written_from_shapes

    df = pd.DataFrame({"op_name": ["myext::nothing", "aten::mm"], "bytes": [10.0, 896.0],
                       "flops_source": ["formula", "formula"], "kind": ["kernel", "kernel"],
                       "op_input_dims": ["[[4,4]]", "[[4,8],[8,16]]"], "op_input_types": ['["float"]', '["float","float"]']})
    # the second row: mm [4, 8] @ [8, 16] in float32 gives its 896 bytes, of which 4 * 16 * 4 = 256 written
    out = written_from_shapes(df)
    assert np.isnan(out[0]) and out[1] == 256.0


def test_annotate_comm_on_tables_of_its_own():
    from wlprof.cost.comm import annotate_comm

    empty_ops = pd.DataFrame({"name": pd.Series([], dtype=object), "args_id": np.zeros(0, np.int64),
                              "parent": np.zeros(0, np.int64)})
    # rows without an args_id column and a table indexed from 5: an NCCL kernel (collective from its name),
    # host ops on the CPU (classed only, a send as p2p, an nccl: op not costed as a kernel)
    k = pd.DataFrame({"kind": ["kernel", "cpu_op", "cpu_op"],
                      "name": ["ncclDevKernel_AllReduce_Sum_f32_RING_LL", "c10d::send", "nccl:all_reduce"],
                      "op_name": [None, "c10d::send", "nccl:all_reduce"], "dur_us": [2.0, 1.0, 1.0]},
                     index=[5, 6, 7])
    rows = pd.DataFrame({"op_pos": [-1, -1, -1]})
    annotate_comm(k, rows, empty_ops, [{"Collective name": "broadcast"}], {"distributedInfo": {"world_size": 2}})
    assert k.comm_class.tolist() == ["collective", "p2p", "collective"]
    assert k.collective.tolist() == ["all_reduce", "send", "all_reduce"]
    assert k.group_size[5] == 2.0 and np.isnan(k.group_size[6]) and np.isnan(k.group_size[7])  # the world: 2
    # no rows at all: the columns, empty
    k = pd.DataFrame({"kind": pd.Series([], dtype=object), "name": pd.Series([], dtype=object),
                      "op_name": pd.Series([], dtype=object), "dur_us": pd.Series([], dtype=float)})
    annotate_comm(k, pd.DataFrame({"op_pos": np.zeros(0, np.int64)}), empty_ops, [], {})
    assert len(k) == 0 and {"comm_class", "comm_bytes", "busbw_gbps"} <= set(k.columns)


def test_autograd_engine_scopes_are_wrappers_custom_functions_are_not():
    from wlprof.cost import is_wrapper

    # generated backward nodes, the engine's C++ nodes and its call of a node: their work is the
    # aten ops nested inside
    for name in ("AddmmBackward0", "NativeGroupNormBackward0", "AsStridedBackward1",
                 "autograd::engine::evaluate_function: AddmmBackward0",
                 "autograd::engine::evaluate_function: CompiledFunctionBackward",
                 "torch::autograd::AccumulateGrad", "torch::autograd::CopySlices"):
        assert is_wrapper(name), name
    # a custom Python function's node (no number) may run work the profiler does not record
    for name in ("CompiledFunctionBackward", "MyFunctionBackward", "Backward0", "aten::addmm"):
        assert not is_wrapper(name), name


def test_a_cpu_training_trace_has_no_rows_for_the_autograd_engine(tmp_path):
    import torch
    from torch.profiler import ProfilerActivity, profile

    from wlprof.pipeline import costed, read

    lin = torch.nn.Linear(16, 8)
    x = torch.randn(4, 16)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        lin(x).relu().sum().backward()
    path = tmp_path / "train.json"
    prof.export_chrome_trace(str(path))
    k = costed(read(path)).kernels
    assert not k.name.str.contains("Backward|autograd").any(), k.name.tolist()
    # the backward's GEMMs are rows of their own: grad input (mm) and grad weight (mm); forward addmm
    assert (k.name == "aten::addmm").sum() == 1 and (k.name == "aten::mm").sum() >= 1

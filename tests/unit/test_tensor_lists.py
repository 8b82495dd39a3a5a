"""Tensor lists the profiler recorded as `[]`, recovered from the backward's gradients
(wlprof.cost.tensor_lists): taken only where the launched multi-tensor-apply blocks confirm them.

Synthetic traces: a backward of `torch::autograd::AccumulateGrad` ops on autograd's thread, then
optimizer ops on the main thread whose kernels carry a grid. A multi-tensor-apply block covers
65,536 elements of one tensor, so a list of shapes launches sum(ceil(numel / 65536)) blocks.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from wlprof import pipeline
from wlprof.trace.parse import read_trace

# gradient shapes of one backward: 100,000 + 70,000 + 10 elements -> 2 + 2 + 1 = 5 blocks
SHAPES = [[100, 1000], [70000], [10]]
N = 100_000 + 70_000 + 10
MTA = ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::"
       "TensorListMetadata<{depth}>, at::native::(anonymous namespace)::{functor}<{dtype}, 1, 1, 0>, "
       "std::plus<float>, float>(at::native::(anonymous namespace)::TensorListMetadata<{depth}>, float)")
ADAMW = ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::"
         "FusedOptimizerTensorListMetadata<5>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 5, "
         "(at::native::ADAM_MODE)1, false>, float*, double, double, double, double, double, bool, float*, "
         "float*>(at::native::(anonymous namespace)::FusedOptimizerTensorListMetadata<5>, "
         "at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 5, (at::native::ADAM_MODE)1, false>, "
         "float*, double, double, double, double, double, bool, float*, float*)")


class Trace:
    def __init__(self):
        self.events, self.ext, self.ts = [], 0, 0

    def x(self, cat, name, dur, tid=1, pid=1, **args):
        self.events.append({"ph": "X", "cat": cat, "name": name, "ts": self.ts, "dur": dur, "pid": pid,
                            "tid": tid, "args": args})
        self.ts += dur + 1

    def backward(self, shapes, dtype="float"):
        for s in shapes:
            self.ext += 1
            self.x("cpu_op", "torch::autograd::AccumulateGrad", 2, tid=2, **{
                "External id": self.ext, "Input Dims": [s], "Input type": [dtype]})

    def op(self, name, types, concrete, grids, kernel):
        """An op recorded with every TensorList as `[]`, launching one kernel per grid."""
        self.ext += 1
        start, ext = self.ts, self.ext
        dims = [[] for _ in types]
        self.events.append({"ph": "X", "cat": "cpu_op", "name": name, "ts": start, "dur": 20 * len(grids) + 5,
                            "pid": 1, "tid": 1, "args": {"External id": ext, "Input Dims": dims,
                                                         "Input type": types, "Concrete Inputs": concrete}})
        self.ts += 1
        for g in grids:
            corr = 10_000 + len(self.events)
            self.x("cuda_runtime", "cudaLaunchKernel", 2, correlation=corr, **{"External id": ext})
            self.events.append({"ph": "X", "cat": "kernel", "name": kernel, "ts": 100_000 + self.ts, "dur": 3,
                                "pid": 0, "tid": 7, "args": {"correlation": corr, "External id": ext, "stream": 7,
                                                             "device": 0, "grid": [g, 1, 1],
                                                             "block": [512, 1, 1]}})
        self.ts += 20 * len(grids) + 5

    def foreach_add(self, grids, dtype="float"):
        # _foreach_add_.List(self, other, alpha): two lists
        self.op("aten::_foreach_add_", ["TensorList", "TensorList", "Scalar"], ["", "", "-0.01"], grids,
                MTA.format(depth=2, functor="BinaryOpListAlphaFunctor", dtype=dtype))

    def costed(self, tmp_path):
        path = tmp_path / "t.json"
        path.write_text(json.dumps({"traceEvents": self.events}))
        k = pipeline.costed(read_trace(path)).kernels
        return k[k.kind == "kernel"]


def _dims(row):
    return json.loads(row.op_input_dims)


def test_a_foreach_list_matching_the_launched_blocks_takes_the_gradients_shapes(tmp_path):
    t = Trace()
    t.backward(SHAPES)
    t.foreach_add([3, 2])  # 5 blocks over two launches
    k = t.costed(tmp_path)
    assert (k.op_input_dims_source == "gradients").all()
    assert _dims(k.iloc[0]) == [SHAPES, SHAPES, []]
    # add_(self, other, alpha=-0.01): 2 FLOPs per element (alpha != 1 multiplies), reads both lists and
    # writes self: 3 * 4 bytes per element
    assert k.flops.sum() == pytest.approx(2 * N)
    assert k["bytes"].sum() == pytest.approx(12 * N)


def test_a_block_count_that_no_reading_explains_leaves_the_list_unrecorded(tmp_path):
    t = Trace()
    t.backward(SHAPES)
    t.foreach_add([4])  # 4 blocks: neither the gradients (5) nor 3 step counters
    k = t.costed(tmp_path)
    assert (k.op_input_dims_source == "trace").all()
    assert _dims(k.iloc[0]) == [[], [], []]
    assert k["bytes"].isna().all()


def test_one_block_per_tensor_reads_as_zero_d_step_counters(tmp_path):
    t = Trace()
    t.backward(SHAPES)
    # _foreach_add_.Scalar(state_steps, 1): 3 blocks for 3 tensors, while the gradients would launch 5
    t.op("aten::_foreach_add_", ["TensorList", "Scalar"], ["", "1"], [3],
         MTA.format(depth=1, functor="BinaryOpScalarFunctor", dtype="float"))
    k = t.costed(tmp_path)
    assert _dims(k.iloc[0]) == [[[], [], []], []]
    # 3 float counters, each read and written: 24 bytes, 3 adds
    assert (k.flops.sum(), k["bytes"].sum()) == (3, 24)


def test_parameters_of_one_chunk_each_are_ambiguous_with_step_counters(tmp_path):
    t = Trace()
    t.backward([[10], [20], [30]])  # 3 tensors, 3 blocks: parameters or counters
    t.foreach_add([3])
    k = t.costed(tmp_path)
    assert (k.op_input_dims_source == "trace").all() and k["bytes"].isna().all()


def test_in_an_sgd_step_parameters_of_one_chunk_each_are_parameters(tmp_path):
    t = Trace()
    t.backward([[10], [20], [30]])
    t.events.append({"ph": "X", "cat": "user_annotation", "name": "Optimizer.step#SGD.step", "ts": t.ts, "dur": 500,
                     "pid": 1, "tid": 1, "args": {}})
    t.ts += 1
    t.foreach_add([3])  # SGD keeps no step counters: the 3 blocks are the 3 parameters
    k = t.costed(tmp_path)
    assert (k.op_input_dims_source == "gradients").all() and _dims(k.iloc[0])[0] == [[10], [20], [30]]
    assert k["bytes"].sum() == 12 * 60  # 60 elements, both lists read and self written at 4 bytes


def test_gradient_accumulation_takes_one_backwards_gradients(tmp_path):
    t = Trace()
    t.backward(SHAPES)
    t.backward(SHAPES)  # a second micro-batch: 10 blocks over both, 5 for one
    t.foreach_add([5])
    k = t.costed(tmp_path)
    assert _dims(k.iloc[0])[0] == SHAPES


def test_only_the_gradients_since_the_previous_optimizer_call_count(tmp_path):
    t = Trace()
    t.backward([[8, 8]] * 50)  # step 1: 50 tensors of one block each
    t.foreach_add([50])  # ambiguous (counters or parameters): left unrecorded
    t.backward(SHAPES)  # step 2 after a change of model: the list is step 2's
    t.foreach_add([5])
    k = t.costed(tmp_path).sort_values("ts_us")
    assert k.op_input_dims_source.tolist() == ["trace", "gradients"]
    assert _dims(k.iloc[1])[0] == SHAPES


def test_the_kernels_dtype_selects_the_gradients_of_that_dtype(tmp_path):
    t = Trace()
    t.backward([[100, 1000]], dtype="c10::BFloat16")  # 2 blocks
    t.backward([[70000], [10]])  # float: 2 + 1 = 3 blocks
    t.foreach_add([2], dtype="c10::BFloat16")
    t.foreach_add([3])
    k = t.costed(tmp_path).sort_values("ts_us")
    assert [_dims(r)[0] for _, r in k.iterrows()] == [[[100, 1000]], [[70000], [10]]]
    # bf16: 100,000 elements * 3 lists * 2 bytes; float: 70,010 * 3 * 4
    assert k["bytes"].tolist() == [600_000, 840_120]


def test_a_fused_adamw_fills_its_parameter_lists_and_its_step_counters(tmp_path):
    t = Trace()
    t.backward(SHAPES)
    # _fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr, beta1, beta2,
    # weight_decay, eps, amsgrad=False, maximize=False, grad_scale=None, found_inf=None)
    types = ["TensorList"] * 6 + ["Scalar"] * 7 + ["", ""]
    concrete = [""] * 6 + ["0.001", "0.9", "0.999", "0.01", "1e-08", "False", "False", "", ""]
    t.op("aten::_fused_adamw_", types, concrete, [5], ADAMW)
    k = t.costed(tmp_path)
    dims = _dims(k.iloc[0])
    assert dims[:4] == [SHAPES] * 4 and dims[4] == [] and dims[5] == [[], [], []]
    # 14 FLOPs per element (13 + AdamW's decay); reads params, grads and both moments (16 bytes per
    # element) and the 3 float step counters (12 bytes), writes params and both moments (12 per element)
    assert k.flops.sum() == 14 * N
    assert k["bytes"].sum() == 28 * N + 12
    assert k.bytes_written.sum() == 12 * N


def test_without_a_backward_in_the_trace_nothing_is_recovered(tmp_path):
    t = Trace()
    t.foreach_add([5])
    k = t.costed(tmp_path)
    assert (k.op_input_dims_source == "trace").all() and np.isnan(k["bytes"]).all()


def _declared(*calls):
    from wlprof.cost.tensor_lists import ListCall

    return tuple(ListCall(name, tuple((i, tuple(tuple(s) for s in shapes)) for i, shapes in lists))
                 for name, lists in calls)


def test_a_workloads_recorded_list_calls_fill_its_steps_unrecorded_lists(tmp_path):
    t = Trace()
    t.events.append({"ph": "X", "cat": "user_annotation", "name": "wlprof/step#0", "ts": 0, "dur": 10_000,
                     "pid": 1, "tid": 1, "args": {}})
    t.foreach_add([5])
    t.op("aten::_foreach_sqrt", ["TensorList"], [""], [5],
         MTA.format(depth=1, functor="UnaryOpFunctor", dtype="float"))
    declared = _declared(("aten::_foreach_add_", [(0, SHAPES), (1, SHAPES)]), ("aten::_foreach_sqrt", [(0, SHAPES)]))
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": t.events}))
    k = pipeline.costed(read_trace(path), lists=declared).kernels
    k = k[k.kind == "kernel"].set_index("op_name")
    assert (k.op_input_dims_source == "workload").all()
    assert _dims(k.loc["aten::_foreach_sqrt"]) == [SHAPES]
    # sqrt: 1 FLOP per element, read and written at 4 bytes
    assert (k.loc["aten::_foreach_sqrt"].flops, k.loc["aten::_foreach_sqrt"]["bytes"]) == (N, 8 * N)


@pytest.mark.parametrize("change", ["names", "blocks"])
def test_declared_calls_that_do_not_match_the_trace_fill_nothing(tmp_path, change):
    t = Trace()
    t.foreach_add([4] if change == "blocks" else [5])  # 4 blocks: not the declared shapes' 5
    name = "aten::_foreach_mul_" if change == "names" else "aten::_foreach_add_"
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": t.events}))
    k = pipeline.costed(read_trace(path), lists=_declared((name, [(0, SHAPES), (1, SHAPES)]))).kernels
    assert (k[k.kind == "kernel"].op_input_dims_source == "trace").all()


def test_the_optim_workload_records_its_lists_past_the_profilers_limit():
    import torch

    from wlprof import workloads

    wl = workloads.get("optim")
    pts = wl.points(wl.parse({"optimizer": ["adamw"], "impl": ["fused"], "tensors": [40], "numel": [7]},
                             torch.device("cpu"), torch.float32).spec)
    built = wl.build(pts[0], torch.device("cpu"), torch.float32)
    # the step counters' _foreach_add_(state_steps, 1), then _fused_adamw_(params, grads, exp_avgs,
    # exp_avg_sqs, max_exp_avg_sqs (empty), state_steps, ...)
    counters, call = built.tensor_lists
    assert counters.name == "aten::_foreach_add_" and counters.lists == ((0, ((),) * 40),)
    assert call.name == "aten::_fused_adamw_"
    assert [i for i, _ in call.lists] == [0, 1, 2, 3, 5]
    assert dict(call.lists)[0] == ((7,),) * 40 and dict(call.lists)[5] == ((),) * 40


def test_long_lists_are_shown_by_count_and_shape():
    from wlprof.predict.report import shapes_text

    assert shapes_text("[[[300000],[300000],[300000],[300000]],[]]") == "[4x[300000],[]]"
    assert shapes_text("[[[3,4],[5],[6],[7]],[]]") == "[4 tensors, 30 elements,[]]"
    assert shapes_text("[[[1],[2]],[]]") == "[[[1],[2]],[]]"  # three or fewer: as recorded
    assert shapes_text("[[4,5],[5]]") == "[[4,5],[5]]"


def test_launches_follow_multi_tensor_applys_tensor_and_block_limits():
    from wlprof.cost.tensor_lists import launches

    # depth 1 takes 110 tensors a launch: 100 one-chunk tensors are one launch, 111 are two
    assert launches([10] * 100, 1) == 1 and launches([10] * 111, 1) == 2
    # depth 3 takes 48: 100 tensors are 48 + 48 + 4, three launches
    assert launches([5000] * 100, 3) == 3
    # 320 blocks a launch: one tensor of 400 chunks (400 * 65536 elements) is two, split across them
    assert launches([400 * 65536], 1) == 2
    # 30 tensors of 11 chunks: 29 fill 319 blocks, the 30th's first chunk closes the launch at 320 and
    # its other 10 open the next
    assert launches([11 * 65536] * 30, 2) == 2
    assert launches([0, 0, 7], 1) == 1  # empty tensors launch nothing


def test_depth_counts_the_lists_of_the_parameters_shapes_and_an_out_of_place_result():
    from wlprof.cost.tensor_lists import depth

    p = [[4], [5]]
    assert depth("aten::_foreach_addcdiv_", [p, p, p]) == 3  # in place: self, tensor1, tensor2
    assert depth("aten::_foreach_sqrt", [p]) == 2  # out of place: the input and the result
    assert depth("aten::_foreach_norm", [p]) == 1  # one scalar per tensor: no result list
    # fused AdamW: params, grads, exp_avgs, exp_avg_sqs; the 0-d step counters are not walked as a list
    assert depth("aten::_fused_adamw_", [p, p, p, p, [[], []]]) == 4

"""convolution_backward and its implementation ops: only the gradients output_mask asks for."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from cost_calls import BF16, F32, NONE, S, T, op

import wlprof.cost  # noqa: F401  (registers every formula)
from wlprof.cost import MATRIX, cost_of
from wlprof.cost.attribution import flag_ops

# x [2,4,9,9], w [6,4,3,3], stride 2, padding 1: out spatial (9 + 2 - 2 - 1)//2 + 1 = 5, grad_out [2,6,5,5]
GO, X, W = T([2, 6, 5, 5]), T([2, 4, 9, 9]), T([6, 4, 3, 3])


def conv_bwd(mask, go=GO, x=X, w=W, groups=1, transposed=False, bias=NONE):
    # (grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed, output_padding, groups,
    #  output_mask)
    return op("aten::convolution_backward", go, x, w, bias, S([2, 2]), S([1, 1]), S([1, 1]), S(transposed),
              S([0, 0]), S(groups), S(mask))


# grad_input: 2*N*C_out*(C_in/g)*prod(out spatial)*prod(kernel) = 2*2*6*4*25*9 = 21600 (the forward's)
DGRAD = 2 * 2 * 6 * 4 * 25 * 9
# grad_weight: 2*N*C_in*C_out*prod(grad_out spatial)*prod(kernel) = 2*2*4*6*25*9 = 21600
WGRAD = 2 * 2 * 4 * 6 * 25 * 9
GO_B, X_B, W_B = 4 * 2 * 6 * 25, 4 * 2 * 4 * 81, 4 * 6 * 4 * 9  # 1200, 2592, 864 bytes


@pytest.mark.parametrize(("mask", "flops", "reads", "written"), [
    # all three: reads go, w, x; writes grad_input (x's size), grad_weight (w's), grad_bias 6 fp32 = 24
    ([True, True, True], DGRAD + WGRAD, GO_B + W_B + X_B, X_B + W_B + 24),
    # the first layer: no grad_input (its input needs none): no dgrad FLOPs, the weight is not read
    ([False, True, False], WGRAD, GO_B + X_B, W_B),
    # grad_input only: the input is not read
    ([True, False, False], DGRAD, GO_B + W_B, X_B),
    # bias only: reads grad_output, writes 6 values, no FLOPs counted (FlopCounterMode counts none)
    ([False, False, True], 0, GO_B, 24),
])
def test_convolution_backward_counts_what_output_mask_asks(mask, flops, reads, written):
    c = cost_of(conv_bwd(mask, bias=S([6]) if mask[2] else NONE))
    assert c.unit == MATRIX
    assert (c.flops, c.bytes, c.written) == (flops, reads + written, written)


def test_grouped_weight_gradient_counts_as_flop_counter_does():
    # groups 2: w [6,2,3,3]; dgrad 2*2*6*2*25*9 = 10800 (C_in/g); FlopCounterMode's wgrad reads the
    # input's full C_in: 2*2*4*6*25*9 = 21600, twice the products actually done
    c = cost_of(conv_bwd([True, True, False], w=T([6, 2, 3, 3]), groups=2))
    assert c.flops == 10800 + 21600


def test_transposed_convolution_backward():
    # conv_transpose x [2,4,5,5] -> out [2,3,9,9] with w [4,3,3,3] (stride 2, padding 1): grad_out [2,3,9,9]
    go, x, w = T([2, 3, 9, 9], BF16), T([2, 4, 5, 5], BF16), T([4, 3, 3, 3], BF16)
    c = cost_of(conv_bwd([True, True, False], go=go, x=x, w=w, transposed=True))
    # dgrad as a plain conv of grad_out by w: 2*N*prod(x spatial)*prod(k)*C_in*C_out = 2*2*25*9*4*3 = 10800
    # wgrad: conv_count(t(go), t(x), t(w)): 2*prod(k)*prod(x spatial)*C_out*C_in*N = 2*9*25*3*4*2 = 10800
    assert c.flops == 10800 + 10800
    assert c.dtype == "bfloat16"


def test_slow_conv2d_backward():
    # _slow_conv2d_backward.output_mask(grad_output, self, weight, kernel_size, stride, padding, output_mask)
    c = cost_of(op("aten::_slow_conv2d_backward", GO, X, W, S([3, 3]), S([2, 2]), S([1, 1]),
                   S([True, True, True])))
    assert c.flops == DGRAD + WGRAD and c.bytes == GO_B + W_B + X_B + X_B + W_B + 24


def test_nested_bias_sum_keeps_it_costed_nested_implementation_makes_it_a_dispatcher():
    # convolution_backward with an aten::sum nested (the bias gradient summed outside cuDNN): still costed;
    # with _slow_conv2d_backward nested (a CPU implementation per group): a dispatcher
    ops = pd.DataFrame({"name": ["aten::convolution_backward", "aten::sum", "aten::convolution_backward",
                                 "aten::_slow_conv2d_backward", "aten::cat"],
                        "parent": [-1, 0, -1, 2, 2]})
    f = flag_ops(ops)
    assert not f.dispatcher[0] and f.dispatcher[2]
    assert np.array_equal(f.has_formula.to_numpy(), [True, True, True, True, True])


def test_slow_conv2d_backward_with_its_bias_sum_nested_stays_costed():
    # a 1x1 Conv2d(16, 3) on the CPU, [2, 16, 20, 20]: convolution_backward runs _slow_conv2d_backward, which
    # sums the bias gradient with a nested aten::sum; it made _slow_conv2d_backward a dispatcher and its two
    # GEMMs were lost (FlopCounterMode's convolution_backward: 153,600 FLOPs)
    ops = pd.DataFrame({"name": ["aten::convolution_backward", "aten::_slow_conv2d_backward", "aten::sum"],
                        "parent": [-1, 0, 1]})
    f = flag_ops(ops)
    assert f.dispatcher[0] and not f.dispatcher[1]
    go, x, w = T([2, 3, 20, 20]), T([2, 16, 20, 20]), T([3, 16, 1, 1])
    args = [go, x, w, S([1, 1]), S([1, 1]), S([0, 0]), S([True, True, True])]
    bias_sum = op("aten::sum", go, S([0, 2, 3]), S(False), NONE, NONE)
    c = cost_of(replace(op("aten::_slow_conv2d_backward", *args), children=(bias_sum,)))
    # grad_input 2 * 2 * 3 * 16 * 400 = 76,800; grad_weight the same products: 76,800
    assert c.flops == 153_600
    # reads grad_output 9,600, the weight 192 (grad_input), the input 51,200 (grad_weight); writes grad_input
    # 51,200 and grad_weight 192; the bias gradient is the nested sum's
    assert (c.bytes, c.written) == (9_600 + 192 + 51_200 + 51_200 + 192, 51_392)
    # without the nested sum (called directly) it writes the 3 bias elements too
    assert cost_of(op("aten::_slow_conv2d_backward", *args)).written == 51_392 + 12


def test_unparsed_mask_is_unknown():
    assert cost_of(op("aten::convolution_backward", GO, X, W, NONE, S([2, 2]), S([1, 1]), S([1, 1]),
                      S(False), S([0, 0]), S(1), NONE)) is None
    _ = F32


def test_output_masks_of_the_wrong_length_are_unknown_and_a_two_entry_mask_has_no_bias():
    assert cost_of(conv_bwd([True, True])) is None
    # mps_convolution_transpose_backward(self, grad_output, weight, padding, output_padding, stride, dilation,
    # groups, output_mask[2]): the shapes of test_transposed_convolution_backward, bf16
    go, x, w = T([2, 3, 9, 9], BF16), T([2, 4, 5, 5], BF16), T([4, 3, 3, 3], BF16)

    def mps(mask):
        return cost_of(op("aten::mps_convolution_transpose_backward", x, go, w, S([1, 1]), S([0, 0]), S([2, 2]),
                          S([1, 1]), S(1), S(mask)))

    # reads go 972 + w 216 + x 400; writes grad_input 400 + grad_weight 216, no bias gradient
    c = mps([True, True])
    assert (c.flops, c.bytes, c.written) == (10800 + 10800, 1588 + 616, 616)
    assert mps([True, True, True]) is None


def test_a_forward_convolution_whose_stride_and_padding_were_not_recorded_is_unknown():
    # PyTorch 1.10 records no Concrete Inputs: _convolution(x [5,3,224,224], w [64,3,7,7]) with stride 2 and
    # padding 3 computes a 112 x 112 output (2 x 5 x 64 x 3 x 49 x 112^2 = 1,180,139,520 FLOPs); read as
    # stride 1 and padding 0 it gave 218 x 218 (4.47e9 FLOPs), costed on 6 µs of self time: 332 TFLOP/s on a CPU
    x, w = T([5, 3, 224, 224]), T([64, 3, 7, 7])
    args = (S([2, 2]), S([3, 3]), S([1, 1]), S(False), S([0, 0]), S(1))
    known = cost_of(op("aten::_convolution", x, w, NONE, *args))
    assert known.flops == 2 * 5 * 64 * 3 * 49 * 112 * 112
    unrecorded = [NONE] * len(args)  # the values absent, as 1.10 writes them (no Concrete Inputs)
    assert cost_of(op("aten::_convolution", x, w, NONE, *unrecorded)) is None
    assert cost_of(op("aten::mkldnn_convolution", x, w, NONE, *unrecorded[:4])) is None
    assert cost_of(op("aten::_slow_conv2d_forward", x, w, S([7, 7]), NONE, NONE, NONE)) is None
    # groups only matter to a transposed convolution (C_out = the weight's dim 1 x groups)
    assert cost_of(op("aten::mkldnn_convolution", x, w, NONE, S([3, 3]), S([2, 2]), S([1, 1]), NONE)).flops \
        == known.flops
    xt, wt = T([2, 4, 5, 5]), T([4, 3, 3, 3])
    assert cost_of(op("aten::_convolution", xt, wt, NONE, S([1, 1]), S([0, 0]), S([1, 1]), S(True), S([0, 0]),
                      NONE)) is None
    # _convolution's transposed (arg 6) decides; its output padding (arg 7) matters only when transposed
    assert cost_of(op("aten::_convolution", x, w, NONE, *args[:3], NONE, *args[4:])) is None
    assert cost_of(op("aten::_convolution", x, w, NONE, *args[:4], NONE, args[5])).flops == known.flops


def test_an_unrecorded_forward_takes_its_output_dims_from_the_backwards_that_agree():
    from wlprof.cost.convolution import forward_outputs

    x, w, go = [5, 3, 224, 224], [64, 3, 7, 7], [5, 64, 112, 112]
    bwd = {"Input Dims": [x, go, w, [], [], []]}  # cudnn_convolution_backward(self, grad_output, weight, ...)
    assert forward_outputs([("aten::cudnn_convolution_backward", bwd)] * 2) == {(tuple(x), tuple(w)): tuple(go)}
    # convolution_backward(grad_output, input, weight, ...) orders them otherwise
    assert forward_outputs([("aten::convolution_backward", {"Input Dims": [go, x, w]})]) == \
        {(tuple(x), tuple(w)): tuple(go)}
    # two strides over the same shapes: backwards that disagree say nothing
    other = {"Input Dims": [x, [5, 64, 218, 218], w]}
    assert forward_outputs([("aten::cudnn_convolution_backward", bwd),
                            ("aten::cudnn_convolution_backward", other)]) == {}
    # a grad_output whose channels are not the weight's output channels is not this forward's output
    assert forward_outputs([("aten::cudnn_convolution_backward", {"Input Dims": [x, [5, 32, 112, 112], w]})]) == {}
    # the forward: 2 x 5 x 64 x 112^2 x 3 x 49 = 1,180,139,520 FLOPs, as with stride 2 and padding 3
    unrecorded = [NONE] * 6  # (bias?, padding, stride, dilation, groups, benchmark, ...) of PyTorch 1.8
    call = op("aten::cudnn_convolution", T(x), T(w), *unrecorded)
    assert cost_of(call) is None
    c = cost_of(replace(call, output_dims=tuple(go)))
    assert c.flops == 2 * 5 * 64 * 112 * 112 * 3 * 49
    # reads x 3,010,560 and w 37,632 bytes, writes 5*64*112*112*4 = 16,056,320
    assert (c.bytes, c.written) == (3_010_560 + 37_632 + 16_056_320, 16_056_320)
    # dims of another batch or channel count are refused
    assert cost_of(replace(call, output_dims=(5, 32, 112, 112))) is None
    # a transposed convolution needs its groups and output padding, which the dims do not replace
    assert cost_of(replace(op("aten::cudnn_convolution_transpose", T(x), T(w), *unrecorded),
                           output_dims=tuple(go))) is None


def _forward_and_next(x, w, after: list[list]) -> tuple[pd.DataFrame, list[dict]]:
    """conv2d > mkldnn_convolution (x, w; no Concrete Inputs), then the ops `after` (each one's Input Dims),
    siblings of conv2d on the same thread."""
    names = ["aten::conv2d", "aten::mkldnn_convolution"] + [f"aten::next{i}" for i in range(len(after))]
    args = [{"Input Dims": [x, w, [], [], [], [], []]}] * 2 + [{"Input Dims": d} for d in after]
    ops = pd.DataFrame({"name": names, "parent": [-1, 0] + [-1] * len(after), "args_id": range(len(names)),
                        "ts_ns": [0, 10] + [1000 + 100 * i for i in range(len(after))],
                        "pid": 1, "tid": 1})
    return ops, args


def test_an_inference_forward_takes_its_output_dims_from_the_op_that_runs_next():
    from wlprof.cost.convolution import consumer_outputs

    x, w, out = [5, 3, 224, 224], [64, 3, 7, 7], [5, 64, 112, 112]
    key = (tuple(x), tuple(w))
    # batch_norm(out, weight, bias, mean, var) right after conv2d
    ops, args = _forward_and_next(x, w, [[out, [64], [64], [64], [64]]])
    assert consumer_outputs(ops, args, [1]) == {key: tuple(out)}
    # a training forward's BatchNorm first adds 1 to its 0-d counter: read past ops on another rank
    ops, args = _forward_and_next(x, w, [[[], [], []], [out, [64]]])
    assert consumer_outputs(ops, args, [1]) == {key: tuple(out)}
    # not the output: other channels, another batch, or spatial sizes no stride and padding give
    for other in ([5, 32, 112, 112], [4, 64, 112, 112], [5, 64, 300, 300]):
        ops, args = _forward_and_next(x, w, [[other, []]])
        assert consumer_outputs(ops, args, [1]) == {}
    # nothing runs after it, or only ops of another rank within the look-ahead
    ops, args = _forward_and_next(x, w, [])
    assert consumer_outputs(ops, args, [1]) == {}
    ops, args = _forward_and_next(x, w, [[[]]] * 5 + [[out]])
    assert consumer_outputs(ops, args, [1]) == {}
    # two forwards of the same shapes followed by different dims (stride 2 and padding 3, then 0) say nothing
    ops, args = _forward_and_next(x, w, [[out]])
    ops2, args2 = _forward_and_next(x, w, [[[5, 64, 109, 109]]])
    ops2 = ops2.assign(ts_ns=ops2.ts_ns + 10_000, parent=ops2.parent.where(ops2.parent < 0, ops2.parent + len(ops)),
                       args_id=ops2.args_id + len(args))
    assert consumer_outputs(pd.concat([ops, ops2], ignore_index=True), args + args2, [1, 1 + len(ops)]) == {}

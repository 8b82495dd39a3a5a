"""The less common forms of the new formulas: fused Adagrad, _foreach_mm, nonzero_static, masked softmax,
the newer batch-norm ops, max pooling without indices, logit and shrink."""

from __future__ import annotations

from cost_calls import BF16, BOOL, F32, NONE, TL, S, T, mta_kernel, op

import wlprof.cost  # noqa: F401  (registers every formula)
from wlprof.cost import MATRIX, cost_of


def test_fused_adagrad():
    # (params, grads, state_sums, state_steps, lr, lr_decay, weight_decay, eps, maximize, grad_scale, found_inf)
    k = (mta_kernel("float", "FusedAdagradMathFunctor", 3),)
    c = cost_of(op("aten::_fused_adagrad_", TL([10]), TL([10]), TL([10]), TL([]), S(0.01), S(0.0), S(0.0),
                   S(1e-10), S(False), NONE, NONE, kernels=k))
    # 7 * 10 = 70; reads params, grads, sums 4*10*3 = 120 + 1 step 4; writes params, sums 80
    assert (c.flops, c.bytes, c.written) == (70, 120 + 4 + 80, 80)


def test_foreach_mm():
    # two products [4, 5] x [5, 6]: 2 * (2*4*5*6) = 480 matrix FLOPs; bytes need the lists' dtype
    c = cost_of(op("aten::_foreach_mm", TL([4, 5], [4, 5]), TL([5, 6], [5, 6])))
    assert (c.flops, c.bytes, c.unit) == (480, None, MATRIX)


def test_nonzero_static():
    # nonzero_static(x [10, 10] bool, size 7, fill_value -1): one compare per element (100);
    # reads 100, writes [7, 2] int64 = 112
    c = cost_of(op("aten::nonzero_static", T([10, 10], BOOL), S(7), S(-1)))
    assert (c.flops, c.bytes, c.written) == (100, 212, 112)


def test_masked_softmax():
    # _masked_softmax(x [4, 8] fp32, mask [4, 8] bool, dim, mask_type): 6 * 32 = 192; reads 128 + 32, writes 128
    c = cost_of(op("aten::_masked_softmax", T([4, 8]), T([4, 8], BOOL), S(-1), NONE))
    assert (c.flops, c.bytes) == (192, 288)
    # backward (grad_output, output, mask, dim): 5 * 32 = 160; reads 128 + 128 + 32, writes 128
    c = cost_of(op("aten::_masked_softmax_backward", T([4, 8]), T([4, 8]), T([4, 8], BOOL), S(-1)))
    assert (c.flops, c.bytes) == (160, 416)


def test_newer_batch_norm_forms():
    x, c3 = T([2, 3, 4, 4], BF16), T([3])
    # batch_norm_backward(grad_out, input, weight, running_mean, running_var, save_mean, save_var, update, eps,
    #  output_mask, reserve [0] uint8): training (saved statistics): (10 + 2 + 1) * 96 = 1248
    c = cost_of(op("aten::batch_norm_backward", T([2, 3, 4, 4], BF16), x, c3, c3, c3, c3, c3, S(True), S(1e-5),
                   S([True, True, True]), T([0], "unsigned char")))
    assert (c.flops, c.written) == (1248, 216)
    # _native_batch_norm_legit.no_stats(input, weight, bias, training, momentum, eps): batch statistics,
    # (5 + 2) * 96 = 672; writes y 192 + saved mean/invstd 24
    c = cost_of(op("aten::_native_batch_norm_legit", x, c3, c3, S(True), S(0.1), S(1e-5)))
    assert (c.flops, c.written) == (672, 216)
    # _batch_norm_no_update with running statistics: evaluation, (2 + 2) * 96 = 384, writes y only
    c = cost_of(op("aten::_batch_norm_no_update", x, c3, c3, c3, c3, S(0.1), S(1e-5)))
    assert (c.flops, c.written) == (384, 192)


def test_max_pool2d_without_indices():
    # the CPU's inference kernel: x [1, 2, 4, 4] fp32, k 2: out [1, 2, 2, 2] = 8 values, 4 comparisons each
    c = cost_of(op("aten::max_pool2d", T([1, 2, 4, 4]), S([2, 2]), S([]), S([0, 0]), S([1, 1]), S(False)))
    assert (c.flops, c.bytes, c.written) == (32, 128 + 32, 32)


def test_logit_and_shrink():
    # logit(x [10], eps 1e-6): (3 + 2 clamps) * 10 = 50; without eps 30
    assert cost_of(op("aten::logit", T([10]), S(1e-6))).flops == 50
    assert cost_of(op("aten::logit", T([10]), NONE)).flops == 30
    c = cost_of(op("aten::softshrink", T([10], F32), S(0.5)))
    assert (c.flops, c.bytes) == (20, 80)

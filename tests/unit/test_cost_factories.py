"""Formula factories called at test time: pooling's and resampling's formulas are closures that a
factory builds once, when the module registers them (`for _n, _name in ...: formula(...)(_max_pool(_n,
True))`). A mutation tool that switches a mutant on per test (mutmut's trampolines) never reaches the
closures registered at import, so these tests build the formulas again, here, and check them by hand.
fp32 = 4 bytes, bf16 = 2, int64 indices = 8."""

from __future__ import annotations

from cost_calls import BF16, NONE, S, T, op

import wlprof.cost  # noqa: F401  (registers every formula)
from wlprof.cost import VECTOR, cost_of, pooling, resampling


def _fields(c):
    return (c.flops, c.bytes, c.written, c.unit, c.dtype)


def test_max_pool_with_and_without_indices():
    # x [2, 4, 8, 8] bf16, k 3, s 2, p 1, d 1: out [2, 4, 4, 4] = 128 windows of 9 -> 1152 comparisons;
    # reads 2 * 512 = 1024; writes 2 * 128 = 256 values (+ 8 * 128 = 1024 int64 indices)
    call = op("aten::max_pool2d_with_indices", T([2, 4, 8, 8], BF16), S([3, 3]), S([2, 2]), S([1, 1]), S([1, 1]),
              S(False))
    assert _fields(pooling._max_pool(2, True)(call)) == (1152, 1024 + 1280, 1280, VECTOR, "bfloat16")
    assert _fields(pooling._max_pool(2, False)(call)) == (1152, 1024 + 256, 256, VECTOR, "bfloat16")
    assert cost_of(call) == pooling._max_pool(2, True)(call)  # the registered one: nsp 2, with indices
    # 1-d, ceil_mode: x [2, 4, 7] fp32, k 2, s 2, p 0: ceil((7 - 2) / 2) + 1 = 4 outputs per row, 32 in all
    # (floor: 3); 2 comparisons each = 64; reads 4 * 56 = 224; writes 4 * 32 + 8 * 32 = 384
    call = op("aten::max_pool1d_with_indices", T([2, 4, 7]), S([2]), S([2]), S([0]), S([1]), S(True))
    assert _fields(pooling._max_pool(1, True)(call)) == (64, 224 + 384, 384, VECTOR, "float32")
    assert cost_of(call) == pooling._max_pool(1, True)(call)
    # 3-d without indices: x [1, 1, 4, 4, 4] fp32, k 2, s 2: 8 windows of 8 = 64; reads 256, writes 32
    call = op("aten::max_pool3d", T([1, 1, 4, 4, 4]), S([2, 2, 2]), S([2, 2, 2]), S([0, 0, 0]), S([1, 1, 1]),
              S(False))
    assert _fields(pooling._max_pool(3, False)(call)) == (64, 256 + 32, 32, VECTOR, "float32")
    assert cost_of(call) == pooling._max_pool(3, False)(call)
    # dilation 2: x [1, 1, 7, 7] fp32, k 2, s 1: (7 - 2 * (2 - 1) - 1) // 1 + 1 = 5 -> 25 windows of 4 = 100
    # (dilation 1 would give 36); reads 4 * 49 = 196, writes 4 * 25 = 100
    call = op("aten::max_pool2d", T([1, 1, 7, 7]), S([2, 2]), S([1, 1]), S([0, 0]), S([2, 2]), S(False))
    assert _fields(pooling._max_pool(2, False)(call)) == (100, 196 + 100, 100, VECTOR, "float32")


def test_avg_pool_and_backward():
    # avg_pool2d(x [1, 2, 6, 6] fp32, k 2, s 2, p 0): out [1, 2, 3, 3] = 18; (4 adds + 1 divide) * 18 = 90;
    # reads 4 * 72 = 288, writes 4 * 18 = 72
    call = op("aten::avg_pool2d", T([1, 2, 6, 6]), S([2, 2]), S([2, 2]), S([0, 0]), S(False), S(True), NONE)
    assert _fields(pooling._avg_pool(2)(call)) == (90, 360, 72, VECTOR, "float32")
    assert cost_of(call) == pooling._avg_pool(2)(call)
    # ceil_mode: x [1, 1, 5, 5], k 2, s 2 -> 3 x 3 = 9 windows (floor: 2 x 2); 5 * 9 = 45; reads 100, writes 36
    call = op("aten::avg_pool2d", T([1, 1, 5, 5]), S([2, 2]), S([2, 2]), S([0, 0]), S(True), S(True), NONE)
    assert _fields(pooling._avg_pool(2)(call)) == (45, 100 + 36, 36, VECTOR, "float32")
    # k 3, s 2, p 1, ceil off, count_include_pad on: x [1, 1, 6, 6] -> (6 + 2 - 2 - 1) // 2 + 1 = 3, 9 windows;
    # (9 + 1) * 9 = 90; reads 4 * 36 = 144, writes 36 (with ceil_mode on, 4 x 4 windows)
    call = op("aten::avg_pool2d", T([1, 1, 6, 6]), S([3, 3]), S([2, 2]), S([1, 1]), S(False), S(True), NONE)
    assert _fields(pooling._avg_pool(2)(call)) == (90, 144 + 36, 36, VECTOR, "float32")
    # 3-d: x [1, 1, 4, 4, 4] bf16, k 2, s 2: 8 windows of 8: 9 * 8 = 72; reads 128, writes 16
    call = op("aten::avg_pool3d", T([1, 1, 4, 4, 4], BF16), S([2, 2, 2]), S([2, 2, 2]), S([0, 0, 0]), S(False),
              S(True), NONE)
    assert _fields(pooling._avg_pool(3)(call)) == (72, 128 + 16, 16, VECTOR, "bfloat16")
    assert cost_of(call) == pooling._avg_pool(3)(call)
    # backward(grad_output [1, 2, 3, 3], self [1, 2, 6, 6], k 2, ...): 18 grads x (4 + 1) = 90;
    # reads the gradient 72, writes grad_input 4 * 72 = 288 (self is not read)
    call = op("aten::avg_pool2d_backward", T([1, 2, 3, 3]), T([1, 2, 6, 6]), S([2, 2]), S([2, 2]), S([0, 0]),
              S(False), S(True), NONE)
    assert _fields(pooling._avg_pool_backward(2)(call)) == (90, 72 + 288, 288, VECTOR, "float32")
    assert cost_of(call) == pooling._avg_pool_backward(2)(call)
    # a one-element kernel_size [3] means 3 x 3 (stride 2): 9 grads [1, 1, 3, 3] x (9 + 1) = 90; reads 36, writes 144
    call = op("aten::avg_pool2d_backward", T([1, 1, 3, 3]), T([1, 1, 6, 6]), S([3]), S([2]), S([1]), S(False),
              S(True), NONE)
    assert _fields(pooling._avg_pool_backward(2)(call)) == (90, 36 + 144, 144, VECTOR, "float32")
    # 3-d backward, bf16 gradient [1, 1, 2, 2, 2] of self [1, 1, 4, 4, 4]: 8 x (8 + 1) = 72; reads 16, writes 128
    call = op("aten::avg_pool3d_backward", T([1, 1, 2, 2, 2], BF16), T([1, 1, 4, 4, 4], BF16), S([2, 2, 2]),
              S([2, 2, 2]), S([0, 0, 0]), S(False), S(True), NONE)
    assert _fields(pooling._avg_pool_backward(3)(call)) == (72, 16 + 128, 128, VECTOR, "bfloat16")
    assert cost_of(call) == pooling._avg_pool_backward(3)(call)


def test_upsampling_forward_and_backward():
    assert resampling._OPS["upsample_bilinear2d"] == (2, 9, 8) and resampling._OPS["upsample_nearest1d"] == (1, 0, 1)
    # bilinear2d(x [1, 2, 4, 4] fp32, [8, 8]): 2 * 64 = 128 outputs x 9 = 1152; reads 128, writes 512
    call = op("aten::upsample_bilinear2d", T([1, 2, 4, 4]), S([8, 8]), S(False), NONE, NONE)
    assert _fields(resampling._forward(9, 2)(call)) == (1152, 128 + 512, 512, VECTOR, "float32")
    assert cost_of(call) == resampling._forward(9, 2)(call)
    # the .vec form: nearest2d(x [1, 4, 8, 8] bf16, None, scale_factors [2., 1.5]): out 16 x 12, 768 outputs;
    # reads 2 * 256 = 512, writes 2 * 768 = 1536
    call = op("aten::upsample_nearest2d", T([1, 4, 8, 8], BF16), NONE, S([2.0, 1.5]))
    assert _fields(resampling._forward(0, 2)(call)) == (0, 512 + 1536, 1536, VECTOR, "bfloat16")
    assert cost_of(call) == resampling._forward(0, 2)(call)
    # linear1d(x [1, 6, 8] fp32, [16], ...): 96 outputs x 3 = 288; reads 192, writes 384
    call = op("aten::upsample_linear1d", T([1, 6, 8]), S([16]), S(False), NONE)
    assert _fields(resampling._forward(3, 1)(call)) == (288, 192 + 384, 384, VECTOR, "float32")
    assert resampling._forward(3, 1)(op("aten::upsample_linear1d", T([1, 6, 8]), NONE, NONE)) is None  # no size
    # backward(grad_output [1, 2, 8, 8], output_size [8, 8], input_size [1, 2, 4, 4]): 8 per gradient = 1024;
    # reads 4 * 128 = 512, writes 4 * 32 = 128
    call = op("aten::upsample_bilinear2d_backward", T([1, 2, 8, 8]), S([8, 8]), S([1, 2, 4, 4]), S(False), NONE,
              NONE)
    assert _fields(resampling._backward(8, 2)(call)) == (1024, 512 + 128, 128, VECTOR, "float32")
    assert cost_of(call) == resampling._backward(8, 2)(call)
    # bf16 gradient of nearest1d: [1, 6, 16] -> input [1, 6, 8]: 96 x 1; reads 192, writes 96
    call = op("aten::upsample_nearest1d_backward", T([1, 6, 16], BF16), S([16]), S([1, 6, 8]), NONE)
    assert _fields(resampling._backward(1, 1)(call)) == (96, 192 + 96, 96, VECTOR, "bfloat16")
    assert resampling._backward(1, 1)(op("aten::upsample_nearest1d_backward", T([1, 6, 16]), S([16]), NONE)) is None

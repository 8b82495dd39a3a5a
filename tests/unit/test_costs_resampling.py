"""Upsampling formulas: output sizes from output_size or scale_factors, bytes by hand."""

from __future__ import annotations

from cost_calls import BF16, NONE, S, T, op

import wlprof.cost  # noqa: F401  (registers every formula)
from wlprof.cost import cost_of


def test_upsample_nearest():
    # upsample_nearest2d.vec(x [1, 4, 8, 8] bf16, output_size None, scale_factors [2., 2.]): out [1, 4, 16, 16];
    # reads 2*256 = 512, writes 2*1024 = 2048; no arithmetic
    c = cost_of(op("aten::upsample_nearest2d", T([1, 4, 8, 8], BF16), NONE, S([2.0, 2.0])))
    assert (c.flops, c.bytes, c.written) == (0, 2560, 2048)
    # upsample_nearest1d(x [1, 6, 8], output_size [128], scales None): 768 outputs
    c = cost_of(op("aten::upsample_nearest1d", T([1, 6, 8], BF16), S([128]), NONE))
    assert c.written == 2 * 768


def test_upsample_bilinear_and_backward():
    # upsample_bilinear2d(x [1, 2, 4, 4] fp32, [8, 8], align_corners, None, None): 128 outputs x 9 = 1152
    c = cost_of(op("aten::upsample_bilinear2d", T([1, 2, 4, 4]), S([8, 8]), S(False), NONE, NONE))
    assert (c.flops, c.bytes) == (1152, 128 + 512)
    # backward(grad_output [1, 2, 8, 8], output_size, input_size [1, 2, 4, 4], ...): 8 per gradient = 1024;
    # reads 512, writes 128
    c = cost_of(op("aten::upsample_bilinear2d_backward", T([1, 2, 8, 8]), S([8, 8]), S([1, 2, 4, 4]), S(False),
                   NONE, NONE))
    assert (c.flops, c.bytes) == (1024, 640)


def test_upsample_scale_factors_per_spatial_rank():
    # upsample_nearest1d.vec(x [1, 6, 8] bf16, None, scale_factors [2.]): out [1, 6, 16] = 96 elements;
    # reads 2*48 = 96, writes 2*96 = 192
    c = cost_of(op("aten::upsample_nearest1d", T([1, 6, 8], BF16), NONE, S([2.0])))
    assert (c.flops, c.bytes, c.written) == (0, 96 + 192, 192)
    # an input with fewer dims than scale factors: unknown
    assert cost_of(op("aten::upsample_nearest2d", T([8], BF16), NONE, S([2.0, 2.0]))) is None


def test_upsample_bicubic_and_backward():
    # upsample_bicubic2d(x [2, 16, 32, 32] fp32, [24, 24], align_corners, None, None): 2*16*576 = 18,432
    # outputs x 35 (five 4-tap cubic interpolations) = 645,120; reads 131,072, writes 73,728
    c = cost_of(op("aten::upsample_bicubic2d", T([2, 16, 32, 32]), S([24, 24]), S(True), NONE, NONE))
    assert (c.flops, c.bytes, c.written) == (645_120, 204_800, 73_728)
    # backward(grad_output [2, 16, 24, 24], output_size, input_size [2, 16, 32, 32], ...): 16 multiply-adds
    # per gradient = 32 x 18,432 = 589,824; reads 73,728, writes 131,072
    c = cost_of(op("aten::upsample_bicubic2d_backward", T([2, 16, 24, 24]), S([24, 24]), S([2, 16, 32, 32]),
                   S(True), NONE, NONE))
    assert (c.flops, c.bytes, c.written) == (589_824, 204_800, 131_072)


def grid(mode, x=T([2, 16, 24, 24]), g=T([2, 20, 20, 2])):
    # grid_sampler_2d(input, grid, interpolation_mode, padding_mode, align_corners)
    return cost_of(op("aten::grid_sampler_2d", x, g, S(mode), S(0), S(False)))


def test_grid_sampler_interpolates_per_output_element_as_its_mode():
    # output [2, 16, 20, 20] = 12,800 elements; bilinear 9 each = 115,200; reads input 73,728 and the grid
    # [2, 20, 20, 2] (1,600 floats, 6,400 bytes); writes 51,200
    c = grid(0)
    assert (c.flops, c.bytes, c.written) == (115_200, 73_728 + 6_400 + 51_200, 51_200)
    assert grid(1).flops == 0 and grid(2).flops == 35 * 12_800  # nearest: a copy; bicubic as upsampling
    assert grid(7) is None  # an unknown mode
    # grid_sampler_3d(x [1, 2, 4, 4, 4], grid [1, 3, 3, 3, 3], trilinear): 2 * 27 outputs x 21 = 1,134
    c = cost_of(op("aten::grid_sampler_3d", T([1, 2, 4, 4, 4]), T([1, 3, 3, 3, 3]), S(0), S(0), S(False)))
    assert c.flops == 1_134


def test_grid_sampler_backward_counts_the_gradients_its_mask_asks_for():
    args = [T([2, 16, 20, 20]), T([2, 16, 24, 24]), T([2, 20, 20, 2]), S(0), S(0), S(False)]
    # grad_input only: each of 12,800 gradients into 4 taps, a multiply-add each: 8 x 12,800 = 102,400;
    # reads grad_output 51,200, input 73,728, grid 6,400; writes grad_input 73,728
    c = cost_of(op("aten::grid_sampler_2d_backward", *args, S([True, False])))
    assert (c.flops, c.bytes, c.written) == (102_400, 131_328 + 73_728, 73_728)
    # with the grid's gradient: 2 coordinates x 4 taps x a multiply-add = 16 more per gradient; writes 6,400
    c = cost_of(op("aten::grid_sampler_2d_backward", *args, S([True, True])))
    assert (c.flops, c.written) == (102_400 + 204_800, 73_728 + 6_400)


def test_pixel_shuffle_im2col_col2im_and_flip_move_data():
    # pixel_shuffle([2, 16, 16, 16], 2) -> [2, 4, 32, 32]: 8,192 floats read and written
    c = cost_of(op("aten::pixel_shuffle", T([2, 16, 16, 16]), S(2)))
    assert (c.flops, c.bytes, c.written) == (0, 65_536, 32_768)
    # im2col([2, 8, 16, 16], kernel 2, dilation 1, padding 0, stride 2): 8 x 8 blocks, out [2, 32, 64]: 4,096
    c = cost_of(op("aten::im2col", T([2, 8, 16, 16]), S([2, 2]), S([1, 1]), S([0, 0]), S([2, 2])))
    assert (c.flops, c.bytes, c.written) == (0, 16_384 + 16_384, 16_384)
    # im2col with padding 1, stride 1, kernel 3 on [1, 2, 5, 5]: 5 x 5 blocks, out [1, 18, 25] = 450 floats
    c = cost_of(op("aten::im2col", T([1, 2, 5, 5]), S([3, 3]), S([1, 1]), S([1, 1]), S([1, 1])))
    assert c.written == 450 * 4
    # col2im([2, 32, 64], output [16, 16], kernel 2, ...): one add per column element (4,096), writes
    # [2, 8, 16, 16] = 4,096 floats
    c = cost_of(op("aten::col2im", T([2, 32, 64]), S([16, 16]), S([2, 2]), S([1, 1]), S([0, 0]), S([2, 2])))
    assert (c.flops, c.bytes, c.written) == (4_096, 32_768, 16_384)
    c = cost_of(op("aten::flip", T([4, 24]), S([0])))
    assert (c.flops, c.bytes) == (0, 2 * 96 * 4)

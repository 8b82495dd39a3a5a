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

"""FFT formulas: 5·N·log2(N) per complex transform, half that for real ones, bytes by hand."""

from __future__ import annotations

from cost_calls import F32, NONE, S, T, op

import wlprof.cost  # noqa: F401  (registers every formula)
from wlprof.cost import cost_of, is_wrapper

C64 = "c10::complex<float>"


def test_r2c():
    # _fft_r2c(x [4, 64] fp32, dim [1], normalization 0, onesided): 4 transforms of 64 real points,
    # 2.5 * 64 * 6 each = 960, 3,840 in all; reads 1,024 bytes, writes 4 x 33 complex64 = 1,056
    c = cost_of(op("aten::_fft_r2c", T([4, 64], F32), S([1]), S(0), S(True)))
    assert (c.flops, c.bytes, c.written) == (3_840, 1_024 + 1_056, 1_056)
    # two-sided and normalized by 1/n: 256 complex values written, each scaled (2 per value)
    c = cost_of(op("aten::_fft_r2c", T([4, 64], F32), S([1]), S(2), S(False)))
    assert (c.flops, c.written) == (3_840 + 512, 2_048)


def test_c2r_and_c2c():
    # _fft_c2r(x [4, 33] complex64, dim [1], normalization 2, last_dim_size 64): 3,840 and 256 scalings;
    # reads 1,056, writes 4 x 64 floats = 1,024
    c = cost_of(op("aten::_fft_c2r", T([4, 33], C64), S([1]), S(2), S(64)))
    assert (c.flops, c.bytes, c.written, c.dtype) == (4_096, 2_080, 1_024, "float32")
    # cuFFT's path runs the scaling as a multiply nested in the op (costed there): 3,840 alone
    from dataclasses import replace

    nested = replace(op("aten::_fft_c2r", T([4, 33], C64), S([1]), S(2), S(64)),
                     children=(op("aten::clone", T([4, 33], C64)), op("aten::mul_", T([4, 64], F32), S(0.015625))))
    assert cost_of(nested).flops == 3_840
    # _fft_c2c(x [4, 16, 16] complex64, dims [1, 2], 0, forward): 4 transforms of 256 points,
    # 5 * 256 * 8 = 10,240 each; 8,192 bytes read and written
    c = cost_of(op("aten::_fft_c2c", T([4, 16, 16], C64), S([1, 2]), S(0), S(True)))
    assert (c.flops, c.bytes) == (40_960, 16_384)
    # a length that is no power of two: 5 * 10 * log2(10) = 166.1, rounded
    assert cost_of(op("aten::_fft_c2c", T([10], C64), S([0]), S(0), S(True))).flops == 166
    # a real input to c2c, or no dims recorded: unknown
    assert cost_of(op("aten::_fft_r2c", T([4, 64], C64), S([1]), S(0), S(True))) is None
    assert cost_of(op("aten::_fft_c2c", T([4, 16], C64), NONE, S(0), S(True))) is None


def test_torch_fft_functions_are_wrappers():
    for name in ("fft", "rfft", "irfft", "fft2", "ifft2", "rfftn", "irfftn", "hfft"):
        assert is_wrapper(f"aten::fft_{name}")

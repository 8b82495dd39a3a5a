"""Fast Fourier transforms: `_fft_c2c`, `_fft_r2c`, `_fft_c2r` (every torch.fft function runs one of them).

FLOPs follow the nominal radix-2 count, used for any length: 5·N·log2(N) real operations for a
complex transform of N points (over every transformed dim together, N their product), half that,
2.5·N·log2(N), for a real-to-complex or complex-to-real one (N the real signal's points), times
the batch (the elements of the untransformed dims); a normalization (`normalization` 1 or 2:
by 1/sqrt(N) or 1/N) multiplies each output value once more (a complex value's two parts: 2),
unless the op runs that scaling as a multiply nested inside (cuFFT's path), which is costed on
its own; what the op runs nested (a clone of the input that c2r overwrites) is its auxiliary work.
FlopCounterMode has no entry for these ops.

Bytes: the input read once, the output written once: r2c writes N/2 + 1 complex values along
the last transformed dim when `onesided`, else N; c2r writes `last_dim_size` reals there.
"""

from __future__ import annotations

import math

from wlprof.cost import dtypes
from wlprof.cost.registry import VECTOR, Cost, OpCall, TensorArg, formula, register_wrapper

# The torch.fft functions and their n-dimensional forms: each runs one _fft_* op nested inside.
register_wrapper(*(f"aten::fft_{n}" for n in (
    "fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2", "irfft2", "hfft2", "ihfft2",
    "fftn", "ifftn", "rfftn", "irfftn", "hfftn", "ihfftn")))
# The short-time transforms: stft pads (reflection_pad1d), windows the frames (mul) and runs _fft_r2c or
# _fft_c2c; istft runs _fft_c2r or _fft_c2c, windows, overlap-adds (unfold_backward) and divides by the
# window envelope: all nested.
register_wrapper("aten::stft", "aten::istft")

_COMPLEX_OF = {"float32": "complex64", "float64": "complex128", "float16": "complex32"}
_REAL_OF = {v: k for k, v in _COMPLEX_OF.items()}


def _dims(call: OpCall, x: TensorArg) -> list[int] | None:
    dim = call.scalar(1)
    if isinstance(dim, int) and not isinstance(dim, bool):
        dim = [dim]
    if not isinstance(dim, list) or not dim or not all(isinstance(d, int) for d in dim) or not x.dims:
        return None
    return [d % len(x.dims) for d in dim]


def _transform_flops(per: float, points: int, batch: int) -> int:
    return round(per * points * math.log2(points) * batch) if points > 1 else 0


NORM_OPS = ("aten::mul_", "aten::div_", "aten::mul", "aten::div")


def _norm_flops(call: OpCall, out_values: int) -> int:
    # the 1/n or 1/sqrt(n) scaling: inside the transform, or (CUDA) a multiply nested in the op,
    # which is costed on its own
    if any(c.name in NORM_OPS for c in call.children):
        return 0
    return out_values if call.scalar(2) in (1, 2) else 0


def _size(dtype: str | None) -> int | None:
    return dtypes.size_of_dtype(dtype) if dtype else None


@formula("aten::_fft_c2c", aux_children=True, uses_children=True)
def fft_c2c(call: OpCall) -> Cost | None:
    # _fft_c2c(self, dim, normalization, forward): complex in, complex out, same shape
    x = call.tensor(0)
    dims = _dims(call, x) if x is not None else None
    if dims is None:
        return None
    points = math.prod(x.dims[d] for d in dims)
    batch = x.numel // points if points else 0
    flops = _transform_flops(5, points, batch) + _norm_flops(call, 2 * x.numel)
    written = x.numel * x.itemsize
    return Cost(flops, x.nbytes_read + written, VECTOR, x.dtype, written=written)


@formula("aten::_fft_r2c", aux_children=True, uses_children=True)
def fft_r2c(call: OpCall) -> Cost | None:
    # _fft_r2c(self, dim, normalization, onesided): real in, complex out (the last dim halved when onesided)
    x = call.tensor(0)
    dims = _dims(call, x) if x is not None else None
    size = _size(_COMPLEX_OF.get(x.dtype)) if x is not None else None
    if dims is None or size is None:
        return None
    points = math.prod(x.dims[d] for d in dims)
    batch = x.numel // points if points else 0
    last = x.dims[dims[-1]]
    out = x.numel // last * (last // 2 + 1) if call.scalar(3) is not False else x.numel
    flops = _transform_flops(2.5, points, batch) + _norm_flops(call, 2 * out)
    written = out * size
    return Cost(flops, x.nbytes_read + written, VECTOR, x.dtype, written=written)


@formula("aten::_fft_c2r", aux_children=True, uses_children=True)
def fft_c2r(call: OpCall) -> Cost | None:
    # _fft_c2r(self, dim, normalization, last_dim_size): complex in (a onesided half), real out whose last
    # transformed dim has last_dim_size points
    x, last_size = call.tensor(0), call.scalar(3)
    dims = _dims(call, x) if x is not None else None
    size = _size(_REAL_OF.get(x.dtype)) if x is not None else None
    if dims is None or size is None or not isinstance(last_size, int) or isinstance(last_size, bool):
        return None
    last = x.dims[dims[-1]]
    out = x.numel // last * last_size if last else 0
    points = math.prod(x.dims[d] for d in dims[:-1]) * last_size
    batch = out // points if points else 0
    flops = _transform_flops(2.5, points, batch) + _norm_flops(call, out)
    written = out * size
    return Cost(flops, x.nbytes_read + written, VECTOR, _REAL_OF[x.dtype], written=written)

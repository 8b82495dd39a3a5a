"""Upsampling by nearest neighbour and (bi/tri)linear interpolation, forward and backward.

FLOPs per output element: nearest 0 (a copy of the chosen input element); linear 3 (one
lerp), bilinear 9 (three lerps), trilinear 21 (seven). The backward adds each gradient
into the inputs it was taken from: 1 (nearest), 2·2^d multiply-adds for d-linear. Bytes:
the input read once and the output written once; a backward reads grad_output and writes
grad_input at the input's size.

Overloads: `upsample_*(self, output_size, [align_corners,] scales...)` and the `.vec` forms
`(input, output_size?, [align_corners,] scale_factors?)`; a `.vec` call runs the other
form nested inside (then a dispatcher, as an op with its own name nested is).
"""

from __future__ import annotations

import math

from wlprof.cost.registry import VECTOR, Cost, OpCall, formula

# op base name -> (spatial dims, FLOPs per output element forward, per grad_output element backward)
_OPS = {
    "upsample_nearest1d": (1, 0, 1), "upsample_nearest2d": (2, 0, 1), "upsample_nearest3d": (3, 0, 1),
    "_upsample_nearest_exact1d": (1, 0, 1), "_upsample_nearest_exact2d": (2, 0, 1),
    "_upsample_nearest_exact3d": (3, 0, 1),
    "upsample_linear1d": (1, 3, 4), "upsample_bilinear2d": (2, 9, 8), "upsample_trilinear3d": (3, 21, 16),
}


def _out_spatial(call: OpCall, nsp: int) -> list[int] | None:
    x = call.tensor(0)
    size = call.scalar(1)
    if isinstance(size, list) and len(size) == nsp and all(isinstance(v, int) for v in size):
        return size
    # the .vec form without a size: scale_factors, the last list argument
    for i in range(len(call.types) - 1, 1, -1):
        v = call.scalar(i)
        if isinstance(v, list) and len(v) == nsp and all(isinstance(f, (int, float)) for f in v):
            return [math.floor(d * f) for d, f in zip(x.dims[-nsp:], v, strict=True)]
    return None


def _forward(per: int, nsp: int):
    def cost(call: OpCall) -> Cost | None:
        x = call.tensor(0)
        out_sp = _out_spatial(call, nsp)
        if out_sp is None:
            return None
        n = math.prod(x.dims[:-nsp]) * math.prod(out_sp)
        written = n * x.itemsize
        return Cost(per * n, x.nbytes_read + written, VECTOR, x.dtype, written=written)

    return cost


def _backward(per: int, nsp: int):
    def cost(call: OpCall) -> Cost | None:
        # (grad_output, output_size, input_size, ...): grad_input has input_size
        g = call.tensor(0)
        size = call.scalar(2)
        if not isinstance(size, list) or not all(isinstance(v, int) for v in size):
            return None
        written = math.prod(size) * g.itemsize
        return Cost(per * g.numel, g.nbytes_read + written, VECTOR, g.dtype, written=written)

    return cost


for _base, (_n, _fwd, _bwd) in _OPS.items():
    formula(f"aten::{_base}")(_forward(_fwd, _n))
    formula(f"aten::{_base}_backward")(_backward(_bwd, _n))

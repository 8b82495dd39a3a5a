"""Resampling: upsampling (nearest, (bi/tri)linear, bicubic), grid sampling, pixel shuffles and
im2col/col2im, forward and backward.

FLOPs per output element: nearest 0 (a copy of the chosen input element); linear 3 (one
lerp), bilinear 9 (three lerps), trilinear 21 (seven); bicubic 35 (five 4-tap cubic
interpolations, 4 multiplies and 3 adds each: four along a row, one down the column). The
weights' computation (per output coordinate, shared by every channel) is not counted. The
backward adds each gradient into the inputs it was taken from: 1 (nearest), 2·2^d
multiply-adds for d-linear, 2·16 for bicubic. Bytes: the input read once and the output
written once; a backward reads grad_output and writes grad_input at the input's size.

`grid_sampler_2d/3d` interpolates each output element at the grid's point as the upsampling of
its mode does (bilinear 9, trilinear 21, bicubic 35, nearest 0); its backward scatters each
gradient into the taps as above (grad_input: nearest 1, else 2·taps) and, for the grid's gradient, differentiates the
weighted sum along each coordinate: 2·d·taps per grad_output element (bilinear 16, trilinear
48, bicubic 64; nearest 0, its gradient is zero). Bytes: input and grid read, output written;
backward grad_output, input and grid read, the gradients its mask asks for written.

Pixel shuffles, im2col and flips move data (0 FLOPs: the input read once, the output written
once); col2im adds each column element into its output position (1 per input element).

Overloads: `upsample_*(self, output_size, [align_corners,] scales...)` and the `.vec` forms
`(input, output_size?, [align_corners,] scale_factors?)`; a `.vec` call runs the other
form nested inside (then a dispatcher, as an op with its own name nested is).
"""

from __future__ import annotations

import math

from wlprof.cost.registry import VECTOR, Cost, OpCall, formula, register_wrapper

# grid_sampler chooses grid_sampler_2d/3d (or cuDNN's); affine_grid_generator and its backward build or
# reduce the grid with linspace, copy_ and a bmm nested inside
register_wrapper("aten::grid_sampler", "aten::affine_grid_generator", "aten::affine_grid_generator_backward")

# op base name -> (spatial dims, FLOPs per output element forward, per grad_output element backward)
_OPS = {
    "upsample_nearest1d": (1, 0, 1), "upsample_nearest2d": (2, 0, 1), "upsample_nearest3d": (3, 0, 1),
    "_upsample_nearest_exact1d": (1, 0, 1), "_upsample_nearest_exact2d": (2, 0, 1),
    "_upsample_nearest_exact3d": (3, 0, 1),
    "upsample_linear1d": (1, 3, 4), "upsample_bilinear2d": (2, 9, 8), "upsample_trilinear3d": (3, 21, 16),
    "upsample_bicubic2d": (2, 35, 32),
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


# grid_sampler's interpolation_mode -> (FLOPs per output element, taps per output element)
_GRID_MODES = {0: (None, 2), 1: (0, 1), 2: (35, 4)}  # bilinear (by dims: 9 or 21), nearest, bicubic


def _grid_mode(call: OpCall, i: int, nsp: int) -> tuple[int, int] | None:
    mode = call.scalar(i)
    if mode not in _GRID_MODES or (mode == 2 and nsp != 2):
        return None
    per, taps_1d = _GRID_MODES[mode]
    return (per if per is not None else {2: 9, 3: 21}[nsp]), taps_1d ** nsp


def _grid_sampler(nsp: int):
    def cost(call: OpCall) -> Cost | None:
        # grid_sampler_2d(input [N, C, *in], grid [N, *out, nsp], interpolation_mode, padding_mode, align_corners)
        x, grid = call.tensor(0), call.tensor(1)
        mode = _grid_mode(call, 2, nsp)
        if x is None or grid is None or mode is None or len(x.dims) != nsp + 2 or len(grid.dims) != nsp + 2:
            return None
        n = x.dims[0] * x.dims[1] * math.prod(grid.dims[1:-1])
        written = n * x.itemsize
        return Cost(mode[0] * n, x.nbytes_read + grid.nbytes_read + written, VECTOR, x.dtype, written=written)

    return cost


def _grid_sampler_backward(nsp: int):
    def cost(call: OpCall) -> Cost | None:
        # (grad_output [N, C, *out], input, grid, interpolation_mode, padding_mode, align_corners, output_mask[2])
        g, x, grid = call.tensor(0), call.tensor(1), call.tensor(2)
        mode, mask = _grid_mode(call, 3, nsp), call.scalar(6)
        if g is None or x is None or grid is None or mode is None:
            return None
        if not (isinstance(mask, list) and len(mask) == 2):
            return None
        nearest, taps = call.scalar(3) == 1, mode[1]
        flops = ((1 if nearest else 2 * taps) * g.numel if mask[0] is True else 0)
        if mask[1] is True and not nearest:
            flops += 2 * nsp * taps * g.numel
        written = (x.numel * x.itemsize if mask[0] is True else 0) + (grid.numel * grid.itemsize if mask[1] is True
                                                                       else 0)
        reads = g.nbytes_read + x.nbytes_read + grid.nbytes_read
        return Cost(flops, reads + written, VECTOR, g.dtype, written=written)

    return cost


formula("aten::grid_sampler_2d", "aten::cudnn_grid_sampler")(_grid_sampler(2))
formula("aten::grid_sampler_3d")(_grid_sampler(3))
formula("aten::grid_sampler_2d_backward", "aten::cudnn_grid_sampler_backward")(_grid_sampler_backward(2))
formula("aten::grid_sampler_3d_backward")(_grid_sampler_backward(3))


def _moved(call: OpCall, out_numel: int) -> Cost:
    x = call.tensor(0)
    written = out_numel * x.itemsize
    return Cost(0, x.nbytes_read + written, VECTOR, x.dtype, written=written)


@formula("aten::pixel_shuffle", "aten::pixel_unshuffle", "aten::native_channel_shuffle", "aten::channel_shuffle",
         "aten::flip", "aten::roll")
def permuted_copy(call: OpCall) -> Cost | None:
    # pixel_shuffle(self, factor), flip(self, dims), roll(self, shifts, dims), ...: every element moved once.
    # Where one runs as a reshape and a copy_ nested inside (pixel_shuffle on CUDA), it is a dispatcher.
    x = call.tensor(0)
    return _moved(call, x.numel) if x is not None else None


def _ints(v, n: int) -> list[int] | None:
    if isinstance(v, int) and not isinstance(v, bool):
        return [v] * n
    if isinstance(v, list) and len(v) in (1, n) and all(isinstance(a, int) for a in v):
        return v * n if len(v) == 1 else v
    return None


@formula("aten::im2col")
def im2col(call: OpCall) -> Cost | None:
    # im2col(self [N, C, H, W] or [C, H, W], kernel_size, dilation, padding, stride) -> [N, C*kh*kw, L]
    x = call.tensor(0)
    k, d, p, st = (_ints(call.scalar(i), 2) for i in (1, 2, 3, 4))
    if x is None or None in (k, d, p, st) or len(x.dims) not in (3, 4):
        return None
    h, w = x.dims[-2:]
    blocks = [(size + 2 * pp - dd * (kk - 1) - 1) // ss + 1 for size, kk, dd, pp, ss in zip((h, w), k, d, p, st,
                                                                                            strict=True)]
    lead = x.numel // (h * w)  # N * C
    return _moved(call, lead * k[0] * k[1] * blocks[0] * blocks[1])


@formula("aten::col2im")
def col2im(call: OpCall) -> Cost | None:
    # col2im(self [N, C*kh*kw, L], output_size, kernel_size, dilation, padding, stride) -> [N, C, H, W]:
    # every column element added into its output position (the output zeroed first, inside the kernel)
    x, size, k = call.tensor(0), _ints(call.scalar(1), 2), _ints(call.scalar(2), 2)
    if x is None or size is None or k is None or len(x.dims) not in (2, 3):
        return None
    lead = x.dims[0] if len(x.dims) == 3 else 1
    channels = x.dims[-2] // (k[0] * k[1])
    written = lead * channels * size[0] * size[1] * x.itemsize
    return Cost(x.numel, x.nbytes_read + written, VECTOR, x.dtype, written=written)

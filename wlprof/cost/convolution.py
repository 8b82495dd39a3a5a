"""Convolution backward: the input, weight and bias gradients a call's `output_mask` asks for.

FLOPs are FlopCounterMode's (`conv_backward_flop`), counting only what is computed:
grad_input as the transposed convolution of grad_output with the weight (the forward's
FLOPs), grad_weight as the convolution of the input with grad_output:
2 * N * C_in * C_out * prod(grad_output spatial) * prod(kernel). FlopCounterMode reads
the input's full channel count there, so for a grouped convolution its weight gradient
is `groups` times the products actually done (C_in / groups per output channel); wlprof
counts as it does (a depthwise convolution's weight gradient is over-counted by C_in),
so that the two agree where both count. The bias gradient (a sum over N and the spatial
dims) is not counted, as the forward's bias add is not.

Bytes: grad_output read once; the weight read for grad_input, the input for grad_weight;
each gradient asked for written once (grad_bias: one element per output channel, grad_output's
channel dim, in grad_output's dtype).
"""

from __future__ import annotations

import math

from wlprof.cost.attribution import next_siblings
from wlprof.cost.registry import MATRIX, Cost, OpCall, TensorArg, formula


def _t(shape) -> list[int]:
    return [shape[1], shape[0], *shape[2:]]


def _conv_count(x, w, out, transposed: bool) -> int:
    """FlopCounterMode's conv_flop_count: prod(spatial) * prod(filter) * batch * c_out * c_in * 2."""
    batch = x[0]
    spatial = (x if transposed else out)[2:]
    c_out, c_in, *filt = w
    return math.prod(spatial) * math.prod(filt) * batch * c_out * c_in * 2


def backward_flops(go: TensorArg, x: TensorArg, w: TensorArg, transposed: bool, mask) -> int:
    g, xs, ws = list(go.dims), list(x.dims), list(w.dims)
    flops = 0
    if mask[0]:  # grad_input = conv_transpose(grad_output, weight); its shape is the input's
        flops += _conv_count(g, ws, xs, not transposed)
    if mask[1]:  # grad_weight; its shape is the weight's
        if transposed:
            flops += _conv_count(_t(g), _t(xs), _t(ws), False)
        else:
            flops += _conv_count(_t(xs), _t(g), _t(ws), False)
    return flops


def _mask(v, n: int = 3) -> list[bool] | None:
    if not isinstance(v, list) or len(v) != n:
        return None
    return [x is True for x in v] + [False] * (3 - n)


def _backward(go: TensorArg, x: TensorArg, w: TensorArg, transposed: bool, mask: list[bool],
              bias_channels: int) -> Cost:
    flops = backward_flops(go, x, w, transposed, mask)
    reads = go.nbytes_read + (w.nbytes_read if mask[0] else 0) + (x.nbytes_read if mask[1] else 0)
    written = (x.numel * x.itemsize if mask[0] else 0) + (w.numel * w.itemsize if mask[1] else 0)
    if mask[2]:
        written += bias_channels * go.itemsize
    return Cost(flops, reads + written, MATRIX, go.dtype, written=written)


# A backward that sums its bias gradient outside the backend (cuDNN) runs an aten::sum nested
# inside: auxiliary work, it stays costed. One that runs an implementation op nested inside
# (_slow_conv2d_backward on the CPU, per group where it loops over groups) is a dispatcher.
_AUX = ("aten::sum", "aten::sum_to_size", "aten::cat")


@formula("aten::convolution_backward", aux_children=_AUX, uses_children=True)
def convolution_backward(call: OpCall) -> Cost | None:
    # (grad_output, input, weight, bias_sizes?, stride, padding, dilation, transposed, output_padding,
    #  groups, output_mask)
    go, x, w = call.tensor(0), call.tensor(1), call.tensor(2)
    if call.scalar(10) is None and call.scalar(7) is None and len(call.concrete) == 0:
        return _unrecorded_backward(call, go, x, w)
    mask = _mask(call.scalar(10))
    if mask is None:
        return None
    bias = call.scalar(3)
    channels = bias[0] if isinstance(bias, list) and bias and isinstance(bias[0], int) else go.dims[1]
    return _backward(go, x, w, bool(call.scalar(7)), mask, channels)


# The ops a backward's gradients are allocated by, nested in it, each recording the gradient's dims
# (torch 1.13's CPU backward: aten::empty, then as_strided_ to the gradient's dims)
_ALLOCATORS = ("aten::as_strided_", "aten::resize_")


def _allocated_mask(call: OpCall, x: TensorArg, w: TensorArg, bias_dims: tuple) -> list[bool] | None:
    """The gradients a backward computes where its output_mask was not recorded, from the tensors it
    allocates nested inside: one of the input's dims (grad_input), of the weight's (grad_weight), of one
    element per output channel (grad_bias). None where it allocates none of them, or where two of the
    three have the same dims (an allocation would not say which)."""
    wanted = (tuple(x.dims), tuple(w.dims), bias_dims)
    if len(set(wanted)) < 3:
        return None
    made = {tuple(c.dims[0]) for c in call.children
            if c.name in _ALLOCATORS and c.dims and isinstance(c.dims[0], tuple)}
    mask = [d in made for d in wanted]
    return mask if any(mask) else None


def _unrecorded_backward(call: OpCall, go: TensorArg | None, x: TensorArg | None,
                         w: TensorArg | None) -> Cost | None:
    """A convolution backward whose scalars were not recorded (torch 1.13 and earlier write no `Concrete
    Inputs`): stride and padding are not needed (grad_output records the output's dims), `transposed` is
    read from the channels (a convolution's weight is [C_out, C_in/groups, *k], grad_output having C_out
    channels; a transposed one's [C_in, C_out/groups, *k]) where some stride and padding also give the
    spatial sizes, and output_mask from the gradients allocated inside (`_allocated_mask`). Where both
    readings of `transposed` fit and give different costs, or no gradient is seen allocated, None."""
    if go is None or x is None or w is None or not len(go.dims) == len(x.dims) == len(w.dims) >= 3:
        return None
    g, xs, ws = list(go.dims), list(x.dims), list(w.dims)
    if g[0] != xs[0] or not ws[1]:
        return None
    readings = []
    if g[1] == ws[0] and xs[1] % ws[1] == 0 and _geometry_fits(xs, ws, g):
        readings.append(False)
    if xs[1] == ws[0] and g[1] % ws[1] == 0 and _geometry_fits(g, ws, xs):
        readings.append(True)
    mask = _allocated_mask(call, x, w, (g[1],))
    if mask is None or not readings:
        return None
    costs = [_backward(go, x, w, transposed, mask, g[1]) for transposed in readings]
    return costs[0] if all(c == costs[0] for c in costs) else None


@formula("aten::convolution_backward_overrideable", aux_children=_AUX)
def convolution_backward_overrideable(call: OpCall) -> Cost | None:
    # (grad_output, input, weight, stride, padding, dilation, transposed, output_padding, groups, output_mask)
    mask = _mask(call.scalar(9))
    if mask is None:
        return None
    go = call.tensor(0)
    return _backward(go, call.tensor(1), call.tensor(2), bool(call.scalar(6)), mask, go.dims[1])


@formula("aten::_slow_conv2d_backward", aux_children=("aten::sum",), uses_children=True)
def slow_conv2d_backward(call: OpCall) -> Cost | None:
    # _slow_conv2d_backward.output_mask(grad_output, self, weight, kernel_size, stride, padding, output_mask).
    # The CPU kernel computes grad_input and grad_weight with its own GEMMs and the bias gradient with a
    # nested aten::sum (auxiliary: costed on its own, so its bytes are not counted here too).
    mask = _mask(call.scalar(6))
    if mask is None:
        return None
    go = call.tensor(0)
    if any(ch.name == "aten::sum" for ch in call.children):
        mask = [mask[0], mask[1], False]
    return _backward(go, call.tensor(1), call.tensor(2), False, mask, go.dims[1])


@formula("aten::mps_convolution_backward")
def mps_convolution_backward(call: OpCall) -> Cost | None:
    # (self, grad_output, weight, padding, stride, dilation, groups, output_mask)
    mask = _mask(call.scalar(7))
    if mask is None:
        return None
    go = call.tensor(1)
    return _backward(go, call.tensor(0), call.tensor(2), False, mask, go.dims[1])


@formula("aten::mps_convolution_transpose_backward")
def mps_convolution_transpose_backward(call: OpCall) -> Cost | None:
    # (self, grad_output, weight, padding, output_padding, stride, dilation, groups, output_mask[2])
    mask = _mask(call.scalar(8), n=2)
    if mask is None:
        return None
    go = call.tensor(1)
    return _backward(go, call.tensor(0), call.tensor(2), True, mask, go.dims[1])


# PyTorch 1.8-1.10's cuDNN and MIOpen backward: `*_convolution_backward` (self, grad_output, weight, ...,
# output_mask) runs one op per gradient, and those launch the kernels. Each records its size argument
# (the input's or the weight's, a list) as `[]`; the caller's record holds that tensor. The caller is
# taken only where its grad_output and the half's other tensor have the half's shapes.
_BACKWARD_CALLERS = ("aten::cudnn_convolution_backward", "aten::miopen_convolution_backward")


def _caller(call: OpCall, go: TensorArg, other: TensorArg, other_at: int) -> OpCall | None:
    p = call.parent
    if p is None or p.name not in _BACKWARD_CALLERS:
        return None
    pgo, pother = p.tensor(1), p.tensor(other_at)
    if pgo is None or pother is None or pgo.dims != go.dims or pother.dims != other.dims:
        return None
    return p


@formula("aten::cudnn_convolution_backward_input", "aten::miopen_convolution_backward_input", uses_parent=True)
def convolution_backward_input(call: OpCall) -> Cost | None:
    # (self_size, grad_output, weight, padding, stride, dilation, groups, benchmark, deterministic, ...)
    go, w = call.tensor(1), call.tensor(2)
    if go is None or w is None:
        return None
    p = _caller(call, go, w, 2)
    x = p.tensor(0) if p is not None else None
    return None if x is None else _backward(go, x, w, False, [True, False, False], 0)


@formula("aten::cudnn_convolution_backward_weight", "aten::miopen_convolution_backward_weight", uses_parent=True)
def convolution_backward_weight(call: OpCall) -> Cost | None:
    # (weight_size, grad_output, self, padding, stride, dilation, groups, benchmark, deterministic, ...)
    go, x = call.tensor(1), call.tensor(2)
    if go is None or x is None:
        return None
    p = _caller(call, go, x, 0)
    w = p.tensor(2) if p is not None else None
    return None if w is None else _backward(go, x, w, False, [False, True, False], 0)


# Backwards whose grad_output has their forward's output dims: name -> positions of (input, grad_output, weight)
_BACKWARD_AT = {
    "aten::cudnn_convolution_backward": (0, 1, 2),
    "aten::miopen_convolution_backward": (0, 1, 2),
    "aten::convolution_backward": (1, 0, 2),
}


def _dims(d) -> bool:
    return isinstance(d, list) and bool(d) and all(isinstance(v, int) for v in d)


def forward_outputs(calls) -> dict[tuple, tuple]:
    """(input dims, weight dims) -> output dims, from the grad_output of each convolution backward.

    `calls`: (name, recorded args) pairs. A pair of dims whose backwards record different grad_output
    dims, or a grad_output whose batch and channels are not the input's batch and the weight's output
    channels, is left out.
    """
    seen: dict[tuple, set] = {}
    for name, args in calls:
        at = _BACKWARD_AT.get(name)
        dims = args.get("Input Dims") if at is not None else None
        if not isinstance(dims, list) or len(dims) <= max(at):
            continue
        x, go, w = (dims[i] for i in at)
        if not (_dims(x) and _dims(go) and _dims(w)) or not len(go) == len(x) == len(w):
            continue
        if go[0] == x[0] and go[1] == w[0]:
            seen.setdefault((tuple(x), tuple(w)), set()).add(tuple(go))
    return {k: next(iter(v)) for k, v in seen.items() if len(v) == 1}


# The ops a forward convolution's implementation is nested in (PyTorch 1.8-1.12: conv2d ->
# convolution -> _convolution -> mkldnn_convolution / cudnn_convolution / thnn_conv2d ...)
_FORWARD_WRAPPERS = frozenset((
    "aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::convolution", "aten::_convolution",
    "aten::_convolution_mode", "aten::thnn_conv2d", "aten::slow_conv3d", "aten::_convolution_nogroup",
))


def _geometry_fits(x: list[int], w: list[int], out: list[int]) -> bool:
    """Whether some stride (1 to max(2, kernel)) and padding (0 to kernel - 1), at dilation 1,
    give each of `out`'s spatial sizes from `x`'s."""
    for i, k, o in zip(x[2:], w[2:], out[2:], strict=True):
        if not any((i + 2 * p - k) // s + 1 == o for s in range(1, max(2, k) + 1) for p in range(k)):
            return False
    return True


_LOOKAHEAD = 4  # ops read after a forward for the first whose first input has the input's rank

# The ops a forward pooling implementation is nested in (max_pool2d -> max_pool2d_with_indices)
_POOL_WRAPPERS = frozenset(f"aten::max_pool{n}d" for n in (1, 2, 3))


def _pool_fits(x: list[int], out: list[int]) -> bool:
    """Whether `out` can be a pooling of `x`: the same batch and channels, each spatial size 1 to the input's."""
    return out[:2] == x[:2] and all(1 <= o <= i for i, o in zip(x[2:], out[2:], strict=True))


def consumer_outputs(ops, args_table: list[dict], positions) -> dict[tuple, tuple]:
    """(input dims, weight dims) -> output dims, from the op that runs next after each forward
    (a pooling, whose second input is its unrecorded window: (input dims, ()) -> output dims).

    For an inference trace of PyTorch 1.8-1.12 (no `Concrete Inputs`, so no stride or padding,
    and no backward to give the output): each forward in `positions` (ops whose recorded args
    have no `Concrete Inputs`) is climbed to its outermost convolution wrapper, and the next op
    on its thread at that level (a batch norm, an activation, a pooling: the conv's consumer) is
    read: the first of the next few whose first input has the input's rank (a training forward's
    BatchNorm first adds to its 0-d counter) is taken, and its first input is the output only
    where it has the input's batch and the weight's output channels and some stride and padding give its spatial sizes; a pair of
    dims whose forwards are followed by different such dims is left out. A pooling's is taken where it
    has the input's batch and channels and no larger spatial sizes.
    """
    names = ops.name.to_numpy(dtype=object)
    parent = ops.parent.to_numpy()
    args_id = ops.args_id.to_numpy()
    nxt = next_siblings(ops)
    seen: dict[tuple, set] = {}
    for pos in positions:
        dims = args_table[args_id[pos]].get("Input Dims")
        if not isinstance(dims, list) or len(dims) < 2 or not _dims(dims[0]):
            continue
        x, w = dims[0], dims[1]
        pool = w == []
        if len(x) < 3 or not (pool or (_dims(w) and len(w) == len(x))):
            continue
        wrappers = _POOL_WRAPPERS if pool else _FORWARD_WRAPPERS
        top = pos
        while parent[top] >= 0 and names[parent[top]] in wrappers:
            top = parent[top]
        out, after = None, nxt[top]
        for _ in range(_LOOKAHEAD):  # past ops on tensors of another rank (BatchNorm's counter add_)
            if after < 0:
                break
            cdims = args_table[args_id[after]].get("Input Dims")
            first = cdims[0] if isinstance(cdims, list) and cdims else None
            if isinstance(first, list) and len(first) == len(x):
                out = first
                break
            after = nxt[after]
        if not _dims(out) or not (_pool_fits(x, out) if pool else
                                  out[0] == x[0] and out[1] == w[0] and _geometry_fits(x, w, out)):
            continue
        seen.setdefault((tuple(x), tuple(w)), set()).add(tuple(out))
    return {k: next(iter(v)) for k, v in seen.items() if len(v) == 1}

"""Pooling, forward and backward: max (with indices), average, adaptive average and adaptive max.

FLOPs follow the reductions' convention (a window of k elements costs k): max pooling
k comparisons per output element, average pooling k adds and a divide; an adaptive pool
touches every input element once (its windows tile the input) plus a divide per output
for the average. A backward scatters each grad_output element into its window: max
pooling adds it once where its index points (1 per grad_output element), average pooling
divides it and adds it into the k inputs of its window (k + 1), adaptive average divides
each input's share (1 per input element).

A forward recorded without its window (PyTorch 1.8-1.13 write no `Concrete Inputs`) has
no FLOPs; where the op run next gives its output dims, it has its bytes.

Bytes: the input read once and the output (and int64 indices) written once; a backward
reads grad_output (and the indices) and writes grad_input at the input's shape and
dtype, without reading the input (only its shape is used). The zero fill some backward
kernels start with is a nested fill_, costed on its own.
"""

from __future__ import annotations

import math

from wlprof.cost.registry import VECTOR, Cost, OpCall, TensorArg, formula, register_wrapper

# Composites: adaptive_avg_pool2d runs a mean for a 1x1 output and _adaptive_avg_pool2d otherwise;
# the 1-d pools run their 2-d forms on an unsqueezed input.
register_wrapper("aten::adaptive_avg_pool1d", "aten::adaptive_avg_pool2d", "aten::adaptive_avg_pool3d",
                 "aten::adaptive_max_pool1d", "aten::avg_pool1d")


def _ints(v, n: int, default: list[int] | None) -> list[int]:
    if v is None or v == []:
        if default is None:
            raise ValueError("missing pooling parameter")
        return list(default)
    if isinstance(v, (int, float)):
        return [int(v)] * n
    v = [int(x) for x in v]
    return v * n if len(v) == 1 else v


def out_size(size: int, k: int, s: int, p: int, d: int, ceil_mode: bool) -> int:
    """ATen's pooling_output_shape."""
    num = size + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)
    out = num // s + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


def _window(call: OpCall, nsp: int, k_at: int, s_at: int, p_at: int, d_at: int | None, ceil_at: int):
    x = call.tensor(0)
    k = _ints(call.scalar(k_at), nsp, None)
    s = _ints(call.scalar(s_at), nsp, k)
    p = _ints(call.scalar(p_at), nsp, [0] * nsp)
    d = _ints(call.scalar(d_at), nsp, [1] * nsp) if d_at is not None else [1] * nsp
    ceil_mode = call.scalar(ceil_at) is True
    spatial = x.dims[-nsp:]
    out_sp = [out_size(i, kk, ss, pp, dd, ceil_mode) for i, kk, ss, pp, dd in zip(spatial, k, s, p, d, strict=True)]
    lead = math.prod(x.dims[:-nsp])
    return x, lead * math.prod(out_sp), math.prod(k)


def _cost(flops: int, reads: int, written: int, like: TensorArg) -> Cost:
    return Cost(flops, reads + written, VECTOR, like.dtype, written=written)


def _unrecorded_window(call: OpCall, nsp: int, indices: bool) -> Cost | None:
    """A forward pool whose window was not recorded (PyTorch 1.8-1.13 without `Concrete Inputs`)
    but whose output dims are known (`OpCall.output_dims`, from the op run next): its bytes, not
    its FLOPs (which count the window's elements)."""
    x, out = call.tensor(0), call.output_dims
    if x is None or call.scalar(1) not in (None, []) or len(out) != len(x.dims) or len(out) < nsp + 1:
        return None
    n_out = math.prod(out)
    written = n_out * x.itemsize + (n_out * 8 if indices else 0)
    return Cost(None, x.nbytes_read + written, VECTOR, x.dtype, written=written)


def _max_pool(nsp: int, indices: bool):
    def cost(call: OpCall) -> Cost | None:
        # (self, kernel_size, stride, padding, dilation, ceil_mode)
        unrecorded = _unrecorded_window(call, nsp, indices)
        if unrecorded is not None:
            return unrecorded
        x, n_out, k = _window(call, nsp, 1, 2, 3, 4, 5)
        written = n_out * x.itemsize + (n_out * 8 if indices else 0)
        return _cost(k * n_out, x.nbytes_read, written, x)

    return cost


def _backward_to_input(call: OpCall, grad: TensorArg, x: TensorArg, flops: int, extra_reads: int = 0) -> Cost:
    written = x.numel * grad.itemsize
    return _cost(flops, grad.nbytes_read + extra_reads, written, grad)


def _max_pool_backward(call: OpCall) -> Cost | None:
    # (grad_output, self, kernel_size, stride, padding, dilation, ceil_mode, indices)
    g, x, idx = call.tensor(0), call.tensor(1), call.tensor(7)
    return _backward_to_input(call, g, x, g.numel, idx.nbytes_read if idx is not None else 0)


# uses_backward: a forward recorded without its window takes its output dims from the op run next
for _n, _name in ((1, "max_pool1d"), (2, "max_pool2d"), (3, "max_pool3d")):
    formula(f"aten::{_name}_with_indices", uses_backward=True)(_max_pool(_n, True))
    # without indices: the CPU's inference kernel (with indices nested, a dispatcher)
    formula(f"aten::{_name}", uses_backward=True)(_max_pool(_n, False))
formula("aten::mkldnn_max_pool2d", uses_backward=True)(_max_pool(2, False))
formula("aten::mkldnn_max_pool3d", uses_backward=True)(_max_pool(3, False))
formula("aten::max_pool2d_with_indices_backward", "aten::max_pool3d_with_indices_backward")(_max_pool_backward)


@formula("aten::max_pool2d_backward", "aten::mkldnn_max_pool2d_backward", "aten::mkldnn_max_pool3d_backward")
def max_pool_backward_no_indices(call: OpCall) -> Cost | None:
    # max_pool2d_backward(grad_output, self, ...); mkldnn_max_pool2d_backward(grad_output, output, input, ...):
    # without indices the maxima are found again, so the input (and the output) are read too
    g = call.tensor(0)
    x = call.tensor(2) if call.tensor(2) is not None else call.tensor(1)
    reads = sum(t.nbytes_read for t in call.tensors[1:])
    return _backward_to_input(call, g, x, g.numel, reads)


def _avg_pool(nsp: int):
    def cost(call: OpCall) -> Cost | None:
        # (self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
        unrecorded = _unrecorded_window(call, nsp, False)
        if unrecorded is not None:
            return unrecorded
        x, n_out, k = _window(call, nsp, 1, 2, 3, None, 4)
        return _cost((k + 1) * n_out, x.nbytes_read, n_out * x.itemsize, x)

    return cost


def _avg_pool_backward(nsp: int):
    def cost(call: OpCall) -> Cost | None:
        # (grad_output, self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
        g, x = call.tensor(0), call.tensor(1)
        k = math.prod(_ints(call.scalar(2), nsp, None))
        return _backward_to_input(call, g, x, (k + 1) * g.numel)

    return cost


formula("aten::avg_pool2d", uses_backward=True)(_avg_pool(2))
formula("aten::avg_pool3d", uses_backward=True)(_avg_pool(3))
formula("aten::avg_pool2d_backward")(_avg_pool_backward(2))
formula("aten::avg_pool3d_backward")(_avg_pool_backward(3))


@formula("aten::_adaptive_avg_pool2d", "aten::_adaptive_avg_pool3d", "aten::mkldnn_adaptive_avg_pool2d")
def adaptive_avg_pool(call: OpCall) -> Cost | None:
    # (self, output_size): every input element added once, a divide per output element
    x, size = call.tensor(0), call.scalar(1)
    if not isinstance(size, list) or not all(isinstance(v, int) for v in size):
        return None
    n_out = math.prod(x.dims[: len(x.dims) - len(size)]) * math.prod(size)
    return _cost(x.numel + n_out, x.nbytes_read, n_out * x.itemsize, x)


@formula("aten::_adaptive_avg_pool2d_backward", "aten::_adaptive_avg_pool3d_backward",
         "aten::mkldnn_adaptive_avg_pool2d_backward")
def adaptive_avg_pool_backward(call: OpCall) -> Cost | None:
    # (grad_output, self): each input element gets its window's grad_output divided by the area: 1 each
    g, x = call.tensor(0), call.tensor(1)
    return _backward_to_input(call, g, x, x.numel)


@formula("aten::adaptive_max_pool2d", "aten::adaptive_max_pool3d")
def adaptive_max_pool(call: OpCall) -> Cost | None:
    # (self, output_size) -> (out, indices int64): one comparison per input element
    x, size = call.tensor(0), call.scalar(1)
    if not isinstance(size, list) or not all(isinstance(v, int) for v in size):
        return None
    n_out = math.prod(x.dims[: len(x.dims) - len(size)]) * math.prod(size)
    return _cost(x.numel, x.nbytes_read, n_out * (x.itemsize + 8), x)


@formula("aten::adaptive_max_pool2d_backward", "aten::adaptive_max_pool3d_backward")
def adaptive_max_pool_backward(call: OpCall) -> Cost | None:
    # (grad_output, self, indices): one add per grad_output element
    g, x, idx = call.tensor(0), call.tensor(1), call.tensor(2)
    return _backward_to_input(call, g, x, g.numel, idx.nbytes_read)


@formula("aten::max_unpool2d", "aten::max_unpool3d")
def max_unpool(call: OpCall) -> Cost | None:
    # max_unpool2d(self, indices, output_size) / max_unpool3d(self, indices, output_size, stride, padding):
    # each input element written where its index points (0 FLOPs); the zero-filled rest of the output is
    # a nested zero_ (costed on its own, or a memset inside it on the CPU)
    x, idx = call.tensor(0), call.tensor(1)
    if x is None or idx is None:
        return None
    written = x.numel * x.itemsize
    return _cost(0, x.nbytes_read + idx.nbytes_read, written, x)

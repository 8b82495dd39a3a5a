"""Elementwise ops `elementwise` lacks: the floating-point class predicates, tril/triu and dropout.

Conventions as in `elementwise` (docs/costs.md): a predicate compares once per element
and writes a bool; tril/triu compare each element's row and column and select it or a
zero (1 per element, a comparison with its select). Dropout in training draws a number,
compares it with p and scales the kept element (3 per element), writing the output and its
bool mask; its backward multiplies the gradient by the mask and the scale (2 per element).
Bytes: the inputs read once at their stored size, the outputs written once.
"""

from __future__ import annotations

from wlprof.cost.registry import VECTOR, Cost, OpCall, formula

_PREDICATES = ("isneginf", "isposinf", "isinf", "isfinite", "signbit", "isreal")


@formula(*(f"aten::{n}" for n in _PREDICATES))
def predicate(call: OpCall) -> Cost | None:
    x = call.tensor(0)
    return Cost(x.numel, x.nbytes_read + x.numel, VECTOR, x.dtype, written=x.numel)


@formula("aten::tril", "aten::triu", "aten::tril_", "aten::triu_")
def triangle(call: OpCall) -> Cost | None:
    # tril(self, diagonal): in place the kept half is rewritten too (the kernel writes every element)
    x = call.tensor(0)
    written = x.numel * x.itemsize
    return Cost(x.numel, x.nbytes_read + written, VECTOR, x.dtype, written=written)


@formula("aten::native_dropout")
def native_dropout(call: OpCall) -> Cost | None:
    # native_dropout(input, p, train): (output, mask); not training (or p = 0) it is a copy
    x = call.tensor(0)
    if x is None:
        return None
    train = call.scalar(2)
    written = x.numel * x.itemsize + (x.numel if train is not False else 0)
    return Cost(3 * x.numel if train is not False else 0, x.nbytes_read + written, VECTOR, x.dtype, written=written)


@formula("aten::native_dropout_backward")
def native_dropout_backward(call: OpCall) -> Cost | None:
    # native_dropout_backward(grad_output, mask, scale): grad * mask * scale
    g, m = call.tensor(0), call.tensor(1)
    if g is None or m is None:
        return None
    written = g.numel * g.itemsize
    return Cost(2 * g.numel, g.nbytes_read + m.nbytes_read + written, VECTOR, g.dtype, written=written)

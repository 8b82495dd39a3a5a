"""Elementwise ops `elementwise` lacks: the floating-point class predicates and tril/triu.

Conventions as in `elementwise` (docs/costs.md): a predicate compares once per element
and writes a bool; tril/triu compare each element's row and column and select it or a
zero (1 per element, a comparison with its select). Bytes: the input read once at its
stored size, the output written once.
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

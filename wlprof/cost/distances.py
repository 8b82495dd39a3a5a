"""Pairwise distances: `_cdist_forward`, `_cdist_backward`, `_pdist_forward`, `_pdist_backward`.

A p-norm distance between two rows of M coordinates costs, per coordinate, a subtract, an abs and
a power (p = 2: a square, no abs) and an add; once per pair, the root. FLOPs per pair: p = 2:
3·M + 1 (sub, square, add; sqrt); p = 1 and p = inf: 3·M (sub, abs, add or max; no root); p = 0:
3·M (sub, compare with 0, add); any other p: 4·M + 1. The backward of one pair's distance to one
row's coordinates: p = 2: 3 per coordinate (sub, a multiply by grad / dist, the add into the row's
gradient) and 1 per pair (grad / dist); p = 1: 4 per coordinate (sub, sign, multiply, add); other p:
5 per coordinate (sub, abs, pow, multiply, add) and 2 per pair (dist^(p-1), grad divided by it).
pdist's backward sends each pair's gradient to both of its rows: one add per coordinate more.
FlopCounterMode has no entry for these ops.

Bytes: the inputs read once (x1 [..., P, M], x2 [..., R, M]), the distances written once
([..., P, R]; pdist: N·(N-1)/2); the backward reads grad, the inputs and the forward's distances and
writes the gradient of x1 ([..., P, M]; autograd calls it again with x1 and x2 swapped for x2's).
`cdist` runs `_cdist_forward`, or, for p = 2 over more than 25 rows, `_euclidean_dist` (a matmul, a
sum of squares, a clamp and a sqrt nested inside): both are wrappers.
"""

from __future__ import annotations

import math

from wlprof.cost.registry import VECTOR, Cost, OpCall, formula, register_wrapper

register_wrapper("aten::cdist", "aten::_euclidean_dist", "aten::pdist")


def _per_pair(p: float, m: int) -> int:
    if p == 2:
        return 3 * m + 1
    if p in (0, 1) or math.isinf(p):
        return 3 * m
    return 4 * m + 1


def _per_pair_backward(p: float, m: int) -> int:
    if p == 2:
        return 3 * m + 1
    if p == 1:
        return 4 * m
    return 5 * m + 2


def _p(call: OpCall, i: int) -> float | None:
    p = call.scalar(i)
    if p == "inf":
        return math.inf
    if isinstance(p, bool) or not isinstance(p, (int, float)) or p < 0:
        return None
    return float(p)


@formula("aten::_cdist_forward")
def cdist_forward(call: OpCall) -> Cost | None:
    # _cdist_forward(x1 [..., P, M], x2 [..., R, M], p, compute_mode): [..., P, R]
    x1, x2, p = call.tensor(0), call.tensor(1), _p(call, 2)
    if x1 is None or x2 is None or p is None or len(x1.dims) < 2 or len(x2.dims) < 2:
        return None
    m = x1.dims[-1]
    batch = max(math.prod(x1.dims[:-2]), math.prod(x2.dims[:-2]))
    pairs = batch * x1.dims[-2] * x2.dims[-2]
    written = pairs * x1.itemsize
    return Cost(pairs * _per_pair(p, m), x1.nbytes_read + x2.nbytes_read + written, VECTOR, x1.dtype,
                written=written)


@formula("aten::_cdist_backward")
def cdist_backward(call: OpCall) -> Cost | None:
    # _cdist_backward(grad [..., P, R], x1 [..., P, M], x2 [..., R, M], p, cdist [..., P, R]): grad of x1
    g, x1, x2, p, d = call.tensor(0), call.tensor(1), call.tensor(2), _p(call, 3), call.tensor(4)
    if g is None or x1 is None or x2 is None or p is None or len(x1.dims) < 2 or len(x2.dims) < 2:
        return None
    m = x1.dims[-1]
    pairs = g.numel
    written = x1.numel * x1.itemsize
    reads = g.nbytes_read + x1.nbytes_read + x2.nbytes_read + (d.nbytes_read if d is not None else 0)
    return Cost(pairs * _per_pair_backward(p, m), reads + written, VECTOR, x1.dtype, written=written)


@formula("aten::_pdist_forward")
def pdist_forward(call: OpCall) -> Cost | None:
    # _pdist_forward(x [N, M], p): the N·(N-1)/2 distances of distinct rows
    x, p = call.tensor(0), _p(call, 1)
    if x is None or p is None or len(x.dims) != 2:
        return None
    n, m = x.dims
    pairs = n * (n - 1) // 2
    written = pairs * x.itemsize
    return Cost(pairs * _per_pair(p, m), x.nbytes_read + written, VECTOR, x.dtype, written=written)


@formula("aten::_pdist_backward")
def pdist_backward(call: OpCall) -> Cost | None:
    # _pdist_backward(grad [N·(N-1)/2], x [N, M], p, pdist [N·(N-1)/2]): grad of x
    g, x, p, d = call.tensor(0), call.tensor(1), _p(call, 2), call.tensor(3)
    if g is None or x is None or p is None or len(x.dims) != 2:
        return None
    m = x.dims[1]
    written = x.numel * x.itemsize
    reads = g.nbytes_read + x.nbytes_read + (d.nbytes_read if d is not None else 0)
    return Cost(g.numel * (_per_pair_backward(p, m) + m), reads + written, VECTOR, x.dtype, written=written)

"""The correction a profile teaches: a call's log time over its base time, from the nearest profiled calls.

For each group of comparable calls the profile holds points x (log2 coordinates) with a
residual r = ln(measured / base). A query's residual is a weighted local-linear fit over
its k nearest points (weights 1 / (d^2 + h^2)), kept inside the range of those points'
residuals: between profiled sizes it interpolates, beyond them it carries the nearest
correction and leaves the trend to the base model. A query on a profiled point (d = 0 to the
decimals a profile's file keeps) gets that point's own residual: the measured time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

K_NEAREST = 8
BANDWIDTH = 0.35  # h, in log2 units: neighbours closer than this count about the same
RIDGE = 0.01  # on the slopes, so that few or collinear neighbours give a weighted mean
# a profile's file keeps coordinates to DECIMALS decimals, so a profiled call asked again may lie up to half a unit
# of the last decimal from its point in each coordinate: within `exact_distance` of a point, a query is that point
DECIMALS = 5


def exact_distance(ncoords: int) -> float:
    """The farthest a query may lie from a profiled point (Euclidean, over `ncoords` coordinates) and be
    that point: each coordinate's rounding to `DECIMALS`, with a margin for the float's own rounding."""
    return 0.51 * 10.0 ** -DECIMALS * math.sqrt(max(ncoords, 1))


@dataclass
class Table:
    """The profiled points of one group: coordinates, residuals, weights (down-weighted noisy points)."""

    x: np.ndarray  # [n, d]
    r: np.ndarray  # [n]
    w: np.ndarray  # [n]
    _tree: object = field(default=None, repr=False)

    def __post_init__(self):
        self.x = np.asarray(self.x, dtype=float).reshape(len(self.r), -1)
        keep = np.flatnonzero(self.x.std(axis=0) > 0) if len(self.x) > 1 else np.arange(0)
        self.dims = keep  # the coordinates that vary within the group; the others tell nothing apart
        self.r = np.asarray(self.r, dtype=float)
        self.w = np.asarray(self.w, dtype=float)

    def pooled(self, lo: float, hi: float) -> float:
        """The weighted mean residual of the points whose first coordinate lies in [lo, hi] (NaN: none)."""
        at = (self.x[:, 0] >= lo) & (self.x[:, 0] <= hi)
        return float(np.average(self.r[at], weights=self.w[at])) if at.any() and self.w[at].sum() > 0 else np.nan

    def tree(self):
        if self._tree is None and len(self.dims):
            from scipy.spatial import cKDTree

            self._tree = cKDTree(self.x[:, self.dims])
        return self._tree

    def loo_error(self) -> float:
        """Mean |error| of each point's residual predicted from the others (leave one out)."""
        if len(self.r) < 3 or not len(self.dims):
            return 0.0
        others = [Table(np.delete(self.x, i, axis=0), np.delete(self.r, i), np.delete(self.w, i))
                  for i in range(len(self.r))] if len(self.r) <= 12 else None
        if others is not None:
            return float(np.mean([abs(t.query(self.x[i:i + 1])[0][0] - self.r[i]) for i, t in enumerate(others)]))
        return float(np.mean(np.abs(self.query(self.x, skip_self=True)[0] - self.r)))

    def query(self, q: np.ndarray, skip_self: bool = False, exact: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """(residual, distance to the nearest profiled point) for each query row of q [m, d];
        `skip_self`: q are this table's own points, each predicted from the others; `exact`: a query on a
        point takes that point's residual (off where the coordinates do not identify a call: a class's
        table, whose points at one base time are other ops)."""
        q = np.asarray(q, dtype=float).reshape(len(q), -1)
        n = len(self.r)
        if not len(self.dims):  # one point, or every point at the same coordinates
            val = float(np.average(self.r, weights=self.w))
            dist = np.abs(q - self.x[0]).max(axis=1) if len(q) else np.zeros(0)
            return np.full(len(q), val), dist
        qs = q[:, self.dims]
        k = min(K_NEAREST + int(skip_self), n)
        dist, idx = self.tree().query(qs, k=k)
        if k == 1:
            dist, idx = dist[:, None], idx[:, None]
        if skip_self:  # drop each point itself (the first of its neighbours at distance 0)
            mine = idx == np.arange(len(q))[:, None]
            keep = ~mine
            keep[keep.sum(axis=1) == k, -1] = False  # a duplicate took its place: drop the farthest
            dist = dist[keep].reshape(len(q), k - 1)
            idx = idx[keep].reshape(len(q), k - 1)
        const = np.setdiff1d(np.arange(self.x.shape[1]), self.dims)
        if len(const):  # a query away from the group in a coordinate its points share
            off = ((q[:, const] - self.x[0, const]) ** 2).sum(axis=1)
            dist = np.sqrt(dist ** 2 + off[:, None])
        xn = self.x[idx][:, :, self.dims]  # [m, k, d]
        rn = self.r[idx]
        w = self.w[idx] / (dist ** 2 + BANDWIDTH ** 2)
        d = len(self.dims)
        a = np.concatenate([np.ones((*xn.shape[:2], 1)), xn - qs[:, None, :]], axis=2)  # [m, k, d+1]
        aw = a * w[:, :, None]
        lhs = np.einsum("mki,mkj->mij", aw, a)
        reg = np.eye(d + 1) * RIDGE * w.sum(axis=1)[:, None, None]
        reg[:, 0, 0] = 1e-12
        rhs = np.einsum("mki,mk->mi", aw, rn)
        beta = np.linalg.solve(lhs + reg, rhs[:, :, None])[:, :, 0]
        pred = np.clip(beta[:, 0], rn.min(axis=1), rn.max(axis=1))
        tol = exact_distance(q.shape[1])
        on = (dist[:, 0] <= tol) & exact
        if on.any():
            same = (dist[on] <= tol)
            wn = self.w[idx[on]]
            pred[on] = np.where(same, rn[on] * wn, 0).sum(axis=1) / np.where(same, wn, 0).sum(axis=1)
        return pred, dist[:, 0]

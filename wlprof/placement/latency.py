"""Latency models for placement: a model's latency alone, and each member's in a co-located group.

A group is a tuple of model indices; `group(members)` returns each member's latency (µs,
from the common arrival of the group's requests to the member's last kernel's end), in
the order given. The makespan of a GPU is the largest of them.

- `SharedCapacity` (the L0 and L2 planners' assumption): the GPU is one pool of capacity that
  co-located models share fairly (processor sharing). With work w_i (FLOPs / peak for L0, the
  roofline time for L2), member i finishes after sum_j min(w_i, w_j): the makespan is the total
  work. This is what "assign capacity by FLOPs" means; it is assumed, never measured.
- `Colocated` (the profile planner): the alone latency A_i from the Level-3 profile, times the
  slowdown measured when i co-ran with each other member alone (a pair):
  l_i(G) = A_i * (1 + sum_{j in G, j != i} rho_ij), rho_ij = (l_i with j - l_i alone) / l_i alone.
  For fair sharing this is exact (rho_ij = min(a_i, a_j) / a_i); for kernels that overlap
  freely rho is 0. Pairs without a measurement take the fitted contention model
  rho_ij = kappa * u_j * min(A_i, A_j) / A_i (u_j: j's roofline time over its latency, the share
  of the device j keeps busy; kappa fitted on the measured pairs).
- `Measured` (the oracle): every group's latencies as measured co-running on the device.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np


class LatencyModel(Protocol):
    name: str

    def alone(self, i: int) -> float:
        """Model i's latency on a GPU of its own (µs)."""

    def group(self, members: tuple[int, ...]) -> tuple[float, ...]:
        """Each member's latency when `members` share one GPU, all arriving together (µs)."""


@dataclass
class SharedCapacity:
    """Processor sharing of one capacity: member i of G finishes after sum_{j in G} min(w_i, w_j)."""

    name: str
    work_us: Sequence[float]

    def alone(self, i: int) -> float:
        return float(self.work_us[i])

    def group(self, members: tuple[int, ...]) -> tuple[float, ...]:
        w = [float(self.work_us[i]) for i in members]
        return tuple(sum(min(a, b) for b in w) for a in w)


@dataclass
class Colocated:
    """Alone latencies with pairwise measured slowdowns, composed per group (see the module doc)."""

    name: str
    alone_us: Sequence[float]
    rho: np.ndarray  # [n, n]: measured slowdown of i next to j; NaN where the pair was not measured
    busy_share: Sequence[float]  # u_j: the share of the device j keeps busy alone (roofline / latency)
    kappa: float = 1.0  # the fitted contention model's coefficient (for pairs never measured)
    kappa_pairs: int = 0  # how many measured pairs the coefficient was fitted on

    def alone(self, i: int) -> float:
        return float(self.alone_us[i])

    def pair_rho(self, i: int, j: int) -> tuple[float, bool]:
        """(rho_ij, whether it was measured)."""
        r = self.rho[i, j]
        if not math.isnan(r):
            return float(r), True
        a_i, a_j = self.alone_us[i], self.alone_us[j]
        return self.kappa * float(self.busy_share[j]) * min(a_i, a_j) / a_i, False

    def group(self, members: tuple[int, ...]) -> tuple[float, ...]:
        out = []
        for i in members:
            extra = sum(self.pair_rho(i, j)[0] for j in members if j != i)
            out.append(float(self.alone_us[i]) * (1.0 + extra))
        return tuple(out)

    def unmeasured_pairs(self) -> int:
        n = len(self.alone_us)
        return int(sum(1 for i in range(n) for j in range(n) if i != j and math.isnan(self.rho[i, j])))


def fit_kappa(alone_us: Sequence[float], rho: np.ndarray, busy_share: Sequence[float]) -> tuple[float, int]:
    """Least-squares kappa (through the origin) of rho_ij ~ kappa * u_j * min(A_i, A_j) / A_i over the
    measured pairs; (1.0, 0) when none is measured (plain fair sharing of the busy share)."""
    xs, ys = [], []
    n = len(alone_us)
    for i in range(n):
        for j in range(n):
            if i != j and not math.isnan(rho[i, j]):
                xs.append(float(busy_share[j]) * min(alone_us[i], alone_us[j]) / alone_us[i])
                ys.append(float(rho[i, j]))
    x, y = np.asarray(xs), np.asarray(ys)
    if not len(x) or float((x * x).sum()) <= 0:
        return 1.0, 0
    return max(float((x * y).sum() / (x * x).sum()), 0.0), len(x)


@dataclass
class Measured:
    """Latencies measured on the device: group (a frozenset of indices) -> {member: latency us}."""

    name: str
    groups: Mapping[frozenset, Mapping[int, float]] = field(default_factory=dict)

    def alone(self, i: int) -> float:
        return float(self.groups[frozenset((i,))][i])

    def group(self, members: tuple[int, ...]) -> tuple[float, ...]:
        g = self.groups.get(frozenset(members))
        if g is None:
            raise KeyError(f"group {sorted(members)} was not measured")
        return tuple(float(g[i]) for i in members)


def slowdowns(alone: Mapping[int, float], pairs: Mapping[frozenset, Mapping[int, float]], n: int) -> np.ndarray:
    """rho[i, j] from measured latencies alone and in pairs (NaN where a pair is missing); a pair that ran
    faster than alone (noise) counts as no slowdown."""
    rho = np.full((n, n), np.nan)
    for g, lat in pairs.items():
        if len(g) != 2:
            continue
        i, j = sorted(g)
        for a, b in ((i, j), (j, i)):
            base = alone.get(a)
            if base and base > 0 and a in lat:
                rho[a, b] = max(0.0, (lat[a] - base) / base)
    return rho

"""The assignment search: models onto g identical GPUs, minimizing the slowest model's latency.

The objective of an assignment is, in order: the number of models predicted over their SLO,
the largest latency of any model (the makespan of the slowest GPU: all requests arrive
together), and the total GPU time (the sum of the GPUs' makespans); exact ties (the L0 and L2
models' fair sharing makes the total GPU time a constant) go to the assignment whose
next-slowest GPU is faster, and so on down the GPUs. GPUs are identical, so an assignment is
a partition of the models into at most g groups.

- `exhaustive`: every partition into at most min(g, n) groups, sum_{k<=g} S(n, k) of them
  (Stirling numbers of the second kind: 187 for 6 models on 4 GPUs, 2,795 for 8 on 4,
  43,947 for 10 on 4); each costs g lookups of a group's latencies, cached by group (at most
  2^n - 1 distinct groups are ever asked of the latency model). Used when the count is at
  most `EXHAUSTIVE_LIMIT`.
- `greedy + local search` beyond: models in decreasing alone latency, each put on the GPU
  that keeps the objective lowest (n * g group evaluations), then best-improvement local
  search over every move of one model to another GPU and every swap of two models on
  different GPUs (n * g + n^2 / 2 candidates a pass, each two group evaluations), until no
  candidate improves (ties in the objective broken by the GPUs' makespans in decreasing
  order, to leave plateaus); repeated from `RESTARTS - 1` shuffled greedy orders (seeded),
  the best kept. Not guaranteed optimal.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from wlprof.placement.latency import LatencyModel

EXHAUSTIVE_LIMIT = 200_000
RESTARTS = 8
MAX_PASSES = 500


@functools.cache
def stirling2(n: int, k: int) -> int:
    if n == k:
        return 1
    if k == 0 or k > n:
        return 0
    return k * stirling2(n - 1, k) + stirling2(n - 1, k - 1)


def partitions_count(n: int, g: int) -> int:
    """Assignments of n models to g identical GPUs (some may stay idle): sum_{k<=g} S(n, k)."""
    return sum(stirling2(n, k) for k in range(1, min(g, n) + 1))


@dataclass(frozen=True)
class GroupCost:
    latencies: tuple[float, ...]  # per member, in index order
    makespan: float
    misses: int


@dataclass
class Plan:
    groups: tuple[tuple[int, ...], ...]  # model indices per used GPU, slowest GPU first
    latency_us: dict[int, float]  # the latency model's prediction per model
    makespan_us: tuple[float, ...]  # per group
    misses: int
    max_us: float
    total_us: float
    gpus: int
    search: str
    candidates: int  # assignments (exhaustive) or candidate moves (heuristic) evaluated
    groups_evaluated: int  # distinct groups the latency model was asked for
    seconds: float
    notes: list[str] = field(default_factory=list)

    @property
    def idle_gpus(self) -> int:
        return self.gpus - len(self.groups)

    def key(self) -> tuple:
        return (self.misses, _r(self.max_us), _r(self.total_us))


def _r(x: float) -> float:
    return round(x, 6)


class Evaluator:
    """A latency model's group costs, cached by group bit mask."""

    def __init__(self, model: LatencyModel, slo_us: Sequence[float | None]):
        self.model = model
        self.slo = list(slo_us)
        self.n = len(self.slo)
        self.cache: dict[int, GroupCost] = {}

    def members(self, mask: int) -> tuple[int, ...]:
        return tuple(i for i in range(self.n) if mask >> i & 1)

    def cost(self, mask: int) -> GroupCost:
        c = self.cache.get(mask)
        if c is None:
            m = self.members(mask)
            lat = tuple(float(x) for x in self.model.group(m))
            misses = sum(1 for i, x in zip(m, lat, strict=True) if self.slo[i] is not None and x > self.slo[i])
            c = GroupCost(lat, max(lat), misses)
            self.cache[mask] = c
        return c

    def key(self, masks: Sequence[int]) -> tuple:
        costs = [self.cost(m) for m in masks if m]
        spans = sorted((_r(c.makespan) for c in costs), reverse=True)
        return (sum(c.misses for c in costs), spans[0] if spans else 0.0, _r(sum(spans)), tuple(spans))


def _plan(ev: Evaluator, masks: Sequence[int], gpus: int, search: str, candidates: int, t0: float) -> Plan:
    used = [m for m in masks if m]
    costs = {m: ev.cost(m) for m in used}
    used.sort(key=lambda m: (-costs[m].makespan, ev.members(m)))
    lat = {}
    for m in used:
        lat.update(zip(ev.members(m), costs[m].latencies, strict=True))
    spans = tuple(costs[m].makespan for m in used)
    return Plan(tuple(ev.members(m) for m in used), lat, spans, sum(costs[m].misses for m in used),
                max(spans), sum(spans), gpus, search, candidates, len(ev.cache), time.perf_counter() - t0)


def exhaustive(ev: Evaluator, gpus: int) -> Plan:
    """The best of every partition of the models into at most `gpus` groups."""
    t0 = time.perf_counter()
    n = ev.n
    limit = min(gpus, n)
    best: list = [None, None]
    count = 0
    blocks: list[int] = []

    def rec(i: int) -> None:
        nonlocal count
        if i == n:
            count += 1
            k = ev.key(blocks)
            if best[0] is None or k < best[0]:
                best[0], best[1] = k, list(blocks)
            return
        bit = 1 << i
        for b in range(len(blocks)):
            blocks[b] |= bit
            rec(i + 1)
            blocks[b] &= ~bit
        if len(blocks) < limit:
            blocks.append(bit)
            rec(i + 1)
            blocks.pop()

    rec(0)
    return _plan(ev, best[1], gpus, "exhaustive", count, t0)


def heuristic(ev: Evaluator, gpus: int, restarts: int = RESTARTS, seed: int = 0) -> Plan:
    """Greedy in decreasing alone latency, then move/swap local search, from `restarts` orders."""
    import numpy as np

    t0 = time.perf_counter()
    n = ev.n
    alone = [ev.cost(1 << i).makespan for i in range(n)]
    base = sorted(range(n), key=lambda i: (-alone[i], i))
    rng = np.random.default_rng(seed)
    best_key, best_masks, candidates = None, None, 0
    for r in range(max(1, restarts)):
        order = base if r == 0 else [int(x) for x in rng.permutation(n)]
        masks, c1 = _greedy(ev, order, gpus)
        masks, c2 = _local_search(ev, masks)
        candidates += c1 + c2
        k = ev.key(masks)
        if best_key is None or k < best_key:
            best_key, best_masks = k, masks
    return _plan(ev, best_masks, gpus, f"greedy + local search ({max(1, restarts)} starts)", candidates, t0)


def _greedy(ev: Evaluator, order: Sequence[int], gpus: int) -> tuple[list[int], int]:
    masks = [0] * gpus
    count = 0
    for i in order:
        bit = 1 << i
        best_k, best_b = None, 0
        tried_empty = False
        for b in range(gpus):
            if masks[b] == 0:
                if tried_empty:
                    continue
                tried_empty = True
            old = masks[b]
            masks[b] = old | bit
            k = ev.key(masks)
            masks[b] = old
            count += 1
            if best_k is None or k < best_k:
                best_k, best_b = k, b
        masks[best_b] |= bit
    return masks, count


def _local_search(ev: Evaluator, masks: list[int]) -> tuple[list[int], int]:
    masks = list(masks)
    n, g = ev.n, len(masks)
    count = 0
    for _ in range(MAX_PASSES):
        cur = ev.key(masks)
        best_k, best_change = cur, None
        where = [next(b for b in range(g) if masks[b] >> i & 1) for i in range(n)]
        first_empty = next((b for b in range(g) if masks[b] == 0), None)
        for i in range(n):
            a, bit = where[i], 1 << i
            for b in range(g):
                if b == a or (masks[b] == 0 and b != first_empty):
                    continue
                if masks[a] == bit and masks[b] == 0:
                    continue  # moving a lone model to an empty GPU changes nothing
                trial = list(masks)
                trial[a] &= ~bit
                trial[b] |= bit
                k = ev.key(trial)
                count += 1
                if k < best_k:
                    best_k, best_change = k, trial
        for i in range(n):
            for j in range(i + 1, n):
                a, b = where[i], where[j]
                if a == b:
                    continue
                bi, bj = 1 << i, 1 << j
                trial = list(masks)
                trial[a] = (trial[a] & ~bi) | bj
                trial[b] = (trial[b] & ~bj) | bi
                k = ev.key(trial)
                count += 1
                if k < best_k:
                    best_k, best_change = k, trial
        if best_change is None:
            break
        masks = best_change
    return masks, count


def search(model: LatencyModel, slo_us: Sequence[float | None], gpus: int, method: str = "auto") -> Plan:
    """The best assignment the planner's search finds: exhaustive when the partitions are few."""
    if gpus < 1:
        raise ValueError("gpus must be at least 1")
    ev = Evaluator(model, slo_us)
    count = partitions_count(ev.n, gpus)
    if method == "exhaustive" or (method == "auto" and count <= EXHAUSTIVE_LIMIT):
        plan = exhaustive(ev, gpus)
    else:
        plan = heuristic(ev, gpus)
        plan.notes.append(f"{count:,} assignments ({count:.3g}): beyond the exhaustive limit of "
                          f"{EXHAUSTIVE_LIMIT:,}")
    return plan


def describe_cost(n: int, gpus: int) -> str:
    """How the search for n models on `gpus` GPUs grows, in words."""
    count = partitions_count(n, gpus)
    if count <= EXHAUSTIVE_LIMIT:
        return f"exhaustive: {count:,} assignments (sum of S({n},k), k<={min(gpus, n)}), <= {2**n - 1:,} groups"
    per_pass = n * gpus + n * (n - 1) // 2
    return (f"greedy + local search: {n * gpus} greedy evaluations, {per_pass:,} candidates per pass, "
            f"{RESTARTS} starts (exhaustive would be {count:.3g} assignments)")


def is_exhaustive(n: int, gpus: int) -> bool:
    return partitions_count(n, gpus) <= EXHAUSTIVE_LIMIT



"""Placement search and latency models on synthetic profiles with a known best assignment."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from wlprof.placement.latency import Colocated, Measured, SharedCapacity, fit_kappa, slowdowns
from wlprof.placement.search import (
    EXHAUSTIVE_LIMIT,
    Evaluator,
    exhaustive,
    heuristic,
    partitions_count,
    search,
    stirling2,
)


def test_partition_counts():
    # Bell numbers when every model may have its own GPU; Stirling sums otherwise
    assert [partitions_count(n, n) for n in range(1, 9)] == [1, 2, 5, 15, 52, 203, 877, 4140]
    assert partitions_count(6, 4) == 187
    assert partitions_count(8, 4) == 2795
    assert partitions_count(3, 1) == 1
    assert partitions_count(3, 10) == 5  # more GPUs than models: some stay idle
    assert stirling2(20, 8) == 15170932662679
    assert partitions_count(20, 8) > EXHAUSTIVE_LIMIT


def test_exhaustive_visits_every_partition_once():
    seen = []

    class Spy:
        name = "spy"

        def alone(self, i):
            return 1.0

        def group(self, members):
            seen.append(members)
            return tuple(1.0 for _ in members)

    ev = Evaluator(Spy(), [None] * 5)
    plan = exhaustive(ev, 3)
    assert plan.candidates == partitions_count(5, 3)
    assert len(set(seen)) == len(seen)  # each group asked once (cached)
    assert len(set(seen)) <= 2 ** 5 - 1


def test_shared_capacity_is_fair_sharing():
    m = SharedCapacity("flops", [1.0, 2.0, 3.0])
    assert m.group((0, 1, 2)) == (3.0, 5.0, 6.0)  # sum_j min(w_i, w_j)
    assert max(m.group((0, 1, 2))) == 6.0  # the makespan is the total work
    assert m.group((1,)) == (2.0,)


def test_flops_balances_flops():
    # makespan scheduling: 8 + 7 | 6 + 5 + 4 ... best max 15 for two GPUs on 30 units
    m = SharedCapacity("flops", [8, 7, 6, 5, 4])
    plan = search(m, [None] * 5, 2)
    assert plan.search == "exhaustive"
    assert plan.max_us == 15
    assert sorted(sum(m.work_us[i] for i in g) for g in plan.groups) == [15, 15]


def _truth(n: int, alone, rho) -> Measured:
    """A synthetic device: every group's latencies by the pairwise composition (what the oracle would measure)."""
    model = Colocated("truth", alone, rho, [1.0] * n)
    groups = {}
    for k in range(1, n + 1):
        for g in itertools.combinations(range(n), k):
            groups[frozenset(g)] = dict(zip(g, model.group(g), strict=True))
    return Measured("oracle", groups)


def test_profile_planner_finds_the_known_best_where_flops_misleads():
    # Two memory-bound models of few FLOPs (0, 1) contend with each other fully; compute-bound
    # models of many FLOPs (2, 3) overlap with the memory-bound ones almost freely.
    alone = [3000.0, 3000.0, 1500.0, 1400.0]
    flops_us = [20.0, 20.0, 900.0, 800.0]
    rho = np.array([[0, 0.75, 0.05, 0.05],
                    [1.0, 0, 0.05, 0.05],
                    [0.1, 0.1, 0, 0.9],
                    [0.1, 0.1, 1.0, 0]], dtype=float)
    oracle = _truth(4, alone, rho)
    best = search(oracle, [None] * 4, 2)
    # the known best: each memory-bound model with a compute-bound one
    assert {frozenset(g) for g in best.groups} in ({frozenset({0, 2}), frozenset({1, 3})},
                                                   {frozenset({0, 3}), frozenset({1, 2})})
    flops = search(SharedCapacity("flops", flops_us), [None] * 4, 2)
    # FLOPs put the two "cheap" memory-bound models together
    assert any({0, 1} <= set(g) for g in flops.groups)
    flops_measured = max(max(oracle.group(g)) for g in flops.groups)
    assert flops_measured > 1.5 * best.max_us

    # the profile planner: alone latencies from the profile (within 3%), slowdowns from measured pairs
    pairs = {frozenset(g): dict(zip(g, oracle.group(g), strict=True)) for g in itertools.combinations(range(4), 2)}
    measured_rho = slowdowns({i: alone[i] for i in range(4)}, pairs, 4)
    np.testing.assert_allclose(np.nan_to_num(measured_rho), rho)
    profile = Colocated("profile", [a * f for a, f in zip(alone, [1.02, 0.98, 1.03, 0.97], strict=True)],
                        measured_rho, [1.0] * 4)
    plan = search(profile, [None] * 4, 2)
    assert {frozenset(g) for g in plan.groups} == {frozenset(g) for g in best.groups}
    assert abs(plan.max_us - best.max_us) / best.max_us < 0.05


def test_colocated_composition_is_exact_for_fair_sharing():
    a = [1.0, 2.0, 3.0]
    fair = SharedCapacity("fair", a)
    pairs = {frozenset(g): dict(zip(g, fair.group(g), strict=True)) for g in itertools.combinations(range(3), 2)}
    rho = slowdowns({i: a[i] for i in range(3)}, pairs, 3)
    comp = Colocated("c", a, rho, [1.0] * 3)
    assert comp.group((0, 1, 2)) == pytest.approx(fair.group((0, 1, 2)))


def test_unmeasured_pairs_use_the_fitted_contention_model():
    a = [100.0, 200.0, 400.0]
    busy = [1.0, 0.5, 0.25]
    kappa_true = 0.8
    rho = np.full((3, 3), np.nan)
    for i, j in itertools.permutations(range(3), 2):
        rho[i, j] = kappa_true * busy[j] * min(a[i], a[j]) / a[i]
    kappa, used = fit_kappa(a, rho, busy)
    assert kappa == pytest.approx(kappa_true) and used == 6
    rho[0, 2] = rho[2, 0] = np.nan
    m = Colocated("p", a, rho, busy, kappa, 4)
    r, measured = m.pair_rho(0, 2)
    assert not measured and r == pytest.approx(kappa_true * busy[2] * 1.0)
    assert m.unmeasured_pairs() == 2
    assert fit_kappa(a, np.full((3, 3), np.nan), busy) == (1.0, 0)


def test_slowdown_below_zero_counts_as_none():
    rho = slowdowns({0: 100.0, 1: 100.0}, {frozenset((0, 1)): {0: 95.0, 1: 130.0}}, 2)
    assert rho[0, 1] == 0.0 and rho[1, 0] == pytest.approx(0.3)


def test_slo_misses_come_first():
    # model 2 has a tight SLO: it must not share a GPU even though sharing lowers the max
    alone = [1000.0, 1000.0, 100.0]
    rho = np.array([[0, 1.0, 0.1], [1.0, 0, 0.1], [5.0, 5.0, 0]])
    oracle = _truth(3, alone, rho)
    free = search(oracle, [None, None, None], 2)
    tight = search(oracle, [None, None, 150.0], 2)
    assert tight.misses == 0
    assert any(g == (2,) for g in tight.groups)
    assert tight.max_us >= free.max_us


def test_more_gpus_than_models_and_one_gpu():
    m = SharedCapacity("flops", [5.0, 3.0])
    p = search(m, [None, None], 8)
    assert len(p.groups) == 2 and p.idle_gpus == 6 and p.max_us == 5.0
    p1 = search(m, [None, None], 1)
    assert p1.groups == ((0, 1),) and p1.max_us == 8.0
    with pytest.raises(ValueError):
        search(m, [None, None], 0)


def test_ties_spread_over_gpus():
    # fair sharing makes total GPU time constant: the next-slowest GPU breaks the tie
    m = SharedCapacity("flops", [10.0, 2.0, 2.0, 2.0])
    p = search(m, [None] * 4, 3)
    assert p.groups[0] == (0,)
    assert sorted(len(g) for g in p.groups) == [1, 1, 2]


@pytest.mark.parametrize("seed", range(6))
def test_heuristic_matches_exhaustive_on_small_mixes(seed):
    rng = np.random.default_rng(seed)
    n, g = 8, 3
    alone = rng.uniform(100, 2000, n)
    rho = rng.uniform(0, 1.2, (n, n))
    np.fill_diagonal(rho, 0)
    model = Colocated("p", alone, rho, [1.0] * n)
    ex = exhaustive(Evaluator(model, [None] * n), g)
    he = heuristic(Evaluator(model, [None] * n), g)
    assert he.max_us >= ex.max_us - 1e-9
    assert he.max_us <= 1.05 * ex.max_us  # a stated heuristic: within 5% here


def test_heuristic_scales_to_20_models_on_8_gpus():
    rng = np.random.default_rng(0)
    n = 20
    alone = rng.uniform(50, 5000, n)
    rho = rng.uniform(0, 1, (n, n))
    np.fill_diagonal(rho, 0)
    plan = search(Colocated("p", alone, rho, [1.0] * n), [None] * n, 8)
    assert plan.search.startswith("greedy + local search")
    assert len(plan.groups) <= 8 and sorted(i for grp in plan.groups for i in grp) == list(range(n))
    assert plan.max_us >= max(alone)  # never below the slowest model alone
    assert not math.isnan(plan.total_us)

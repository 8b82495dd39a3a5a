"""Routing generators: exactly the requested per-expert counts, distinct experts per token, seeded.

Counts are worked out by hand in the comments; the property test checks every
spec over random sizes: counts realized exactly, no token picks an expert twice,
gates positive and summing to 1 per token.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wlprof.errors import InputError, Key
from wlprof.workloads.moe import routing as rt

ARG = Key("routing")


def counts_of(text: str, tokens: int, experts: int, top_k: int, seed: int = 0) -> list[int]:
    spec = rt.parse_spec(text, ARG)
    rt.check_feasible(spec, tokens, experts, top_k, ARG)
    r = rt.generate(spec, tokens, experts, top_k, seed)
    assert r.expert_ids.shape == (tokens, top_k)
    return r.counts().tolist()


def distinct_per_token(ids: np.ndarray) -> bool:
    s = np.sort(ids, axis=1)
    return bool((s[:, 1:] != s[:, :-1]).all())


# ---------------------------------------------------------------- exact counts


def test_concentrated_default_is_two_experts_of_64_for_128_tokens_top1():
    # the example: 128 tokens, top-1, 64 experts -> 2 experts x 64 tokens
    assert counts_of("concentrated", 128, 64, 1) == [64, 64] + [0] * 62


def test_concentrated_n_hot_experts_with_top2():
    # 128 tokens x top-2 = 256 assignments over 4 hot experts: 64 each
    assert counts_of("concentrated:4", 128, 8, 2) == [64, 64, 64, 64, 0, 0, 0, 0]
    # top-3 without N: max(2, 3) = 3 hot experts, each takes every token (3 x 10 = 30 = 10 x 3)
    assert counts_of("concentrated", 10, 5, 3) == [10, 10, 10, 0, 0]


def test_balanced_gives_the_remainder_to_the_first_experts():
    # 100 = 8 * 12 + 4: the first 4 experts get 13, the others 12
    assert counts_of("balanced", 100, 8, 1) == [13] * 4 + [12] * 4


def test_dispersed_gives_every_expert_1_to_4_tokens():
    # 128 tokens, top-1, 64 experts: mean 2, every expert in 1..4
    c = np.array(counts_of("dispersed", 128, 64, 1))
    assert c.sum() == 128 and c.min() >= 1 and c.max() <= 4
    assert len(set(c.tolist())) > 1  # not balanced in disguise
    # an expert never gets more than there are tokens: 3 tokens, top-2, 2 experts -> 3 each
    assert counts_of("dispersed", 3, 2, 2) == [3, 3]


@pytest.mark.parametrize("tokens,experts,top_k", [(8192, 64, 1), (10, 64, 1), (128, 16, 2)])
def test_dispersed_is_defined_at_sizes_the_old_1_to_4_rule_refused(tokens, experts, top_k):
    # 8192 > 4 * 64; 10 < 64; 256 > 4 * 16: refused before, realized now (tests/unit/test_dispersed_routing.py)
    rt.check_feasible(rt.parse_spec("dispersed", ARG), tokens, experts, top_k, ARG)
    c = rt.expert_counts(rt.parse_spec("dispersed", ARG), tokens, experts, top_k)
    assert c.sum() == tokens * top_k and c.max() <= rt.dispersed_cap(tokens, experts, top_k)


def test_explicit_counts_are_exact():
    assert counts_of("explicit:2x64", 128, 64, 1) == [64, 64] + [0] * 62
    # 1 x 100 + 28 x 1 = 128 assignments
    assert counts_of("explicit:1x100+28x1", 128, 64, 1) == [100] + [1] * 28 + [0] * 35


@pytest.mark.parametrize("text,tokens,experts,top_k,why", [
    ("explicit:2x64", 64, 64, 1, "assigns 128"),  # 128 != 64
    ("explicit:3x10", 30, 2, 1, "names 3 experts"),
    ("explicit:1x20", 10, 4, 2, "more assignments than there are tokens"),  # an expert takes a token once
    ("concentrated:1", 16, 8, 2, "N >= top-k"),
    ("concentrated:9", 16, 8, 1, "N <= the expert count"),
])
def test_infeasible_specs_are_refused_naming_the_spec(text, tokens, experts, top_k, why):
    with pytest.raises(InputError) as exc:
        rt.check_feasible(rt.parse_spec(text, ARG), tokens, experts, top_k, ARG)
    assert exc.value.arg == ARG and why in exc.value.rule and exc.value.value == text


def test_zipf_zero_is_balanced_and_skew_grows_with_s():
    assert counts_of("zipf:0", 100, 8, 1) == counts_of("balanced", 100, 8, 1)
    shares = []
    for s in (0, 0.5, 1.2, 2):
        c = np.array(counts_of(f"zipf:{s}", 8192, 64, 2))
        assert c.sum() == 8192 * 2
        assert (np.diff(c) <= 0).all()  # rank order: expert 0 hottest
        shares.append(c.max() / c.sum())
    assert shares == sorted(shares) and len(set(shares)) == 4


def test_zipf_by_hand_and_capped_at_tokens():
    # s = 1, 3 experts, 11 assignments: weights 1, 1/2, 1/3 (sum 11/6), quotas 6, 3, 2 exactly
    assert counts_of("zipf:1", 11, 3, 1) == [6, 3, 2]
    # top-2 over 3 experts with a steep skew: expert 0 capped at all 10 tokens, the
    # next takes the rest (10), not a token picked twice
    assert counts_of("zipf:50", 10, 3, 2) == [10, 10, 0]


# ---------------------------------------------------------------- spec parsing


def test_parse_specs_continues_a_knob_and_keeps_labels():
    specs = rt.parse_specs("zipf:0,0.5,1.2,2,balanced,explicit:2x64,1x100+28x1", ARG)
    assert [s.label for s in specs] == ["zipf:0", "zipf:0.5", "zipf:1.2", "zipf:2", "balanced",
                                        "explicit:2x64", "explicit:1x100+28x1"]
    assert [s.s for s in specs[:4]] == [0.0, 0.5, 1.2, 2.0]


@pytest.mark.parametrize("text", ["uniform", "zipf:-1", "zipf:abc", "zipf:inf", "zipf:", "explicit:2y64",
                                  "explicit:0x5", "concentrated:0", "balanced:3", ""])
def test_bad_specs_name_the_argument_and_value(text):
    with pytest.raises(InputError) as exc:
        rt.parse_specs(text, ARG)
    assert exc.value.arg == ARG
    if text:
        assert exc.value.value == text


# ---------------------------------------------------------------- assignments, gates, seeds


def test_same_seed_same_routing_and_seed_changes_placement_not_counts():
    spec = rt.parse_spec("zipf:1.2", ARG)
    a, b = rt.generate(spec, 64, 8, 2, seed=0), rt.generate(spec, 64, 8, 2, seed=0)
    assert np.array_equal(a.expert_ids, b.expert_ids) and np.array_equal(a.gates, b.gates)
    c = rt.generate(spec, 64, 8, 2, seed=1)
    assert not np.array_equal(a.expert_ids, c.expert_ids)
    assert a.counts().tolist() == c.counts().tolist()


def test_gates_are_renormalized_and_top1_gates_are_one():
    r = rt.generate(rt.parse_spec("balanced", ARG), 32, 8, 3)
    assert (r.gates > 0).all() and np.allclose(r.gates.sum(axis=1), 1.0, atol=1e-6)
    assert (rt.generate(rt.parse_spec("balanced", ARG), 32, 8, 1).gates == 1.0).all()


def test_stats_by_hand():
    # counts [6, 2, 0, 0]: 2 active, max share 6/8 = 0.75, mean load 8/4 = 2 -> imbalance 3
    s = rt.stats(np.array([6, 2, 0, 0]))
    assert (s.active_experts, s.max_expert_share, s.imbalance) == (2, 0.75, 3.0)


def test_router_routing_is_the_renormalized_softmax_top_k():
    import torch

    g = torch.Generator().manual_seed(0)
    x, w = torch.randn(40, 16, generator=g), torch.randn(6, 16, generator=g)
    r = rt.route_by_router(x, w, 2)
    probs = torch.softmax(x @ w.T, dim=-1)
    top_v, top_i = probs.topk(2, dim=-1)
    assert np.array_equal(r.expert_ids, top_i.numpy())
    assert np.allclose(r.gates, (top_v / top_v.sum(-1, keepdim=True)).numpy(), atol=1e-6)
    assert r.counts().sum() == 80 and distinct_per_token(r.expert_ids)


SPECS = st.sampled_from(["concentrated", "balanced", "dispersed", "zipf:0", "zipf:0.7", "zipf:3", "concentrated:3"])


@settings(max_examples=150, deadline=None)
@given(spec=SPECS, tokens=st.integers(1, 300), experts=st.integers(1, 40), top_k=st.integers(1, 6),
       seed=st.integers(0, 3))
def test_every_feasible_spec_realizes_its_counts_exactly(spec, tokens, experts, top_k, seed):
    if top_k > experts:
        return
    s = rt.parse_spec(spec, ARG)
    try:
        rt.check_feasible(s, tokens, experts, top_k, ARG)
    except InputError:
        return
    counts = rt.expert_counts(s, tokens, experts, top_k, seed)
    assert counts.sum() == tokens * top_k and counts.max() <= tokens and counts.min() >= 0
    r = rt.generate(s, tokens, experts, top_k, seed)
    assert r.counts().tolist() == counts.tolist()
    assert distinct_per_token(r.expert_ids)
    assert np.allclose(r.gates.sum(axis=1), 1.0, atol=1e-5)
    if s.kind == "dispersed":
        assert counts.max() <= rt.dispersed_cap(tokens, experts, top_k)
        assert counts.min() >= 1 if tokens * top_k >= experts else counts.max() == 1

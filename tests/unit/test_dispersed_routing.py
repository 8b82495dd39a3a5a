"""`dispersed` at every token count: every expert active with uneven random counts, not `balanced`."""

from __future__ import annotations

import numpy as np
import pytest

from wlprof.workloads.moe import routing as rt

ARG = "--routing"
DISPERSED = rt.parse_spec("dispersed", ARG)


def counts(tokens, experts, top_k, seed=0):
    return rt.expert_counts(DISPERSED, tokens, experts, top_k, seed)


def old_rule(tokens, experts, top_k, seed):
    """The definition before every token count was allowed: 1 each, then 1-4 over random free slots."""
    cap = min(4, tokens)
    c = np.ones(experts, dtype=np.int64)
    rng = np.random.default_rng([seed, 1])
    slots = rng.choice(experts * (cap - 1), size=tokens * top_k - experts, replace=False)
    return c + np.bincount(slots // (cap - 1), minlength=experts)


@pytest.mark.parametrize("tokens", [64, 65, 100, 128, 255, 256, 1000, 4096, 8192, 32768])
@pytest.mark.parametrize("experts,top_k", [(64, 1), (64, 2), (8, 2), (32, 1)])
def test_every_expert_active_uneven_and_within_the_cap(tokens, experts, top_k):
    c = counts(tokens, experts, top_k)
    total = tokens * top_k
    assert c.sum() == total and c.min() >= 1
    cap = rt.dispersed_cap(tokens, experts, top_k)
    assert c.max() <= cap == min(tokens, max(4, -(-2 * total // experts)))
    if total >= 2 * experts:  # below, balanced itself is 1-2 each: room to differ, but not always taken
        balanced = rt.expert_counts(rt.parse_spec("balanced", ARG), tokens, experts, top_k)
        assert sorted(c.tolist()) != sorted(balanced.tolist())  # distinct from balanced
        assert len(set(c.tolist())) > 1
    r = rt.generate(DISPERSED, tokens, experts, top_k)
    assert r.counts().tolist() == c.tolist()
    assert all(len(set(row)) == top_k for row in r.expert_ids.tolist())  # no token picks an expert twice


@pytest.mark.parametrize("tokens,experts,top_k", [(128, 64, 1), (64, 32, 1), (16, 8, 1), (100, 64, 1)])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_where_the_mean_load_is_at_most_2_it_is_the_old_1_to_4_rule(tokens, experts, top_k, seed):
    # the committed H200 results (128 tokens, top-1, 64 experts) keep their exact counts
    assert counts(tokens, experts, top_k, seed).tolist() == old_rule(tokens, experts, top_k, seed).tolist()


def test_fewer_assignments_than_experts_spread_one_each():
    c = counts(10, 64, 1)
    assert c.sum() == 10 and c.max() == 1 and (c > 0).sum() == 10
    assert rt.dispersed_note(10, 64, 1).startswith("dispersed at 10 tokens")


def test_seeds_draw_other_counts_and_sizes_without_room_say_so():
    assert counts(4096, 64, 1, 0).tolist() != counts(4096, 64, 1, 1).tolist()
    assert rt.dispersed_note(4096, 64, 1) is None
    assert counts(64, 64, 1).tolist() == [1] * 64  # one assignment per expert: nothing can be uneven
    assert "same as balanced" in rt.dispersed_note(64, 64, 1)


def test_the_run_help_defines_dispersed():
    from typer.testing import CliRunner

    from wlprof.cli.main import app

    res = CliRunner().invoke(app, ["run", "moe", "--help"], terminal_width=200)
    text = " ".join(res.output.split())
    assert "dispersed: every expert active with uneven random counts" in text.replace("│ ", "")

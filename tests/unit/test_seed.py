"""The data seed of MoE and GNN points (`wlprof sweep --set SEED`: integration/test_seed_cli.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from wlprof.cli.options import spell_cli, spell_study
from wlprof.errors import InputError
from wlprof.workloads import get
from wlprof.workloads import gnn as gnn_mod
from wlprof.workloads.gnn import steps as gnn_steps
from wlprof.workloads.moe import tensors as moe_tensors

CPU = torch.device("cpu")
F32 = torch.float32


def _moe_point(seed, routing="dispersed"):
    wl = get("moe")
    params = {"tokens": "64", "experts": 32, "top_k": 1, "d_model": 16, "d_ff": 32, "routing": routing,
              "dispatch": "loop"}
    if seed is not None:
        params["seed"] = seed
    return wl.points(wl.parse(params, CPU, F32).spec)[0]


def test_moe_seed_defaults_to_zero_and_redraws_dispersed_counts():
    p0, p_none, p1 = _moe_point(0), _moe_point(None), _moe_point(1)
    assert p_none.params["seed"] == 0 and p1.params["seed"] == 1
    c0, c1 = moe_tensors.routing_for(p0.params).counts(), moe_tensors.routing_for(p1.params).counts()
    # dispersed: every expert gets 1 + its share of the 32 remaining assignments (64 tokens, 32 experts)
    assert c0.sum() == c1.sum() == 64 and c0.min() >= 1 and c1.min() >= 1
    assert not np.array_equal(c0, c1)
    np.testing.assert_array_equal(c0, moe_tensors.routing_for(p_none.params).counts())
    # a run recorded before the parameter existed has no seed: it used the default
    legacy = {k: v for k, v in p0.params.items() if k != "seed"}
    np.testing.assert_array_equal(moe_tensors.routing_for(legacy).counts(), c0)


def test_moe_seed_keeps_exact_counts_but_redraws_token_order_and_inputs():
    b0, b1 = moe_tensors.routing_for(_moe_point(0, "balanced").params), moe_tensors.routing_for(_moe_point(1, "balanced").params)
    np.testing.assert_array_equal(b0.counts(), b1.counts())  # 64 over 32 experts: 2 each, whatever the seed
    assert (b0.counts() == 2).all()
    assert not np.array_equal(b0.expert_ids, b1.expert_ids)
    t0 = moe_tensors.make_tensors(_moe_point(0, "balanced").params, CPU, F32)
    t1 = moe_tensors.make_tensors(_moe_point(1, "balanced").params, CPU, F32)
    assert t0.x.shape == t1.x.shape and not torch.equal(t0.x, t1.x)


def test_gnn_seed_redraws_the_graph_and_features():
    wl0, wl1 = gnn_mod.Gnn(), gnn_mod.Gnn()
    params = {"graph": "uniform", "scale": 8, "edge_factor": 4, "features": 8, "backend": "scatter"}
    p0 = wl0.points(wl0.parse(params, CPU, F32).spec)[0]
    p1 = wl1.points(wl1.parse({**params, "seed": 1}, CPU, F32).spec)[0]
    assert (p0.params["seed"], p1.params["seed"]) == (0, 1)
    e0, n0, _ = wl0._graph_for(p0.params, CPU)
    e1, n1, _ = wl1._graph_for(p1.params, CPU)
    assert n0 == n1 == 256
    assert e0.shape != e1.shape or not torch.equal(e0, e1)
    x0, x1 = gnn_steps.node_features(n0, 8, CPU, F32, 0), gnn_steps.node_features(n0, 8, CPU, F32, 1)
    assert not torch.equal(x0, x1)
    torch.testing.assert_close(x0, gnn_steps.node_features(n0, 8, CPU, F32))  # default seed 0


@pytest.mark.parametrize(("bad", "typed"), [(-1, "-1"), (1.5, "1.5"), ("x", "'x'"), (True, "true")])
def test_bad_seed_names_the_argument(bad, typed):
    # the value as a user types it: a string quoted, a bool as TOML writes it
    with pytest.raises(InputError) as exc:
        get("moe").parse({"seed": bad}, CPU, F32)
    assert exc.value.message(spell_cli) == f"--seed must be an integer >= 0 (got {typed})"
    with pytest.raises(InputError) as exc:
        gnn_mod.Gnn().parse({"seed": bad}, CPU, F32)
    assert exc.value.message(spell_study) == f"params.seed must be an integer >= 0 (got {typed})"

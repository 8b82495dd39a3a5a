"""`wlprof sweep --set` re-runs a study on another data draw (the seed), and refuses bad settings."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import torch

from wlprof.workloads import get
from wlprof.workloads.moe import tensors as moe_tensors


def _moe_point(seed):
    """The params of the study's one point, parsed as the workload does, with `seed`."""
    wl = get("moe")
    params = {"tokens": "64", "experts": 32, "top_k": 1, "d_model": 16, "d_ff": 32, "routing": "dispersed",
              "dispatch": "grouped", "seed": seed}
    return wl.points(wl.parse(params, torch.device("cpu"), torch.float32).spec)[0].params


def test_sweep_set_overrides_a_study_parameter(tmp_path, cli, cpu_ceilings):
    study = tmp_path / "s.toml"
    study.write_text('[study]\nworkload = "moe"\n[params]\ntokens = [64]\nexperts = 32\nd_model = 16\n'
                     'd_ff = 32\nrouting = "dispersed"\ndispatch = "grouped"\n'
                     '[capture]\nprofiled_steps = 1\nlatency_reps = 2\nwarmup = 1\nbatches = 1\n')
    out = tmp_path / "t"
    res = cli("sweep", study, "--traces", out, "-q", "--set", "seed=7")
    assert res.exit_code == 0, res.output
    k = pd.read_parquet(out)
    assert set(k.seed) == {7}
    expected = moe_tensors.routing_for(_moe_point(7)).counts().tolist()
    assert list(k.expert_counts.iloc[0]) == expected
    manifest = json.loads(next(out.glob("*/_manifest.json")).read_text())
    assert manifest["study"]["params"]["seed"] == 7


@pytest.mark.parametrize(("setting", "needle"), [
    ("seed", "--set must be KEY=VALUE"),
    ("=3", "--set must be KEY=VALUE"),
    # a value given with --set is named as given there, not as the study file's params.seed
    ("seed=-2", "error: --set seed must be an integer >= 0 (got -2)"),
    ("colour=red", "error: --set colour is not a parameter of the moe workload"),
])
def test_sweep_bad_set_is_refused_and_writes_nothing(tmp_path, cli, setting, needle):
    study = tmp_path / "s.toml"
    study.write_text('[study]\nworkload = "moe"\n[params]\ntokens = [64]\nd_model = 16\nd_ff = 32\n')
    out = tmp_path / "t"
    res = cli("sweep", study, "--traces", out, "--set", setting)
    assert res.exit_code == 2, res.output
    assert needle in res.output
    assert not out.exists()

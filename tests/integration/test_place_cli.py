"""`wlprof place` end to end on the CPU: co-location measured with threads, --validate, the outputs, refusals."""

from __future__ import annotations

import gzip
import json
import time
from pathlib import Path

import pandas as pd
import pytest
from conftest import HUNG_S
from typer.testing import CliRunner

from wlprof.cli.main import app

ROOT = Path(__file__).resolve().parents[2]

TINY = """
[mix]
name = "tiny"
[[model]]
name = "mlp-a"
workload = "mlp"
params = { batch = 64, d_model = 64, d_ff = 256 }
slo_us = 1e7
[[model]]
name = "gemm-b"
workload = "gemm"
params = { shapes = "32x64x64" }
[[model]]
name = "gnn-c"
workload = "gnn"
params = { graph = "rmat", scale = 7, features = 8, backend = "scatter" }
"""


def _mix(tmp_path: Path, text: str = TINY) -> Path:
    p = tmp_path / "mix.toml"
    p.write_text(text)
    return p


def _run(*args):
    r = CliRunner().invoke(app, ["place", *map(str, args)])
    return r.exit_code, r.output


def test_corun_threads_overlap_on_the_cpu():
    """Two co-run requests run at once: each step waits at a barrier for the other's, which requests run
    one after the other never reach (the barrier times out and the co-run raises). No upper bound on a
    time: on a loaded machine a 50 ms sleep has measured 580 ms."""
    import threading

    import torch

    from wlprof.placement.corun import CoRunner, Prepared
    from wlprof.workloads.base import Built

    class M:
        def __init__(self, name):
            self.name, self.layers = name, 1

    runner = CoRunner([M("a"), M("b")], torch.device("cpu"))
    runner.prepared = [Prepared(M(n), Built(step=lambda: time.sleep(0.05)), "eager") for n in "ab"]
    alone = runner.measure((0,), reps=2, warmup=0)
    assert len(alone.samples[0]) == 2 and min(alone.samples[0]) >= 50_000  # a request's latency covers its step
    both = threading.Barrier(2, timeout=HUNG_S)  # a guard against a hang: co-run, both arrive
    runner.prepared = [Prepared(M(n), Built(step=both.wait), "eager") for n in "ab"]
    pair = runner.measure((0, 1), reps=3, warmup=1)  # four waves, each passing the barrier once
    assert set(pair.samples) == {0, 1} and all(len(s) == 3 for s in pair.samples.values())
    serial = threading.Barrier(2, timeout=0.5)
    runner.prepared = [Prepared(M(n), Built(step=serial.wait), "eager") for n in "ab"]
    with pytest.raises(threading.BrokenBarrierError):  # the premise: a request alone never passes it
        runner.measure((0,), reps=1, warmup=0)


@pytest.mark.slow
def test_place_validate_on_the_cpu(tmp_path, cpu_ceilings):
    out = tmp_path / "out"
    code, text = _run(_mix(tmp_path), "--gpus", 2, "--validate", "--device", "cpu", "--reps", 2, "-q", "-o", out)
    assert code == 0, text
    assert "| flops | L0 | exhaustive |" in text and "| oracle | measured | exhaustive |" in text
    assert "profile planner skipped: no --profile given" in text
    plan = json.loads((out / "plan.json").read_text())
    assert [p["planner"] for p in plan["planners"]] == ["flops", "roofline", "oracle"]
    oracle = plan["planners"][-1]
    assert oracle["gap_to_oracle"] == 0.0 and oracle["groups_evaluated"] == 7
    for p in plan["planners"]:
        assert sorted(n for g in p["assignment"] for n in g) == ["gemm-b", "gnn-c", "mlp-a"]
        assert p["measured_max_us"] > 0
    v = pd.read_parquet(out / "validation.parquet")
    assert len(v) == 3 * 3 and v.measured_us.gt(0).all() and v.samples_us.map(len).eq(2).all()
    g = pd.read_parquet(out / "groups.parquet")
    assert set(g.stage) == {"oracle", "validation"}
    assert g[g.stage == "oracle"].measurement.nunique() == 7  # every group of three models
    costs = pd.read_parquet(out / "costs.parquet")
    assert set(costs.model) == {"mlp-a", "gemm-b", "gnn-c"} and costs.flops.notna().any()
    traces = sorted((out / "chrome").glob("*.json.gz"))
    assert traces and all(t.name.split("-gpu")[0] in ("flops", "roofline", "oracle") for t in traces)
    doc = json.loads(gzip.decompress(traces[0].read_bytes()))
    assert any(str(e.get("name", "")).startswith("place/") for e in doc["traceEvents"])
    assert doc["wlprof"]["placement"]["members"]
    assert (out / "plan.md").read_text().startswith("# Placement of mix tiny")


@pytest.mark.slow
def test_place_profile_planner_on_the_cpu(tmp_path, cpu_ceilings):
    """The profile planner end to end: an offline profile of two of the configurations, pairs calibrated."""
    prof = tmp_path / "profile"
    r = CliRunner().invoke(app, ["run", "mlp", "--batch", "64", "--d-model", "64", "--d-ff", "256", "-t", str(prof),
                                 "-q", "--reps", "3", "--steps", "2"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(app, ["run", "gemm", "--shapes", "32x64x64", "-t", str(prof), "-q", "--reps", "3",
                                 "--steps", "2"])
    assert r.exit_code == 0, r.output
    mix = _mix(tmp_path, TINY.replace('backend = "scatter"', 'backend = "csr"'))
    out = tmp_path / "out"
    code, text = _run(mix, "--gpus", 2, "--planner", "profile", "--profile", prof, "--device", "cpu",
                      "--reps", 2, "-q", "-o", out)
    assert code == 0, text
    plan = json.loads((out / "plan.json").read_text())
    (p,) = plan["planners"]
    assert p["alone"]["mlp-a"]["source"] == "same point" and p["alone"]["gemm-b"]["source"] == "same point"
    assert p["alone"]["gnn-c"]["source"] == "op calls"  # never profiled as a point: its op calls, one by one
    coloc = json.loads((out / "coloc.json").read_text())
    assert len(coloc["alone"]) == 3 and len(coloc["pairs"]) == 3
    # reused: nothing measured again
    out2 = tmp_path / "out2"
    code, text = _run(mix, "--gpus", 2, "--planner", "profile", "--profile", prof, "--coloc", out / "coloc.json",
                      "--device", "cpu", "-o", out2)
    assert code == 0 and "calibrate co-location" not in text


def test_refusals(tmp_path, cpu_ceilings):
    mix = _mix(tmp_path)
    code, text = _run(mix, "--gpus", 0, "--device", "cpu")
    assert code == 2 and "--gpus must be a positive integer" in text
    code, text = _run(tmp_path / "none.toml", "--gpus", 2)
    assert code == 2 and "MIX_FILE must be an existing mix file" in text
    code, text = _run(_mix(tmp_path, TINY.replace('workload = "gemm"', 'workload = "gem"')), "--gpus", 2,
                      "--device", "cpu")
    assert code == 2 and "model[1].workload must be one of" in text and "did you mean 'gemm'" in text
    code, text = _run(_mix(tmp_path, TINY), "--gpus", 2, "--planner", "profile", "--device", "cpu")
    assert code == 2 and "--profile is required by the profile planner" in text
    code, text = _run(_mix(tmp_path, TINY), "--gpus", 2, "--planner", "nope", "--device", "cpu")
    assert code == 2 and "--planner must be one of flops, roofline, profile, oracle" in text
    many = "".join(f'[[model]]\nname = "m{i}"\nworkload = "gemm"\nparams = {{ shapes = "8x8x{8 + i}" }}\n'
                   for i in range(9))
    code, text = _run(_mix(tmp_path, many), "--gpus", 2, "--planner", "oracle", "--device", "cpu")
    assert code == 2 and "oracle measures every group" in text


@pytest.mark.slow
def test_impossible_slo_and_idle_gpus(tmp_path, cpu_ceilings):
    code, text = _run(_mix(tmp_path, TINY.replace("slo_us = 1e7", "slo_us = 1e-3")), "--gpus", 2, "--device",
                      "cpu", "-q", "-o", tmp_path / "o1")
    assert code == 2 and "model[0].slo_us must be at least mlp-a's roofline time alone" in text
    code, text = _run(_mix(tmp_path), "--gpus", 5, "--device", "cpu", "-q", "-o", tmp_path / "o2")
    assert code == 0, text
    assert "5 GPUs for 3 models: at least 2 stay idle" in text
    plan = json.loads((tmp_path / "o2" / "plan.json").read_text())
    assert all(len(p["assignment"]) + p["idle_gpus"] == 5 for p in plan["planners"])


def test_a_missing_profile_is_said_to_be_not_given_not_none(tmp_path):
    # `--planner all` names the profile planner, which needs --profile; the value is absent, not Python's None
    out = tmp_path / "out"
    code, text = _run(_mix(tmp_path), "--gpus", 2, "--planner", "all", "--device", "cpu", "-q", "-o", out)
    assert code == 2, text
    assert text.strip().splitlines() == [
        "error: --profile is required by the profile planner: an offline profile folder (`wlprof sweep STUDY "
        "--traces DIR` on the device, or `wlprof profile`) (not given)"], text
    assert not out.exists()

"""`wlprof profile` and `wlprof predict --profile` end to end on the CPU: --test, --spec, --trace --scale."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
from typer.testing import CliRunner

from wlprof.cli.main import app

pytestmark = pytest.mark.slow
FAST = ["--steps", "2", "--warmup", "1", "--reps", "3", "-q", "--device", "cpu"]


class _StudyClock:
    """The profile's clock, advanced by the grid's studies only, `step` seconds each (the machine's own time
    is not counted): a budget then leaves out the same studies on any machine, however slow or busy."""

    def __init__(self, step: float):
        import time

        self.real, self.step, self.offset = time, step, 0.0

    def monotonic(self) -> float:
        return self.offset

    def __getattr__(self, name):  # every other function of the time module, as it is
        return getattr(self.real, name)


def _slow_grid(mp, step: float) -> _StudyClock:
    """Make every study of `wlprof profile` take `step` seconds on its budget's clock (mp: a MonkeyPatch)."""
    import wlprof.study
    from wlprof.predict import profile as profile_mod

    clock = _StudyClock(step)
    real_run = wlprof.study.run_study

    def run_study(*args, **kwargs):
        res = real_run(*args, **kwargs)
        clock.offset += clock.step
        return res

    mp.setattr(profile_mod, "time", clock)
    mp.setattr(wlprof.study, "run_study", run_study)
    return clock


@pytest.fixture(scope="module")
def profiled(tmp_path_factory, cpu_ceilings):
    root = tmp_path_factory.mktemp("predict")
    runner = CliRunner()
    with pytest.MonkeyPatch.context() as mp:
        # gemm nn pass 1 (0 s spent), the first MoE study (20 s spent, 6 points estimated at 0.2 s each) and the
        # second (40 s spent, 20 s estimated from the first): 60 s; the next MoE study (20 s more) and gemm nn
        # pass 2 (9 points at 20 / 12 s: 15 s more) would pass the 72 s budget
        _slow_grid(mp, 20.0)
        res = runner.invoke(app, ["profile", "--device", "cpu", "-o", str(root / "profile"), "--section",
                                  "gemm nn", "--section", "moe", "--budget-minutes", "1.2", "-q"])
    assert res.exit_code == 0, res.output
    held = root / "held"
    for args in (["gemm", "--shapes", "24x96x200,3x128x128"],
                 ["moe", "--tokens", "24", "--experts", "6", "--top-k", "2", "--d-model", "32", "--d-ff", "64",
                  "--routing", "balanced", "--dispatch", "grouped,padded"]):
        r = runner.invoke(app, ["run", *args, *FAST, "--traces", str(held)])
        assert r.exit_code == 0, r.output
    study = root / "mlp.toml"  # a study file keeps torch.profiler's own trace, for --trace
    study.write_text('[study]\nworkload = "mlp"\ndevice = "cpu"\n[params]\nbatch = [8]\nd_model = 64\n'
                     'd_ff = 128\n[capture]\nprofiled_steps = 2\nwarmup = 1\nlatency_reps = 3\nbatches = 1\n'
                     'keep_raw_trace = true\n')
    r = runner.invoke(app, ["sweep", str(study), "--traces", str(held), "-q"])
    assert r.exit_code == 0, r.output
    return root, runner


def test_profile_writes_its_record_and_predictor(profiled):
    root, _ = profiled
    info = json.loads((root / "profile" / "profile.json").read_text())
    assert info["points"] > 10 and info["op_calls"] > 100
    assert [s["study"] for s in info["sections"]] == ["profile:gemm nn pass 1", "profile:moe T16 E4 k1",
                                                       "profile:moe T32 E8 k1"]
    assert [s["study"] for s in info["skipped"]] == ["profile:moe T64 E8 k2", "profile:moe T128 E4 k2",
                                                      "profile:gemm nn pass 2"]
    assert (root / "profile" / "predictor.json").is_file() and (root / "profile" / "ops.parquet").is_file()
    # the ceilings are taken before the grid (here from the cache), their time apart from the sections'
    assert info["calibration"]["origin"].startswith("cache: ") and info["calibration"]["seconds"] >= 0


def test_drop_leaves_studies_out_and_refits(profiled, tmp_path):
    import shutil

    import pandas as pd

    root, runner = profiled
    prof = tmp_path / "profile"
    shutil.copytree(root / "profile", prof)
    before = json.loads((prof / "profile.json").read_text())
    gone = [s for s in before["sections"] if s["section"] == "moe"]
    assert gone
    res = runner.invoke(app, ["profile", "-o", str(prof), "--drop", "profile:moe *", "--reason", "test"])
    assert res.exit_code == 0, res.output
    info = json.loads((prof / "profile.json").read_text())
    assert {s["section"] for s in info["sections"]} == {"gemm nn"}
    assert [s["study"] for s in info["skipped"] if s.get("dropped") == "test"] == [s["study"] for s in gone]
    want = before["grid_seconds"] - sum(s["seconds"] for s in gone)
    assert info["grid_seconds"] == pytest.approx(want, abs=0.11)
    ops = pd.read_parquet(prof / "ops.parquet")
    assert set(ops.run_id) == {s["run_id"] for s in info["sections"]}
    assert info["op_calls"] == len(ops)
    doc = json.loads((prof / "predictor.json").read_text())
    assert not any("moe" in g for g in doc["predictor"]["groups"])  # refitted without the MoE calls
    # a pattern that matches nothing is refused, naming it, and leaves the profile as it was
    res = runner.invoke(app, ["profile", "-o", str(prof), "--drop", "profile:nothing*"])
    assert res.exit_code != 0 and "--drop" in res.output and "profile:nothing*" in res.output
    assert json.loads((prof / "profile.json").read_text()) == info


def test_refit_fits_the_same_predictor_from_the_tables_and_records_when(profiled, tmp_path):
    import shutil

    root, runner = profiled
    prof = tmp_path / "profile"
    shutil.copytree(root / "profile", prof)
    before = json.loads((prof / "predictor.json").read_text())
    (prof / "predictor.json").write_text("{}")  # a predictor the refit must replace, not read
    res = runner.invoke(app, ["profile", "-o", str(prof), "--refit"])
    assert res.exit_code == 0, res.output
    after = json.loads((prof / "predictor.json").read_text())
    # fitted at first on the full runs, refitted (as after --drop) on the tables the profile keeps: the same
    # groups, and the same predictor every time
    assert set(after["predictor"]["groups"]) == set(before["predictor"]["groups"])
    assert after["predictor"]["constants"] == before["predictor"]["constants"]
    res = runner.invoke(app, ["profile", "-o", str(prof), "--refit"])
    assert res.exit_code == 0 and json.loads((prof / "predictor.json").read_text()) == after
    info = json.loads((prof / "profile.json").read_text())
    assert info["refitted"].endswith("Z") and info["fit_seconds"] >= 0
    assert f"from {info['op_calls']:,} op calls" in " ".join(res.output.split())
    res = runner.invoke(app, ["profile", "-o", str(tmp_path / "none"), "--refit"])
    assert res.exit_code == 2 and "must be a profile folder made by `wlprof profile`" in res.output


def test_ceilings_a_later_calibration_measured_are_added_and_the_profile_refitted(profiled, tmp_path):
    import shutil

    root, runner = profiled
    prof = tmp_path / "profile"
    shutil.copytree(root / "profile", prof)
    before = json.loads((prof / "profile.json").read_text())
    have = before["ceilings"]
    later = {**have, "matrix_tflops": {**have["matrix_tflops"], "float32": 1e-3, "int8": 0.25},
             "bandwidth_gbps": {**(have.get("bandwidth_gbps") or {}), "host_to_device": 12.5},
             "measured_at": "2026-12-07T00:00:00+00:00"}
    cal = tmp_path / "later.json"
    cal.write_text(json.dumps(later))
    res = runner.invoke(app, ["profile", "-o", str(prof), "--ceilings", str(cal)])
    assert res.exit_code == 0, res.output
    assert "matrix_tflops.int8" in res.output and "bandwidth_gbps.host_to_device" in res.output
    info = json.loads((prof / "profile.json").read_text())
    # what the profile lacked is added; what it held (its own float32 peak) is kept
    assert info["ceilings"]["matrix_tflops"]["int8"] == 0.25
    assert info["ceilings"]["matrix_tflops"]["float32"] == have["matrix_tflops"]["float32"]
    assert info["ceilings_supplemented"][-1]["added"] == ["matrix_tflops.int8", "bandwidth_gbps.host_to_device"]
    doc = json.loads((prof / "predictor.json").read_text())
    assert doc["predictor"]["constants"]["matrix"]["int8"] == pytest.approx(0.25e6)
    # again: nothing left to add, nothing written
    res = runner.invoke(app, ["profile", "-o", str(prof), "--ceilings", str(cal)])
    assert res.exit_code == 0 and "nothing added" in res.output
    assert json.loads((prof / "profile.json").read_text()) == info
    # another device's calibration is refused, naming it, and the profile stays as it was
    cal.write_text(json.dumps({**later, "device_name": "Other GPU"}))
    res = runner.invoke(app, ["profile", "-o", str(prof), "--ceilings", str(cal)])
    assert res.exit_code == 2 and "--ceilings" in res.output and "Other GPU" in res.output
    res = runner.invoke(app, ["profile", "-o", str(prof), "--ceilings", str(cal), "--refit"])
    assert res.exit_code == 2 and "must be given alone" in " ".join(res.output.split())
    assert json.loads((prof / "profile.json").read_text()) == info


def test_predict_scores_held_out_runs(profiled, tmp_path):
    from wlprof.store.runs import list_runs

    root, runner = profiled
    runs = [m["run_id"] for m in list_runs(root / "held")]
    out = tmp_path / "scores.md"
    args = ["predict", "--profile", str(root / "profile"), "--traces", str(root / "held"), "-o", str(out)]
    for r in runs:
        args += ["--test", r]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    text = out.read_text()
    assert "L3 profile" in text and "L2 roofline" in text and "noise floor" in text
    assert "back-to-back" in text
    # shares as percentages, as `predict --train` prints them: every L3 row's within-10% cell ends in %
    l3 = [line.split("|") for line in text.splitlines() if line.startswith("| L3 profile |")]
    assert l3 and all(cells[4].strip().endswith("%") for cells in l3)


def test_predict_refuses_profile_runs_as_tests(profiled):
    root, runner = profiled
    info = json.loads((root / "profile" / "profile.json").read_text())
    res = runner.invoke(app, ["predict", "--profile", str(root / "profile"), "--traces", str(root / "profile" /
                                                                                              "traces"),
                              "--test", info["sections"][0]["run_id"]])
    assert res.exit_code == 2 and "must not be runs of the profile" in res.output


def test_predict_refuses_runs_of_another_device_and_says_how_to_profile_it(profiled):
    # the CPU runs of `held` scored against the shipped H200 profile
    from pathlib import Path

    from wlprof.store.runs import list_runs

    root, runner = profiled
    h200 = Path(__file__).resolve().parents[2] / "benchmarks" / "profiles" / "h200"
    run = next(iter(list_runs(root / "held")))["run_id"]
    res = runner.invoke(app, ["predict", "--profile", str(h200), "--traces", str(root / "held"), "--test", run],
                        env={"COLUMNS": "200"})
    text = " ".join(res.output.split())
    assert res.exit_code == 2
    assert "must come from the device the profile was measured on (NVIDIA H200)" in text
    assert "wlprof profile --device cuda -o profiles/DEVICE" in text


def test_predict_spec_and_scaled_trace(profiled, tmp_path):
    root, runner = profiled
    res = runner.invoke(app, ["predict", "--profile", str(root / "profile"), "--spec",
                              "moe tokens=40 experts=6 top_k=2 d_model=32 d_ff=64 routing=zipf:1.2 dispatch=grouped",
                              "--dtype", "float32", "-o", str(tmp_path / "spec.md")])
    assert res.exit_code == 0, res.output
    assert "aten::_grouped_mm" in (tmp_path / "spec.md").read_text()
    res = runner.invoke(app, ["predict", "--profile", str(root / "profile"), "--spec", "gemm shapes=8x8x8",
                              "--dtype", "float32"])
    assert res.exit_code == 0, res.output
    assert "balanced 8x8x8: 1 call, kernel time" in res.output  # it read '1 calls'
    raw = next((root / "held").glob("mlp-*/_chrome/*.raw.json.gz"))
    res = runner.invoke(app, ["predict", "--profile", str(root / "profile"), "--trace", str(raw), "--scale",
                              "batch=4", "-o", str(tmp_path / "trace.md")])
    assert res.exit_code == 0, res.output
    text = (tmp_path / "trace.md").read_text()
    assert "[32,64]" in text  # batch 8 -> 32 rows into the first Linear
    res = runner.invoke(app, ["predict", "--profile", str(root / "profile"), "--trace", str(raw), "--scale", "x"])
    assert res.exit_code == 2


def test_a_spec_or_scale_past_the_profiled_gpus_memory_is_refused_and_nothing_is_printed(tmp_path):
    # the shipped H200 profile records its GPU's memory (150,109,880,320 bytes: 139.8 GiB); an MLP of a billion
    # rows (d_model 4096 in bfloat16: 8 KiB a row for the input alone) and the batch-64 MLP trace scaled by 1e9
    # could never run there
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    h200 = repo / "benchmarks" / "profiles" / "h200"
    assert json.loads((h200 / "profile.json").read_text())["device"]["memory_bytes"] == 150_109_880_320
    res = subprocess.run([sys.executable, "-m", "wlprof.cli.main", "predict", "--profile", str(h200), "--spec",
                          "mlp batch=1000000000"], capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"})
    assert res.returncode == 2 and res.stdout == ""
    assert "--spec must be a configuration that fits in the profiled GPU's memory: point 'batch 1000000000'" in res.stderr
    assert "of NVIDIA H200's 139.8 GiB (got 'mlp batch=1000000000')" in res.stderr
    raw = repo / "tests" / "fixtures" / "h200" / "mlp-20261129-093337-6c80" / "_chrome" / "p001-batch-64.raw.json.gz"
    res = subprocess.run([sys.executable, "-m", "wlprof.cli.main", "predict", "--profile", str(h200), "--trace",
                          str(raw), "--scale", "batch=1e9"], capture_output=True, text=True,
                         env={**os.environ, "COLUMNS": "200"})
    assert res.returncode == 2 and res.stdout == ""  # not even the line that names the profile
    assert "--scale must leave each op within the profiled GPU's memory: with batch (64) x 1e+09" in res.stderr
    # an unknown dimension: refused with nothing printed either
    res = subprocess.run([sys.executable, "-m", "wlprof.cli.main", "predict", "--profile", str(h200), "--trace",
                          str(raw), "--scale", "12345=2"], capture_output=True, text=True)
    assert res.returncode == 2 and res.stdout == "" and "--scale must name a dimension the trace has" in res.stderr


@pytest.mark.slow
def test_extend_adds_what_the_budget_left_out(tmp_path, cpu_ceilings, monkeypatch):
    # a profile cut short by its budget, shipped without its run folders, then extended: its tables gain the
    # new studies' rows, the skipped list loses them, and the refitted predictor answers a spec
    import shutil

    import pandas as pd

    _slow_grid(monkeypatch, 20.0)
    runner = CliRunner()
    out = tmp_path / "p"
    # mlp: pass 1 (4 points) runs; after its 20 s pass 2 (3 points at >= 5 s each) would pass the 30 s budget
    res = runner.invoke(app, ["profile", "--device", "cpu", "-o", str(out), "--section", "mlp",
                              "--budget-minutes", "0.5", "-q"])
    assert res.exit_code == 0, res.output
    first = json.loads((out / "profile.json").read_text())
    ops_before = len(pd.read_parquet(out / "ops.parquet"))
    assert [s["pass"] for s in first["sections"]] == [1] and [s["pass"] for s in first["skipped"]] == [2]
    shutil.rmtree(out / "traces")  # as shipped: the tables and the predictor only
    res = runner.invoke(app, ["profile", "--device", "cpu", "-o", str(out), "--extend", "--budget-minutes", "0.5",
                              "--section", "mlp", "-q"])
    assert res.exit_code == 0, res.output
    info = json.loads((out / "profile.json").read_text())
    added = info["sections"][len(first["sections"]):]
    assert [a["study"] for a in added] == [s["study"] for s in first["skipped"]] and not info["skipped"]
    assert len(pd.read_parquet(out / "ops.parquet")) > ops_before and len(info["extended"]) == 1
    assert info["grid_seconds"] > first["grid_seconds"]
    res = runner.invoke(app, ["predict", "--profile", str(out), "--spec", "mlp batch=3 d_model=32 d_ff=64",
                              "--dtype", "float32"])
    assert res.exit_code == 0, res.output
    # a section the profile never ran (not left out by its budget: not asked for) is measured by --extend too;
    # its first study runs, the budget leaves out the rest
    res = runner.invoke(app, ["profile", "--device", "cpu", "-o", str(out), "--extend", "--budget-minutes", "0.3",
                              "--section", "moe", "-q"])
    assert res.exit_code == 0, res.output
    again = json.loads((out / "profile.json").read_text())
    assert {a["section"] for a in again["sections"][len(info["sections"]):]} == {"moe"}
    assert again["skipped"] and {s["section"] for s in again["skipped"]} == {"moe"}
    assert len(again["extended"]) == 2
    res = runner.invoke(app, ["profile", "--device", "cpu", "-o", str(tmp_path / "none"), "--extend"])
    assert res.exit_code == 2 and "--out must be a profile folder" in res.output


def test_the_shipped_profile_scores_an_ingested_trace(tmp_path, cpu_ceilings):
    # an H200 training step ingested on a machine without H200 ceilings: L0-L2 are placed against the
    # profile's own ceilings, so every call with known FLOPs and bytes is scored
    from pathlib import Path

    from wlprof.ingest import ingest

    fixtures = Path(__file__).resolve().parents[1] / "fixtures"
    profile = fixtures.parents[1] / "benchmarks" / "profiles" / "h200"
    run = ingest(fixtures / "h200_training" / "transformer_eager.pt.trace.json.gz", tmp_path, jobs=1)
    res = CliRunner().invoke(app, ["predict", "--profile", str(profile), "--test", run.run_id,
                                   "--traces", str(tmp_path)], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    scored = int(res.output.split("scored ")[1].split(" op calls")[0].replace(",", ""))
    assert scored > 200  # of the step's 266 op calls with known FLOPs and bytes


def test_a_cpu_trace_is_predicted_as_the_gpu_would_launch_it(tmp_path):
    # the CPU fixture's MLP step (batch 4, 64 -> 256 -> 64, GELU) against the H200 profile: the calls
    # CUDA launches (two addmm and the gelu), no CPU wrappers, no CPU times set beside them
    from pathlib import Path

    fixtures = Path(__file__).resolve().parents[1] / "fixtures"
    profile = fixtures.parents[1] / "benchmarks" / "profiles" / "h200"
    raw = next((next((fixtures / "cpu").iterdir()) / "_chrome").glob("*.raw.json.gz"))
    res = CliRunner().invoke(app, ["predict", "--profile", str(profile), "--trace", str(raw), "--scale", "batch=2",
                                   "-o", str(tmp_path / "t.md")], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    flat = " ".join(res.output.split())
    assert "ran on the CPU: its op calls are predicted as NVIDIA H200 would launch them" in flat
    text = (tmp_path / "t.md").read_text()
    assert "measured" not in text and "[[256],[8,64],[64,256],[],[]]" in text  # batch 4 -> 8
    ops = [line.split("|")[1].strip() for line in text.splitlines() if line.startswith("| aten::")]
    assert sorted(ops) == ["aten::addmm", "aten::addmm", "aten::gelu"]


@pytest.mark.parametrize("minutes, rule", [("-1", "must be a positive number of minutes (got -1.0)"),
                                           ("0.0001", "must leave time for at least one section (got 0.0001)")])
def test_a_budget_that_measures_nothing_is_refused_and_leaves_no_folder(tmp_path, cli, minutes, rule):
    out = tmp_path / "new" / "prof"
    res = cli("profile", "-o", out, "--device", "cpu", "--budget-minutes", minutes, "-q")
    assert res.exit_code == 2 and f"--budget-minutes {rule}" in res.output
    assert not (tmp_path / "new").exists()


def test_a_trace_of_another_gpu_without_shapes_is_predicted_and_says_so(tmp_path):
    # HTA's A100 ResNet step (no record_shapes) against the H200 profile: both weaknesses named, the
    # step's measured kernel time beside the prediction
    from pathlib import Path

    fixtures = Path(__file__).resolve().parents[1] / "fixtures"
    profile = fixtures.parents[1] / "benchmarks" / "profiles" / "h200"
    res = CliRunner().invoke(app, ["predict", "--profile", str(profile), "--trace",
                                   str(fixtures / "public" / "hta_2024_nccl.json.gz")], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    flat = " ".join(res.output.split())
    assert "was recorded on NVIDIA A100-PG509-200, the profile on NVIDIA H200" in flat
    # measured: the kernels, copies and sets whose launch lies in ProfilerStep#4, the backward thread's
    # included (summed from the raw JSON: 1,258 events, 51,381.0 µs)
    assert "recorded no shapes" in flat and "(measured 51,381.0 µs)" in flat
    # an H200 trace with shapes: neither note
    res = CliRunner().invoke(app, ["predict", "--profile", str(profile), "--trace",
                                   str(fixtures / "h200_zoo3" / "bert.pt.trace.json.gz")], env={"COLUMNS": "200"})
    flat = " ".join(res.output.split())
    assert res.exit_code == 0 and "was recorded on" not in flat and "recorded no shapes" not in flat


def test_a_trace_whose_tensor_lists_were_not_recorded_says_so(tmp_path):
    # TraceLens' trimmed MI300 trace: one _foreach_add_ with its lists recorded as [] and no backward to
    # recover them from; vit's optimizer lists, also [], are recovered from its gradients: no note
    from pathlib import Path

    fixtures = Path(__file__).resolve().parents[1] / "fixtures"
    profile = fixtures.parents[1] / "benchmarks" / "profiles" / "h200"
    res = CliRunner().invoke(app, ["predict", "--profile", str(profile), "--trace",
                                   str(fixtures / "public" / "tracelens_mi300_foreach_unexpanded.json.gz")],
                             env={"COLUMNS": "200"})
    flat = " ".join(res.output.split())
    assert res.exit_code == 0, res.output
    assert "1 calls of aten::_foreach_add_ have tensor lists recorded as []" in flat
    res = CliRunner().invoke(app, ["predict", "--profile", str(profile), "--trace",
                                   str(fixtures / "h200_training" / "vit.pt.trace.json.gz")], env={"COLUMNS": "200"})
    assert res.exit_code == 0 and "recorded as []" not in " ".join(res.output.split())


@pytest.mark.parametrize("scale,says", [
    ("bacth=2", "--scale must name the dimension as batch, rows, tokens or by its value (e.g. 4096=2) "
                "(got 'bacth=2'); did you mean 'batch'?"),
    ("seq=2", "(got 'seq=2'); a trace names no other dimension: give a sequence, width or head count by its size"),
    ("1=2", "--scale must name a dimension of 2 or more by its value: dimensions of 0 and 1 (broadcasts, kept "
            "reductions, empty tensors) cannot be told from one another (got '1=2')"),
    ("0=3", "must name a dimension of 2 or more by its value"),
    ("12345=2", "--scale must name a dimension the trace has: no input dimension equals 12345 (got '12345')"),
])
def test_a_scale_naming_no_dimension_the_trace_can_scale_is_refused(scale, says, tmp_path):
    # the CPU fixture's MLP step (batch 4): a misspelt or unnamed dimension, the sizes 0 and 1 (every
    # broadcast and kept reduction has them) and a size the trace lacks: exit 2, a message naming --scale,
    # the rule and the value, and no --out file
    from pathlib import Path

    fixtures = Path(__file__).resolve().parents[1] / "fixtures"
    profile = fixtures.parents[1] / "benchmarks" / "profiles" / "h200"
    raw = next((next((fixtures / "cpu").iterdir()) / "_chrome").glob("*.raw.json.gz"))
    res = CliRunner().invoke(app, ["predict", "--profile", str(profile), "--trace", str(raw), "--scale", scale,
                                   "-o", str(tmp_path / "t.md")], env={"COLUMNS": "300"})
    assert res.exit_code == 2, res.output
    assert says in " ".join(res.output.split()), res.output
    assert not (tmp_path / "t.md").exists()


def test_a_sequence_first_lstms_batch_must_be_named_by_its_value(tmp_path):
    # nn.LSTM(32, 64) over x [S 50, N 8, 32] on the CPU (batch_first=False): the CPU's mkldnn_rnn_layer is left
    # out of the H200's calls, yet it tells that the leading 50 is the sequence; 'batch=2' is refused with the
    # value to name, and '8=2' doubles the batch
    from pathlib import Path

    from torch.profiler import ProfilerActivity, profile

    lstm, x = torch.nn.LSTM(32, 64), torch.randn(50, 8, 32)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        lstm(x)[0].sum().backward()
    trace = tmp_path / "lstm.json"
    prof.export_chrome_trace(str(trace))
    profile_dir = Path(__file__).resolve().parents[2] / "benchmarks" / "profiles" / "h200"
    args = ["predict", "--profile", str(profile_dir), "--trace", str(trace), "-o", str(tmp_path / "t.md"), "--scale"]
    res = CliRunner().invoke(app, [*args, "batch=2"], env={"COLUMNS": "300"})
    assert res.exit_code == 2, res.output
    flat = " ".join(res.output.split())
    assert ("--scale cannot take the batch from the leading dimension: aten::mkldnn_rnn_layer runs sequence-first"
            in flat and "its batch N = 8" in flat and "(that is 50)" in flat and "--scale 8=2 scales it" in flat)
    assert not (tmp_path / "t.md").exists()
    res = CliRunner().invoke(app, [*args, "8=2"], env={"COLUMNS": "300"})
    assert res.exit_code == 0, res.output
    text = (tmp_path / "t.md").read_text()
    # the LSTM's output gradient [50, 8, 64] summed and filled: its batch 8 became 16, its sequence stayed 50
    assert "with 8 (8) x 2" in text and "[[50,16,64]" in text and "[[50,8,64]" not in text

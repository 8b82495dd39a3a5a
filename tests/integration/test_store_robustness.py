"""The store loses nothing: a killed sweep keeps its finished points and resumes; concurrent runs
do not clobber each other; an out-of-memory point is recorded as failed and the sweep goes on."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest
import torch
from conftest import HUNG_S
from typer.testing import CliRunner

import wlprof
from wlprof.store.runs import list_runs

N_POINTS = 8  # a sweep stopped in its fourth point: five more points are still to run
SHAPES = ",".join(f"{8 * (i + 1)}x96x96" for i in range(N_POINTS))
N_CONCURRENT = 3  # points of each of the two runs that write into one folder at once
FAST = ["--steps", "2", "--warmup", "1", "--reps", "3", "-q"]


def _cmd(out, *extra, shapes=SHAPES):
    return [sys.executable, "-m", "wlprof.cli.main", "run", "gemm", "--shapes", shapes, "--device", "cpu",
            "--traces", str(out), *FAST, *extra]


def _manifest(out):
    runs = [p for p in out.iterdir() if p.is_dir() and not p.name.startswith(".")] if out.exists() else []
    if not runs:
        return None, None
    return runs[0], json.loads((runs[0] / "_manifest.json").read_text())


# `wlprof` that stops itself (SIGSTOP) as it is about to write the kernels file of point argv[1], the last of
# that point's files: the points before it are finished, and a signal the test sends then lands at that moment
# on any machine, however slow or busy (a test that polled the manifest raced the sweep)
STOPPING = r"""
import os, signal, sys
import wlprof.store.runs as R
from wlprof.cli.main import main

stem = f"p{int(sys.argv.pop(1)):03d}-"
real = R.atomic_write_parquet

def write(path, df, table):
    if table == "kernels" and path.name.startswith(stem):
        os.kill(os.getpid(), signal.SIGSTOP)
    return real(path, df, table)

R.atomic_write_parquet = write
sys.argv[0] = "wlprof"
main()
"""


def _stopped_in_point(out, point: int) -> subprocess.Popen:
    """The sweep of `_cmd(out)` started, and stopped as it is about to write point `point`'s kernels file."""
    env = dict(os.environ)  # WLPROF_CACHE_DIR: the session cache, where cpu_ceilings saved the CPU's
    proc = subprocess.Popen([sys.executable, "-c", STOPPING, str(point), *_cmd(out)[3:]], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status = os.waitpid(proc.pid, os.WUNTRACED)  # returns once it stopped (or, wrongly, ended)
    assert os.WIFSTOPPED(status), f"the sweep ended ({status}) before point {point}: {proc.stderr.read()[-2000:]}"
    return proc


@pytest.mark.slow
def test_sigkill_keeps_finished_points_and_resume_finishes_without_redoing_them(tmp_path, cpu_ceilings):
    out = tmp_path / "traces"
    env = dict(os.environ)  # WLPROF_CACHE_DIR: the session cache, where cpu_ceilings saved the CPU's
    proc = _stopped_in_point(out, 3)  # points 0-2 finished; point 3's other files written, its kernels not
    proc.send_signal(signal.SIGKILL)  # no handler can run: the store must already be consistent
    proc.wait()
    run, m = _manifest(out)
    assert m["status"] == "running"  # as the killed process left it ...
    (listed,) = list_runs(out)
    assert listed["status"] == "incomplete"  # ... but its writer is gone: incomplete
    finished = [p for p in m["points"] if p["status"] == "ok"]
    assert [p["index"] for p in finished] == [0, 1, 2]
    k = pd.read_parquet(out)  # every finished point is readable, and the one in flight is not there
    assert sorted(k.point.unique()) == [0, 1, 2]
    for table in ("ops", "steps"):  # point 3 wrote these before it stopped: no table shows them
        assert sorted(wlprof.load(out, table=table).point.unique()) == [0, 1, 2], table
    kept = {p["index"]: (run / p["files"]["kernels"]).stat().st_mtime_ns for p in finished}

    res = subprocess.run(_cmd(out, "--resume", run.name), env=env,
                         capture_output=True, text=True, timeout=HUNG_S)
    assert res.returncode == 0, res.stderr
    m2 = json.loads((run / "_manifest.json").read_text())
    assert m2["status"] == "complete" and all(p["status"] == "ok" for p in m2["points"])
    for idx, mtime in kept.items():  # finished points were not redone
        assert (run / m2["points"][idx]["files"]["kernels"]).stat().st_mtime_ns == mtime
    k = pd.read_parquet(out)
    assert sorted(k.point.unique()) == list(range(N_POINTS)) and k.run_id.nunique() == 1
    assert len(list(out.iterdir())) == 1  # no second run folder


def test_resume_refuses_a_different_study(tmp_path, cpu_ceilings, cli):
    out = tmp_path / "traces"
    r = cli("run", "gemm", "--shapes", "8x8x8", "--traces", out, *FAST)
    assert r.exit_code == 0
    run_id = next(out.iterdir()).name
    r = cli("run", "gemm", "--shapes", "16x8x8", "--traces", out, *FAST, "--resume", run_id)
    assert r.exit_code == 2 and "--resume must name a run of this same study" in r.output
    r = cli("run", "gemm", "--shapes", "8x8x8", "--traces", out, *FAST, "--resume", "../x")
    assert r.exit_code == 2 and "RUN_ID" in r.output


def test_resume_refuses_a_run_captured_otherwise_and_leaves_it_as_it_was(tmp_path, cpu_ceilings, cli):
    # two points, the second marked pending as a killed sweep leaves it: resumed with --steps 3 instead of
    # the run's 2, it would hold points of 2 and of 3 profiled steps under one manifest saying 2
    out = tmp_path / "traces"
    r = cli("run", "gemm", "--shapes", "8x8x8,16x8x8", "--traces", out, *FAST)
    assert r.exit_code == 0
    run = next(out.iterdir())
    m = json.loads((run / "_manifest.json").read_text())
    m["status"], m["points"][1]["status"] = "incomplete", "pending"
    (run / "_manifest.json").write_text(json.dumps(m))
    before = {p.name: p.stat().st_mtime_ns for p in run.rglob("*")}
    fast = [a for a in FAST if a not in ("--steps", "2")]
    r = cli("run", "gemm", "--shapes", "8x8x8,16x8x8", "--traces", out, "--steps", "3", *fast, "--resume", run.name)
    assert r.exit_code == 2, r.output
    assert (f"error: --resume must name a run captured as this command captures (its finished points would "
            f"differ from the rest): capture.profiled_steps 2 in the run, 3 here (got '{run.name}')") in \
        " ".join(r.output.split())
    assert {p.name: p.stat().st_mtime_ns for p in run.rglob("*")} == before
    r = cli("run", "gemm", "--shapes", "8x8x8,16x8x8", "--traces", out, *FAST, "--resume", run.name)
    assert r.exit_code == 0, r.output  # the same capture finishes it
    assert json.loads((run / "_manifest.json").read_text())["status"] == "complete"


def test_resume_of_a_run_that_is_not_there_writes_nothing(tmp_path, cli):
    # the traces folder was made before the run was looked for: an empty folder left behind
    out = tmp_path / "traces"
    r = cli("run", "gemm", "--shapes", "8x8x8", "--traces", out, *FAST, "--resume", "gemm-nope")
    assert r.exit_code == 2
    assert f"error: --resume must name a run in {out.resolve()}/ (see `wlprof ls`) (got 'gemm-nope')" in \
        " ".join(r.output.split())
    assert not out.exists()


@pytest.mark.slow
def test_two_runs_writing_into_one_folder_at_once(tmp_path, cpu_ceilings):
    out = tmp_path / "traces"
    env = dict(os.environ)  # WLPROF_CACHE_DIR: the session cache, where cpu_ceilings saved the CPU's
    shapes = ",".join(SHAPES.split(",")[:N_CONCURRENT])
    procs = [subprocess.Popen(_cmd(out, shapes=shapes), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
             for _ in range(2)]
    for p in procs:
        assert p.wait(timeout=HUNG_S) == 0, p.stderr.read()
    runs = list_runs(out)
    assert len(runs) == 2 and {r["status"] for r in runs} == {"complete"}
    k = pd.read_parquet(out)
    assert k.run_id.nunique() == 2 and k.groupby("run_id").point.nunique().tolist() == [N_CONCURRENT, N_CONCURRENT]


@pytest.mark.slow
def test_out_of_memory_at_one_point_is_recorded_and_the_sweep_goes_on(tmp_path, monkeypatch, cpu_ceilings):
    from wlprof.study import Study, run_study
    from wlprof.workloads.gemm import Gemm

    real_build = Gemm.build

    def build(self, point, device, dtype):
        if point.params["m"] == 16:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")
        return real_build(self, point, device, dtype)

    monkeypatch.setattr(Gemm, "build", build)
    from wlprof.capture import CaptureConfig

    res = run_study(Study("gemm", {"shapes": "8x8x8,16x8x8,24x8x8"}, device="cpu",
                          capture=CaptureConfig(warmup=1, latency_reps=2, batches=1, profiled_steps=1)), traces=tmp_path)
    assert res.status == "partial"
    m = json.loads((res.path / "_manifest.json").read_text())
    assert [p["status"] for p in m["points"]] == ["ok", "failed", "ok"]
    assert m["points"][1]["error"].startswith("OutOfMemoryError: CUDA out of memory")
    steps = wlprof.load(tmp_path, table="steps").set_index("point")
    assert steps.loc[1, "status"] == "failed" and "out of memory" in steps.loc[1, "error"]
    assert set(wlprof.load(tmp_path).point) == {0, 2}
    # compare names the failed point as failed, with its reason (it said the run had no such point)
    from wlprof.cli.main import app

    run = res.path.name
    out = CliRunner().invoke(app, ["compare", f"{run}:balanced 16x8x8", f"{run}:balanced 8x8x8", "--traces",
                                   str(tmp_path)], terminal_width=300)
    assert out.exit_code == 2
    assert (f"error: RUN_A must name a sweep point that finished; 'balanced 16x8x8' of {run} is failed: "
            "OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB (got 'balanced 16x8x8')") in out.output


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT])
def test_interrupt_marks_the_run_incomplete(tmp_path, cpu_ceilings, signum):
    out = tmp_path / "traces"
    proc = _stopped_in_point(out, 2)  # frozen with two points finished: the interrupt lands mid-sweep
    proc.send_signal(signum)
    proc.send_signal(signal.SIGCONT)
    rc = proc.wait(timeout=HUNG_S)
    err = proc.stderr.read().decode()
    assert rc == 130, err[-2000:]
    run, m = _manifest(out)
    assert m["status"] == "incomplete" and m["finished_at"]
    assert [p["status"] for p in m["points"]] == ["ok", "ok"] + ["pending"] * (N_POINTS - 2)
    # the message names the run and how to finish it
    assert f"interrupted: run {run.name} keeps its finished points" in err and f"--resume {run.name}" in err, err


def test_an_interrupt_dropped_by_a_callback_still_stops_the_sweep_at_the_next_point(tmp_path, monkeypatch,
                                                                                     cpu_ceilings):
    # the interpreter prints and drops a KeyboardInterrupt raised inside a finalizer or a hook that C code
    # calls; the sweep noted the signal and stops before its next point, the run marked incomplete
    from wlprof.capture import CaptureConfig
    from wlprof.study import Study, run_study
    from wlprof.workloads.gemm import Gemm

    real_build = Gemm.build

    def build(self, point, device, dtype):
        if point.params["m"] == 16:
            try:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.5)  # the handler runs here
            except KeyboardInterrupt:
                pass  # dropped, as a finalizer's would be
        return real_build(self, point, device, dtype)

    monkeypatch.setattr(Gemm, "build", build)
    with pytest.raises(KeyboardInterrupt):
        run_study(Study("gemm", {"shapes": "8x8x8,16x8x8,24x8x8,32x8x8"}, device="cpu",
                        capture=CaptureConfig(warmup=1, latency_reps=2, batches=1, profiled_steps=1)), traces=tmp_path)
    _, m = _manifest(tmp_path)
    assert m["status"] == "incomplete"
    assert [p["status"] for p in m["points"]] == ["ok", "ok", "pending", "pending"]


def test_a_point_interrupted_while_writing_leaves_no_rows_in_any_table(tmp_path, cpu_ceilings, cli):
    # a run killed after writing a point's ops and steps but before its kernels file (written last) and
    # its manifest entry: every table of the run holds the finished points only
    out = tmp_path / "traces"
    res = cli("run", "gemm", "--shapes", "8x96x96,16x96x96", "--device", "cpu", "--traces", out, *FAST)
    assert res.exit_code == 0, res.output
    run, m = _manifest(out)
    done = m["points"][1]
    for table in ("ops", "steps"):  # point 1's files, as a point 2 that stopped before its kernels
        src = run / done["files"][table]
        src.with_name(src.name.replace("p001-", "p002-")).write_bytes(src.read_bytes())
    m["points"].append({**{k: v for k, v in done.items() if k != "files"}, "index": 2, "status": "pending"})
    (run / "_manifest.json").write_text(json.dumps(m))
    before = {t: wlprof.load(out, table=t) for t in ("kernels", "ops", "steps")}
    for table, frame in before.items():
        assert sorted(frame.point.unique()) == [0, 1], table
    # once its kernels file is there the point is whole, and counts as `pandas.read_parquet` counts it
    # (its copied rows say point 1: they double point 1's rows)
    k = run / done["files"]["kernels"]
    k.with_name(k.name.replace("p001-", "p002-")).write_bytes(k.read_bytes())
    ops = wlprof.load(out, table="ops")
    assert len(ops) == len(before["ops"]) + int((before["ops"].point == 1).sum())

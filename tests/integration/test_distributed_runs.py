"""Distributed runs on the CPU with gloo: the merged run, its overlap and collectives tables, the bytes
the all-to-all moved against the rows the routing sent, and the ways a run must fail cleanly."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import wlprof

pytestmark = pytest.mark.slow  # each test launches ranks as processes (3-7 s each on 2 cores)

FAST = ["--steps", "2", "--warmup", "1", "--reps", "3", "-q", "--device", "cpu"]
MOE = ["moe", "--dispatch", "alltoall", "--experts", "4", "--tokens", "16", "--top-k", "2", "--d-model", "32",
       "--d-ff", "64", "--routing", "zipf:1.2"]
HALO = ["halo", "--nodes", "256", "--features", "8"]


def _wlprof(args, traces: Path, env=None, timeout=240):
    e = {**os.environ, "WLPROF_DIST_TIMEOUT": "60", **(env or {})}
    return subprocess.run([sys.executable, "-m", "wlprof", "run", *args, *FAST, "--traces", str(traces)], env=e,
                          capture_output=True, text=True, timeout=timeout)


def _only_run(traces: Path) -> Path:
    runs = [p for p in traces.iterdir()]
    assert len(runs) == 1, runs  # one published run; no staged folder left beside it
    return runs[0]


def _check_moe(traces: Path, world: int, experts: int = 4):
    run = _only_run(traces)
    steps = wlprof.load(run, table="steps")
    assert sorted(steps["rank"]) == list(range(world))
    k = wlprof.load(run)
    d_model, itemsize = 32, 4
    for _, s in steps.iterrows():
        r = int(s["rank"])
        a2a = k[(k["rank"] == r) & (k.kind == "comm") & (k.collective == "all_to_all")]
        dispatch = a2a[a2a.region == "moe/dispatch-a2a"]
        combine = a2a[a2a.region == "moe/combine-a2a"]
        routed = sum(s.ep_send_rows)  # this rank's tokens x top-k: every row it sends, its own included
        assert routed == 16 * 2
        # per step: the counts (one int64 per expert), then the tokens; the results come back
        assert sorted(dispatch.comm_bytes.unique()) == sorted({experts * 8.0, routed * d_model * itemsize})
        assert set(combine.comm_bytes) == {s.ep_recv_rows * d_model * itemsize}
        assert s.ep_recv_rows == s.ep_rows_by_rank[r]
    ov = wlprof.load(run, table="overlap")
    assert set(ov["rank"]) == set(range(world)) and (ov.scope == "rank").all()
    assert (ov.comm_us > 0).all() and (ov.collective_us == ov.comm_us).all()
    coll = wlprof.load(run, table="collectives")
    assert set(coll["rank"]) == set(range(world))
    if world > 1:
        assert (coll.ranks_matched == world).all() and (coll.clock_method == "same host").all()
        waits = coll.groupby(["point", "seq"]).skew_wait_us.min()
        assert (waits == 0).all()  # in every matched collective someone arrived last and waited for no one
    return steps


def test_moe_alltoall_one_rank(tmp_path):
    res = _wlprof([*MOE, "--world-size", "1"], tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    _check_moe(tmp_path, 1)


def test_moe_alltoall_three_ranks(tmp_path):
    # 6 experts over 3 ranks, two each: every rank sends to two others
    args = [*MOE]
    args[args.index("--experts") + 1] = "6"
    res = _wlprof([*args, "--world-size", "3"], tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    _check_moe(tmp_path, 3, experts=6)


def _check_halo(traces: Path, world: int):
    run = _only_run(traces)
    steps = wlprof.load(run, table="steps")
    assert sorted(steps["rank"].unique()) == list(range(world)) and set(steps.schedule) == {"serial", "overlap"}
    k = wlprof.load(run)
    for _, s in steps.iterrows():
        assert s.halo_sum_us == pytest.approx(s.halo_compute_us + s.halo_exchange_us)
        assert s.halo_max_us == max(s.halo_compute_us, s.halo_exchange_us)
        sends = k[(k.point == s.point) & (k["rank"] == s["rank"]) & (k.kind == "comm") & (k.collective == "send")]
        if world > 1:
            # a 16 x 16 grid in strips: a rank sends one 16-node row of 8 floats to each neighbour, per step
            neighbours = 1 if s["rank"] in (0, world - 1) else 2
            assert set(sends.comm_bytes) == {16 * 8 * 4.0} and len(sends) == neighbours * 2  # 2 profiled steps
            assert s.exchange_bytes == neighbours * 16 * 8 * 4
    ov = wlprof.load(run, table="overlap")
    assert set(ov["rank"]) == set(range(world))


@pytest.fixture(scope="module")
def halo_two(tmp_path_factory):
    """One 2-rank halo run (both schedules), shared by the tests that only read it."""
    traces = tmp_path_factory.mktemp("halo2")
    res = _wlprof([*HALO, "--world-size", "2"], traces)
    assert res.returncode == 0, res.stderr[-3000:]
    return traces, res


def test_halo_two_ranks(halo_two):
    traces, res = halo_two
    _check_halo(traces, 2)
    assert "against max" in res.stdout and "P2P with ranks" in res.stdout


def test_halo_one_rank_four_partitions(tmp_path):
    res = _wlprof([*HALO, "--world-size", "1", "--partitions", "4"], tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    _check_halo(tmp_path, 1)
    steps = wlprof.load(tmp_path, table="steps")
    # 4 strips of a 16 x 16 grid: 3 borders, each copied both ways, 16 nodes of 8 floats each
    assert (steps.exchange_bytes == 6 * 16 * 8 * 4).all() and (steps.exchange_copies == 6).all()


def test_halo_three_ranks(tmp_path):
    # the middle rank has two neighbours, the end ranks one
    res = _wlprof([*HALO, "--world-size", "3"], tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    _check_halo(tmp_path, 3)


def test_moe_alltoall_two_ranks_under_torchrun(tmp_path):
    # torchrun starts the ranks (wlprof reads RANK/WORLD_SIZE from it); the launcher's own 2-rank path is
    # the halo's, its 1- and 4-rank MoE runs are above
    torchrun = Path(sys.executable).with_name("torchrun")
    e = {**os.environ, "WLPROF_DIST_TIMEOUT": "60"}
    res = subprocess.run([str(torchrun), "--nproc-per-node", "2", "-m", "wlprof", "run", *MOE, *FAST, "--traces",
                          str(tmp_path)], env=e, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    steps = _check_moe(tmp_path, 2)
    # zipf:1.2 over 4 experts: rank 0's experts (0, 1) get the most rows
    by_rank = steps.ep_rows_by_rank.iloc[0]
    assert by_rank[0] > by_rank[1] and steps.ep_rank_imbalance.iloc[0] == pytest.approx(max(by_rank) / 32)
    assert "balanced" not in res.stdout and "(rank 1)" in res.stdout


def test_a_rank_that_dies_leaves_nothing(tmp_path):
    res = _wlprof([*HALO, "--world-size", "2", "--schedule", "overlap"], tmp_path,
                  env={"WLPROF_TEST_FAIL": "1:capture"})
    assert res.returncode != 0
    assert "rank 1 exited with code 3" in res.stderr
    assert "error: rank 0: rank 0 stopped: rank 1" in res.stderr or "rank 1" in res.stderr.split("error: rank 0")[-1]
    assert list(tmp_path.iterdir()) == []  # neither a run nor a staged folder


def test_rank_zero_dying_leaves_nothing(tmp_path):
    res = _wlprof([*HALO, "--world-size", "2", "--schedule", "overlap"], tmp_path,
                  env={"WLPROF_TEST_FAIL": "0:write"})
    assert res.returncode != 0 and "rank 0 exited with code 3" in res.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_port_in_use_is_refused(tmp_path, cli, monkeypatch):
    # refused by the launcher before any rank starts: run in this process
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        monkeypatch.setenv("MASTER_PORT", str(port))
        res = cli("run", *HALO, "--world-size", "2", *FAST, "--traces", tmp_path)
    assert res.exit_code == 2
    assert "MASTER_PORT must be a free port on 127.0.0.1" in res.output and f"(got {port})" in res.output
    assert list(tmp_path.iterdir()) == []


def test_mismatched_versions_are_refused(tmp_path):
    res = _wlprof([*HALO, "--world-size", "2"], tmp_path, env={"WLPROF_TEST_VERSION": "1:torch=2.0.0"})
    assert res.returncode != 0
    assert "rank 1 runs torch 2.0.0, rank 0 runs" in res.stderr
    assert list(tmp_path.iterdir()) == []


def test_bad_input_refused_before_launch(tmp_path, cli):
    res = cli("run", "moe", "--dispatch", "alltoall", "--experts", "2", "--routing", "balanced", "--tokens", "8",
              "--world-size", "4", *FAST, "--traces", tmp_path)
    assert res.exit_code == 2 and "--experts must be at least the world size" in res.output
    res = cli("run", "halo", "--nodes", "4", "--graph", "uniform", "--partitions", "8", *FAST, "--traces", tmp_path)
    assert res.exit_code == 2 and "--partitions must be at most --nodes (4)" in res.output
    assert not any(tmp_path.iterdir()) or all(p.is_dir() for p in tmp_path.iterdir())


def test_overlap_command_and_load(halo_two, cli):
    traces, _ = halo_two
    run = _only_run(traces)
    out = cli("overlap", run.name, "--traces", traces)
    assert out.exit_code == 0, out.output
    assert "per rank" in out.output and "collectives per rank" in out.output and "position" in out.output
    ov = wlprof.load(traces, table="overlap")
    assert isinstance(ov, pd.DataFrame) and sorted(set(ov["rank"].astype(int))) == [0, 1]
    assert len(ov) == 2 * 2  # one row per rank and sweep point (serial, overlap)


def test_show_and_compare_a_two_rank_run(halo_two):
    traces, _ = halo_two
    run = _only_run(traces).name

    def cli(*args):
        out = subprocess.run([sys.executable, "-m", "wlprof", *args, "--traces", str(traces)],
                             capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "200"})
        assert out.returncode == 0, out.stderr[-3000:]
        return out.stdout

    # one sweep point of each schedule, two steps rows per point (one per rank)
    got = cli("compare", f"{run}:serial", f"{run}:overlap")
    assert "(rank 0 of 2;" in got
    shown = cli("show", run)
    assert "serial (rank 0)" in shown and "overlap (rank 1)" in shown
    assert "per step and rank, over 2 profiled steps x 2 ranks" in shown

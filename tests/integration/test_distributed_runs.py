"""Distributed runs on the CPU with gloo: the halo exchange's merged run, its overlap and collectives tables
(the ways a run must fail cleanly: test_distributed_failures.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import HUNG_S
from distributed import FAST, _only_run, _wlprof

import wlprof

# each test launches ranks as processes (3-7 s each on 2 cores); rank 0 reads the CPU ceilings from the
# session cache, which cpu_ceilings fills (without it every run would measure them again)
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("cpu_ceilings")]

HALO = ["halo", "--nodes", "256", "--features", "8"]


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
def halo_three(tmp_path_factory):
    """One 3-rank halo run (both schedules), shared by the tests that only read it."""
    traces = tmp_path_factory.mktemp("halo3")
    res = _wlprof([*HALO, "--world-size", "3"], traces)
    assert res.returncode == 0, res.stderr[-3000:]
    return traces, res


def test_halo_three_ranks(halo_three):
    # the middle rank has two neighbours, the end ranks one
    traces, res = halo_three
    _check_halo(traces, 3)
    assert "against max" in res.stdout and "P2P with ranks" in res.stdout


def test_halo_one_process_four_partitions(tmp_path, cli):
    # no ranks: the partitions exchange by copies in this process (a 1-rank launch is the MoE's test)
    res = cli("run", *HALO, "--partitions", "4", *FAST, "--traces", tmp_path)
    assert res.exit_code == 0, res.output
    _check_halo(tmp_path, 1)
    steps = wlprof.load(tmp_path, table="steps")
    # 4 strips of a 16 x 16 grid: 3 borders, each copied both ways, 16 nodes of 8 floats each
    assert (steps.exchange_bytes == 6 * 16 * 8 * 4).all() and (steps.exchange_copies == 6).all()


def test_overlap_command_and_load(halo_three, cli):
    traces, _ = halo_three
    run = _only_run(traces)
    out = cli("overlap", run.name, "--traces", traces)
    assert out.exit_code == 0, out.output
    assert "per rank" in out.output and "collectives per rank" in out.output and "position" in out.output
    ov = wlprof.load(traces, table="overlap")
    assert isinstance(ov, pd.DataFrame) and sorted(set(ov["rank"].astype(int))) == [0, 1, 2]
    assert len(ov) == 3 * 2  # one row per rank and sweep point (serial, overlap)


def test_show_and_compare_a_three_rank_run(halo_three):
    traces, _ = halo_three
    run = _only_run(traces).name

    def cli(*args):
        out = subprocess.run([sys.executable, "-m", "wlprof", *args, "--traces", str(traces)],
                             capture_output=True, text=True, timeout=HUNG_S, env={**os.environ, "COLUMNS": "200"})
        assert out.returncode == 0, out.stderr[-3000:]
        return out.stdout

    # one sweep point of each schedule, three steps rows per point (one per rank)
    got = cli("compare", f"{run}:serial", f"{run}:overlap")
    assert "(rank 0 of 3;" in got
    shown = cli("show", run)
    assert "serial (rank 0)" in shown and "overlap (rank 2)" in shown
    assert "per step and rank, over 2 profiled steps x 3 ranks" in shown

"""Expert-parallel MoE runs on the CPU with gloo: the bytes the all-to-all moved against the rows the routing
sent, per rank, and the refusals before any rank starts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import HUNG_S
from distributed import FAST, _only_run, _wlprof

import wlprof

# each test launches ranks as processes (3-7 s each on 2 cores); rank 0 reads the CPU ceilings from the
# session cache, which cpu_ceilings fills (without it every run would measure them again)
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("cpu_ceilings")]

MOE = ["moe", "--dispatch", "alltoall", "--experts", "4", "--tokens", "16", "--top-k", "2", "--d-model", "32",
       "--d-ff", "64", "--routing", "zipf:1.2"]


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


def test_moe_alltoall_three_ranks_under_torchrun(tmp_path):
    # torchrun starts the ranks (wlprof reads RANK/WORLD_SIZE from it); the launcher's own multi-rank path
    # is the halo's and the failure tests', its 1-rank MoE run is above. 6 experts over 3 ranks, two each:
    # every rank sends to two others
    # --standalone: the agent's store listens on a port the system picks (torchrun's default, 29500, is taken
    # where another run of this test, or any torchrun, is under way on the machine)
    torchrun = Path(sys.executable).with_name("torchrun")
    args = [*MOE]
    args[args.index("--experts") + 1] = "6"
    res = subprocess.run([str(torchrun), "--standalone", "--nproc-per-node", "3", "-m", "wlprof", "run", *args, *FAST,
                          "--traces", str(tmp_path)], capture_output=True, text=True, timeout=HUNG_S)
    assert res.returncode == 0, res.stderr[-3000:]
    steps = _check_moe(tmp_path, 3, experts=6)
    # zipf:1.2 over 6 experts: rank 0's experts (0, 1) get the most rows, rank 2's (4, 5) the fewest; each
    # rank routes its 16 tokens x top-2 = 32 rows, 96 in all
    by_rank = steps.ep_rows_by_rank.iloc[0]
    assert by_rank[0] > by_rank[1] > by_rank[2] and sum(by_rank) == 96
    assert steps.ep_rank_imbalance.iloc[0] == pytest.approx(max(by_rank) / 32)
    assert "balanced" not in res.stdout and "(rank 2)" in res.stdout
    # the note lists the numbers, not Python lists
    note = " ".join(steps.note.dropna().iloc[0].split())
    sends = ", ".join(map(str, steps.ep_send_rows.iloc[0]))
    assert f"(per rank: {by_rank[0]}, {by_rank[1]}, {by_rank[2]};" in note and f"sends {sends} rows to ranks 0..2" in note


def test_bad_input_refused_before_launch(tmp_path, cli):
    res = cli("run", "moe", "--dispatch", "alltoall", "--experts", "2", "--routing", "balanced", "--tokens", "8",
              "--world-size", "4", *FAST, "--traces", tmp_path)
    assert res.exit_code == 2 and "--experts must be at least the world size" in res.output
    res = cli("run", "halo", "--nodes", "4", "--graph", "uniform", "--partitions", "8", *FAST, "--traces", tmp_path)
    assert res.exit_code == 2 and "--partitions must be at most --nodes (4)" in res.output
    assert not any(tmp_path.iterdir()) or all(p.is_dir() for p in tmp_path.iterdir())

"""Distributed runs on the CPU with gloo that must fail cleanly: a rank that dies, a port in use, ranks
of different versions; nothing is left behind."""

from __future__ import annotations

import socket

import pytest
from distributed import FAST, _wlprof

# each test launches ranks as processes (3-7 s each on 2 cores); rank 0 reads the CPU ceilings from the
# session cache, which cpu_ceilings fills (without it every run would measure them again)
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("cpu_ceilings")]

HALO = ["halo", "--nodes", "256", "--features", "8"]


def test_a_rank_that_dies_leaves_nothing(tmp_path):
    res = _wlprof([*HALO, "--world-size", "2", "--schedule", "overlap"], tmp_path,
                  env={"WLPROF_TEST_FAIL": "1:capture"})
    assert res.returncode != 0
    assert "rank 1 exited with code 3" in res.stderr
    # rank 0 hears it from the launcher (through the store) or from gloo (the connection closed, or on a
    # loaded machine its wait timed out), whichever comes first; each says so in one line that names the rank
    # once, with no stack (c10d's, gloo's or Python's) around it
    assert ("error: rank 0 stopped: rank 1 exited with code 3" in res.stderr
            or "error: rank 0: lost the connection to another rank (it died or exited: " in res.stderr
            or "error: rank 0: timed out waiting for another rank (it died, exited or hangs: " in res.stderr), \
        res.stderr
    assert "Traceback" not in res.stderr and "frame #" not in res.stderr and "rank 0: rank 0" not in res.stderr, \
        res.stderr
    assert list(tmp_path.iterdir()) == []  # neither a run nor a staged folder


def test_rank_zero_dying_leaves_nothing(tmp_path):
    # rank 0 stages the run; the launcher hosts the store, so rank 1 hears of rank 0's death from it: rank 0 died
    # writing its point, after the last collective, and rank 1 waits at the store for that point
    res = _wlprof([*HALO, "--world-size", "2", "--schedule", "overlap"], tmp_path,
                  env={"WLPROF_TEST_FAIL": "0:write"})
    assert res.returncode != 0 and "error: rank 0 exited with code 3; the other ranks stopped" in res.stderr
    assert "error: rank 1 stopped: rank 0 exited with code 3" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr and "frame #" not in res.stderr, res.stderr
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


def test_a_grace_that_is_no_number_of_seconds_is_refused(tmp_path, cli, monkeypatch):
    monkeypatch.setenv("WLPROF_DIST_GRACE", "soon")
    res = cli("run", *HALO, "--world-size", "2", *FAST, "--traces", tmp_path)
    assert res.exit_code == 2
    assert "WLPROF_DIST_GRACE must be a number of seconds, 0 or more (got 'soon')" in res.output, res.output
    assert list(tmp_path.iterdir()) == []


def test_mismatched_versions_are_refused(tmp_path):
    res = _wlprof([*HALO, "--world-size", "2"], tmp_path, env={"WLPROF_TEST_VERSION": "1:torch=2.0.0"})
    assert res.returncode != 0
    assert "rank 1 runs torch 2.0.0, rank 0 runs" in res.stderr
    assert list(tmp_path.iterdir()) == []

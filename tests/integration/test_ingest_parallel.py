"""A folder of ranks ingested by several processes gives the tables one process gives."""

from __future__ import annotations

import pickle
from pathlib import Path

import pandas as pd
import pytest
from conftest import HUNG_S

import wlprof
from wlprof.errors import InputError, Key, TraceFormatError
from wlprof.ingest import ingest

RANKS = Path(__file__).resolve().parents[1] / "fixtures" / "public" / "hta_2023_two_ranks"


@pytest.mark.slow
def test_parallel_and_serial_ingest_of_a_rank_folder_agree(tmp_path):
    one = ingest(RANKS, tmp_path / "one", jobs=1)
    two = ingest(RANKS, tmp_path / "two", jobs=2)
    assert [f.rank for f in one.files] == [f.rank for f in two.files] == [0, 1]
    cols = ["variant", "rank", "name", "dur_us", "op_name", "join_method", "flops", "bytes"]
    a = wlprof.load(one.path).sort_values(["rank", "ts_us"])[cols].reset_index(drop=True)
    b = wlprof.load(two.path).sort_values(["rank", "ts_us"])[cols].reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b)
    assert len(a) == sum(f.kernels for f in two.files)


def test_errors_survive_the_trip_from_a_worker_process():
    e = pickle.loads(pickle.dumps(TraceFormatError("x.json", "ends at byte 7")))
    assert (e.path, e.problem, str(e)) == ("x.json", "ends at byte 7", "x.json: ends at byte 7")
    i = pickle.loads(pickle.dumps(InputError(Key("jobs", "store"), "must be positive", 0, hint="try 2")))
    assert (i.arg, i.value, i.hint) == (Key("jobs", "store"), 0, "try 2")


@pytest.mark.slow
def test_a_stopped_fork_server_is_gone_and_the_next_pool_starts_another(tmp_path):
    import os
    from multiprocessing import forkserver

    from wlprof.ingest import prestart_workers, stop_workers

    prestart_workers()
    pid = forkserver._forkserver._forkserver_pid
    assert pid is not None
    stop_workers()
    assert forkserver._forkserver._forkserver_pid is None
    with pytest.raises(ChildProcessError):  # reaped: no zombie left behind
        os.waitpid(pid, os.WNOHANG)
    stop_workers()  # nothing to stop: no error
    two = ingest(RANKS, tmp_path / "two", jobs=2)
    assert [f.rank for f in two.files] == [0, 1]


def test_the_ingest_command_ends_at_once_with_its_output_flushed_and_its_pool_released(tmp_path):
    import subprocess
    import sys

    out = tmp_path / "traces"
    res = subprocess.run([sys.executable, "-m", "wlprof", "ingest", str(RANKS), "--traces", str(out)],
                         capture_output=True, text=True, timeout=HUNG_S)
    assert res.returncode == 0, res.stderr
    run = next(out.iterdir()).name
    assert res.stdout.replace("\n", "").rstrip().endswith(f"run_id={run!r}))"), res.stdout  # its last line, to a pipe
    assert "leaked" not in res.stderr and "Traceback" not in res.stderr, res.stderr
    assert len(wlprof.load(out)) > 0
    bad = subprocess.run([sys.executable, "-m", "wlprof", "ingest", str(tmp_path / "none"), "--traces", str(out)],
                         capture_output=True, text=True, timeout=HUNG_S)
    assert bad.returncode == 2 and "PATH must be an existing trace file or folder" in bad.stderr, bad.stderr

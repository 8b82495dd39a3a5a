"""What a run leaves behind: nothing on stderr but wlprof's own lines, integer parameters that read back as
integers, files a group can read."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pandas as pd
import pytest
from conftest import HUNG_S

import wlprof

pytestmark = pytest.mark.slow  # the module's fixture runs the CLI's captures in subprocesses

FAST = ["--steps", "1", "--warmup", "1", "--reps", "2", "--device", "cpu"]


def wl(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "wlprof.cli.main", *map(str, args)], capture_output=True,
                          text=True, timeout=HUNG_S, cwd=cwd)


@pytest.fixture(scope="module")
def traces(tmp_path_factory, cpu_ceilings, cli):
    # the MLP in a process of its own (its stderr is the process's, C libraries' lines included); the gemm
    # run, which only adds rows without a batch, in this one
    root = tmp_path_factory.mktemp("traces")
    runs = [wl("run", "mlp", "--batch", "1,8", "--d-model", "32", "--d-ff", "64", *FAST, "-q", "--traces", root)]
    res = cli("run", "gemm", "--shapes", "8x8x8", *FAST, "-q", "--traces", root)
    assert res.exit_code == 0, res.output
    return root, runs


def test_stderr_has_no_profiler_lines(traces):
    _, runs = traces
    for res in runs:
        assert res.returncode == 0, res.stderr
        assert "USDT" not in res.stderr and "profiler_start" not in res.stderr
        assert res.stderr == "", res.stderr  # -q: no progress; nothing else is wlprof's to say


def test_integer_parameters_read_back_as_integers(traces):
    root, _ = traces
    for k in (pd.read_parquet(root), wlprof.load(root), wlprof.load(root, table="steps")):
        assert str(k.batch.dtype) == "Int64" and str(k.m.dtype) == "Int64"
        assert sorted(k.batch.dropna().unique().tolist()) == [1, 8]
        assert k.batch.isna().any()  # the gemm rows: null, not NaN in a float column
    steps = pd.read_parquet(next(p for p in root.iterdir() if p.name.startswith("mlp")) / "_steps")
    assert steps.batch.tolist() == [1, 8] and str(steps.batch.dtype) == "Int64"


def test_files_are_group_and_world_readable(traces):
    root, _ = traces
    umask = os.umask(0o022)
    os.umask(umask)
    files = [p for p in root.rglob("*") if p.is_file()]
    assert files
    for p in files:
        mode = stat.S_IMODE(p.stat().st_mode)
        assert mode == 0o666 & ~umask, f"{p}: {oct(mode)}"  # 0644 under the usual umask 022

"""What the distributed-run tests share: running `wlprof run` with ranks as processes, and its one run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import HUNG_S

FAST = ["--steps", "2", "--warmup", "1", "--reps", "3", "-q", "--device", "cpu"]


def _wlprof(args, traces: Path, env=None):
    cache = Path(os.environ["WLPROF_CACHE_DIR"])
    assert any(cache.glob("ceilings-cpu-*.json")), "request the cpu_ceilings fixture: rank 0 would measure them"
    e = {**os.environ, "WLPROF_DIST_TIMEOUT": "60", **(env or {})}
    return subprocess.run([sys.executable, "-m", "wlprof", "run", *args, *FAST, "--traces", str(traces)], env=e,
                          capture_output=True, text=True, timeout=HUNG_S)


def _only_run(traces: Path) -> Path:
    runs = [p for p in traces.iterdir()]
    assert len(runs) == 1, runs  # one published run; no staged folder left beside it
    return runs[0]

"""What the distributed-run tests share: running `wlprof run` with ranks as processes, and its one run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import HUNG_S

FAST = ["--steps", "2", "--warmup", "1", "--reps", "3", "-q", "--device", "cpu"]


# the ranks' waits (WLPROF_DIST_TIMEOUT, 300 s by default) end before the launcher ends the ranks that did not stop
# after one failed, which is before the test calls the run hung: a rank that hangs still says so on any machine
GRACE_S = 600


def _wlprof(args, traces: Path, env=None):
    cache = Path(os.environ["WLPROF_CACHE_DIR"])
    assert any(cache.glob("ceilings-cpu-*.json")), "request the cpu_ceilings fixture: rank 0 would measure them"
    e = {**os.environ, "WLPROF_DIST_GRACE": str(GRACE_S), **(env or {})}
    e.pop("WLPROF_DIST_TIMEOUT", None)
    return subprocess.run([sys.executable, "-m", "wlprof", "run", *args, *FAST, "--traces", str(traces)], env=e,
                          capture_output=True, text=True, timeout=HUNG_S)


def _only_run(traces: Path) -> Path:
    runs = [p for p in traces.iterdir()]
    assert len(runs) == 1, runs  # one published run; no staged folder left beside it
    return runs[0]

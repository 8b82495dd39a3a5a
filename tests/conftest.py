"""Shared test fixtures: an empty ceilings cache per session, CPU ceilings on request, one CLI helper,
the committed H200 fixtures, and the gpu / slow / calibrates markers.

- `tests/unit`: pure functions (no capture, no CLI); `tests/integration`: the CLI, captures,
  the store, the fixtures, the golden comparison. `pytest -m "not slow"` is the fast tier.
- Every test sees `WLPROF_CACHE_DIR` pointing at an empty temporary folder of the session
  (never ~/.cache). A test that runs a study or needs the CPU's ceilings requests
  `cpu_ceilings`: the CPU is measured once per session (quick sizes) and saved there.
- No test may measure ceilings otherwise: `ceilings.calibrate` raises unless the test is
  marked `calibrates` (the tests of calibration itself).
- The suite checks the code as the CPU runs it on any machine: where a GPU is present, CUDA is
  hidden from the session (the workloads' defaults would otherwise pick the GPU, its dtype and
  its memory), unless the run selects the GPU tests (`pytest -m gpu`) or sets
  `WLPROF_TEST_CUDA=1`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

# One OpenMP thread for torch and scikit-learn: the tests check what wlprof computes, never how
# fast, and on a small shared machine two spinning OpenMP pools fighting over two cores made
# tiny ops 5-30x slower (the ladder's regressor: 1.8 s alone, 23-80 s under load). Set before
# torch is imported; `OMP_NUM_THREADS=N pytest` overrides it. Subprocesses inherit it.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest  # noqa: E402

from wlprof import ceilings  # noqa: E402  (imports no torch)

FIXTURES = Path(__file__).parent / "fixtures"
H200 = FIXTURES / "h200"

# Seconds a test waits for a subprocess (or a thread) before calling it hung: a guard against a hang, never
# a measure of speed. Every wait in the suite ends by an event; a loaded machine takes many times longer than
# an idle one, and the slowest subprocess here takes under a minute on an idle 2-core machine.
HUNG_S = 900


def _wants_cuda(config) -> bool:
    expr = config.getoption("markexpr") or ""
    return os.environ.get("WLPROF_TEST_CUDA") == "1" or ("gpu" in expr and "not gpu" not in expr)


_HIDDEN = []


def pytest_configure(config):
    # before any test module imports torch (xdist workers run this too)
    import glob

    if not _wants_cuda(config) and (glob.glob("/dev/nvidia[0-9]*") or os.path.exists("/dev/kfd")):
        os.environ["CUDA_VISIBLE_DEVICES"] = os.environ["HIP_VISIBLE_DEVICES"] = ""
        _HIDDEN.append(True)


def _cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:  # pragma: no cover
        return False


def pytest_collection_modifyitems(config, items):
    if _cuda():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device" + (" (hidden from this run: `pytest -m gpu`)" if _HIDDEN else ""))
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


# ---------------------------------------------------------------- the ceilings cache


@pytest.fixture(scope="session", autouse=True)
def wlprof_cache_dir(tmp_path_factory):
    """WLPROF_CACHE_DIR for the whole session: an empty temporary folder, never ~/.cache. COLUMNS
    unset (pytest-xdist's workers may inherit one from a terminal): tables take wlprof's default width
    unless a test sets one."""
    d = tmp_path_factory.mktemp("wlprof-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("WLPROF_CACHE_DIR", str(d))
        mp.delenv("COLUMNS", raising=False)
        yield d


_CALIBRATE = ceilings.calibrate  # the real one, for cpu_ceilings and the tests marked calibrates


@pytest.fixture(autouse=True)
def _no_unrequested_calibration(request, monkeypatch):
    """A test that would measure the CPU without asking fails instead of silently taking seconds
    (and, alone, measuring with the full sizes): request `cpu_ceilings`, or mark it `calibrates`."""
    if request.node.get_closest_marker("calibrates"):
        return

    def refuse(device, quick=False):
        raise AssertionError(f"{request.node.nodeid} measured the ceilings of {device}: request the "
                             "cpu_ceilings fixture (or mark the test calibrates)")

    monkeypatch.setattr(ceilings, "calibrate", refuse)


@pytest.fixture(scope="session")
def cpu_ceilings(wlprof_cache_dir):
    """This CPU's ceilings, measured once per session (quick sizes) and saved in the session's cache,
    so every study the tests run (in this process or a subprocess) finds them there."""
    import torch

    c = _CALIBRATE(torch.device("cpu"), quick=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("WLPROF_CACHE_DIR", str(wlprof_cache_dir))
        ceilings.save(c)
    return c


# ---------------------------------------------------------------- the CLI


@pytest.fixture(scope="session")
def cli():
    """`cli("run", "gemm", "--shapes", "8x8x8", "--traces", tmp)`: the real `wlprof` app in this
    process (typer's CliRunner), arguments stringified; returns the click Result (exit_code, output)."""
    from typer.testing import CliRunner

    from wlprof.cli.main import app

    runner = CliRunner()

    def invoke(*args):
        return runner.invoke(app, [str(a) for a in args])

    return invoke


def files_under(path: Path) -> list[str]:
    """Every file and folder under `path`, relative to it (empty when it does not exist)."""
    return sorted(str(p.relative_to(path)) for p in path.rglob("*")) if path.exists() else []


# ---------------------------------------------------------------- the committed H200 fixtures


def copy_h200_runs(root: Path) -> Path:
    """The committed H200 fixture runs copied into `root`, a traces folder of its own (tests never write
    into tests/)."""
    import shutil

    for run in H200.iterdir():
        shutil.copytree(run, root / run.name)
    return root


def h200_run(prefix: str) -> Path:
    runs = sorted(p for p in H200.iterdir() if p.name.startswith(prefix))
    assert runs, f"no H200 fixture run starting with {prefix!r} in {H200}"
    return runs[0]


def h200_manifest(prefix: str) -> dict:
    return json.loads((h200_run(prefix) / "_manifest.json").read_text())

"""Shared test fixtures: an isolated ceilings cache, the committed H200 fixtures, a GPU marker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
H200 = FIXTURES / "h200"


def _cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:  # pragma: no cover
        return False


def pytest_collection_modifyitems(config, items):
    if _cuda():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def cpu_ceilings_dir(tmp_path_factory) -> Path:
    """A ceilings cache with this CPU measured once (quick sizes) for the whole session."""
    import torch

    from wlprof import ceilings

    d = tmp_path_factory.mktemp("wlprof-cache")
    mp = pytest.MonkeyPatch()
    mp.setenv("WLPROF_CACHE_DIR", str(d))
    ceilings.save(ceilings.calibrate(torch.device("cpu"), quick=True))
    mp.undo()
    return d


@pytest.fixture(autouse=True)
def isolated_cache(cpu_ceilings_dir, monkeypatch):
    """Every test reads and writes ceilings in the session's own cache, never ~/.cache."""
    monkeypatch.setenv("WLPROF_CACHE_DIR", str(cpu_ceilings_dir))
    return cpu_ceilings_dir


def h200_run(prefix: str) -> Path:
    runs = sorted(p for p in H200.iterdir() if p.name.startswith(prefix))
    assert runs, f"no H200 fixture run starting with {prefix!r} in {H200}"
    return runs[0]


def h200_manifest(prefix: str) -> dict:
    return json.loads((h200_run(prefix) / "_manifest.json").read_text())

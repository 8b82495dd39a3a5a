"""The README says `ruff check wlprof tests benchmarks` is clean: held where ruff is installed."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import HUNG_S

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("ruff") is None, reason="ruff is not in [test]: `pip install ruff`")
def test_ruff_check_is_clean():
    res = subprocess.run(["ruff", "check", "--no-cache", "wlprof", "tests", "benchmarks"], cwd=ROOT,
                         capture_output=True, text=True, timeout=HUNG_S)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-1000:]

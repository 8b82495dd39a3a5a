"""Ingested traces give, to the bit, the tables they gave when `tests/golden/ingest_digests.json` was
written (`python tests/golden/golden.py --digests`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "golden"))
import golden  # noqa: E402

WANT = json.loads(golden.DIGESTS.read_text())


# a folder is read by a pool of processes: seconds
CASES = [pytest.param(p, marks=pytest.mark.slow) if p.is_dir() else p for p in golden.DIGESTED]


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.name)
def test_ingested_tables_equal_their_digests(path, tmp_path):
    from wlprof.ingest import ingest

    got = golden.digests(ingest(path, tmp_path).path)
    want = WANT[path.relative_to(golden.FIXTURES).as_posix()]
    for table in want:
        keys = set(want[table]) | set(got[table])
        changed = sorted(c for c in keys if want[table].get(c) != got[table].get(c))
        assert not changed, f"{path.name} {table}: {changed} changed"

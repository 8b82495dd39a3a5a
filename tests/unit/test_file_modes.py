"""Files wlprof writes get the mode a plain open() gives them (0644 under umask 022), not mkstemp's 0600."""

from __future__ import annotations

import os
import stat

import pandas as pd

from wlprof.store.atomic import _umask, atomic_write_bytes, atomic_write_parquet


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_atomic_files_follow_the_umask(tmp_path):
    expected = 0o666 & ~_umask()
    atomic_write_bytes(tmp_path / "a.json", b"{}")
    assert _mode(tmp_path / "a.json") == expected
    df = pd.DataFrame({"run_id": ["r"], "workload": ["gemm"], "variant": ["v"], "point": [0]})
    atomic_write_parquet(tmp_path / "k.parquet", df, "steps")
    assert _mode(tmp_path / "k.parquet") == expected
    if _umask() == 0o022:
        assert expected == 0o644
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]

"""The collectives table of a run: every rank's collective rows, matched across ranks, written once.

Written after the ranks' points are (a rank folder's ingest, a distributed run's point),
from the kernels files already in the (staged) run folder.
"""

from __future__ import annotations

from pathlib import Path

from wlprof.store.atomic import atomic_write_parquet
from wlprof.store.runs import TABLE_DIRS


def write_collectives(run_path: Path, points: list[int] | None, hosts: dict | None, stem: str,
                      rows=None) -> int:
    """Match the collective rows of `points` (None: every point) across their ranks; write them as
    `_collectives/<stem>.parquet`. Returns the rows written (0: no collective, no file).

    `rows`: those points' collective rows (`collective_rows`) where the caller holds them; else
    they are read from the points' kernels files.
    """
    from wlprof import schema
    from wlprof.analysis.collectives import match

    if rows is None:
        rows = _read_rows(run_path, points)
    if rows is None or rows.empty:
        return 0
    table = match(rows, hosts)
    keep = [c.name for c in schema.columns("collectives") if c.name in table]
    path = Path(run_path) / TABLE_DIRS["collectives"] / f"{stem}.parquet"
    path.parent.mkdir(exist_ok=True)
    atomic_write_parquet(path, table[keep], "collectives")
    return len(table)


def _read_rows(run_path: Path, points: list[int] | None):
    """The collective rows of `points` in the run folder's kernels files (None: no kernels file)."""
    import pyarrow.dataset as ds

    from wlprof import schema
    from wlprof.analysis.collectives import WORK_KINDS

    # the folder may still be staged (a hidden name, which wlprof.load skips): read its files directly
    files = sorted(str(p) for p in Path(run_path).glob("*.parquet") if not p.name.startswith((".", "_")))
    if not files:
        return None
    expr = ds.field("kind").isin(list(WORK_KINDS)) & ds.field("comm_class").isin(["collective", "p2p"])
    if points is not None:
        expr = expr & ds.field("point").isin(list(points))
    return ds.dataset(files, schema=schema.arrow_schema("kernels"), format="parquet").to_table(filter=expr).to_pandas()

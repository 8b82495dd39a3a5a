"""The collectives table of a run: every rank's collective rows, matched across ranks, written once.

Written after the ranks' points are (a rank folder's ingest, a distributed run's point),
from the kernels files already in the (staged) run folder.
"""

from __future__ import annotations

from pathlib import Path

from wlprof.store.atomic import atomic_write_parquet
from wlprof.store.runs import TABLE_DIRS


def write_collectives(run_path: Path, points: list[int] | None, hosts: dict | None, stem: str) -> int:
    """Match the collective rows of `points` (None: every point) across their ranks; write them as
    `_collectives/<stem>.parquet`. Returns the rows written (0: no collective, no file)."""
    import pyarrow.dataset as ds

    from wlprof import schema
    from wlprof.analysis.collectives import WORK_KINDS, match

    # the folder may still be staged (a hidden name, which wlprof.load skips): read its files directly
    files = sorted(str(p) for p in Path(run_path).glob("*.parquet") if not p.name.startswith((".", "_")))
    if not files:
        return 0
    expr = ds.field("kind").isin(list(WORK_KINDS)) & ds.field("comm_class").isin(["collective", "p2p"])
    if points is not None:
        expr = expr & ds.field("point").isin(list(points))
    rows = ds.dataset(files, schema=schema.arrow_schema("kernels"), format="parquet").to_table(filter=expr)
    rows = rows.to_pandas()
    if rows.empty:
        return 0
    table = match(rows, hosts)
    keep = [c.name for c in schema.columns("collectives") if c.name in table]
    path = Path(run_path) / TABLE_DIRS["collectives"] / f"{stem}.parquet"
    path.parent.mkdir(exist_ok=True)
    atomic_write_parquet(path, table[keep], "collectives")
    return len(table)

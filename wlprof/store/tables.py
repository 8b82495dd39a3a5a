"""Reading the store's tables back: one table of every run (or one run) as a DataFrame."""

from __future__ import annotations

from pathlib import Path

from wlprof import schema
from wlprof.errors import InputError, StoreError
from wlprof.store.runs import MANIFEST, TABLE_DIRS


def table_files(root: str | Path, table: str) -> list[Path]:
    root = Path(root)
    sub = TABLE_DIRS.get(table)
    if sub is None:
        raise InputError("table", f"must be one of {sorted(TABLE_DIRS)}", table)
    run_dirs = [root] if (root / MANIFEST).exists() else [p for p in sorted(root.glob("*")) if p.is_dir()]
    files: list[Path] = []
    for d in run_dirs:
        if d.name.startswith(("_", ".")):
            continue
        base = d / sub if sub else d
        files.extend(sorted(p for p in base.glob("*.parquet") if not p.name.startswith((".", "_"))))
    return files


def load_table(root: str | Path = "traces", table: str = "kernels", **filters):
    """One table of every run under `root` (or of one run folder) as a pandas DataFrame.

    Older minor schema versions load (their missing columns come back as nulls);
    a newer major version is refused. `filters` are `column=value` or
    `column=[values]`, pushed down to the Parquet reader.
    """
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    root = Path(root)
    if not root.exists():
        raise InputError("path", "must be a traces folder or a run folder that exists", str(root))
    files = table_files(root, table)
    declared = schema.arrow_schema(table)
    for name in filters:
        if name not in declared.names:
            raise InputError(name, f"is not a column of the {table} table", filters[name])
    if not files:
        return declared.empty_table().to_pandas()
    for f in files:
        if f.stat().st_size == 0:
            raise StoreError(f"{f} is empty (0 bytes): not a Parquet file")
        meta = pq.read_schema(f).metadata or {}
        schema.check_version(meta.get(schema.METADATA_KEY, b"0").decode(), str(f))
    dataset = ds.dataset([str(f) for f in files], schema=declared, format="parquet")
    expr = None
    for name, value in filters.items():
        field = ds.field(name)
        cond = field.isin(list(value)) if isinstance(value, (list, tuple, set)) else field == value
        expr = cond if expr is None else expr & cond
    return dataset.to_table(filter=expr).to_pandas()


"""Reading the store's tables back: one table of every run (or one run) as a DataFrame."""

from __future__ import annotations

import re
from pathlib import Path

from wlprof import schema
from wlprof.errors import InputError, StoreError
from wlprof.store.runs import MANIFEST, TABLE_DIRS


def table_files(root: str | Path, table: str) -> list[Path]:
    """The Parquet files of `table` in every run under `root` (or in one run folder).

    A point's kernels file is written last: a point the manifest does not mark done or failed counts
    only once that file is there (as `pandas.read_parquet` of the folder sees it), so a run interrupted
    while writing a point leaves that point's other files behind, never their rows."""
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
        unfinished = _unfinished_points(d) if sub and table != "collectives" else set()
        files.extend(sorted(p for p in base.glob("*.parquet") if not p.name.startswith((".", "_"))
                            and (_point_index(p.name) not in unfinished or (d / p.name).exists())))
    return files


_POINT = re.compile(r"^p(\d+)-")


def _point_index(name: str) -> int | None:
    m = _POINT.match(name)
    return int(m.group(1)) if m else None


def _unfinished_points(run_dir: Path) -> set[int]:
    """The indices of the points a run's manifest lists as neither done nor failed (none where the
    manifest cannot be read: every file counts)."""
    import json

    try:
        points = json.loads((run_dir / MANIFEST).read_text()).get("points") or []
        return {int(p["index"]) for p in points if isinstance(p, dict) and p.get("status") not in ("ok", "failed")
                and isinstance(p.get("index"), int)}
    except (OSError, ValueError, AttributeError):
        return set()


def _migrate(table, declared):
    """An Arrow table of an older schema with its changed columns converted (schema.MIGRATIONS)."""
    import json

    import pyarrow as pa

    for name, (old_type, how) in schema.MIGRATIONS.items():
        if name in table.column_names and table.schema.field(name).type == old_type:
            if how != "json list":  # pragma: no cover - one kind of migration so far
                raise StoreError(f"no migration {how!r} for column {name}")
            values = [None if v is None else json.loads(v) for v in table.column(name).to_pylist()]
            i = table.column_names.index(name)
            table = table.set_column(i, name, pa.array(values, type=declared.field(name).type))
    return table


def load_table(root: str | Path = "traces", table: str = "kernels", **filters):
    """One table of every run under `root` (or of one run folder) as a pandas DataFrame.

    Older schema versions load: their missing columns come back as nulls and changed
    columns are converted (`schema.MIGRATIONS`); a newer major version is refused.
    `filters` are `column=value` or `column=[values]`, pushed down to the Parquet reader.
    """
    import pyarrow as pa
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
    # files grouped by the migrated columns they hold in an older type: one dataset scan per group
    groups: dict[frozenset, list[str]] = {}
    for f in files:
        if f.stat().st_size == 0:
            raise StoreError(f"{f} is empty (0 bytes): not a Parquet file")
        file_schema = pq.read_schema(f)
        schema.check_version((file_schema.metadata or {}).get(schema.METADATA_KEY, b"0").decode(), str(f))
        changed = frozenset(n for n in schema.MIGRATIONS if n in file_schema.names
                            and file_schema.field(n).type != declared.field(n).type)
        groups.setdefault(changed, []).append(str(f))
    expr = None
    for name, value in filters.items():
        field = ds.field(name)
        cond = field.isin(list(value)) if isinstance(value, (list, tuple, set)) else field == value
        expr = cond if expr is None else expr & cond
    parts = []
    for changed, group in groups.items():
        read_as = declared
        for n in changed:
            read_as = read_as.set(read_as.get_field_index(n), pa.field(n, schema.MIGRATIONS[n][0]))
        t = ds.dataset(group, schema=read_as, format="parquet").to_table(filter=expr)
        parts.append(_migrate(t, declared).cast(declared) if changed else t)
    return pa.concat_tables(parts).to_pandas()


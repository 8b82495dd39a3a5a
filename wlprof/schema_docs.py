"""docs/columns.md, written from the schema: every column of every table wlprof stores.

    python -m wlprof.schema_docs docs/columns.md     # or without a path: the page on stdout

The columns come from `wlprof.schema` and the registered workloads' `columns`; a test checks that
the committed page is what this module writes.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow as pa

from wlprof import schema

DOCS_PATH = Path("docs") / "columns.md"

# How each table is read: (files under a run's folder, a line that loads it across runs)
TABLE_ACCESS = {
    "kernels": ("p000-<variant>.parquet, ...", 'pandas.read_parquet("traces")'),
    "ops": ("_ops/*.parquet", 'wlprof.load("traces", table="ops")'),
    "steps": ("_steps/*.parquet", 'wlprof.load("traces", table="steps")'),
    "overlap": ("_overlap/*.parquet", 'wlprof.load("traces", table="overlap")'),
    "collectives": ("_collectives/*.parquet", 'wlprof.load("traces", table="collectives")'),
}
TABLE_ROWS = {
    "kernels": "one row per device activity (GPU: kernel, memcpy, memset; CPU: an op's own work)",
    "ops": "one row per launching op call, its kernels' time summed",
    "steps": "one row per sweep point (per rank in a distributed run): timings and totals",
    "overlap": "per rank and stream of each point: communication against computation",
    "collectives": "every collective or P2P row of every rank, matched across the ranks",
}


def type_name(t: pa.DataType) -> str:
    """An Arrow type as the page names it: string, int64, float64, bool, list<int64>."""
    if pa.types.is_list(t):
        return f"list<{type_name(t.value_type)}>"
    return {"double": "float64"}.get(str(t), str(t))


def pandas_dtype(c: schema.Column) -> str:
    """The dtype pandas gives the column when it reads the Parquet files (`schema._pandas_metadata`)."""
    if pa.types.is_boolean(c.type):
        return "boolean"
    if pa.types.is_integer(c.type):
        nullable = c.name in schema.nullable_int_columns()
        return ("Int32" if c.type == schema.I32 else "Int64") if nullable else type_name(c.type)
    if pa.types.is_floating(c.type):
        return "float64"
    if pa.types.is_list(c.type):
        return "object (arrays)"
    return "str"


def _cell(text: str) -> str:
    """Text as one Markdown table cell: its pipes escaped, and its angle brackets (read as HTML tags)."""
    return str(text).replace("|", "\\|").replace("\n", " ").replace("<", "&lt;").replace(">", "&gt;")


def _rows(cols, extra: tuple = ()) -> list[str]:
    """A Markdown table of columns; `extra`: more (header, cell of a column) pairs."""
    head = ["column", "type", "pandas", "unit", "meaning", *(h for h, _ in extra)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for c in cols:
        cells = [f"`{c.name}`", type_name(c.type), pandas_dtype(c), c.unit, c.meaning, *(fn(c) for _, fn in extra)]
        lines.append("| " + " | ".join(_cell(x) for x in cells) + " |")
    return lines


def _declared_by() -> dict[str, list[str]]:
    from wlprof import workloads

    out: dict[str, list[str]] = {}
    for wl in workloads.all_workloads():
        for c in wl.columns:
            out.setdefault(c.name, []).append(wl.name)
    return out


def columns_markdown() -> str:
    """The page: per table its own columns, then the workloads' columns every table carries."""
    workload_cols = schema.workload_columns()
    shared = {c.name for c in workload_cols}
    lines = [
        "# Columns",
        "",
        "Every column of every table wlprof writes, as `pandas.read_parquet` (or `wlprof.load`) gives it. "
        "Written by `python -m wlprof.schema_docs docs/columns.md` from [`wlprof/schema.py`](../wlprof/schema.py) "
        "and the workloads' `columns`: edit those, not this page.",
        "",
        "Each run is a folder `traces/<run_id>/`; every file carries every column of its table (null where a "
        "run has no value), so one read over the traces folder gives every run. Units are in the names "
        "(`_us`: microseconds, `_bytes`, `_gbps`: GB/s, `_tflops`: TFLOP/s). `pandas`: the dtype read back; "
        "integer and boolean columns that can be null are pandas' nullable `Int64`/`Int32` and `boolean` "
        "(`<NA>` where unknown); `str` is object under pandas 2.",
        "",
        "| table | rows | files in a run's folder | read across runs |",
        "|---|---|---|---|",
    ]
    for table in schema.TABLE_NAMES:
        files, read = TABLE_ACCESS[table]
        lines.append(f"| [{table}](#{table}) | {TABLE_ROWS[table]} | `{files}` | `{read}` |")
    for table in schema.TABLE_NAMES:
        own = [c for c in schema.columns(table) if c.name not in shared]
        lines += ["", f"## {table}", "", f"{TABLE_ROWS[table][0].upper()}{TABLE_ROWS[table][1:]}. Its "
                  f"{len(own)} columns, then the [workload columns](#workload-columns).", "", *_rows(own)]
    by = _declared_by()

    def roles(c: schema.Column) -> str:
        return ", ".join(r for r in ("data", "distribution", "feature") if getattr(c, r))

    lines += ["", "## Workload columns", "",
              "The parameters and facts of the workloads' sweep points, in every table (null on other workloads' "
              "rows). `workloads`: which declare it; `role`: data (part of the data a data-dependent op ran on), "
              "distribution (part of what that data was drawn from), feature (a number the performance models "
              "may use).", "",
              *_rows(workload_cols, (("workloads", lambda c: ", ".join(by.get(c.name, []))), ("role", roles)))]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    """Write the page to the path given, or to stdout."""
    text = columns_markdown()
    if not argv:
        sys.stdout.write(text)
        return 0
    Path(argv[0]).write_text(text, encoding="utf-8")
    print(f"wrote {argv[0]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

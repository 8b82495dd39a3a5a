"""DataFrames as Markdown tables, for the files `report` and `predict` write. Presentation only."""

from __future__ import annotations

import math

import pandas as pd


def fmt(v, digits: int = 3) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, float):
        if v != 0 and (abs(v) >= 1e5 or abs(v) < 1e-3):
            return f"{v:.3g}"
        return f"{v:,.{digits}f}".rstrip("0").rstrip(".") if "." in f"{v:.{digits}f}" else f"{v:,}"
    return str(v)


def table(df: pd.DataFrame, columns: dict[str, str] | None = None, digits: int = 3) -> str:
    cols = columns or {c: c for c in df.columns}
    head = "| " + " | ".join(cols.values()) + " |"
    sep = "|" + "|".join("---" for _ in cols) + "|"
    rows = ["| " + " | ".join(fmt(r[c], digits) for c in cols) + " |" for _, r in df.iterrows()]
    return "\n".join([head, sep, *rows]) + "\n"


def rich_table(df: pd.DataFrame, columns: dict[str, str], title: str | None = None, digits: int = 3):
    from rich.table import Table

    t = Table(title=title, title_justify="left")
    for label in columns.values():
        t.add_column(label)
    for _, r in df.iterrows():
        t.add_row(*[fmt(r[c], digits) for c in columns])
    return t


SPECTRUM_COLUMNS = {
    "family": "family", "points": "points", "spearman": "rank corr.", "r2_linear": "R² (linear)",
    "r2_flops_only": "R² (FLOPs only)", "equal_flops_spread": "spread at equal FLOPs (max/min)",
    "median_peak_fraction": "median fraction of peak", "median_roofline_fraction": "median fraction of roofline",
    "above_roof": "above roof (why)",
}

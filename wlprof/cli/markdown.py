"""DataFrames as Markdown tables, for the files `report` and `predict` write, and the same tables for the
terminal. Presentation only; numbers are written as `render` writes them (three significant digits,
whole numbers with thousands separators, R² and correlations with two decimals, fractions as %)."""

from __future__ import annotations

import math
from collections.abc import Callable

import pandas as pd

from wlprof.cli import render


def fmt(v, digits: int = 3) -> str:
    """One cell: '-' for missing, three significant digits for floats, ints with thousands separators."""
    if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        return render.sig(v, digits)
    try:
        import numpy as np

        if isinstance(v, np.integer):
            return f"{int(v):,}"
        if isinstance(v, np.floating):
            return render.sig(float(v), digits)
    except ImportError:  # pragma: no cover
        pass
    return str(v)


Formats = dict[str, Callable]


def table(df: pd.DataFrame, columns: dict[str, str] | None = None, digits: int = 3,
          formats: Formats | None = None) -> str:
    cols = columns or {c: c for c in df.columns}
    formats = formats or {}
    head = "| " + " | ".join(h.replace("\n", " ") for h in cols.values()) + " |"
    sep = "|" + "|".join("---" for _ in cols) + "|"
    rows = ["| " + " | ".join(formats.get(c, lambda v: fmt(v, digits))(r[c]) for c in cols) + " |"
            for _, r in df.iterrows()]
    return "\n".join([head, sep, *rows]) + "\n"


def rich_table(df: pd.DataFrame, columns: dict[str, str], title: str | None = None, digits: int = 3,
               formats: Formats | None = None, wide: bool = False, width: int | None = None,
               priorities: dict[str, int] | None = None, text: set[str] | None = None,
               wrap: dict[str, int] | None = None):
    """The same table for the terminal, fitted to its width (`render.table`): the first column, then the
    others in order, are kept longest unless `priorities` says otherwise."""
    formats = formats or {}
    priorities = priorities or {}
    names = list(columns)
    spec = {c: (columns[c], formats.get(c, lambda v: fmt(v, digits)),
                priorities.get(c, 10 if i == 0 else max(1, 9 - i // 2))) for i, c in enumerate(names)}
    text = text if text is not None else {c for c in names if c in df and _is_text(df[c])}
    return render.frame_table(df, spec, title, wide=wide, width=width, text=text, wrap=wrap)


def _is_text(col: pd.Series) -> bool:
    """Whether a column holds text (left-justified): object or string dtype (pandas 3 reads strings as
    `str`), not all numbers."""
    if col.dtype != object and not pd.api.types.is_string_dtype(col.dtype):
        return False
    return not col.map(lambda v: isinstance(v, (int, float))).all()


SPECTRUM_COLUMNS = {
    "family": "family", "points": "points", "spearman": "rank\ncorr.", "r2_linear": "R²\nlinear",
    "r2_flops_only": "R²\nFLOPs only", "equal_flops_spread": "spread at\nequal FLOPs",
    "median_peak_fraction": "median\n% of peak", "median_roofline_fraction": "median %\nof roofline",
    "above_roof": "above roof\n(why)",
}
SPECTRUM_FORMATS: Formats = {
    "spearman": render.coef, "r2_linear": render.coef, "r2_flops_only": render.coef,
    "equal_flops_spread": render.ratio, "median_peak_fraction": render.percent,
    "median_roofline_fraction": render.percent,
}
FIT_COLUMNS = ("spearman", "r2_linear", "r2_flops_only")


def spectrum_cells(frame: pd.DataFrame) -> tuple[pd.DataFrame, str | None]:
    """The spectrum as its tables show it, and the note to print below them: a family of too few points
    shows n/a where its rank correlation and R² would be."""
    from wlprof.analysis.spectrum import FEW_POINTS, FEW_POINTS_NOTE, MIN_FIT_POINTS

    out = frame.astype({c: object for c in FIT_COLUMNS if c in frame})
    few = out.points < MIN_FIT_POINTS if "points" in out else pd.Series(False, index=out.index)
    out.loc[few, [c for c in FIT_COLUMNS if c in out]] = FEW_POINTS
    return out, FEW_POINTS_NOTE if few.any() else None


SPECTRUM_PRIORITY = {"family": 10, "points": 4, "spearman": 8, "r2_linear": 6, "r2_flops_only": 8,
                     "equal_flops_spread": 9, "median_peak_fraction": 7, "median_roofline_fraction": 7,
                     "above_roof": 5}

"""DataFrame columns of Python strings kept as object dtype."""

from __future__ import annotations

import numpy as np
import pandas as pd


def object_column(values, index=None) -> pd.Series:
    """An object column of Python strings (or None), on `index` (a table's own: a slice of a stored
    table keeps its row labels, and a Series is assigned by label).

    Rows share their string objects: pandas 3 would otherwise copy every row's string into an
    Arrow buffer (a kernel's 250-character name, once per row), which on a million-event trace
    costs hundreds of MB; the Parquet writer builds Arrow strings once per file instead.
    """
    return pd.Series(np.asarray(values, dtype=object), dtype=object, index=index)


def filled(n: int, value) -> np.ndarray:
    """An object array of `n` rows that all hold `value` itself.

    `np.full(n, "text", dtype=object)` and `np.where(mask, objects, "text")` store a new copy of
    the string in every row (numpy converts it to a fixed-width string array first).
    """
    out = np.empty(n, dtype=object)
    out.fill(value)
    return out


def per_distinct(values: np.ndarray, test) -> np.ndarray:
    """`test(value)` of each of `values` as a bool array, `test` called once per distinct value.

    The rows of a table repeat a few values (a kernel's 200-character name on each of its launches);
    a dict of them hashes each row by the hash Python keeps on the string, where pandas' factorize
    hashes every row's characters anew.
    """
    answer = dict.fromkeys(values)
    for v in answer:
        answer[v] = bool(test(v))
    return np.fromiter(map(answer.__getitem__, values), dtype=bool, count=len(values))


NAME_CODE = "_name_code"  # a trace table's private column: each row's name as the parser's code of it


def coded_names(table: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(codes, names, held) of a trace table that keeps the parser's name codes (`NAME_CODE`): each row's
    code, the name at each code (None at codes no row holds) and the codes some row holds; None for a
    table without them. A per-name answer is then one call per held code, spread by indexing: no hash
    of every row's name."""
    if NAME_CODE not in table or "name" not in table:
        return None
    codes = table[NAME_CODE].to_numpy().astype(np.int64, copy=False)
    names = np.full(int(codes.max()) + 1 if len(codes) else 0, None, dtype=object)
    names[codes] = table["name"].to_numpy(dtype=object)  # the rows of a code share its name
    return codes, names, np.flatnonzero(np.bincount(codes, minlength=len(names)))

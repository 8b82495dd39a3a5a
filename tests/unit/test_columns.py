"""wlprof.columns: object columns that share their strings, and tests run once per distinct value."""

from __future__ import annotations

import numpy as np
import pandas as pd

from wlprof.columns import filled, per_distinct


def test_filled_rows_hold_the_one_value_itself():
    label = "unknown"
    col = filled(5, label)
    assert col.dtype == object and col.tolist() == [label] * 5
    assert all(v is label for v in col)  # np.full would have stored a copy per row
    assert filled(0, label).tolist() == []


def test_per_distinct_answers_every_row_and_asks_once_per_value():
    asked = []

    def test(v):
        asked.append(v)
        return isinstance(v, str) and v.startswith("nccl")

    kernel = "ncclKernel_AllReduce_RING_LL_Sum_float" * 5  # repeated long names, as in a kernels table
    values = np.array([kernel, "gemm", None, kernel, "gemm", None, kernel], dtype=object)
    got = per_distinct(values, test)
    assert got.dtype == bool and got.tolist() == [True, False, False, True, False, False, True]
    assert asked == [kernel, "gemm", None]
    # the same answer as pandas' factorize would give, row by row
    codes, uniq = pd.factorize(pd.Series(values, dtype=object), use_na_sentinel=False)
    assert (np.array([test(u) for u in uniq], dtype=bool)[codes] == got).all()
    assert per_distinct(np.array([], dtype=object), test).tolist() == []

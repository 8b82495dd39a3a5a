"""wlprof: kernel-by-kernel profiling that shows where FLOPs stop predicting latency.

The package imports nothing heavy at import time: torch, pandas and pyarrow are
imported by the functions that need them, so `wlprof --help` stays instant.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__", "load"]


def load(path="traces", table: str = "kernels", **filters):
    """Load one table of every run under `path` as a pandas DataFrame.

    `filters` are column == value (or column in list) conditions, pushed down to
    the Parquet reader, e.g. ``wlprof.load("traces", workload="moe")``.
    """
    from wlprof.store.tables import load_table

    return load_table(path, table=table, **filters)

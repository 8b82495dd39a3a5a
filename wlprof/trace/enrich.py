"""The enriched Chrome trace: the raw trace with wlprof's numbers in each kernel's args.

A user clicking a kernel in Perfetto or chrome://tracing sees its FLOPs, bytes,
intensity, achieved TFLOP/s and GB/s, bound and roofline fraction, and where the
FLOPs came from. On a CPU trace the annotated events are the ops that did work.
"""

from __future__ import annotations

import gzip
import math
from typing import Any

import pandas as pd

from wlprof import jsonio

ARG_COLUMNS = {
    "flops": "flops",
    "bytes": "bytes",
    "intensity_flop_per_byte": "intensity (FLOP/byte)",
    "achieved_tflops": "achieved TFLOP/s",
    "achieved_gbps": "achieved GB/s",
    "bound": "bound",
    "roofline_fraction": "roofline fraction",
    "roof": "roof",
    "roof_note": "roof note",
    "flops_source": "flops source",
    "region": "wlprof region",
}


def _clean(v: Any) -> Any:
    if v is None:
        return None
    if isinstance(v, float) and math.isnan(v):
        return None
    if hasattr(v, "item"):
        v = v.item()
        if isinstance(v, float) and math.isnan(v):
            return None
    return v


def enriched_trace(meta: dict, events: list[dict], kernels: pd.DataFrame, extra_meta: dict) -> bytes:
    """Gzipped JSON of the trace with kernel args filled from `kernels` (its `_event_idx` column)."""
    cols = [c for c in ARG_COLUMNS if c in kernels.columns]
    idx = kernels["_event_idx"].to_numpy()
    values = {c: kernels[c].to_numpy() for c in cols}
    for row, ev_i in enumerate(idx):
        ev = events[ev_i]
        args = ev.get("args")
        if not isinstance(args, dict):
            args = ev["args"] = {}
        for c in cols:
            v = _clean(values[c][row])
            if v is not None:
                args[ARG_COLUMNS[c]] = v
    doc = dict(meta)
    doc["wlprof"] = extra_meta
    doc["traceEvents"] = events
    return gzip.compress(jsonio.dumps(doc), compresslevel=5)

"""Costing a model's op calls: one request profiled once, through wlprof's pipeline, times never used.

The planners need each model's op calls with their FLOPs and bytes (L0, L2) and the calls'
identities (L3 looks them up in the profile). They come from building the model's step at its
sizes on the planning device and recording one request under torch.profiler with shapes; the
pipeline costs every call with the formula registry and the workload's stated costs, exactly as
`wlprof run` does. The measured durations of this pass are kept in the table but no planner
reads them.
"""

from __future__ import annotations

import math
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd


@dataclass
class ModelCost:
    name: str
    flops: float  # per request (all layers), known FLOPs only
    bytes: float
    peak_us: float  # L0: sum over op calls of FLOPs / the measured peak of the call's unit and dtype
    roofline_us: float  # L2: sum over op calls of max(FLOPs / peak, bytes / bandwidth)
    unknown_share: float  # share of the profiled op time whose FLOPs are unknown (left out of L0)
    ops: pd.DataFrame  # one request's op calls (one layer; `layers` repeats it)
    layers: int = 1


def summarize_ops(name: str, ops: pd.DataFrame, layers: int) -> ModelCost:
    """L0 and L2 work of one request from its op calls' costs."""
    known = ops[ops.flops.notna()] if len(ops) else ops
    tf = pd.to_numeric(known.get("ceiling_tflops"), errors="coerce") if len(known) else pd.Series(dtype=float)
    ok = tf.notna() & (tf > 0) if len(known) else pd.Series(dtype=bool)
    peak = float((known.flops[ok] / (tf[ok] * 1e6)).sum()) if len(known) else 0.0
    roof = float(pd.to_numeric(ops.roofline_us, errors="coerce").fillna(0).sum()) if len(ops) else 0.0
    total = float(ops.dur_us.sum()) if len(ops) else 0.0
    unknown = float(ops.loc[ops.flops.isna(), "dur_us"].sum() / total) if total > 0 else math.nan
    flops = float(known.flops.sum()) if len(known) else 0.0
    nbytes = float(pd.to_numeric(ops["bytes"], errors="coerce").fillna(0).sum()) if len(ops) else 0.0
    return ModelCost(name, flops * layers, nbytes * layers, peak * layers, roof * layers, unknown, ops, layers)


def cost_step(model, built, device, ceilings, run_id: str = "place") -> ModelCost:
    """Profile one step of `built` (already warmed up) and cost its op calls."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    from wlprof import pipeline
    from wlprof.device import device_name, synchronize

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with tempfile.TemporaryDirectory(prefix="wlprof-place-") as tmp:
        raw = Path(tmp) / "cost.json"
        with torch.inference_mode():
            built.step()
            synchronize(device)
            with profile(activities=activities, record_shapes=True) as prof:
                with record_function("wlprof/step#0"):
                    built.step()
                synchronize(device)
            prof.export_chrome_trace(str(raw))
        identity: dict[str, Any] = {"run_id": run_id, "workload": model.workload, "device_type": device.type,
                                    "device_name": device_name(device), "dtype": model.dtype_name,
                                    **model.params, **built.facts, "variant": model.point.variant, "point": 0}
        tf32 = bool(device.type == "cuda" and torch.backends.cuda.matmul.allow_tf32)
        tables = pipeline.process(raw, ceilings=ceilings, identity=identity, stated=built.stated, timings=None,
                                  profiled_steps=1, useful_flops=built.useful_flops,
                                  executed_regions=built.executed_regions, tf32=tf32)
    ops = tables.ops
    ops = ops[ops.step >= 0] if "step" in ops else ops
    return summarize_ops(model.name, ops.reset_index(drop=True), model.layers)


def costs_table(costs: dict[str, ModelCost]) -> pd.DataFrame:
    """Every model's op calls, one table (a `model` column added)."""
    frames = [c.ops.assign(model=name) for name, c in costs.items() if len(c.ops)]
    if not frames:
        return pd.DataFrame()
    df = pd.concat(frames, ignore_index=True)
    # Parquet wants one type per column: lists and dicts as JSON text, the rest as is
    for col in df.columns:
        if df[col].dtype == object and df[col].map(lambda v: isinstance(v, (list, dict, np.ndarray))).any():
            df[col] = df[col].map(lambda v: None if v is None else str(list(v) if isinstance(v, np.ndarray) else v))
    return df

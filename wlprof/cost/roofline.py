"""Roofline placement: intensity, achieved rates and the roof a kernel is placed against."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from wlprof.ceilings import Ceilings


def _obj(values) -> pd.Series:
    return pd.Series(np.asarray(values, dtype=object), dtype=object)


def add_roofline(df: pd.DataFrame, ceilings: Ceilings | None, tf32: bool = False) -> None:
    """Intensity, achieved rates and roofline placement, in place (needs flops, bytes, dur_us, cost_unit, cost_dtype)."""
    flops = df["flops"].to_numpy(dtype=float)
    nbytes = df["bytes"].to_numpy(dtype=float)
    dur = df["dur_us"].to_numpy(dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        df["intensity_flop_per_byte"] = np.where(nbytes > 0, flops / nbytes, np.nan)
        df["achieved_tflops"] = np.where(dur > 0, flops / dur / 1e6, np.nan)
        df["achieved_gbps"] = np.where(dur > 0, nbytes / dur / 1e3, np.nan)
    if ceilings is None:
        for c in ("ceiling_tflops", "ceiling_gbps", "ridge_flop_per_byte", "roofline_us", "roofline_fraction"):
            df[c] = np.nan
        df["bound"] = None
        return
    units = df["cost_unit"].to_numpy(dtype=object)
    dts = df["cost_dtype"].to_numpy(dtype=object)
    cache: dict[tuple, float] = {}
    peak = np.empty(len(df))
    for i, key in enumerate(zip(units, dts, strict=True)):
        if key not in cache:
            cache[key] = ceilings.compute_tflops(key[0], key[1], tf32) if key[0] else math.nan
        peak[i] = cache[key]
    bw = float(ceilings.copy_gbps)
    with np.errstate(divide="ignore", invalid="ignore"):
        t_compute = flops / (peak * 1e6)
        t_memory = nbytes / (bw * 1e3)
        roof = np.fmax(t_compute, t_memory)
        roof = np.where(np.isnan(t_compute) | np.isnan(t_memory), np.nan, roof)
        df["ceiling_tflops"] = peak
        df["ceiling_gbps"] = np.where(np.isnan(peak), np.nan, bw)
        df["ridge_flop_per_byte"] = peak * 1e3 / bw
        df["roofline_us"] = roof
        df["roofline_fraction"] = np.where(dur > 0, roof / dur, np.nan)
    df["bound"] = _obj(np.where(np.isnan(roof), None, np.where(t_compute >= t_memory, "compute", "memory")))

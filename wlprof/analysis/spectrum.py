"""How well FLOPs explain latency, per workload family: rank correlation, R², spread at equal FLOPs.

Also the median fraction of the compute peak and of the roofline each family reached.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from wlprof.analysis.families import add_family, workload_label

# The fewest points a rank correlation or an R² is computed from: through two points a line fits exactly and
# their ranks correlate +-1, whatever the points are.
MIN_FIT_POINTS = 3
FEW_POINTS = "n/a"  # what the tables show in their place, with FEW_POINTS_NOTE below
FEW_POINTS_NOTE = (f"n/a: fewer than {MIN_FIT_POINTS} points, too few for a rank correlation or an R² (through "
                   "two points a line fits exactly)")


def r2(y: np.ndarray, pred: np.ndarray) -> float:
    ss_res = float(np.sum((y - pred) ** 2))
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    if ss_tot == 0:
        return 1.0 if ss_res == 0 else float("nan")
    return 1.0 - ss_res / ss_tot


def r2_linear(x: np.ndarray, y: np.ndarray) -> float:
    """R^2 of the least-squares line y = a x + b (NaN below MIN_FIT_POINTS points)."""
    if len(x) < MIN_FIT_POINTS or np.ptp(x) == 0:
        return float("nan")
    slope, intercept = np.polyfit(x, y, 1)
    return r2(y, slope * x + intercept)


def r2_flops_only(x: np.ndarray, y: np.ndarray) -> float:
    """R^2 of y = x / T with T fitted by least squares through the origin (Level 0, fitted); NaN below
    MIN_FIT_POINTS points."""
    if len(x) < MIN_FIT_POINTS or not np.any(x):
        return float("nan")
    a = float(np.dot(x, y) / np.dot(x, x))
    return r2(y, a * x)


def equal_flops_groups(flops: np.ndarray, rel_tol: float = 0.01) -> np.ndarray:
    """Group ids: points whose FLOPs are within rel_tol of their group's smallest share an id."""
    order = np.argsort(flops)
    gid = np.empty(len(flops), dtype=int)
    current, base = -1, None
    for i in order:
        f = flops[i]
        if base is None or f > base * (1 + rel_tol):
            current += 1
            base = f
        gid[i] = current
    return gid


def equal_flops_spread(flops: np.ndarray, latency: np.ndarray, rel_tol: float = 0.01) -> float:
    """The largest max/min latency ratio among groups of >= 2 points with equal FLOPs (NaN: no such group)."""
    if len(flops) < 2:
        return float("nan")
    gid = equal_flops_groups(flops, rel_tol)
    best = float("nan")
    for g in np.unique(gid):
        lat = latency[gid == g]
        if len(lat) >= 2 and lat.min() > 0:
            ratio = float(lat.max() / lat.min())
            best = ratio if np.isnan(best) else max(best, ratio)
    return best


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rank correlation (NaN below MIN_FIT_POINTS points)."""
    if len(x) < MIN_FIT_POINTS:
        return float("nan")
    return float(pd.Series(x).rank().corr(pd.Series(y).rank()))


def workload_flops(steps: pd.DataFrame) -> pd.Series:
    """The FLOPs a FLOPs-based model would be given: the workload's useful FLOPs (MoE: the
    routed tokens' expert work, padding excluded) where recorded, else the kernels' FLOPs."""
    if "useful_flops" in steps:
        return steps.useful_flops.fillna(steps.flops)
    return steps.flops


def _above_roof(g: pd.DataFrame) -> str | None:
    """'N of M points: reasons' for the points whose roofline fraction is above 1 (None: none is)."""
    above = g[g.roofline_fraction > 1]
    if above.empty:
        return None
    from wlprof.ceilings import ABOVE_ROOF_NOTES

    notes = above.roof_note if "roof_note" in above else pd.Series([None] * len(above), index=above.index)
    seen = {n for v in notes.dropna() for n in str(v).split(",") if n in ABOVE_ROOF_NOTES}
    why = ", ".join(n for n in ABOVE_ROOF_NOTES if n in seen) or "no reason recorded"
    return f"{len(above)} of {len(g)}: {why}"


def spectrum(steps: pd.DataFrame, latency: str = "latency_us", rel_tol: float = 0.01,
             workload_totals: bool = True) -> pd.DataFrame:
    """One row per family: how well FLOPs explain `latency` (a steps-table column) there.

    With `workload_totals`, a workload split over several families (MoE by routing, GNN
    by backend) also gets a row of its own: the spread across routings or backends.
    """
    s = steps[(steps.get("status", "ok") == "ok") & steps.flops.notna() & steps[latency].notna()]
    s = add_family(s.assign(flops=workload_flops(s)))
    groups = list(s.groupby("family", sort=False))
    if workload_totals:
        for wl, g in s.groupby("workload", sort=False):
            if g.family.nunique() > 1:
                groups.append((f"{workload_label(wl)} (all)", g))
    rows = []
    for fam, g in groups:
        x, y = g.flops.to_numpy(float), g[latency].to_numpy(float)
        peak = (g.achieved_tflops / g.ceiling_tflops).replace([np.inf, -np.inf], np.nan)
        rows.append({
            "family": fam,
            "points": len(g),
            "flops_min": float(x.min()),
            "flops_max": float(x.max()),
            "latency_min_us": float(y.min()),
            "latency_max_us": float(y.max()),
            "spearman": spearman(x, y),
            "r2_linear": r2_linear(x, y),
            "r2_flops_only": r2_flops_only(x, y),
            "equal_flops_spread": equal_flops_spread(x, y, rel_tol),
            "median_peak_fraction": float(peak.median()) if peak.notna().any() else float("nan"),
            "median_roofline_fraction": float(g.roofline_fraction.median()),
            "above_roof": _above_roof(g),
        })
    return pd.DataFrame(rows)

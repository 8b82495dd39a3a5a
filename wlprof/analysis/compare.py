"""Two runs (or two sweep points) side by side: where did the extra time go?"""

from __future__ import annotations

import numpy as np
import pandas as pd

from wlprof.analysis.families import add_category
from wlprof.analysis.summary import profiled_steps

# The steps-table numbers compared, and the statistic each one is (wlprof.steps.summarize)
STEP_COLUMNS = {
    "latency_us": "median of single calls",
    "back_to_back_us": "median of batches",
    "graph_us": "median of graph replays",
    "kernel_us": "median of profiled steps",
    "host_overhead_us": "median latency - median kernel time",
    "kernels_per_step": "mean of profiled steps",
    "flops": "mean of profiled steps",
    "useful_flops": "mean of profiled steps",
    "executed_flops": "mean of profiled steps",
    "bytes": "mean of profiled steps",
    "achieved_tflops": "mean FLOPs / median kernel time",
    "achieved_gbps": "mean bytes / median kernel time",
}
# What the per-group tables hold: totals over the profiled steps divided by their count
GROUP_STATISTIC = "mean of profiled steps"


def per_step(kernels: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Kernel time, count, FLOPs and bytes per profiled step (of one rank, where there are several), grouped by
    `by`."""
    k = add_category(kernels[kernels.step >= 0])
    k["region"] = k.region.fillna("(none)")
    steps = profiled_steps(k)
    g = k.groupby(by, dropna=False)
    return pd.DataFrame({
        "dur_us": g.dur_us.sum() / steps,
        "kernels": g.size() / steps,
        "flops": g.flops.sum(min_count=1) / steps,
        "bytes": g["bytes"].sum(min_count=1) / steps,
    })


def compare_kernels(a: pd.DataFrame, b: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Per group: time per step in A and B, B - A, B / A and the group's share of the total difference."""
    pa, pb = per_step(a, by), per_step(b, by)
    out = pa.merge(pb, how="outer", left_index=True, right_index=True, suffixes=("_a", "_b")).fillna({"dur_us_a": 0.0, "dur_us_b": 0.0,
                                                                       "kernels_a": 0.0, "kernels_b": 0.0})
    out["diff_us"] = out.dur_us_b - out.dur_us_a
    with np.errstate(divide="ignore", invalid="ignore"):
        out["ratio"] = np.where(out.dur_us_a > 0, out.dur_us_b / out.dur_us_a, np.inf)
    total = out.diff_us.sum()
    out["share_of_diff"] = out.diff_us / total if total != 0 else np.nan
    return out.sort_values("diff_us", key=np.abs, ascending=False).reset_index()


def compare_steps(a: pd.Series, b: pd.Series) -> pd.DataFrame:
    """The steps-table numbers of two sweep points, the statistic each is, and B / A (none where either is
    negative: a negative host overhead is a difference, and its ratio means nothing)."""
    rows = []
    for c, statistic in STEP_COLUMNS.items():
        va, vb = a.get(c), b.get(c)
        va = float(va) if va is not None and pd.notna(va) else np.nan
        vb = float(vb) if vb is not None and pd.notna(vb) else np.nan
        ratio = vb / va if va > 0 and vb >= 0 else np.nan
        rows.append({"metric": c, "statistic": statistic, "a": va, "b": vb, "ratio": ratio})
    return pd.DataFrame(rows)


def negative_overhead_note(points: dict[str, pd.Series]) -> str | None:
    """A note naming the points whose `host_overhead_us` is negative, and why that happens; None if none is."""
    neg = [name for name, row in points.items()
           if row.get("host_overhead_us") is not None and pd.notna(row.get("host_overhead_us"))
           and float(row["host_overhead_us"]) < 0]
    if not neg:
        return None
    return (f"note: host_overhead_us is negative in {' and '.join(neg)}: the profiled kernel time exceeds the "
            "unprofiled latency (on a CPU, op times under the profiler include its own overhead), so the "
            "difference is no host time")

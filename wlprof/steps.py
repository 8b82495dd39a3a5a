"""The steps table: per sweep point, the three timings beside the profiled kernel totals."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from wlprof.timing import Timings

# A point's timings are `noisy` when its repeated samples spread more than this (see `spread`).
NOISY_SPREAD = 0.25


def spread(samples) -> float:
    """How far repeated samples of one timing scatter, relative to their median: (p90 - p10) / median
    with 10 or more samples, (max - min) / median with 2-9 (too few for percentiles). NaN below 2."""
    xs = np.asarray([x for x in (samples if samples is not None else []) if x == x], dtype=float)
    if len(xs) < 2:
        return math.nan
    med = float(np.median(xs))
    if med <= 0:
        return math.nan
    lo, hi = (np.percentile(xs, [10, 90]) if len(xs) >= 10 else (xs.min(), xs.max()))
    return float((hi - lo) / med)


def timing_spread(latency, back_to_back, graph, kernel) -> tuple[float, str | None]:
    """The largest spread among a point's sample sets and which set it is (NaN, None: none measured)."""
    best, which = math.nan, None
    for name, xs in (("latency", latency), ("back_to_back", back_to_back), ("graph", graph), ("kernel", kernel)):
        s = spread(xs)
        if s == s and not best >= s:
            best, which = s, name
    return best, which


def _busy_us(starts: np.ndarray, ends: np.ndarray) -> float:
    """Length of the union of [start, end) intervals: device busy time, overlap counted once."""
    if len(starts) == 0:
        return 0.0
    order = np.argsort(starts)
    s, e = starts[order], ends[order]
    if np.isfinite(s).all() and np.isfinite(e).all() and (e >= s).all():
        return _busy_sorted_array(s, e)
    total, cur_s, cur_e = 0.0, s[0], e[0]
    for a, b in zip(s[1:], e[1:], strict=True):
        if a > cur_e:
            total += cur_e - cur_s
            cur_s, cur_e = a, b
        else:
            cur_e = max(cur_e, b)
    return float(total + cur_e - cur_s)


def _busy_sorted_array(s: np.ndarray, e: np.ndarray) -> float:
    """`_busy_us` by array operations, for finite intervals sorted by start with no negative duration:
    each start past the furthest end before it begins a piece (with none ending before it starts, that end
    is its own piece's); the pieces are summed one after another in start order, as the sweep sums them."""
    reach = np.maximum.accumulate(e)
    first = np.flatnonzero(np.r_[True, s[1:] > reach[:-1]])
    piece_s, piece_e = s[first], reach[np.r_[first[1:] - 1, len(s) - 1]]
    total = float(np.add.accumulate(piece_e[:-1] - piece_s[:-1])[-1]) if len(first) > 1 else 0.0
    return float(total + piece_e[-1] - piece_s[-1])


def note_union(notes: pd.Series) -> str | None:
    """Every roof note of a set of rows, once each, in the roofline's order (None when there are none)."""
    from wlprof.ceilings import NOTES

    seen = {n for v in notes.dropna().unique() for n in str(v).split(",") if n}
    ordered = [n for n in NOTES if n in seen] + sorted(seen - set(NOTES))
    return ",".join(ordered) or None


def roofline_fields(k: pd.DataFrame, n_steps: int) -> dict:
    """A steps row's placement from its kernels (step >= 0): the roofline time per step, its fraction
    of the kernel time (over the placed kernels), the bound holding most time, the longest kernel's
    ceilings, and every roof note."""
    roofed = k[k.roofline_us.notna()]
    roof_us = float(roofed.roofline_us.sum()) / n_steps if len(roofed) else math.nan
    roof_frac = float(roofed.roofline_us.sum() / roofed.dur_us.sum()) if roofed.dur_us.sum() > 0 else math.nan
    bound = None
    if len(roofed):
        by_bound = roofed.groupby("bound").dur_us.sum()
        bound = str(by_bound.idxmax())
    # the longest kernel's ceilings: the sort of the whole frame, on the four columns read
    top = k[["dur_us", "ceiling_tflops", "ceiling_gbps", "ridge_flop_per_byte"]].sort_values(
        "dur_us", ascending=False).head(1)
    return {
        "ceiling_tflops": float(top.ceiling_tflops.iloc[0]) if len(top) else math.nan,
        "ceiling_gbps": float(top.ceiling_gbps.iloc[0]) if len(top) else math.nan,
        "ridge_flop_per_byte": float(top.ridge_flop_per_byte.iloc[0]) if len(top) else math.nan,
        "bound": bound,
        "roofline_us": roof_us,
        "roofline_fraction": roof_frac,
        "roof_note": note_union(k["roof_note"]) if "roof_note" in k else None,
    }


def replace_steps_roofline(steps: pd.DataFrame, kernels: pd.DataFrame) -> pd.DataFrame:
    """Stored steps rows with their placement recomputed from their (re-placed) kernels (a copy)."""
    out = steps.copy()
    if out.empty:
        return out
    k = kernels[kernels.step >= 0]
    groups = dict(iter(k.groupby(["run_id", "point"], sort=False)))
    for i, row in out.iterrows():
        g = groups.get((row["run_id"], row["point"]))
        if g is None or row.get("status", "ok") == "failed":
            continue
        for key, value in roofline_fields(g, max(g.step.nunique(), 1)).items():
            out.at[i, key] = value
    return out


def summarize(kernels: pd.DataFrame, timings: Timings | None, profiled_steps: int,
              useful_flops: float | None, executed_regions: tuple[str, ...] | None = None) -> dict:
    """One steps-table row (without identity and parameters) for a profiled point."""
    cols = ["step", "ts_us", "dur_us", "flops", "bytes", "flops_source", "roofline_us", "bound",
            "ceiling_tflops", "ceiling_gbps", "ridge_flop_per_byte", "region", "roof_note"]
    cols = [c for c in cols if c in kernels]
    k = kernels.loc[kernels.step >= 0, cols]  # only the columns needed: a large trace's rows are wide
    steps = sorted(k.step.unique())
    per_step = k.groupby("step").dur_us.sum()
    # each step's rows in table order, as a groupby gives them, without a frame per step
    at, bounds = np.argsort(k.step.to_numpy(), kind="stable"), np.r_[0, np.cumsum(k.groupby("step").size())]
    starts, ends = k.ts_us.to_numpy(), (k.ts_us + k.dur_us).to_numpy()
    busy = [_busy_us(starts[at[a:b]], ends[at[a:b]]) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    n_steps = max(len(steps), 1)
    kernel_us = float(per_step.median()) if len(per_step) else math.nan
    # the columns summed, each of the rows that have it (not the frame's rows: a copy of every column)
    has_flops, has_bytes = k.flops.notna(), k["bytes"].notna()
    known = k.flops[has_flops]
    flops = float(known.sum()) / n_steps if len(known) else math.nan
    known_bytes = k["bytes"][has_bytes]
    nbytes = float(known_bytes.sum()) / n_steps if len(known_bytes) else math.nan
    # the intensity of the kernels whose FLOPs and bytes are both known (a fused optimizer on the CPU has
    # FLOPs and no bytes: its FLOPs over the other kernels' bytes would be no intensity at all)
    both = has_flops & has_bytes
    both_bytes = float(k["bytes"][both].sum())
    intensity = float(k.flops[both].sum()) / both_bytes if both_bytes > 0 else math.nan
    if executed_regions is None:
        executed = flops
    else:
        executed = float(k.flops[has_flops & k.region.isin(executed_regions)].sum()) / n_steps
    total = k.dur_us.sum()
    unknown_share = float(k.loc[k.flops.isna(), "dur_us"].sum() / total) if total > 0 else math.nan
    bytes_unknown = float(k.loc[k["bytes"].isna(), "dur_us"].sum() / total) if total > 0 else math.nan
    placement = roofline_fields(k, n_steps)
    lat = timings.latency_median_us if timings is not None else math.nan  # ingested traces: not measured
    # an ingested trace has no unprofiled timings, but its profiled steps' kernel times spread as a run's do
    spread_, spread_of = (timing_spread(timings.latency_us, timings.back_to_back_us, timings.graph_us,
                                        per_step.to_numpy()) if timings is not None
                          else timing_spread(None, None, None, per_step.to_numpy()))
    with np.errstate(divide="ignore", invalid="ignore"):
        row = {
            "latency_us": lat,
            "latency_p10_us": timings.percentile(0.10) if timings else math.nan,
            "latency_p90_us": timings.percentile(0.90) if timings else math.nan,
            "latency_samples_us": list(timings.latency_us) if timings else None,
            "back_to_back_us": timings.back_to_back_median_us if timings else math.nan,
            "back_to_back_samples_us": list(timings.back_to_back_us) if timings else None,
            "calls_per_batch": timings.calls_per_batch if timings else None,
            "graph_us": timings.graph_median_us if timings else None,
            "graph_error": timings.graph_error if timings else "an ingested trace: no unprofiled timings",
            "kernel_us": kernel_us,
            "kernel_busy_us": float(np.median(busy)) if busy else math.nan,
            "kernels_per_step": len(k) / n_steps,
            "profiled_steps": profiled_steps,
            "dur_us": kernel_us,
            "flops": flops,
            "bytes": nbytes,
            "flops_source": ",".join(sorted(k.flops_source.dropna().unique())) if len(k) else None,
            "useful_flops": useful_flops if useful_flops is not None else executed,
            "executed_flops": executed,
            "unknown_time_share": unknown_share,
            "bytes_unknown_time_share": bytes_unknown,
            "intensity_flop_per_byte": intensity,
            "achieved_tflops": flops / kernel_us / 1e6 if kernel_us > 0 else math.nan,
            "achieved_gbps": nbytes / kernel_us / 1e3 if kernel_us > 0 else math.nan,
            "achieved_tflops_latency": flops / lat / 1e6 if lat > 0 else math.nan,  # NaN > 0 is False
            "achieved_tflops_useful": (useful_flops if useful_flops is not None else executed) / kernel_us / 1e6
            if kernel_us > 0 else math.nan,
            "achieved_tflops_executed": executed / kernel_us / 1e6 if kernel_us > 0 else math.nan,
            **placement,
            "host_overhead_us": lat - kernel_us,
            "timing_spread": spread_,
            "timing_spread_of": spread_of,
            "noisy": bool(spread_ > NOISY_SPREAD) if spread_ == spread_ else None,
            "status": "ok",
        }
    return row

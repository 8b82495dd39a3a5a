"""The report's figures. Each function takes DataFrames and returns a matplotlib Figure.

matplotlib is imported inside the functions (with the Agg backend), so importing
wlprof stays light and works without a display.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _colors(labels):
    plt = _plt()
    cmap = plt.get_cmap("tab20")
    return {lab: cmap(i % 20) for i, lab in enumerate(sorted(set(labels)))}


def _markers(labels):
    shapes = "osD^v<>PX*"
    return {lab: shapes[(i // 20 + i) % len(shapes)] for i, lab in enumerate(sorted(set(labels)))}


def roofline(ops: pd.DataFrame, ceilings: dict, title: str = "Roofline"):
    """Every op call as a point (intensity, achieved TFLOP/s), coloured by family, sized by time."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(9, 6), dpi=120)
    d = ops[(ops.intensity_flop_per_byte > 0) & (ops.achieved_tflops > 0)]
    bw = float(ceilings["copy_gbps"])  # GB/s
    x = np.logspace(-3, 5, 400)
    peaks = {f"matrix {k}": v for k, v in ceilings.get("matrix_tflops", {}).items() if k in ("bfloat16", "float32")}
    peaks["vector fp32"] = ceilings.get("vector_tflops")
    styles = ["-", "--", ":"]
    for (label, peak), ls in zip(peaks.items(), styles, strict=False):
        if peak:
            ax.plot(x, np.minimum(peak, bw * x / 1e3), ls, color="black", lw=1.2,
                    label=f"{label}: {peak:,.0f} TFLOP/s, {bw:,.0f} GB/s (measured)")
    if not d.empty:
        colors, markers = _colors(d.family), _markers(d.family)
        t = d.dur_us.to_numpy()
        sizes = 10 + 190 * np.sqrt(t / t.max())
        for fam, g in d.groupby("family"):
            idx = d.index.get_indexer(g.index)
            ax.scatter(g.intensity_flop_per_byte, g.achieved_tflops, s=sizes[idx], alpha=0.55,
                       color=colors[fam], marker=markers[fam], edgecolors="none", label=fam)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte, compulsory bytes)")
    ax.set_ylabel("achieved TFLOP/s")
    ax.set_title(title + " (marker area ~ time per call)")
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return fig


def latency_vs_flops(steps: pd.DataFrame, peak_tflops: float, fitted_tflops: float | None = None,
                     latency: str = "latency_us"):
    """Latency against FLOPs on log-log axes, one colour per family, with the FLOPs-only predictions."""
    from wlprof.analysis.spectrum import workload_flops

    plt = _plt()
    fig, ax = plt.subplots(figsize=(9, 6), dpi=120)
    d = steps.assign(flops=workload_flops(steps))
    d = d[(d.flops > 0) & (d[latency] > 0)]
    colors, markers = _colors(d.family), _markers(d.family)
    for fam, g in d.groupby("family"):
        ax.scatter(g.flops, g[latency], s=28, alpha=0.8, color=colors[fam], marker=markers[fam], label=fam)
    if not d.empty:
        x = np.logspace(np.log10(d.flops.min()) - 0.3, np.log10(d.flops.max()) + 0.3, 100)
        ax.plot(x, x / (peak_tflops * 1e6), "k-", lw=1, label=f"L0: FLOPs / peak ({peak_tflops:,.0f} TFLOP/s)")
        if fitted_tflops:
            ax.plot(x, x / (fitted_tflops * 1e6), "k--", lw=1,
                    label=f"L0 fitted: FLOPs / {fitted_tflops:,.1f} TFLOP/s")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("FLOPs per step (the workload's useful FLOPs)")
    ax.set_ylabel({"latency_us": "latency of one call (µs)", "kernel_us": "kernel time per step (µs)"}.get(
        latency, latency))
    ax.set_title("Latency vs FLOPs: where FLOPs stop predicting latency")
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def tflops_vs(steps: pd.DataFrame, axis: str, label: str):
    """Achieved TFLOP/s (kernels, and as a caller sees it) against a sweep parameter (MLP: batch)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 5), dpi=120)
    d = steps.sort_values(axis)
    for run, g in d.groupby("run_id"):
        ax.plot(g[axis], g.achieved_tflops, "o-", label=f"kernels ({run})")
        ax.plot(g[axis], g.achieved_tflops_latency, "s--", label=f"one call, as a caller sees it ({run})")
        if g.ceiling_tflops.notna().any():
            ax.axhline(g.ceiling_tflops.max(), color="grey", lw=0.8, ls=":")
    ax.set_xscale("log", base=2)
    ax.set_xlabel(axis)
    ax.set_ylabel("achieved TFLOP/s")
    ax.set_title(f"{label}: achieved TFLOP/s against {axis}")
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def phases(per_region: pd.DataFrame, title: str):
    """Stacked bars: time per step by region (columns) for each variant (rows of `per_region`)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(max(6, 0.6 * len(per_region) + 3), 5), dpi=120)
    bottom = np.zeros(len(per_region))
    labels = [str(i) for i in per_region.index]
    for col in per_region.columns:
        vals = per_region[col].fillna(0).to_numpy()
        ax.bar(labels, vals, bottom=bottom, label=str(col))
        bottom += vals
    ax.set_ylabel("kernel time per step (µs)")
    ax.set_title(title)
    ax.tick_params(axis="x", rotation=60, labelsize=7)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig

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


def _as_ceilings(ceilings):
    """A `Ceilings` from a Ceilings, a manifest's ceilings dict, or a partial dict (copy, matrix, vector)."""
    from wlprof.ceilings import Ceilings

    if isinstance(ceilings, Ceilings):
        return ceilings
    d = {"device_type": "cuda", "device_name": "", "source": "", "measured_at": "", "torch_version": "",
         "matrix_tflops": {}, "vector_tflops": None, **(ceilings or {})}
    return Ceilings.from_dict(d)


# how a point above its roof is marked, by the first of its reasons found in this order
_ABOVE = [("ceiling_stale", "X", "red"), ("above_measured_roof", "P", "darkorange"),
          ("indexed_reuse", "s", "olive"), ("cache_fit", "h", "teal"), ("data_dependent", "*", "navy"),
          ("mixed_traffic", "^", "purple"),
          ("written_unknown", "v", "brown"), ("within_spread", "D", "grey")]
_MEMORY_STYLE = {"read": "--", "copy": "-", "write": ":"}


def roofline_lines(ops: pd.DataFrame, ceilings) -> tuple[dict[str, float], dict[str, float]]:
    """The lines a hierarchical roofline draws: memory roofs (GB/s: the main memory's copy roof, its
    read and write roofs where they differ from it by more than 2%, every cache level) and compute
    roofs (TFLOP/s: one per compute roof the op calls are placed under, e.g. compute:bfloat16)."""
    from wlprof.cost.roofline import compute_key

    c = _as_ceilings(ceilings)
    mem = c.memory_roofs()
    copy = mem.get(f"{c.memory}_copy", c.copy_gbps)
    memory = {}
    for roof, bw in mem.items():
        _, _, kind = roof.partition("_")
        if kind in ("read", "write") and copy and abs(bw / copy - 1) <= 0.02:
            continue
        memory[roof] = bw
    if not memory and c.copy_gbps:
        memory[f"{c.memory}_copy"] = c.copy_gbps
    roofs = ops["compute_roof"] if "compute_roof" in ops else pd.Series([None] * len(ops), index=ops.index)
    derived = [f"compute:{k}" for k in (compute_key(u, d) for u, d in zip(ops.get("cost_unit", []),
                                                                          ops.get("cost_dtype", []), strict=False))
               if k]
    present = sorted(set(roofs.dropna()) | (set(derived) if roofs.isna().all() else set()))
    compute = {}
    for roof in present:
        key = roof.split(":", 1)[1]
        peak = c.vector_tflops if key == "vector" else c.matrix_tflops.get(key)
        if peak and np.isfinite(peak):
            compute[roof] = float(peak)
    if not compute:  # nothing placed: the matrix roofs of the usual dtypes, as before
        compute = {f"compute:{k}": v for k, v in c.matrix_tflops.items() if k in ("bfloat16", "float32")}
        if c.vector_tflops and np.isfinite(c.vector_tflops):
            compute["compute:vector"] = c.vector_tflops
    return memory, compute


def roofline(ops: pd.DataFrame, ceilings, title: str = "Roofline"):
    """Every op call as a point (intensity, achieved TFLOP/s), coloured by family, sized by time, under a
    hierarchical roofline: the main memory's copy roof (its read and write roofs where they differ), each
    cache level's, and one compute roof per dtype present. A point above its roof is marked by its reason
    (roof_note); a point placed against a cache level is ringed."""
    plt = _plt()
    c = _as_ceilings(ceilings)
    fig, ax = plt.subplots(figsize=(10, 6.5), dpi=120)
    d = ops[(ops.intensity_flop_per_byte > 0) & (ops.achieved_tflops > 0)]
    memory, compute = roofline_lines(ops, c)
    top = max(compute.values(), default=1.0)
    xmin, xmax = 1e-3, 1e5
    if not d.empty:
        xmin = min(xmin, float(d.intensity_flop_per_byte.min()) / 2)
        xmax = max(xmax, float(d.intensity_flop_per_byte.max()) * 2)
    for roof, bw in memory.items():
        level, _, kind = roof.partition("_")
        ridge = top * 1e3 / bw
        x = np.logspace(np.log10(xmin), np.log10(ridge), 200)
        ax.plot(x, bw * x / 1e3, _MEMORY_STYLE.get(kind, "-."), color="black" if kind else "teal", lw=1.2,
                label=f"{roof}: {bw:,.0f} GB/s (measured)")
    slowest = min(memory.values(), default=None)
    same: dict[float, list[str]] = {}
    for roof, peak in compute.items():  # roofs of one value (fp32 matrix and vector) share a line
        same.setdefault(peak, []).append(roof)
    for (peak, roofs), ls in zip(sorted(same.items(), reverse=True), ["-", "--", ":", "-."] * 4, strict=False):
        x0 = peak * 1e3 / slowest if slowest else xmin
        ax.plot([x0, xmax], [peak, peak], ls, color="dimgrey", lw=1.2,
                label=f"{', '.join(roofs)}: {peak:,.1f} TFLOP/s (measured)")
    if not d.empty:
        colors, markers = _colors(d.family), _markers(d.family)
        t = d.dur_us.to_numpy()
        sizes = 10 + 190 * np.sqrt(t / t.max())
        for fam, g in d.groupby("family"):
            idx = d.index.get_indexer(g.index)
            ax.scatter(g.intensity_flop_per_byte, g.achieved_tflops, s=sizes[idx], alpha=0.55,
                       color=colors[fam], marker=markers[fam], edgecolors="none", label=fam)
        notes = d["roof_note"].fillna("") if "roof_note" in d else pd.Series("", index=d.index)
        cached = notes.str.contains("_resident")
        if cached.any():
            g = d[cached]
            ax.scatter(g.intensity_flop_per_byte, g.achieved_tflops, s=60, facecolors="none", edgecolors="teal",
                       lw=0.8, label=f"placed against a cache level ({int(cached.sum())})")
        above = (d.roofline_fraction > 1) if "roofline_fraction" in d else pd.Series(False, index=d.index)
        left = above.copy()
        for reason, marker, color in _ABOVE:
            sel = left & notes.map(lambda s, r=reason: r in s.split(","))
            if sel.any():
                g = d[sel]
                ax.scatter(g.intensity_flop_per_byte, g.achieved_tflops, s=40, marker=marker, color=color,
                           lw=0.8, label=f"above its roof: {reason} ({int(sel.sum())})")
                left &= ~sel
        if left.any():  # never expected: every fraction above 1 carries a reason
            g = d[left]
            ax.scatter(g.intensity_flop_per_byte, g.achieved_tflops, s=40, marker="*", color="black",
                       label=f"above its roof: no reason recorded ({int(left.sum())})")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(xmin, xmax)
    ax.set_xlabel("arithmetic intensity (FLOP/byte, compulsory bytes)")
    ax.set_ylabel("achieved TFLOP/s")
    when = f"ceilings measured {c.measured_at}" if c.measured_at else "ceilings"
    ax.set_title(f"{title} (marker area ~ time per call; {when})", fontsize=10)
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=6.5, loc="lower right", ncol=2)
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

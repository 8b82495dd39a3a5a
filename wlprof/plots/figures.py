"""The report's figures. Each function takes DataFrames and returns a matplotlib Figure.

Each figure answers one question, said in its title: same FLOPs, different
latency (`latency_vs_flops`); where a sweep turns from memory- to compute-bound (`rate_vs_axis`,
the MLP over batch); where an MoE layer's time goes and what padding wastes (`phase_breakdown`);
which GNN backend moves its bytes at the copy bandwidth (`backends`); what one call costs beyond
its kernels (`timings`). The roofline (`roofline`) is drawn on the measured ceilings.

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
    """A `Ceilings` from a Ceilings, a manifest's ceilings dict, or a partial dict (copy, matrix, vector);
    None where nothing was measured (an ingested trace of a device never calibrated)."""
    from wlprof.ceilings import Ceilings

    if isinstance(ceilings, Ceilings):
        return ceilings
    d = {"device_type": "cuda", "device_name": "", "source": "", "measured_at": "", "torch_version": "",
         "matrix_tflops": {}, "vector_tflops": None, **(ceilings or {})}
    try:
        return Ceilings.from_dict(d)
    except KeyError:
        return None


# how a point above its roof is marked, by the first of its reasons found in this order
_ABOVE = [("ceiling_stale", "X", "red"), ("above_datasheet", "d", "magenta"), ("above_measured_roof", "P", "darkorange"),
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
    from wlprof.store.selection import _rate  # a CPU's 0.03 TFLOP/s roof is not labelled '0.0'

    plt = _plt()
    c = _as_ceilings(ceilings)
    fig, ax = plt.subplots(figsize=(10, 6.5), dpi=120)
    d = ops[(ops.intensity_flop_per_byte > 0) & (ops.achieved_tflops > 0)]
    memory, compute = roofline_lines(ops, c) if c is not None else ({}, {})
    kind_of = ceilings_kind(c)
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
                label=f"{roof}: {_rate(bw, 0)} GB/s ({kind_of})")
    slowest = min(memory.values(), default=None)
    same: dict[float, list[str]] = {}
    for roof, peak in compute.items():  # roofs of one value (fp32 matrix and vector) share a line
        same.setdefault(peak, []).append(roof)
    for (peak, roofs), ls in zip(sorted(same.items(), reverse=True), ["-", "--", ":", "-."] * 4, strict=False):
        x0 = peak * 1e3 / slowest if slowest else xmin
        ax.plot([x0, xmax], [peak, peak], ls, color="dimgrey", lw=1.2,
                label=f"{', '.join(roofs)}: {_rate(peak, 1)} TFLOP/s ({kind_of})")
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
    if c is None:
        when = "no ceilings measured for this device: no roofs drawn"
    else:
        when = (f"datasheet peaks of the {c.method.get('datasheet')}, not measured" if kind_of == "datasheet" else
                f"ceilings measured {c.measured_at}" if c.measured_at else "ceilings")
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=6.5, loc="lower right", ncol=2)
    _title_inside(ax, f"{title} (marker area ~ time per call; {when})", fontsize=10)
    return fig


def _title_inside(ax, text: str, fontsize: float) -> None:
    """Set the axes' title wrapped at the widest line length (in characters) whose lines stay inside the
    figure, 1% of its width from either edge, once it is laid out: several run ids make a title wider
    than the figure, and the title is centred over the axes, not over the figure (a line whose box
    ends at the edge still loses its last glyph's pixels there)."""
    import textwrap

    fig = ax.figure
    pad = 0.01 * fig.bbox.width
    for width in range(120, 19, -5):
        title = ax.set_title(textwrap.fill(text, width), fontsize=fontsize)
        fig.tight_layout()
        box = title.get_window_extent(fig.canvas.get_renderer())
        if box.x0 >= fig.bbox.x0 + pad and box.x1 <= fig.bbox.x1 - pad:
            return


# --------------------------------------------------------------------------- shared


def num(v: float, digits: int = 3) -> str:
    """A number as the report writes it: three significant digits below 1,000, whole numbers above."""
    if v is None or not np.isfinite(v):
        return "-"
    if v == 0:
        return "0"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    if abs(v) < 1e-3:
        return f"{v:.2g}"
    return f"{v:,.{max(0, digits - 1 - int(np.floor(np.log10(abs(v)))))}f}"


def rate(tflops: float) -> str:
    """A FLOP rate in the unit its magnitude wants: 806 TFLOP/s, 132 GFLOP/s."""
    if tflops is None or not np.isfinite(tflops):
        return "-"
    return f"{num(tflops)} TFLOP/s" if tflops >= 1 else f"{num(tflops * 1e3)} GFLOP/s"


def _time_unit(values) -> tuple[float, str]:
    v = np.asarray([float(x) for x in values if pd.notna(x) and x > 0], dtype=float)
    top = v.max() if len(v) else 0.0
    return (1.0, "µs") if top < 1e4 else ((1e3, "ms") if top < 1e7 else (1e6, "s"))


def _palette(labels, cmap: str = "tab10"):
    plt = _plt()
    cm = plt.get_cmap(cmap)
    n = cm.N if hasattr(cm, "N") else 10
    return {lab: cm(i % n) for i, lab in enumerate(labels)}


def tick(v: float) -> str:
    """A tick label: 1, 10, 1,000, 0.1 (whole numbers without decimals)."""
    if v >= 1 and abs(v - round(v)) < 1e-9 * max(1.0, v):
        return f"{v:,.0f}"
    return f"{v:g}" if v < 1000 else num(v)


def si_tick(v: float) -> str:
    """An SI tick label for counts: 100 M, 1 G, 10 T."""
    for div, suffix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= div:
            return f"{tick(v / div)} {suffix}"
    return tick(v)


def _log_ticks(ax, axis: str = "y", labels=tick) -> None:
    """Plain numbers on a log axis (1, 10, 100, 1,000 rather than 10^0 ... 10^3)."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    a = ax.yaxis if axis == "y" else ax.xaxis
    a.set_major_formatter(FuncFormatter(lambda v, _: labels(v)))
    a.set_minor_formatter(NullFormatter())


def _natural_key(text: str):
    """'F64' < 'F128' < 'F256'; 'zipf:0.5' < 'zipf:1.2': numbers inside labels sort as numbers."""
    import re

    return [float(t) if re.fullmatch(r"\d+(\.\d+)?", t) else t for t in re.split(r"(\d+(?:\.\d+)?)", str(text))]


# --------------------------------------------------------------------------- 1. same FLOPs, different latency


def latency_vs_flops(steps: pd.DataFrame, latency: str = "latency_us", rel_tol: float = 0.01, annotate: int = 3):
    """Per workload, latency against FLOPs on log axes with the FLOPs-only lines and, for points of equal
    FLOPs, the spread between the slowest and the fastest (the `annotate` widest labelled).

    `steps` needs `family` and a `peak_tflops` column (the measured matrix peak of each run's dtype).
    """
    from wlprof.analysis.spectrum import equal_flops_groups, workload_flops

    plt = _plt()
    d = steps.assign(flops=workload_flops(steps))
    d = d[(d.flops > 0) & (d[latency] > 0)]
    workloads = list(dict.fromkeys(d.workload))
    n = max(len(workloads), 1)
    cols = min(2, n)
    rows = int(np.ceil(n / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(7.6 * cols, 4.2 * rows), dpi=120, squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    for ax, wl in zip(axes.flat, workloads, strict=False):
        g = d[d.workload == wl]
        fams = sorted(dict.fromkeys(g.family), key=_natural_key)
        colors = _palette(fams, "tab10" if len(fams) <= 10 else "tab20")
        for fam in fams:
            f = g[g.family == fam]
            ax.scatter(f.flops, f[latency], s=30, alpha=0.85, color=colors[fam], label=fam, edgecolors="none",
                       zorder=3)
        lo, hi = g.flops.min(), g.flops.max()
        if hi / lo < 10:  # one FLOP count (the GEMM study): room either side
            lo, hi = lo / 4, hi * 4
        x = np.logspace(np.log10(lo), np.log10(hi), 50)
        peaks = g.peak_tflops.dropna() if "peak_tflops" in g else pd.Series(dtype=float)
        if len(peaks):
            peak = float(peaks.median())
            dtypes = "/".join(sorted(set(g.dtype.dropna()))) if "dtype" in g else ""
            ax.plot(x, x / (peak * 1e6), "k-", lw=1, label=f"FLOPs / {dtypes} peak ({rate(peak)})")
        fx, fy = g.flops.to_numpy(float), g[latency].to_numpy(float)
        fitted = float(np.dot(fx, fx) / np.dot(fx, fy)) / 1e6 if len(g) > 1 else None  # TFLOP/s, least squares
        if fitted:
            ax.plot(x, x / (fitted * 1e6), "k--", lw=1, label=f"FLOPs-only fit ({rate(fitted)})")
        # equal FLOPs: the slowest over the fastest, a bracket per group, the widest labelled
        gid = equal_flops_groups(fx, rel_tol)
        spans = []
        for k in np.unique(gid):
            ys = fy[gid == k]
            if len(ys) >= 2 and ys.min() > 0:
                xm = float(np.exp(np.log(fx[gid == k]).mean()))
                spans.append((ys.max() / ys.min(), xm, ys.min(), ys.max()))
                ax.plot([xm] * 2, [ys.min(), ys.max()], color="0.45", lw=0.8, zorder=1)
        spans.sort(reverse=True)
        for ratio, xm, y0, y1 in spans[:annotate]:
            if ratio >= 1.5:
                ax.annotate(f"{num(ratio)}x", (xm, np.sqrt(y0 * y1)), xytext=(4, 0), textcoords="offset points",
                            fontsize=7, color="0.15", va="center", zorder=4,
                            bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.8})
        best = spans[0][0] if spans else None
        label = str(g.family_label.iloc[0]) if "family_label" in g else str(wl)
        ax.set_title(f"{label}: " + (f"same FLOPs, up to {num(best)}x apart" if best else "latency vs FLOPs"),
                     fontsize=9)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo / 1.3, hi * 1.3)
        ax.set_xlabel("FLOPs per step (useful)", fontsize=8)
        ax.set_ylabel("latency of one call (µs)" if latency == "latency_us" else "kernel time per step (µs)",
                      fontsize=8)
        _log_ticks(ax)
        _log_ticks(ax, "x", si_tick)
        ax.tick_params(labelsize=7)
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=6.5, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.suptitle("Same FLOPs, different latency: one call's latency against its FLOPs, per workload\n"
                 "(solid: FLOPs over the measured peak; dashed: the best FLOPs-only fit; bars: points of equal FLOPs)",
                 fontsize=10)
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- 3. where memory-bound turns compute-bound


def ceilings_kind(ceilings) -> str:
    """'datasheet' for ceilings taken from a vendor's sheet (`--ceilings datasheet`), else 'measured'."""
    c = _as_ceilings(ceilings)
    return "datasheet" if c is not None and c.source == "datasheet" else "measured"


def rate_vs_axis(steps: pd.DataFrame, axis: str, label: str, peak_kind: str = "measured"):
    """Achieved rate (kernels, and as one call sees it) and latency against a sweep parameter (MLP: batch),
    with where the kernels turn from memory- to compute-bound marked; the peak line labelled `peak_kind`
    (measured, or datasheet)."""
    plt = _plt()
    d = steps.dropna(subset=[axis]).sort_values(axis)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 7.5), dpi=120, sharex=True,
                                      gridspec_kw={"height_ratios": [3, 2]})
    scale = 1.0 if d.achieved_tflops.max() >= 1 else 1e-3
    unit = "TFLOP/s" if scale == 1.0 else "GFLOP/s"
    t_scale, t_unit = _time_unit(pd.concat([d.latency_us, d.kernel_us]))
    runs = list(dict.fromkeys(d.run_id))
    for i, (run, g) in enumerate(d.groupby("run_id", sort=False)):
        suffix = f" ({run})" if len(runs) > 1 else ""
        x = g[axis].astype(float)
        top.plot(x, g.achieved_tflops / scale, "o-", color="C0", alpha=1 - 0.3 * i, label=f"kernels{suffix}")
        top.plot(x, g.achieved_tflops_latency / scale, "s--", color="C1", alpha=1 - 0.3 * i,
                 label=f"one call, as a caller sees it{suffix}")
        bottom.plot(x, g.latency_us / t_scale, "s--", color="C1", alpha=1 - 0.3 * i, label=f"one call{suffix}")
        bottom.plot(x, g.kernel_us / t_scale, "o-", color="C0", alpha=1 - 0.3 * i, label=f"kernels per step{suffix}")
    peak = d.ceiling_tflops.max() if "ceiling_tflops" in d else np.nan
    if peak == peak:
        top.axhline(peak / scale, color="0.4", lw=0.8, ls=":")
        top.annotate(f"{peak_kind} peak {rate(peak)}", (d[axis].min(), peak / scale), xytext=(2, 3),
                     textcoords="offset points", fontsize=7, color="0.3")
    # the switch from memory- to compute-bound (the bound holding most kernel time), or the ridge
    if "bound" in d and d.bound.notna().any():
        first = d[d.bound == "compute"]
        if len(first) and len(first) < len(d):
            xb = float(first[axis].iloc[0])
            prev = d[d[axis] < xb][axis]
            x0 = float(prev.iloc[-1]) if len(prev) else xb
            cut = np.sqrt(x0 * xb)
            for ax in (top, bottom):
                ax.axvspan(d[axis].min() / 1.5, cut, color="tab:blue", alpha=0.06, lw=0)
                ax.axvspan(cut, d[axis].max() * 1.5, color="tab:red", alpha=0.06, lw=0)
                ax.axvline(cut, color="0.5", lw=0.8, ls="--")
            top.annotate(f"memory-bound  |  compute-bound from {axis} {num(xb)}", (cut, 0.5),
                         xycoords=("data", "axes fraction"), ha="center", fontsize=8,
                         bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "0.7", "alpha": 0.9})
    top.set_ylabel(f"achieved {unit}")
    top.set_title(f"{label}: where the {axis} sweep turns from memory- to compute-bound", fontsize=10)
    top.grid(True, which="both", alpha=0.25)
    top.legend(fontsize=7, loc="upper left", bbox_to_anchor=(0.0, 0.93))
    bottom.set_xscale("log", base=2)
    bottom.set_yscale("log")
    _log_ticks(bottom)
    bottom.set_ylabel(f"time ({t_unit})")
    bottom.set_xlabel(axis)
    xs = sorted(set(d[axis].astype(float)))
    bottom.set_xticks(xs if len(xs) <= 14 else xs[::2])
    _log_ticks(bottom, "x")
    bottom.grid(True, which="both", alpha=0.25)
    bottom.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- 4. where a layer's time goes


def phase_breakdown(phases: pd.DataFrame, label: str, useful: pd.Series | None = None,
                    executed: pd.Series | None = None):
    """Per variant (rows of `phases`, columns the regions' kernel time per step): the share of each phase,
    the absolute time on a log axis, and, where given (indexed like `phases`), executed against useful
    FLOPs (padding waste). A (context, variant) index splits the rows into titled blocks (token counts)."""
    plt = _plt()
    t = phases.fillna(0.0)
    groups = None
    if isinstance(t.index, pd.MultiIndex):
        groups = pd.Series(t.index.get_level_values(0).astype(str), index=t.index)
    total = t.sum(axis=1)
    shares = t.div(total.where(total > 0), axis=0).fillna(0.0)
    regions = [c for c in t.columns if shares[c].max() >= 0.005]  # a phase no bar shows has no legend entry
    other = [c for c in t.columns if c not in regions]
    if other and shares[other].sum(axis=1).max() >= 0.005:
        shares = shares[regions].assign(**{"other": shares[other].sum(axis=1)})
        regions = [*regions, "other"]
    waste = useful is not None and executed is not None and (executed.fillna(0) > useful.fillna(0) * 1.001).any()
    ncols = 3 if waste else 2
    height = max(3.5, 0.24 * len(t) + 1.6)
    fig, axes = plt.subplots(1, ncols, figsize=(4.6 * ncols + 1.5, height), dpi=120, sharey=True,
                             gridspec_kw={"width_ratios": [1.2, 1.0, 0.8][:ncols]})
    y = np.arange(len(t))[::-1]
    colors = _palette(regions)
    left = np.zeros(len(t))
    for r in regions:
        vals = shares[r].to_numpy()
        axes[0].barh(y, vals * 100, left=left * 100, color=colors[r], label=r.split("/")[-1], height=0.8)
        left += vals
    axes[0].set_xlim(0, 100)
    axes[0].set_xlabel("share of kernel time per step (%)")
    axes[0].set_yticks(y)
    axes[0].set_yticklabels([str(i[-1]) if isinstance(i, tuple) else str(i) for i in t.index], fontsize=7)
    axes[0].legend(fontsize=7, ncol=min(len(regions), 4), loc="lower left", bbox_to_anchor=(0, 1.0), frameon=False)
    t_scale, t_unit = _time_unit(total)
    axes[1].barh(y, total / t_scale, color="0.82", height=0.8, label="all phases")
    for r in [c for c in regions if c in t.columns]:
        v = t[r].to_numpy() / t_scale
        keep = v > 0
        axes[1].scatter(v[keep], y[keep], s=14, color=colors[r], zorder=3, edgecolors="white", linewidths=0.4)
    axes[1].set_xscale("log")
    _log_ticks(axes[1], "x")
    axes[1].set_xlabel(f"kernel time per step ({t_unit}, log): the bar all phases, a dot each phase")
    for yi, v in zip(y, total / t_scale, strict=True):
        axes[1].annotate(num(v), (v, yi), xytext=(2, 0), textcoords="offset points", fontsize=6, va="center")
    if waste:
        ratio = (executed / useful).reindex(t.index).fillna(1.0)
        axes[2].barh(y, ratio, color=["tab:red" if r > 1.001 else "0.7" for r in ratio], height=0.8)
        axes[2].axvline(1.0, color="0.3", lw=0.8)
        axes[2].set_xlabel("executed / useful FLOPs (padding)")
        for yi, v in zip(y, ratio, strict=True):
            if v > 1.001:
                axes[2].annotate(f"{num(v)}x", (v, yi), xytext=(2, 0), textcoords="offset points", fontsize=6,
                                 va="center")
        axes[2].set_xlim(0, max(2.0, float(ratio.max()) * 1.25))
    if groups is not None:  # separators between blocks (token counts)
        g = groups.to_numpy()
        for i in range(1, len(g)):
            if g[i] != g[i - 1]:
                for ax in axes:
                    ax.axhline(y[i] + 0.5, color="0.2", lw=0.8)
        for i, name in enumerate(g):
            if i == 0 or g[i] != g[i - 1]:
                axes[-1].annotate(name, (1.0, y[i] + 0.45), xycoords=("axes fraction", "data"), ha="right",
                                  va="top", fontsize=7, color="0.2")
    for ax in axes:
        ax.grid(True, axis="x", alpha=0.25)
        ax.tick_params(labelsize=7)
    fig.suptitle(f"{label}: where the time goes, per routing and dispatch (kernel time per step by phase)",
                 fontsize=10)
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- 5. backends against the copy ceiling


def backends(steps: pd.DataFrame, label: str, copy_gbps: float | None = None):
    """Per graph (and size), time and achieved bandwidth of each backend against the feature width, with
    the measured copy bandwidth as the ceiling a gather/scatter can hope for."""
    plt = _plt()
    d = steps.copy()
    d["where"] = [f"{g} s{int(s)}" if pd.notna(s) else str(g) for g, s in zip(d.graph, d.scale, strict=True)]
    pyg_only = {w: bool(g.backend.str.startswith("pyg").all()) for w, g in d.groupby("where")}
    places = sorted(dict.fromkeys(d["where"]), key=lambda w: (pyg_only[w], _natural_key(w)))
    names = sorted(dict.fromkeys(d.backend), key=lambda b: (b.startswith("pyg"), _natural_key(b)))
    colors = _palette(names, "tab10" if len(names) <= 10 else "tab20")
    fig, axes = plt.subplots(2, len(places), figsize=(3.6 * len(places) + 1, 6.5), dpi=120, squeeze=False,
                             sharey="row")
    t_scale, t_unit = _time_unit(d.kernel_us)
    for j, where in enumerate(places):
        g = d[d["where"] == where]
        for b in names:
            h = g[g.backend == b].sort_values("features")
            if h.empty:
                continue
            x = h.features.astype(float)
            axes[0, j].plot(x, h.kernel_us / t_scale, "o-", color=colors[b], label=b, ms=4)
            axes[1, j].plot(x, h.achieved_gbps, "o-", color=colors[b], label=b, ms=4)
        ceiling = copy_gbps if copy_gbps else (g.ceiling_gbps.max() if "ceiling_gbps" in g else None)
        if ceiling and pd.notna(ceiling):
            axes[1, j].axhline(ceiling, color="k", lw=1, ls="--")
            axes[1, j].annotate(f"copy {num(ceiling)} GB/s", (0.02, ceiling), xycoords=("axes fraction", "data"),
                                xytext=(0, 3), textcoords="offset points", fontsize=7)
        axes[0, j].set_title(where, fontsize=9)
        feats = sorted(set(g.features.astype(float)))
        for ax in axes[:, j]:
            ax.set_xscale("log", base=2)
            ax.set_xticks(feats)
            ax.set_xticklabels([tick(f) for f in feats], fontsize=7)
            ax.minorticks_off()
            ax.grid(True, alpha=0.25)
            ax.tick_params(labelsize=7)
        axes[1, j].set_xlabel("feature width F")
    axes[0, 0].set_yscale("log")
    _log_ticks(axes[0, 0])
    axes[0, 0].set_ylabel(f"kernel time per step ({t_unit})")
    axes[1, 0].set_ylabel("achieved GB/s (compulsory bytes)")
    from matplotlib.ticker import FuncFormatter

    axes[1, 0].yaxis.set_major_formatter(FuncFormatter(lambda v, _: tick(v)))
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=colors[b], marker="o", ms=4, label=b) for b in names]
    fig.legend(handles=handles, fontsize=7, loc="upper right", ncol=1, frameon=False, title="backend",
               title_fontsize=7)
    fig.suptitle(f"{label}: which backend moves its bytes near the copy bandwidth (per graph and size)",
                 fontsize=10)
    fig.tight_layout(rect=(0, 0, 0.9, 1))
    return fig


# --------------------------------------------------------------------------- 6. one call against its kernels


def timings(steps: pd.DataFrame):
    """Per sweep point, one call's latency and the back-to-back time per step against the profiled kernel
    time, absolute and as a ratio: above 1x is what a caller waits beyond the kernels (launches, host
    work, syncs), and how much of it queueing steps back to back hides."""
    plt = _plt()
    d = steps[(steps.kernel_us > 0) & (steps.latency_us > 0)]
    fig, (a, r) = plt.subplots(1, 2, figsize=(12, 5.2), dpi=120, sharex=True)
    wls = list(dict.fromkeys(d.workload))
    colors = _palette(wls)
    for wl in wls:
        g = d[d.workload == wl]
        lab = str(g.family_label.iloc[0]) if "family_label" in g and len(g) else wl
        for ax, ys in ((a, (g.latency_us, g.back_to_back_us)), (r, (g.latency_us / g.kernel_us,
                                                                  g.back_to_back_us / g.kernel_us))):
            ax.scatter(g.kernel_us, ys[0], s=20, color=colors[wl], alpha=0.85, edgecolors="none",
                       label=f"{lab}: one call")
            ax.scatter(g.kernel_us, ys[1], s=20, facecolors="none", edgecolors=colors[wl], linewidths=0.9,
                       label=f"{lab}: back to back")
            ax.vlines(g.kernel_us, np.minimum(ys[0], ys[1]), np.maximum(ys[0], ys[1]), color=colors[wl], lw=0.5,
                      alpha=0.6)
    if len(d):
        lo, hi = d.kernel_us.min() / 1.5, d.kernel_us.max() * 1.5
        a.plot([lo, hi], [lo, hi], "-", color="0.3", lw=0.8)
        a.annotate("= kernel time", (hi / 1.5, hi / 1.5), fontsize=7, color="0.3", ha="right", va="bottom")
        for k, style in ((1, "-"), (2, "--"), (10, ":")):
            r.axhline(k, color="0.3", lw=0.8, ls=style)
            r.annotate("= kernel time" if k == 1 else f"{k}x", (hi, k), fontsize=7, color="0.3", ha="right",
                       va="bottom")
        lat = (d.latency_us / d.kernel_us).replace([np.inf, -np.inf], np.nan).dropna()
        b2b = (d.back_to_back_us / d.kernel_us).replace([np.inf, -np.inf], np.nan).dropna()
        r.text(0.02, 0.97, f"one call: median {num(float(lat.median()))}x, {(lat > 2).mean():.0%} of points "
               f"above 2x\nback to back: median {num(float(b2b.median()))}x, {(b2b > 2).mean():.0%} above 2x",
               transform=r.transAxes, fontsize=8, va="top")
    for ax in (a, r):
        ax.set_xscale("log")
        ax.set_yscale("log")
        _log_ticks(ax)
        _log_ticks(ax, "x")
        ax.set_xlabel("profiled kernel time per step (µs)")
        ax.grid(True, which="major", alpha=0.3)
        ax.tick_params(labelsize=7)
    a.set_ylabel("time per call or step (µs)")
    a.set_title("absolute (filled: one call; open: back to back)", fontsize=9)
    top = float(np.nanmax(np.r_[(d.latency_us / d.kernel_us).to_numpy(), 1.0])) if len(d) else 10.0
    r.set_yticks([t for t in (0.5, 1, 1.5, 2, 3, 5, 10, 20, 50, 100) if t <= max(top * 1.5, 2)])
    _log_ticks(r)
    r.set_ylabel("over the kernel time (x)")
    r.set_title("the host-overhead gap: time over kernel time", fontsize=9)
    handles, labels = a.get_legend_handles_labels()
    a.legend(handles, labels, fontsize=6.5, loc="upper left", frameon=False, ncol=1)
    fig.suptitle("Timings: what one call costs beyond its kernels, and what queueing steps back to back hides",
                 fontsize=10)
    fig.tight_layout()
    return fig

"""Writing the report folder: report.md and its PNG figures, each file atomically."""

from __future__ import annotations

import io
from pathlib import Path

from wlprof.analysis.report import Report
from wlprof.errors import InputError


def _save(fig, path: Path) -> None:
    from wlprof.store.atomic import atomic_write_bytes

    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    atomic_write_bytes(path, buf.getvalue())
    import matplotlib.pyplot as plt

    plt.close(fig)


def write_report(rep: Report, out: Path, traces: Path) -> Path:
    from wlprof.cli.markdown import SPECTRUM_COLUMNS, table
    from wlprof.plots import figures
    from wlprof.store.atomic import atomic_write_bytes
    from wlprof.store.runs import check_writable
    from wlprof.store.selection import ceilings_of

    out = check_writable(out, "--out")
    if out.resolve() == Path(traces).resolve():
        raise InputError("--out", "must not be the traces folder (the report would be read as traces)", str(out))
    runs = sorted(rep.steps.run_id.unique())
    ceilings = rep.ceilings if rep.ceilings is not None else ceilings_of(traces, runs[0])
    ceilings_dict = ceilings if isinstance(ceilings, dict) else ceilings.to_dict()
    device = rep.steps.device_name.iloc[0]
    peak = max((ceilings_dict.get("matrix_tflops") or {"x": 1.0}).values())
    findings = rep.ceilings_findings or [
        f"{', '.join(runs)}: copy {ceilings_dict.get('copy_gbps', 0):,.0f} GB/s; "
        + ", ".join(f"{k} {v:,.1f} TFLOP/s" for k, v in sorted((ceilings_dict.get('matrix_tflops') or {}).items()))]
    lines = [f"# Where FLOPs stop predicting latency — {device}", "",
             f"Runs: {', '.join(runs)}", "", "## Ceilings", "",
             *[f"- {line}" for line in findings],
             "", "A roofline fraction above 1 is shown with its reason (`roof_note`; docs/ceilings.md).",
             "", "## How well FLOPs explain latency, per family", "",
             "Latency of one call, as a caller sees it:", "", table(rep.spectrum_latency, SPECTRUM_COLUMNS),
             "Kernel time per step:", "", table(rep.spectrum_kernel, SPECTRUM_COLUMNS)]
    figs = {"roofline.png": figures.roofline(rep.ops, ceilings, f"Roofline of every op call ({device})"),
            "latency_vs_flops.png": figures.latency_vs_flops(rep.steps, peak, rep.fitted_tflops)}
    from wlprof import workloads

    for w in workloads.all_workloads():
        present = rep.steps[rep.steps.workload == w.name]
        if w.rate_axis and len(present):
            figs[f"tflops_vs_{w.rate_axis}.png"] = figures.tflops_vs(present, w.rate_axis, w.label or w.name)
        if w.name in rep.phases:
            figs[f"phases_{w.name}.png"] = figures.phases(rep.phases[w.name],
                                                          f"{w.label or w.name}: kernel time per step by phase")
    for name, fig in figs.items():
        _save(fig, out / name)
        lines += [f"![{name}]({name})", ""]
    for wl, t in rep.phases.items():
        lines += [f"## {wl}: kernel time per step by phase (µs)", "", table(t.reset_index(names="variant")), ""]
    path = out / "report.md"
    atomic_write_bytes(path, "\n".join(lines).encode())
    return path

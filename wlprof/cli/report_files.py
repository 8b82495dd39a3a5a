"""Writing the report folder: index.html (one self-contained page to share), report.md and the PNG figures.

Each figure answers one question and is listed once in `figures_for` with that question, which both
report.md and index.html print as its caption. The roofline is drawn by `plots.figures.roofline` on the
measured ceilings; it is one entry of that list (`roofline_figure`), so a new roofline only changes it.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from wlprof.analysis.report import EMPTY_SPECTRUM, Report
from wlprof.errors import InputError


@dataclass
class Context:
    """What the figures and the pages are drawn from."""

    rep: Report
    device: str
    ceilings: object  # what the roofline's lines are drawn from: the placement's Ceilings, else the first run's
    manifests: dict[str, dict] = field(default_factory=dict)  # run id -> manifest

    def ceilings_of(self, run_id: str) -> dict:
        return (self.manifests.get(run_id) or {}).get("ceilings") or {}


@dataclass(frozen=True)
class Figure:
    name: str  # the PNG's file name
    question: str  # what it answers: its caption
    draw: Callable[[Context], object]  # -> a matplotlib Figure


def _save_png(fig) -> bytes:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


def _save(fig, path: Path) -> None:
    from wlprof.store.atomic import atomic_write_bytes

    atomic_write_bytes(path, _save_png(fig))


def _steps_for_figures(ctx: Context) -> pd.DataFrame:
    """The steps with the measured matrix peak of each run's dtype and the workload's label."""
    from wlprof.analysis.families import workload_label

    s = ctx.rep.steps.copy()
    peaks = {}
    for run, dtype in s.groupby("run_id").dtype.first().items():
        peaks[run] = ((ctx.ceilings_of(run).get("matrix_tflops") or {}).get(dtype))
    s["peak_tflops"] = s.run_id.map(peaks).astype(float)
    s["family_label"] = s.workload.map(workload_label)
    return s


def roofline_figure() -> Figure:
    """The roofline entry of the report (the ceilings work owns `figures.roofline` and what it draws)."""
    from wlprof.plots import figures

    return Figure("roofline.png", "Roofline: where does each op call sit under the measured roofs?",
                  lambda ctx: figures.roofline(ctx.rep.ops, ctx.ceilings, f"Roofline of every op call ({ctx.device})"))


def _workload_figures(ctx: Context) -> list[Figure]:
    from wlprof import workloads
    from wlprof.plots import figures

    steps = _steps_for_figures(ctx)
    out = []
    for w in workloads.all_workloads():
        present = steps[steps.workload == w.name]
        if present.empty:
            continue
        kind = w.figure or ("rate" if w.rate_axis else ("phases" if w.phases else None))
        label = w.label or w.name
        if kind == "rate" and w.rate_axis and present[w.rate_axis].notna().any():
            out.append(Figure(f"tflops_vs_{w.rate_axis}.png",
                              f"{label}: where does the {w.rate_axis} sweep turn from memory- to compute-bound, and "
                              "what does one call's latency do meanwhile?",
                              lambda ctx, p=present, w=w, label=label: figures.rate_vs_axis(
                                  p, w.rate_axis, label, figures.ceilings_kind(ctx.ceilings))))
        elif kind == "phases" and w.name in ctx.rep.phases:
            table = ctx.rep.phases[w.name]
            by_point = present.drop_duplicates(["run_id", "point"]).set_index(["run_id", "point"])
            rows = table.attrs.get("points") or []
            useful = pd.Series([by_point.useful_flops.get(p) for p in rows], index=table.index, dtype=float)
            executed = pd.Series([by_point.executed_flops.get(p) for p in rows], index=table.index, dtype=float)
            out.append(Figure(f"phases_{w.name}.png",
                              f"{label}: where does the time go, per variant, by phase (as shares, and as absolute "
                              "time on a log axis), and how many of the executed FLOPs are padding?",
                              lambda ctx, t=table, label=label, u=useful, e=executed:
                              figures.phase_breakdown(t, label, u, e)))
        elif kind == "backends":
            copy = ctx.ceilings_of(present.run_id.iloc[0]).get("copy_gbps")
            out.append(Figure(f"backends_{w.name}.png",
                              f"{label}: which backend moves its bytes near the copy bandwidth, per graph and size "
                              "(feature widths in numeric order)?",
                              lambda ctx, p=present, label=label, c=copy: figures.backends(p, label, c)))
    return out


def figures_for(ctx: Context) -> list[Figure]:
    """The report's figures in reading order, each with the question it answers."""
    from wlprof.plots import figures

    steps = _steps_for_figures(ctx)
    return [
        Figure("latency_vs_flops.png", "Same FLOPs, different latency: per workload, one call's latency against "
               "its FLOPs (log axes), the FLOPs-only lines, and how far apart points of equal FLOPs are.",
               lambda ctx: figures.latency_vs_flops(steps)),
        roofline_figure(),
        *_workload_figures(ctx),
        Figure("timings.png", "Timings: what does one call cost beyond its kernels (the host-overhead gap), and how "
               "much of it does queueing steps back to back hide?", lambda ctx: figures.timings(steps)),
    ]


# --------------------------------------------------------------------------- provenance


def _runs_frame(ctx: Context) -> pd.DataFrame:
    rows = []
    for run in sorted(ctx.manifests):
        m = ctx.manifests[run]
        v = m.get("versions") or {}
        pts = m.get("points") or []
        rows.append({
            "run": run, "workload": m.get("workload"), "study": (m.get("study") or {}).get("name") or "-",
            "device": (m.get("device") or {}).get("name"), "dtype": m.get("dtype") or "-",
            "points": f"{sum(p.get('status') == 'ok' for p in pts)}/{len(pts)}", "status": m.get("status"),
            "created (UTC)": str(m.get("created_at") or "").replace("+00:00", ""),
            "software": ", ".join(f"{k} {v[k]}" for k in ("wlprof", "torch", "cuda", "torch_geometric") if v.get(k)),
            "command": m.get("command") or "-",
        })
    return pd.DataFrame(rows)


def _ceilings_lines(ctx: Context) -> list[str]:
    """Which ceilings the runs were placed against (the placement's findings where it made them)."""
    from wlprof.cli.render import ceilings_text

    if ctx.rep.ceilings_findings:
        return [*ctx.rep.ceilings_findings, "A roofline fraction above 1 is shown with its reason (`roof_note`; "
                "docs/ceilings.md)."]
    seen: dict[str, list[str]] = {}
    for run in sorted(ctx.manifests):
        seen.setdefault(ceilings_text(ctx.ceilings_of(run)), []).append(run)
    if len(seen) == 1:
        return [f"Ceilings: {next(iter(seen))}"]
    return [f"Ceilings of {', '.join(runs)}: {text}" for text, runs in seen.items()]


# --------------------------------------------------------------------------- the files


def _spectrum_md(frame: pd.DataFrame) -> str:
    """The spectrum as a Markdown table, or the sentence that says why it has no row."""
    from wlprof.cli.markdown import SPECTRUM_COLUMNS, SPECTRUM_FORMATS, spectrum_cells, table

    if frame.empty:
        return f"{EMPTY_SPECTRUM}.\n"
    shown, note = spectrum_cells(frame)
    return table(shown, SPECTRUM_COLUMNS, formats=SPECTRUM_FORMATS) + (f"\n{note}.\n" if note else "")


def _figures_of_earlier_report(report_md: Path) -> set[str]:
    """The figure files a report written earlier into the same folder lists in its report.md (a plain
    name each: `![x.png](x.png)`): the files wlprof wrote there, which it may replace or remove."""
    import re

    try:
        text = report_md.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return set()
    return {m.group(1) for m in re.finditer(r"^!\[([^\]/\\]+\.png)\]\(\1\)$", text, re.MULTILINE)}


def write_report(rep: Report, out: Path, traces: Path) -> tuple[Path, list[str]]:
    """Write index.html, report.md and the figures into `out`; (index.html, the figures' file names). The
    figures an earlier report in `out` wrote and this one does not are removed: the folder holds this
    report's files only (other files are left alone)."""
    from wlprof.cli.markdown import table
    from wlprof.store.atomic import atomic_write_bytes
    from wlprof.store.runs import check_writable, read_manifest, run_dir

    out = check_writable(out, "--out", "the report")
    if out.resolve() == Path(traces).resolve():
        raise InputError("--out", "must not be the traces folder (the report would be read as traces)", str(out))
    runs = sorted(rep.steps.run_id.unique())
    manifests = {r: read_manifest(run_dir(traces, r)) for r in runs}
    device = rep.steps.device_name.iloc[0]
    ceilings = rep.ceilings if rep.ceilings is not None else (manifests[runs[0]].get("ceilings") or {})
    ctx = Context(rep, device, ceilings, manifests)
    earlier = _figures_of_earlier_report(out / "report.md")
    pngs: list[tuple[Figure, bytes]] = []
    for f in figures_for(ctx):
        data = _save_png(f.draw(ctx))
        atomic_write_bytes(out / f.name, data)
        pngs.append((f, data))
    # report.md
    runs_df = _runs_frame(ctx)
    lines = [f"# Where FLOPs stop predicting latency — {device}", "",
             "## Runs", "", table(runs_df.drop(columns=["device"])), *_ceilings_lines(ctx), "",
             "## How well FLOPs explain latency, per family", "",
             "Latency of one call, as a caller sees it:", "", _spectrum_md(rep.spectrum_latency),
             "Kernel time per step:", "", _spectrum_md(rep.spectrum_kernel),
             "## Figures", ""]
    for i, (f, _) in enumerate(pngs, 1):
        lines += [f"### {i}. {f.question}", "", f"![{f.name}]({f.name})", ""]
    for wl, t in rep.phases.items():
        lines += [f"## {wl}: kernel time per step by phase (µs)", "", table(_phase_frame(t)), ""]
    atomic_write_bytes(out / "report.md", "\n".join(lines).encode())
    atomic_write_bytes(out / "index.html", html_page(ctx, runs_df, pngs).encode())
    names = [f.name for f, _ in pngs]
    for stale in sorted(earlier - set(names)):
        (out / stale).unlink(missing_ok=True)
    return out / "index.html", names


def _phase_frame(t: pd.DataFrame) -> pd.DataFrame:
    df = t.reset_index()
    if "context" in df:
        df["variant"] = df.variant + " · " + df.context
        df = df.drop(columns=["context"])
    return df


def _spectrum_html(frame: pd.DataFrame) -> str:
    """The spectrum as an HTML table, with the note on families of too few points."""
    from wlprof.cli.markdown import SPECTRUM_COLUMNS, SPECTRUM_FORMATS, spectrum_cells

    shown, note = spectrum_cells(frame)
    return (f"<div class=scroll>{_html_table(shown, SPECTRUM_COLUMNS, SPECTRUM_FORMATS, text={'family'})}</div>"
            + (f"<p class=meta>{html.escape(note)}.</p>" if note else ""))


def _html_table(df: pd.DataFrame, columns: dict[str, str] | None = None, formats: dict | None = None,
                text: set[str] = frozenset()) -> str:
    from wlprof.cli.markdown import fmt

    columns = columns or {c: c for c in df.columns}
    formats = formats or {}
    head = "".join(f"<th>{html.escape(h.replace(chr(10), ' '))}</th>" for h in columns.values())
    body = []
    for _, r in df.iterrows():
        cells = []
        for c in columns:
            v = formats.get(c, fmt)(r[c])
            cls = ' class="t"' if c in text else ""
            cells.append(f"<td{cls}>{html.escape(str(v))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


_CSS = """
body{font:15px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0 auto;max-width:1200px;
padding:24px;color:#1d1d1f}
h1{font-size:26px;margin:0 0 4px}h2{font-size:20px;margin:32px 0 8px;border-bottom:1px solid #ddd}
h3{font-size:16px;margin:24px 0 6px}
table{border-collapse:collapse;margin:8px 0 16px;font-size:13px;font-variant-numeric:tabular-nums}
th,td{border:1px solid #ddd;padding:3px 8px;text-align:right;vertical-align:top}
th{background:#f4f4f6;text-align:center}td.t{text-align:left}
tr:nth-child(even) td{background:#fafafb}
figure{margin:12px 0 28px}figure img{max-width:100%;height:auto;border:1px solid #eee}
figcaption{font-size:14px;color:#444;margin-top:4px}
.meta{color:#555;font-size:13px}code{font-size:12px;word-break:break-all}
.scroll{overflow-x:auto}
"""


def html_page(ctx: Context, runs_df: pd.DataFrame, pngs: list[tuple[Figure, bytes]]) -> str:
    """One self-contained page: the provenance of every run, the tables, every figure embedded."""

    rep = ctx.rep
    esc = html.escape
    runs_html = _html_table(runs_df.drop(columns=["command"]), text={"run", "workload", "study", "device", "dtype",
                                                                     "status", "software"})
    commands = "".join(f"<li><code>{esc(r.run)}</code>: <code>{esc(str(r.command))}</code></li>"
                       for r in runs_df.itertuples())
    figs = "".join(
        f'<figure id="{esc(f.name.removesuffix(".png"))}"><img alt="{esc(f.question)}" '
        f'src="data:image/png;base64,{base64.b64encode(data).decode()}"><figcaption>{i}. {esc(f.question)}'
        f"</figcaption></figure>" for i, (f, data) in enumerate(pngs, 1))
    phases = "".join(f"<h3>{esc(wl)}: kernel time per step by phase (µs)</h3><div class=scroll>"
                     f"{_html_table(_phase_frame(t), text={'variant'})}</div>" for wl, t in rep.phases.items())
    spectrum = "".join(
        f"<h3>{esc(title)}</h3>" + (f"<p>{esc(EMPTY_SPECTRUM)}.</p>" if frame.empty else _spectrum_html(frame))
        for title, frame in (("Latency of one call, as a caller sees it", rep.spectrum_latency),
                             ("Kernel time per step", rep.spectrum_kernel)))
    ceilings = "".join(f"<p class=meta>{esc(line)}</p>" for line in _ceilings_lines(ctx))
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>wlprof report: {esc(ctx.device)}</title><style>{_CSS}</style></head>
<body>
<h1>Where FLOPs stop predicting latency</h1>
<p class=meta>{esc(ctx.device)} · {len(runs_df)} runs · {int(rep.steps.shape[0])} sweep points · made by wlprof</p>
<h2>Figures</h2>
{figs}
<h2>How well FLOPs explain latency, per family</h2>
{spectrum}
<h2>Phases</h2>
{phases or "<p>No workload with phases in these runs.</p>"}
<h2>Runs and provenance</h2>
<div class=scroll>{runs_html}</div>
{ceilings}
<h3>Commands</h3><ul class=meta>{commands}</ul>
</body></html>
"""

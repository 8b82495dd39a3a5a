"""`wlprof report`: how well FLOPs explain latency, per family, across the runs in the traces folder."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from wlprof.cli.common import console, handle_errors
from wlprof.cli.options import DEFAULT_TRACES, AllowMixed, CeilingsChoice, Traces, Wide, epilog

EXAMPLES = epilog("wlprof report", "wlprof report --out report/", "wlprof report RUN_A RUN_B --workload moe --out moe-report/",
                  "wlprof report --ceilings h200-ceilings.json --out report/")


@handle_errors
def report(
    runs: Annotated[list[str] | None, typer.Argument(help="Run ids. Default: every run in --traces.")] = None,
    traces: Traces = DEFAULT_TRACES,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Write index.html, report.md and PNG figures into this folder. Default: none (the tables only).",
        metavar="DIR")] = None,
    workload: Annotated[str | None, typer.Option("--workload", help="Only this workload. Default: every workload.")] = None,
    allow_mixed_devices: AllowMixed = False,
    ceilings: CeilingsChoice = "run",
    wide: Wide = False,
) -> None:
    """The spectrum: rank correlation, R², spread at equal FLOPs, fraction of peak and roofline, per family."""
    created = out is not None and not Path(out).exists()
    if out is not None:  # a folder that cannot be written is refused before any work
        from wlprof.store.runs import check_writable

        check_writable(out, "--out", "the report")
    try:
        _report(runs, traces, out, workload, ceilings, allow_mixed_devices, wide)
    except BaseException:
        if created and Path(out).is_dir() and not any(Path(out).iterdir()):
            Path(out).rmdir()  # bad input found after the check: no empty folder left behind
        raise


def _report(runs, traces, out, workload, ceilings, allow_mixed_devices, wide) -> None:
    from rich.markup import escape

    from wlprof.analysis.report import EMPTY_SPECTRUM, build_report
    from wlprof.cli.markdown import (
        SPECTRUM_COLUMNS,
        SPECTRUM_FORMATS,
        SPECTRUM_PRIORITY,
        rich_table,
        spectrum_cells,
    )
    from wlprof.store.selection import load_runs, split_runs

    ids = split_runs(runs)
    steps = load_runs(traces, "steps", ids, "RUNS", workload, allow_mixed_devices)
    ops = load_runs(traces, "ops", ids, "RUNS", workload, allow_mixed_devices)
    kernels = load_runs(traces, "kernels", ids, "RUNS", workload, allow_mixed_devices)
    from wlprof.cli.placement import place

    placed = place(traces, ceilings, ops, kernels, steps)
    rep = build_report(placed.steps, placed.ops, placed.kernels)
    rep.ceilings = placed.lines_ceilings
    rep.ceilings_findings = placed.findings
    con = console(wide=wide)
    con.print("[bold]Ceilings[/bold]")
    for line in placed.findings:
        con.print(f"  {escape(str(line))}")
    for frame, title in ((rep.spectrum_latency, "How well FLOPs explain latency (one call, as a caller sees it)"),
                         (rep.spectrum_kernel, "... and kernel time per step")):
        if frame.empty:
            # an ingested trace has kernel time but no single-call latency: say so, not an empty table
            con.print(f"{title}: {EMPTY_SPECTRUM}", markup=False, highlight=False)
            continue
        shown, note = spectrum_cells(frame)
        con.print(rich_table(shown, SPECTRUM_COLUMNS, title=title, formats=SPECTRUM_FORMATS, wide=wide,
                             width=con.width, text={"family", "above_roof"}, wrap={"family": 18, "above_roof": 16},
                             priorities=SPECTRUM_PRIORITY))
        if note:
            con.print(note, markup=False, highlight=False)
    if out is not None:
        from wlprof.cli.report_files import write_report

        path, pngs = write_report(rep, out, traces)
        pngs = sorted(pngs)
        con.print(f"wrote {path} (one self-contained page), {path.parent / 'report.md'} and {len(pngs)} figures: "
                  + ", ".join(pngs), markup=False, highlight=False)

"""`wlprof show RUN_ID`: a readable per-kernel table for one run."""

from __future__ import annotations

from typing import Annotated

import typer

from wlprof.cli.common import console, handle_errors
from wlprof.cli.options import DEFAULT_TRACES, Traces, epilog

EXAMPLES = epilog("wlprof show RUN_ID", "wlprof show RUN_ID --variant 'batch 64' --top 0")


@handle_errors
def show(
    run_id: Annotated[str, typer.Argument(help="A run id from `wlprof ls`.")],
    traces: Traces = DEFAULT_TRACES,
    variant: Annotated[str | None, typer.Option("--variant", help="Only this sweep point.")] = None,
    top: Annotated[int, typer.Option("--top", help="Kernels per variant (0: all).")] = 12,
) -> None:
    """Per variant: timings and totals, then the kernels by time with their costs and roofline."""
    from wlprof import load
    from wlprof.analysis.summary import kernel_summary
    from wlprof.cli import render
    from wlprof.cli.placement import place
    from wlprof.errors import InputError, StoreError
    from wlprof.store.runs import effective_status, read_manifest, run_dir
    from wlprof.store.selection import run_ceilings

    path = run_dir(traces, run_id)
    if not path.is_dir():
        raise InputError("RUN_ID", f"must name a run in {traces}/ (see `wlprof ls`)", run_id)
    manifest = read_manifest(path)
    steps = load(path, table="steps")
    kernels = load(path, table="kernels")
    if variant is not None:
        known = list(steps.variant)
        if variant not in known:
            raise InputError("--variant", f"must be one of {known}", variant)
        steps, kernels = steps[steps.variant == variant], kernels[kernels.variant == variant]
    if top < 0:
        raise InputError("--top", "must be 0 (all) or a positive number", top)
    con = console()
    dev = manifest.get("device", {})
    cei = manifest.get("ceilings", {})
    con.print(f"[bold]{run_id}[/bold]  {manifest.get('workload')} on {dev.get('name')} ({manifest.get('dtype')}), "
              f"status {effective_status(manifest)}")
    con.print(f"command: {manifest.get('command')}")
    rc = run_ceilings(traces, [run_id])[run_id]
    con.print(f"ceilings ({cei.get('source')}, {cei.get('origin')}): {rc.describe()}")
    placed = place(traces, "run", None, kernels, steps)
    steps, kernels = placed.steps, placed.kernels
    for line in placed.findings[1:]:  # the first describes the ceilings, printed above
        con.print(f"[yellow]{line}[/yellow]")
    if rc.stale:
        con.print("[yellow]`wlprof report --ceilings current` places it against this machine's current "
                  "ceilings[/yellow]")
    for note in manifest.get("notes", []):
        con.print(f"[dim]note: {note}[/dim]")
    con.print(render.steps_table(steps.sort_values("point"), title="per variant (one step)"))
    if kernels.empty:
        raise StoreError(f"run {run_id} has no kernel rows")
    for (point, name), k in kernels.groupby(["point", "variant"], sort=True):
        summary = kernel_summary(k)
        if top:
            summary = summary.head(top)
        con.print(render.kernel_table(summary, title=f"{name}: kernels by time per step"))
        chrome = next((p.get("files", {}).get("chrome") for p in manifest.get("points", [])
                       if p.get("index") == point), None)
        if chrome:
            con.print(f"[dim]Chrome trace (open in https://ui.perfetto.dev): {path / chrome}[/dim]")

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
    variant: Annotated[str | None, typer.Option("--variant", help="Only this sweep point. Default: every sweep point.")] = None,
    top: Annotated[int, typer.Option("--top", help="Kernels per variant (0: all).")] = 12,
) -> None:
    """Per variant: timings and totals, then the kernels by time with their costs and roofline."""
    from wlprof import load
    from wlprof.analysis.summary import kernel_summary
    from wlprof.cli import render
    from wlprof.errors import InputError, StoreError, did_you_mean
    from wlprof.store.runs import effective_status, read_manifest, run_dir
    from wlprof.store.selection import ls_hint

    path = run_dir(traces, run_id)
    if not path.is_dir():
        from wlprof.store.runs import list_runs

        raise InputError("RUN_ID", f"must name a run in {traces}/ ({ls_hint(traces)})", run_id,
                         hint=did_you_mean(run_id, [m["run_id"] for m in list_runs(traces)]))
    manifest = read_manifest(path)
    steps = load(path, table="steps")
    kernels = load(path, table="kernels")
    if variant is not None:
        known = list(steps.variant)
        if variant not in known:
            raise InputError("--variant", f"must be one of {known}", variant, hint=did_you_mean(variant, known))
        steps, kernels = steps[steps.variant == variant], kernels[kernels.variant == variant]
    if top < 0:
        raise InputError("--top", "must be 0 (all) or a positive number", top)
    con = console()
    dev = manifest.get("device", {})
    cei = manifest.get("ceilings", {})
    con.print(f"[bold]{run_id}[/bold]  {manifest.get('workload')} on {dev.get('name')} ({manifest.get('dtype')}), "
              f"status {effective_status(manifest)}")
    con.print(f"command: {manifest.get('command')}")
    con.print(f"ceilings ({cei.get('source')}, {cei.get('origin')}): copy {cei.get('copy_gbps', 0):,.0f} GB/s, "
              + ", ".join(f"{k} {v:,.1f} TFLOP/s" for k, v in sorted((cei.get('matrix_tflops') or {}).items())))
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

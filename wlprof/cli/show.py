"""`wlprof show RUN_ID`: a readable per-kernel table for one run."""

from __future__ import annotations

from typing import Annotated

import typer

from wlprof.cli.common import console, handle_errors
from wlprof.cli.options import DEFAULT_TRACES, Traces, Wide, epilog

EXAMPLES = epilog("wlprof show RUN_ID", "wlprof show RUN_ID --variant 'batch 64' --top 0")


@handle_errors
def show(
    run_id: Annotated[str | None, typer.Argument(
        help="A run id from `wlprof ls`. Default: the folder's run, where it holds one (an ingest's).")] = None,
    traces: Traces = DEFAULT_TRACES,
    variant: Annotated[str | None, typer.Option("--variant", help="Only this sweep point. Default: every sweep point.")] = None,
    top: Annotated[int, typer.Option("--top", help="Kernels per variant (0: all).")] = 12,
    wide: Wide = False,
) -> None:
    """Per variant: timings and totals, then the kernels by time with their costs and roofline."""
    from rich.markup import escape

    from wlprof import load
    from wlprof.analysis.summary import kernel_summary
    from wlprof.cli import render
    from wlprof.cli.placement import place
    from wlprof.errors import InputError, did_you_mean
    from wlprof.store.runs import effective_status, read_manifest, run_dir
    from wlprof.store.selection import ls_hint, require_folder, run_ceilings

    require_folder(traces)
    if run_id is None:
        from wlprof.store.runs import list_runs

        runs = [m["run_id"] for m in list_runs(traces)]
        if len(runs) != 1:
            raise InputError("RUN_ID", f"is required where {traces}/ holds {len(runs)} runs ({ls_hint(traces)})",
                             None)
        run_id = runs[0]
    path = run_dir(traces, run_id)
    if not path.is_dir():
        from wlprof.store.runs import list_runs

        raise InputError("RUN_ID", f"must name a run in {traces}/ ({ls_hint(traces)})", run_id,
                         hint=did_you_mean(run_id, [m["run_id"] for m in list_runs(traces)]))
    manifest = read_manifest(path)
    steps = load(path, table="steps")
    kernels = load(path, table="kernels")
    if variant is not None:
        known = list(dict.fromkeys(steps.variant))  # a run of several ranks: one row per rank
        if variant not in known:
            raise InputError("--variant", f"must be one of {', '.join(repr(v) for v in known)}", variant,
                             hint=did_you_mean(variant, known))
        steps, kernels = steps[steps.variant == variant], kernels[kernels.variant == variant]
    if top < 0:
        raise InputError("--top", "must be 0 (all) or a positive number", top)
    con = console(wide=wide)
    dev = manifest.get("device") or {}
    dtype = manifest.get("dtype")
    cei = manifest.get("ceilings") or {}
    con.print(f"[bold]{escape(run_id)}[/bold]  {escape(str(manifest.get('workload')))} on "
              f"{escape(str(dev.get('name') or 'an unknown device'))}" + (f" ({escape(dtype)})" if dtype else "")
              + f", status {effective_status(manifest)}")
    con.print(f"command: {escape(str(manifest.get('command')))}")
    rc = run_ceilings(traces, [run_id])[run_id]
    if rc.ceilings is not None:
        origin = str(cei.get("origin") or "")
        where = origin if origin.startswith(str(cei.get("source"))) else f"{cei.get('source')}, {origin}"
        con.print(escape(f"ceilings ({where}): {rc.describe()}"))
    else:  # an ingested trace of a device never calibrated here: say so, not copy 0 GB/s
        con.print(escape(f"ceilings: {render.ceilings_text(cei)}"))
    placed = place(traces, "run", None, kernels, steps)
    steps, kernels = placed.steps, placed.kernels
    for line in placed.findings[1:]:  # the first describes the ceilings, printed above
        con.print(f"[yellow]{escape(str(line))}[/yellow]")
    if rc.stale:
        con.print("[yellow]`wlprof report --ceilings current` places it against this machine's current "
                  "ceilings[/yellow]")
    for note in manifest.get("notes", []):
        con.print(f"[dim]note: {escape(str(note))}[/dim]")
    opts = {"wide": wide, "width": con.width}
    shown = steps.sort_values("point", kind="stable")
    if "rank" in shown and shown["rank"].nunique() > 1:  # one row per rank, named as `wlprof run` names them
        shown = shown.sort_values(["point", "rank"], kind="stable")
        shown = shown.assign(variant=render.with_rank(shown.variant, shown["rank"]))
    con.print(render.steps_table(shown, title="per variant (one step)", **opts))
    from wlprof.cli.execute import unplaced_lines

    for line in unplaced_lines(steps):
        con.print(escape(line))
    if kernels.empty:
        con.print(f"no kernel rows in {escape(run_id)}: the trace recorded no device activity in its profiled "
                  "steps (nothing to break down)")
        return
    for (point, name), k in kernels.groupby(["point", "variant"], sort=True):
        summary = kernel_summary(k)
        if summary.empty:
            con.print(f"{escape(str(name))}: no kernel rows inside a profiled step")
            continue
        if top:
            summary = summary.head(top)
        n = int(k.step[k.step >= 0].nunique()) if "step" in k else 0
        ranks = int(k["rank"].nunique()) if "rank" in k else 0
        title = (f"{name}: kernels by mean time per step" + (" and rank" if ranks > 1 else "")
                 + f", over {n} profiled step{'s' if n != 1 else ''}" + (f" x {ranks} ranks" if ranks > 1 else "")
                 + (" (the table above: the median step)" if n > 1 else ""))
        con.print(render.kernel_table(summary, title=title, **opts))
        chrome = next((p.get("files", {}).get("chrome") for p in manifest.get("points", [])
                       if p.get("index") == point), None)
        if chrome:
            con.print(f"[dim]Chrome trace (open in https://ui.perfetto.dev): {escape(str(path / chrome))}[/dim]")

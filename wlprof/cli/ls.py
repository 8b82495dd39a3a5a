"""`wlprof ls`: the runs in the traces folder."""

from __future__ import annotations

import typer

from wlprof.cli.common import console, handle_errors
from wlprof.cli.options import DEFAULT_TRACES, Traces, Wide, epilog

EXAMPLES = epilog("wlprof ls", "wlprof ls --traces offline/")


@handle_errors
def ls(traces: Traces = DEFAULT_TRACES, wide: Wide = False) -> None:
    """List the runs in the traces folder, oldest first."""

    from wlprof.analysis.summary import runs_overview
    from wlprof.cli import render
    from wlprof.store.runs import list_runs
    from wlprof.store.selection import require_folder

    require_folder(traces)
    skipped: list[str] = []
    runs = runs_overview(list_runs(traces, skipped))
    for why in skipped:  # a run that cannot be read is named, not left out of the list unsaid
        typer.echo(f"not listed: {why}", err=True)
    if runs.empty:
        typer.echo(f"no {'readable ' if skipped else ''}runs in {traces}/ yet: try `wlprof run gemm`")
        return
    con = console(wide=wide)
    con.print(render.runs_table(runs, wide=wide, width=con.width))

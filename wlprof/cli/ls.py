"""`wlprof ls`: the runs in the traces folder."""

from __future__ import annotations

import typer

from wlprof.cli.common import DEFAULT_OUT, OutOption, console, handle_errors


@handle_errors
def ls(out: OutOption = DEFAULT_OUT) -> None:
    """List the runs in the traces folder, oldest first."""
    from wlprof.analysis.summary import runs_overview
    from wlprof.cli import render
    from wlprof.store.runs import list_runs

    runs = runs_overview(list_runs(out))
    if runs.empty:
        typer.echo(f"no runs in {out}/ yet: try `wlprof run gemm`")
        return
    console().print(render.runs_table(runs))

"""`wlprof roofline RUN... -o roofline.png`: every op call of the runs on the measured roofline."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from wlprof.cli.common import handle_errors
from wlprof.cli.options import DEFAULT_TRACES, AllowMixed, Traces, epilog

EXAMPLES = epilog("wlprof roofline RUN_ID", "wlprof roofline RUN_A RUN_B -o roofline.png")


@handle_errors
def roofline(
    runs: Annotated[list[str], typer.Argument(help="Run ids.")],
    output: Annotated[Path, typer.Option("--out", "-o", help="PNG file to write.")] = Path("roofline.png"),
    traces: Traces = DEFAULT_TRACES,
    allow_mixed_devices: AllowMixed = False,
) -> None:
    """Draw the roofline (measured ceilings) with every op call as a point."""
    from wlprof.analysis.families import add_family
    from wlprof.cli.report_files import _save
    from wlprof.errors import InputError
    from wlprof.plots import figures
    from wlprof.store.runs import check_writable
    from wlprof.store.selection import ceilings_of, load_runs, split_runs

    ids = split_runs(runs)
    if output.suffix.lower() != ".png":
        raise InputError("--out", "must be a .png file", str(output))
    check_writable(output.parent if str(output.parent) else Path("."), "--out")
    ops = add_family(load_runs(traces, "ops", ids, "RUNS", None, allow_mixed_devices))
    fig = figures.roofline(ops, ceilings_of(traces, ids[0]), f"Roofline: {', '.join(ids)}")
    _save(fig, output)
    typer.echo(f"wrote {output} ({len(ops)} op calls)")

"""Run a study from the CLI: progress over sweep points, then the summary table."""

from __future__ import annotations

from pathlib import Path

from wlprof.cli.common import command_line, console


def execute(study, traces: Path, quiet: bool = False, resume: str | None = None, wide: bool = False,
            exit_on_failure: bool = True, label: str | None = None) -> str:
    """Run `study`, showing progress on stderr, then its steps table; returns the run's status."""
    from rich.markup import escape
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from wlprof.cli import render
    from wlprof.study import run_study

    err = console(stderr=True)
    progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), console=err, disable=quiet, transient=False)
    task = None

    def on_progress(done: int, total: int, variant: str, state: str) -> None:
        nonlocal task
        if task is None:
            task = progress.add_task(variant, total=total)
        progress.update(task, completed=done, description=f"{study.workload}: {variant} ({state})")

    with progress:
        result = run_study(study, traces=traces, progress=on_progress, command=command_line(), resume=resume)
    con = console()
    for note in result.notes:
        con.print(f"[dim]note: {escape(note)}[/dim]")
    steps = result.steps
    device = steps.device_name.iloc[0] if "device_name" in steps and len(steps) else "?"
    con.print(render.steps_table(steps, title=f"{result.run_id}  ({device}, {steps.dtype.iloc[0]}, {result.status})"))
    con.print(f"ceilings: {result.ceilings_origin}")
    con.print(f"traces:   {result.path}  (kernels: pandas.read_parquet({str(traces)!r}); "
              f"Chrome traces for Perfetto: {result.path / '_chrome'})")
    if result.status != "complete" and exit_on_failure:
        raise SystemExit(1)
    return result.status

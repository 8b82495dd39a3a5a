"""`wlprof run ... --world-size N` and runs under torchrun: launch the ranks, or be one of them.

Rank 0 prints what a single-process run prints (its notes, every rank's steps rows, where
the run was written); the other ranks print only their errors, prefixed with their rank.
"""

from __future__ import annotations

import typer

from wlprof.cli.common import command_line, console
from wlprof.cli.options import spell_cli
from wlprof.errors import InputError, TraceFormatError, WlprofError


def run_distributed(study, traces, quiet: bool, world_size: int | None, resume: str | None) -> None:
    """The `wlprof run` path of a distributed study: launch `world_size` ranks, or run as a rank."""
    from wlprof.distributed import world as W

    if resume is not None:
        raise InputError("--resume", "is not available for distributed runs (a failed one leaves nothing to resume)",
                         resume)
    env = W.from_env()
    if env is not None:
        if world_size is not None and world_size != env[1]:
            raise InputError("--world-size", f"must match WORLD_SIZE ({env[1]}) set by the launcher, or be left out",
                             world_size)
        code = execute_rank(study, traces, quiet, command_line())
    else:
        from wlprof.distributed.launch import launch

        code = launch(study, traces, world_size, quiet, command_line())
    if code:
        raise typer.Exit(code)


def execute_rank(study, traces, quiet: bool, command: str | None) -> int:
    """Run this process's rank of `study`; rank 0 prints the result. Returns the exit code."""
    import os

    from wlprof.distributed.run import run_rank

    rank = os.environ.get("RANK", "?")
    err = console(stderr=True)

    def said(message: str) -> str:
        """The message with this rank named once (a distributed error may name it already)."""
        return message if message.startswith((f"rank {rank}:", f"rank {rank} ")) else f"rank {rank}: {message}"

    def progress(done: int, total: int, variant: str, state: str) -> None:
        if not quiet:
            err.print(f"[dim]{study.workload}: {variant} ({state}) {done}/{total}[/dim]")

    try:
        result = run_rank(study, traces, progress, command)
    except InputError as exc:
        typer.echo(f"error: {said(exc.message(spell_cli))}", err=True)
        return 2
    except TraceFormatError as exc:
        typer.echo(f"error: {said(str(exc))}", err=True)
        return 2
    except WlprofError as exc:
        typer.echo(f"error: {said(str(exc))}", err=True)
        return 1
    except KeyboardInterrupt:
        return 130
    if result is None:
        return 0
    show_result(result, traces)
    return 0


def show_result(result, traces) -> None:
    from wlprof.cli import render

    con = console()
    for note in result.notes:
        con.print(f"[dim]note: {note}[/dim]")
    steps = result.steps.sort_values(["point", "rank"], kind="stable") if "rank" in result.steps else result.steps
    shown = steps.assign(variant=render.with_rank(steps.variant, steps["rank"]))
    device = steps.device_name.iloc[0] if len(steps) else "?"
    con.print(render.steps_table(shown, title=f"{result.run_id}  ({device}, {steps.dtype.iloc[0]}, {result.status}, "
                                              f"{steps['rank'].nunique()} ranks)"))
    for _, r in shown.iterrows():
        if isinstance(r.get("note"), str) and r["note"]:
            con.print(f"[dim]{r['variant']}: {r['note']}[/dim]")
    from wlprof.cli.execute import unplaced_lines

    for line in unplaced_lines(steps):
        con.print(line, markup=False)
    con.print(f"ceilings: {result.ceilings_origin}")
    con.print(f"traces:   {result.path}  (kernels: pandas.read_parquet({str(traces)!r}); overlap per rank: "
              f"wlprof overlap {result.run_id})")

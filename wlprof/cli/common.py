"""What every command shares: error handling and the console."""

from __future__ import annotations

import functools
import shlex
import sys

import typer

from wlprof.cli.options import spell_cli
from wlprof.errors import InputError, TraceFormatError, WlprofError


def console(stderr: bool = False, wide: bool = False):
    """The console tables and text go to. `wide`: tables keep every column at its full width and may be
    wider than the terminal (a narrower console would squeeze some columns to nothing)."""
    from rich.console import Console

    if stderr:
        # whether stderr is a terminal is decided now: while the profiler runs, fd 2 is a pipe
        # (wlprof.stderr_filter) and the progress display must keep drawing through it
        return Console(stderr=True, highlight=False, force_terminal=sys.stderr.isatty() or None)
    # a terminal's own width; elsewhere COLUMNS, else 100 (tables are fitted to it: `render.fit`)
    import os

    width = None if sys.stdout.isatty() else int(os.environ.get("COLUMNS", "0") or 0) or 100
    if wide:
        width = WIDE_WIDTH
    return Console(highlight=False, soft_wrap=False, width=width)


WIDE_WIDTH = 1000  # characters: wider than any table wlprof draws with every column


def fail(message: str, code: int = 2) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def command_line() -> str:
    """The command as the user typed it, for the manifest."""
    return "wlprof " + " ".join(shlex.quote(a) for a in sys.argv[1:])


def handle_errors(fn=None, *, spelling=spell_cli):
    """Turn wlprof's errors into a one-line message and a non-zero exit (2: bad input, 1: other).

    `spelling` writes argument keys as the command's user wrote them.
    """
    if fn is None:
        return functools.partial(handle_errors, spelling=spelling)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except InputError as exc:  # bad input: an argument
            fail(exc.message(spelling), 2)
        except TraceFormatError as exc:  # bad input: a file's content
            fail(str(exc), 2)
        except WlprofError as exc:
            fail(str(exc), 1)
        except KeyboardInterrupt as exc:
            run_id = getattr(exc, "run_id", None)
            if run_id:
                typer.echo(f"interrupted: run {run_id} keeps its finished points and is marked incomplete; "
                           f"the same command with `--resume {run_id}` finishes it", err=True)
            elif getattr(exc, "detail", None):
                typer.echo(f"interrupted: {exc.detail}", err=True)
            else:  # stopped before or after anything a command writes: no claim about what was written
                typer.echo("interrupted", err=True)
            raise typer.Exit(130) from None

    return wrapper

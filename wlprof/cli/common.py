"""What every command shares: the traces folder option, error handling, the console."""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Annotated

import typer

from wlprof.errors import InputError, TraceFormatError, WlprofError

OutOption = Annotated[Path, typer.Option("--out", "-o", help="Traces folder (one sub-folder per run).")]
DEFAULT_OUT = Path("traces")


def console(stderr: bool = False):
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, soft_wrap=False, width=200 if not sys.stdout.isatty() else None)


def fail(message: str, code: int = 2) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def handle_errors(fn):
    """Turn wlprof's errors into a one-line message and a non-zero exit (2: bad input, 1: other)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (InputError, TraceFormatError) as exc:  # bad input: an argument, or a file's content
            fail(str(exc), 2)
        except WlprofError as exc:
            fail(str(exc), 1)
        except KeyboardInterrupt:
            typer.echo("interrupted: finished points are kept; the run is marked incomplete", err=True)
            raise typer.Exit(130) from None

    return wrapper

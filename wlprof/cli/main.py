"""The `wlprof` command: one module per command, each thin over library functions."""

from __future__ import annotations

import typer

from wlprof.cli import (
    calibrate,
    compare,
    ingest,
    ls,
    overlap,
    place,
    predict,
    profile,
    report,
    roofline,
    run,
    show,
    sweep,
)
from wlprof.cli.usage import WlprofCommand, WlprofGroup

app = typer.Typer(
    cls=WlprofGroup,
    no_args_is_help=True,
    add_completion=False,
    help="wlprof: kernel by kernel, where FLOPs stop predicting latency.",
    pretty_exceptions_enable=False,
)
app.add_typer(run.app, name="run")
for _module, _name in ((sweep, "sweep"), (calibrate, "calibrate"), (ls, "ls"), (show, "show"), (report, "report"),
                       (roofline, "roofline"), (compare, "compare"), (predict, "predict"), (ingest, "ingest"),
                       (overlap, "overlap"), (place, "place"), (profile, "profile")):
    _fn = getattr(_module, _name)
    _summary = " ".join((_fn.__doc__ or "").split("\n\n")[0].split())  # the list's line, not the docstring's breaks
    app.command(_name, epilog=_module.EXAMPLES, cls=WlprofCommand, short_help=_summary)(_fn)


def main() -> None:
    # "wlprof" however it was started (`python -m wlprof`, torchrun -m wlprof): messages name the command to type
    app(prog_name="wlprof")


if __name__ == "__main__":
    main()

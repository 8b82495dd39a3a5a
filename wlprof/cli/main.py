"""The `wlprof` command: one module per command, each thin over library functions."""

from __future__ import annotations

import typer

from wlprof.cli import calibrate, compare, ingest, ls, overlap, predict, report, roofline, run, show, sweep

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="wlprof: kernel by kernel, where FLOPs stop predicting latency.",
    pretty_exceptions_enable=False,
)
app.add_typer(run.app, name="run")
for _module, _name in ((sweep, "sweep"), (calibrate, "calibrate"), (ls, "ls"), (show, "show"), (report, "report"),
                       (roofline, "roofline"), (compare, "compare"), (predict, "predict"), (ingest, "ingest"),
                       (overlap, "overlap")):
    app.command(_name, epilog=_module.EXAMPLES)(getattr(_module, _name))


def main() -> None:
    app()


if __name__ == "__main__":
    main()

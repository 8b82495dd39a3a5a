"""The `wlprof` command: one module per command, each thin over library functions."""

from __future__ import annotations

import typer

from wlprof.cli import calibrate, compare, ingest, ls, predict, report, roofline, run, show, sweep

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="wlprof: kernel by kernel, where FLOPs stop predicting latency.",
    pretty_exceptions_enable=False,
)
app.add_typer(run.app, name="run")
app.command("sweep")(sweep.sweep)
app.command("calibrate")(calibrate.calibrate)
app.command("ls")(ls.ls)
app.command("show")(show.show)
app.command("report")(report.report)
app.command("roofline")(roofline.roofline)
app.command("compare")(compare.compare)
app.command("predict")(predict.predict)
app.command("ingest")(ingest.ingest)


def main() -> None:
    app()


if __name__ == "__main__":
    main()

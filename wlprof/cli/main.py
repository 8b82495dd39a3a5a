"""The `wlprof` command: one module per command, each thin over library functions."""

from __future__ import annotations

import sys


def _build():
    """The typer app with every command (imports them all)."""
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
    for module, name in ((sweep, "sweep"), (calibrate, "calibrate"), (ls, "ls"), (show, "show"),
                         (report, "report"), (roofline, "roofline"), (compare, "compare"), (predict, "predict"),
                         (ingest, "ingest"), (overlap, "overlap"), (place, "place"), (profile, "profile")):
        fn = getattr(module, name)
        summary = " ".join((fn.__doc__ or "").split("\n\n")[0].split())  # the list's line, not the docstring's breaks
        app.command(name, epilog=module.EXAMPLES, cls=WlprofCommand, short_help=summary)(fn)
    return app


_APP = None


def __getattr__(name: str):
    """`app` is built on first use, so that `main` can start work before the commands load."""
    global _APP
    if name == "app":
        if _APP is None:
            _APP = _build()
        return _APP
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _ingests_a_folder(argv: list[str]) -> bool:
    import os

    return argv[1:2] == ["ingest"] and any(os.path.isdir(a) for a in argv[2:])


def main() -> None:
    if _ingests_a_folder(sys.argv):  # the workers' fork server loads their modules while the commands load
        from wlprof.ingest import prestart_workers

        prestart_workers()
    # "wlprof" however it was started (`python -m wlprof`, torchrun -m wlprof): messages name the command to type
    __getattr__("app")(prog_name="wlprof")


if __name__ == "__main__":
    main()

"""The `wlprof` command: one module per command, each thin over library functions."""

from __future__ import annotations

import sys

# the commands besides `run`, whose modules import no workload (`run` registers one command per workload)
COMMANDS = ("sweep", "calibrate", "ls", "show", "report", "roofline", "compare", "predict", "ingest", "overlap",
            "place", "profile")


def _build(with_run: bool = True):
    """The typer app with every command (`with_run` False: all but `run`, which loads every workload)."""
    import importlib

    import typer

    from wlprof.cli.usage import WlprofCommand, WlprofGroup

    app = typer.Typer(
        cls=WlprofGroup,
        no_args_is_help=True,
        add_completion=False,
        help="wlprof: kernel by kernel, where FLOPs stop predicting latency.",
        pretty_exceptions_enable=False,
    )
    if with_run:
        from wlprof.cli import run

        app.add_typer(run.app, name="run")
    for name in COMMANDS:
        module = importlib.import_module(f"wlprof.cli.{name}")
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
    if sys.argv[1:2] == ["ingest"]:
        import os

        # numpy's OpenBLAS starts a thread per core on import that spins for tens of milliseconds; an ingest
        # does no BLAS work, and its processes (this one, the fork server, the workers) import numpy
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    folder = _ingests_a_folder(sys.argv)
    if folder:  # the workers' fork server loads their modules while the commands load
        from wlprof.ingest import prestart_workers

        prestart_workers()
    # a command other than `run` is parsed by an app without the workloads' commands (it loads in half the time)
    try:
        app = _build(with_run=False) if sys.argv[1:2] and sys.argv[1] in COMMANDS else __getattr__("app")
    except KeyboardInterrupt:  # a Ctrl-C while the commands load: no command has started, nothing was written
        if folder:
            from wlprof.ingest import stop_workers

            stop_workers()
        print("interrupted (while loading, before the command started: nothing was written)", file=sys.stderr)
        raise SystemExit(130) from None
    try:
        # "wlprof" however it was started (`python -m wlprof`, torchrun -m wlprof): messages name the command to type
        app(prog_name="wlprof")
    except SystemExit as exc:
        if sys.argv[1:2] == ["ingest"] and exc.code in (0, None):
            if folder:
                from wlprof.ingest import stop_workers

                stop_workers()
            _exit_now()
        raise
    finally:
        if folder:
            from wlprof.ingest import stop_workers

            stop_workers()


def _exit_now() -> None:
    """End a command that succeeded without the interpreter's teardown of every module and object
    (tens of milliseconds after a large ingest): the exit handlers run first (the process pool's
    resources are released there) and the output is flushed, so nothing the command wrote is lost.
    Where the output cannot be flushed (a closed pipe) it returns, and the interpreter exits as usual."""
    import atexit
    import os

    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        return
    atexit._run_exitfuncs()
    os._exit(0)


if __name__ == "__main__":
    main()

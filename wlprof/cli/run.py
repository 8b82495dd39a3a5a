"""`wlprof run WORKLOAD`: profile one workload's sweep; one sub-command per registered workload.

Each sub-command's options come from the workload's declared parameters, plus the
shared device, dtype, traces and capture options.
"""

from __future__ import annotations

import inspect
from typing import Annotated

import typer

from wlprof.cli.common import handle_errors
from wlprof.cli.options import (
    DEFAULT_TRACES,
    Device,
    Dtype,
    Quiet,
    Resume,
    Traces,
    Wide,
    WorldSize,
    capture_config,
    capture_parameters,
    epilog,
)
from wlprof.cli.usage import WlprofCommand, WlprofGroup


def distributed_env() -> bool:
    """This process is a rank torchrun (or `--world-size`) started."""
    import os

    return "RANK" in os.environ and "WORLD_SIZE" in os.environ


app = typer.Typer(cls=WlprofGroup, no_args_is_help=True, help="Profile a workload's sweep: `wlprof run gemm`.")


def _help(p) -> str:
    text = p.help.rstrip(".") + "."
    if p.choices and p.item is None and p.items is None:
        text += f" One or more of: {', '.join(p.choices)}." if p.many else f" One of: {', '.join(p.choices)}."
    default = p.default_text()
    if default is not None:
        text += f" Default: {default}."
    return text


def _metavar(p) -> str:
    if p.metavar:
        return p.metavar
    base = {"int": "INT", "float": "FLOAT", "str": "TEXT"}[p.kind]
    return f"{base},..." if p.many else base


def _option(p) -> inspect.Parameter:
    if p.kind == "bool":
        dashed = p.flag[2:]
        opt = typer.Option(f"{p.flag}/--no-{dashed}", help=_help(p), show_default=False, metavar="")
        annotation = Annotated[bool | None, opt]
    else:
        annotation = Annotated[str | None, typer.Option(p.flag, help=_help(p), metavar=_metavar(p),
                                                        show_default=False)]
    return inspect.Parameter(p.name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=annotation)


_SHARED = [
    ("device", Device, None), ("dtype", Dtype, None), ("traces", Traces, DEFAULT_TRACES), ("quiet", Quiet, False),
    ("resume", Resume, None), ("world_size", WorldSize, None), ("wide", Wide, False),
]


def command_for(wl):
    """The `wlprof run <name>` command of a workload: its parameters as options, then the shared ones."""
    names = [p.name for p in wl.params]

    def run(**kwargs) -> None:
        from wlprof.cli.execute import execute
        from wlprof.study import Study

        params = {n: kwargs[n] for n in names if kwargs[n] is not None}
        study = Study(workload=wl.name, params=params, device=kwargs["device"], dtype=kwargs["dtype"],
                      capture=capture_config(kwargs))
        if kwargs["world_size"] is not None or distributed_env():  # ranks: launched here, or by torchrun
            from wlprof.cli.distributed import run_distributed

            run_distributed(study, kwargs["traces"], kwargs["quiet"], kwargs["world_size"], kwargs["resume"])
            return
        execute(study, kwargs["traces"], kwargs["quiet"], resume=kwargs["resume"], wide=kwargs["wide"])

    shared = [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=d, annotation=a) for n, a, d in _SHARED]
    run.__signature__ = inspect.Signature([_option(p) for p in wl.params] + shared + capture_parameters())
    run.__name__ = wl.name
    run.__doc__ = wl.summary[:1].upper() + wl.summary[1:] + "."
    return handle_errors(run)


def _register() -> None:
    from wlprof import workloads

    for wl in workloads.all_workloads():
        app.command(wl.name, epilog=epilog(*wl.examples) if wl.examples else None, cls=WlprofCommand)(
            command_for(wl))


_register()

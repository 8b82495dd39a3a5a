"""`wlprof sweep STUDY.toml`: re-run exactly the sweep a study file describes.

`--set KEY=VALUE` overrides one of the study's [params] (VALUE read as a TOML value,
else as a string), e.g. `--set seed=1` to profile the same sweep on another data draw;
the run's manifest records the parameters it ran with.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from wlprof.cli.common import DEFAULT_OUT, OutOption, handle_errors


@handle_errors
def sweep(
    study_file: Annotated[Path, typer.Argument(help="A study file, e.g. workloads/gemm_same_flops.toml")],
    out: OutOption = DEFAULT_OUT,
    device: Annotated[str | None, typer.Option("--device", help="Override the study's device.")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q")] = False,
    resume: Annotated[str | None, typer.Option(
        "--resume", help="Finish an interrupted run of this study (RUN_ID), keeping its finished points.")] = None,
    set_: Annotated[list[str] | None, typer.Option(
        "--set", help="Override a study parameter, KEY=VALUE (repeatable), e.g. --set seed=1")] = None,
) -> None:
    """Run the sweep of a study file (workloads/*.toml) into the traces folder."""
    from dataclasses import replace

    from wlprof.cli.execute import execute
    from wlprof.study import load_study, override_params

    study = load_study(study_file)
    if set_:
        study = override_params(study, set_)
    if device is not None:
        study = replace(study, device=device)
    execute(study, out, quiet, prefix="params.", resume=resume)

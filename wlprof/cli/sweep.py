"""`wlprof sweep STUDY.toml`: re-run exactly the sweep a study file describes."""

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
) -> None:
    """Run the sweep of a study file (workloads/*.toml) into the traces folder."""
    from dataclasses import replace

    from wlprof.cli.execute import execute
    from wlprof.study import load_study

    study = load_study(study_file)
    if device is not None:
        study = replace(study, device=device)
    execute(study, out, quiet, prefix="params.", resume=resume)

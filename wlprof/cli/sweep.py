"""`wlprof sweep STUDY.toml`: re-run exactly the sweep a study file describes.

`--set KEY=VALUE` overrides one of the study's [params] (VALUE read as a TOML value,
else as a string), e.g. `--set seed=1` to profile the same sweep on another data draw;
the run's manifest records the parameters it ran with.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from wlprof.cli.common import handle_errors
from wlprof.cli.options import DEFAULT_TRACES, Device, Quiet, Resume, Traces, epilog, spell_cli, spell_study
from wlprof.errors import InputError, Key

EXAMPLES = epilog("wlprof sweep workloads/gemm_same_flops.toml",
                  "wlprof sweep workloads/moe_zipf.toml --set seed=1 --traces offline/",
                  "wlprof sweep workloads/mlp_batch.toml --device cpu")


@handle_errors(spelling=spell_study)
def sweep(
    study_file: Annotated[Path, typer.Argument(help="A study file, e.g. workloads/gemm_same_flops.toml")],
    traces: Traces = DEFAULT_TRACES,
    device: Device = None,
    quiet: Quiet = False,
    resume: Resume = None,
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
    try:
        execute(study, traces, quiet, resume=resume)
    except InputError as exc:  # an override given as a flag is named as the flag
        if device is not None and exc.arg == Key("device", "study"):
            raise exc.spelled(spell_cli) from None
        raise

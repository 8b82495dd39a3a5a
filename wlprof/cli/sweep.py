"""`wlprof sweep STUDY.toml`: re-run exactly the sweep a study file describes.

`--set KEY=VALUE` overrides one of the study's [params] (VALUE read as a TOML value,
else as a string), or with KEY `dtype` its dtype, e.g. `--set seed=1` to profile the same sweep on
another data draw;
the run's manifest records the parameters it ran with.
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import Annotated

import typer

from wlprof.cli.common import handle_errors
from wlprof.cli.options import (
    DEFAULT_TRACES,
    Device,
    Quiet,
    Resume,
    Traces,
    Wide,
    epilog,
    spell_cli,
    spell_study,
)
from wlprof.errors import InputError, Key

EXAMPLES = epilog("wlprof sweep workloads/gemm_same_flops.toml",
                  "wlprof sweep workloads/moe_zipf.toml --set seed=1 --traces offline/",
                  "wlprof sweep workloads/*.toml --device cpu")


@handle_errors(spelling=spell_study)
def sweep(
    study_files: Annotated[list[Path], typer.Argument(
        help="Study files (workloads/*.toml), run one after another, each into a run of its own.",
        metavar="STUDY_FILE...")],
    traces: Traces = DEFAULT_TRACES,
    device: Device = None,
    quiet: Quiet = False,
    resume: Resume = None,
    set_: Annotated[list[str] | None, typer.Option(
        "--set", help="Override a study parameter (or the dtype), KEY=VALUE (repeatable), e.g. --set seed=1 or "
        "--set dtype=bfloat16. Default: none.",
        metavar="KEY=VALUE")] = None,
    wide: Wide = False,
) -> None:
    r"""Run the sweep of each study file into the traces folder.

    On a CPU a study runs at the scale its \[cpu] section gives (the GPU sizes stay in \[params]).
    """
    from dataclasses import replace

    from wlprof.cli.execute import execute
    from wlprof.study import RunInterrupted, load_study, override_params, prepare

    if resume is not None and len(study_files) > 1:
        raise InputError(Key("resume", "store"), "finishes one run: pass one study file with it",
                         [str(f) for f in study_files])
    set_keys = {Key(a.partition("=")[0].strip()) for a in set_ or []}  # the [params] --set overrides
    studies = []
    for f in study_files:
        with _naming(f, study_files, set_keys, device):
            study = load_study(f)
            if set_:
                study = override_params(study, set_)
            if device is not None:
                study = replace(study, device=device)
        studies.append(study)
    try:
        for f, study in zip(study_files[1:], studies[1:], strict=True):  # every file is checked before the first runs
            with _naming(f, study_files, set_keys, device):
                prepare(study)
        statuses = []
        for i, study in enumerate(studies):
            try:
                statuses.append(execute(study, traces, quiet, resume=resume, wide=wide, exit_on_failure=False,
                                        label=f"[{i + 1}/{len(studies)}] {study.source}" if len(studies) > 1
                                        else None))
            except RunInterrupted as exc:
                if len(studies) == 1:
                    raise
                raise _interrupted_file(exc.run_id, study_files[i], study_files[i + 1:], traces, device,
                                        set_) from None
    except InputError as exc:  # an override given as a flag is named as the flag
        if device is not None and exc.arg == Key("device", "study"):
            raise exc.spelled(spell_cli) from None
        if isinstance(exc.arg, Key) and exc.arg in set_keys:
            raise exc.spelled(lambda k: f"--set {k.name}" if k in set_keys else spell_study(k)) from None
        raise
    if any(s != "complete" for s in statuses):
        raise SystemExit(1)


@contextlib.contextmanager
def _naming(file: Path, files: list[Path], set_keys: set, device):
    """Of several study files, the one whose own key an error names is named with it (`b.toml's
    params.shapes`); an override given on the command line (--set, --device) keeps the flag's name."""
    try:
        yield
    except InputError as exc:
        k = exc.arg
        if len(files) < 2:
            raise
        if isinstance(k, str) and re.match(r"(study|params|capture|cpu)\.\w|\[", k):  # a key the loader spelled
            raise InputError(f"{file}'s {k}", exc.rule, exc.value, exc.hint) from None
        own = (isinstance(k, Key) and k.section != "store" and k not in set_keys
               and not (device is not None and k == Key("device", "study")))
        if not own:
            raise
        raise exc.spelled(lambda key: f"{file}'s {spell_study(key)}" if key == k else spell_study(key)) from None


def _interrupted_file(run_id: str, file: Path, rest: list[Path], traces: Path, device, sets):
    """The interrupt of one study of several: `--resume` takes one study file, so the command that
    finishes the run names that file alone, and the files after it are named as not run."""
    import shlex

    from wlprof.errors import Interrupted

    words = ["wlprof", "sweep", str(file)]
    if Path(traces) != DEFAULT_TRACES:
        words += ["--traces", str(traces)]
    if device is not None:
        words += ["--device", str(device)]
    for a in sets or []:
        words += ["--set", a]
    command = " ".join(shlex.quote(w) for w in [*words, "--resume", run_id])
    left = f"; not run: {', '.join(str(f) for f in rest)}" if rest else ""
    return Interrupted(f"run {run_id} keeps its finished points and is marked incomplete; `{command}` "
                       f"finishes it{left}")

"""The options commands share, declared once, and how argument keys are spelled for the user.

The traces folder is `--traces/-t` in every command that reads or writes the store;
files a command writes are named by `--out/-o`. Capture options take their defaults
from `CaptureConfig`.
"""

from __future__ import annotations

import inspect
from dataclasses import fields
from pathlib import Path
from typing import Annotated

import typer

from wlprof.capture import CaptureConfig
from wlprof.errors import Key

DEFAULT_TRACES = Path("traces")
Traces = Annotated[Path, typer.Option("--traces", "-t", help="Traces folder: one sub-folder per run.",
                                       metavar="DIR")]
Device = Annotated[str | None, typer.Option(
    "--device", help="cuda, cuda:N or cpu. Default: the GPU if there is one, else the CPU.", metavar="DEVICE")]
Dtype = Annotated[str | None, typer.Option(
    "--dtype", help="bfloat16, float16, float32 or float64 (also bf16, fp16, fp32, fp64). Default: bfloat16 on a "
    "GPU, float32 on the CPU.", metavar="DTYPE")]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="No progress output. Default: off (progress on stderr).", metavar="")]
Resume = Annotated[str | None, typer.Option(
    "--resume", help="Finish an interrupted run of this same sweep (RUN_ID from `wlprof ls`), keeping its "
    "finished points. Default: none (a new run).", metavar="RUN_ID")]
Wide = Annotated[bool, typer.Option(
    "--wide", help="Show every column of the tables. Default: off (the columns that fit the terminal, at least "
    "100 characters, by priority).", metavar="")]
WorldSize = Annotated[int | None, typer.Option(
    "--world-size", help="Ranks to run the sweep on (processes on this host: gloo on the CPU, NCCL on GPUs); each "
    "rank profiles itself and rank 0 merges them into one run. Default: 1; under torchrun, WORLD_SIZE.",
    metavar="N")]
AllowMixed = Annotated[bool, typer.Option(
    "--allow-mixed-devices", help="Analyse runs of several devices together (each keeps its own ceilings). "
    "Default: off (runs of one device only).", metavar="")]

CeilingsChoice = Annotated[str, typer.Option(
    "--ceilings", help="The ceilings the roofline placement is read against: 'run' (each run's own, as recorded; "
    "a run whose ceilings are older and lower than this machine's current calibration is marked ceiling_stale), "
    "'current' (this machine's cached ceilings of each run's device), 'datasheet' (each run's GPU's vendor peaks, "
    "not measured: docs/ceilings.md lists the GPUs) or a ceilings JSON file (`wlprof calibrate --out`, a cache "
    "file or a run manifest).", metavar="run|current|datasheet|FILE")]

# Capture settings a `run` takes as flags: CaptureConfig field -> (flag, help)
CAPTURE_FLAGS = {
    "profiled_steps": ("--steps", "Profiled steps per point (at least 1)."),
    "warmup": ("--warmup", "Unprofiled warm-up calls per point (at least 1: the first call pays one-time setup)."),
    "latency_reps": ("--reps", "Single-call latency samples per point (at least 1)."),
}
_CAPTURE_DEFAULTS = {f.name: f.default for f in fields(CaptureConfig)}


def capture_parameters() -> list[inspect.Parameter]:
    """The capture flags as keyword parameters of a command, with CaptureConfig's defaults."""
    return [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=_CAPTURE_DEFAULTS[name],
                              annotation=Annotated[int, typer.Option(flag, help=text, metavar="INT")])
            for name, (flag, text) in CAPTURE_FLAGS.items()]


def capture_config(values: dict) -> CaptureConfig:
    return CaptureConfig(**{name: values[name] for name in CAPTURE_FLAGS})


def spell_cli(key: Key) -> str:
    """How a key is written on the command line: --top-k, --device, --steps, --traces."""
    if key.section == "capture":
        flag = CAPTURE_FLAGS.get(key.name)
        return flag[0] if flag else f"capture.{key.name}"
    if key.section == "study" and key.name == "workload":
        return "WORKLOAD"
    return "--" + key.name.replace("_", "-")


def spell_study(key: Key) -> str:
    """How a key is written in a study file: params.top_k, study.device, capture.profiled_steps."""
    if key.section == "store":
        return spell_cli(key)
    return f"{key.section}.{key.name}"


def epilog(*examples: str) -> str:
    """A command's --help ending: its examples, one per line."""
    return "Examples:\n\n" + "\n\n".join(f"  {e}" for e in examples)

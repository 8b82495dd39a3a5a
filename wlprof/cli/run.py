"""`wlprof run WORKLOAD`: profile one workload's sweep on this machine's GPU (or CPU)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from typer.core import TyperGroup

from wlprof.cli.common import DEFAULT_OUT, handle_errors


class WorkloadGroup(TyperGroup):
    """Names the argument, the rule and the value for an unknown workload."""

    def resolve_command(self, ctx, args):
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            typer.echo(f"error: WORKLOAD must be one of {', '.join(sorted(self.commands))} (got {args[0]!r})",
                       err=True)
            raise typer.Exit(2)
        return super().resolve_command(ctx, args)


app = typer.Typer(cls=WorkloadGroup, no_args_is_help=True, help="Profile a workload's sweep: `wlprof run gemm`.")

Device = Annotated[str | None, typer.Option("--device", help="cuda, cuda:N or cpu (default: the GPU if any).")]
Dtype = Annotated[str | None, typer.Option("--dtype", help="bfloat16, float16, float32 (default: bf16 on GPU, fp32 on CPU).")]
Out = Annotated[Path, typer.Option("--out", "-o", help="Traces folder.")]
Steps = Annotated[int, typer.Option("--steps", help="Profiled steps per point.")]
Warmup = Annotated[int, typer.Option("--warmup", help="Unprofiled warm-up calls per point.")]
Reps = Annotated[int, typer.Option("--reps", help="Single-call latency samples per point.")]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")]
Resume = Annotated[str | None, typer.Option(
    "--resume", help="Finish an interrupted run of this same sweep (RUN_ID from `wlprof ls`), keeping its finished points.")]


def _go(workload: str, params: dict, device, dtype, out, steps, warmup, reps, quiet, resume=None) -> None:
    from wlprof.capture import CaptureConfig
    from wlprof.cli.execute import execute
    from wlprof.errors import InputError
    from wlprof.study import Study

    try:
        cfg = CaptureConfig(profiled_steps=steps, warmup=warmup, latency_reps=reps)
    except InputError as exc:  # report the flag, not the config field
        flag = {"capture.profiled_steps": "--steps", "capture.warmup": "--warmup",
                "capture.latency_reps": "--reps"}.get(exc.arg, exc.arg)
        raise InputError(flag, exc.rule, exc.value) from None
    params = {k: v for k, v in params.items() if v is not None}
    execute(Study(workload=workload, params=params, device=device, dtype=dtype, capture=cfg), out, quiet,
            resume=resume)


@app.command("gemm")
@handle_errors
def gemm(
    shapes: Annotated[str | None, typer.Option("--shapes", help="MxKxN,... (default: the note's three 21.5-GFLOP shapes)")] = None,
    device: Device = None, dtype: Dtype = None, out: Out = DEFAULT_OUT, steps: Steps = 5, warmup: Warmup = 5,
    reps: Reps = 30, quiet: Quiet = False, resume: Resume = None,
) -> None:
    """GEMMs of equal FLOPs and different shapes."""
    _go("gemm", {"shapes": shapes}, device, dtype, out, steps, warmup, reps, quiet, resume)


@app.command("mlp")
@handle_errors
def mlp(
    batch: Annotated[str | None, typer.Option("--batch", help="Batch sizes, e.g. 1,8,64,512,4096")] = None,
    d_model: Annotated[int | None, typer.Option("--d-model", help="Model width (GPU 4096, CPU 512)")] = None,
    d_ff: Annotated[int | None, typer.Option("--d-ff", help="Hidden width (GPU 16384, CPU 2048)")] = None,
    activation: Annotated[str, typer.Option("--activation", help="gelu, relu or silu")] = "gelu",
    device: Device = None, dtype: Dtype = None, out: Out = DEFAULT_OUT, steps: Steps = 5, warmup: Warmup = 5,
    reps: Reps = 30, quiet: Quiet = False, resume: Resume = None,
) -> None:
    """A dense MLP block at several batch sizes."""
    _go("mlp", {"batch": batch, "d_model": d_model, "d_ff": d_ff, "activation": activation},
        device, dtype, out, steps, warmup, reps, quiet, resume)


@app.command("elementwise")
@handle_errors
def elementwise(
    ops: Annotated[str | None, typer.Option("--ops", help="copy,relu,gelu,silu,mul,add,dot,matvec,matmul")] = None,
    numel: Annotated[str | None, typer.Option("--numel", help="Elements for copy/relu/gelu/silu/dot, e.g. 65536,268435456")] = None,
    matvec_n: Annotated[str | None, typer.Option("--matvec-n", help="Matrix sides for matvec, e.g. 4096,16384")] = None,
    matmul_n: Annotated[str | None, typer.Option("--matmul-n", help="Matrix sides for matmul")] = None,
    device: Device = None, dtype: Dtype = None, out: Out = DEFAULT_OUT, steps: Steps = 5, warmup: Warmup = 5,
    reps: Reps = 30, quiet: Quiet = False, resume: Resume = None,
) -> None:
    """The roofline note's micro-kernels, from ReLU (1/4 FLOP/byte) to matmul (n/3)."""
    _go("elementwise", {"ops": ops, "numel": numel, "matvec_n": matvec_n, "matmul_n": matmul_n},
        device, dtype, out, steps, warmup, reps, quiet, resume)


from wlprof.cli.run_moe import moe  # noqa: E402

app.command("moe")(handle_errors(moe))

from wlprof.cli.run_gnn import gnn  # noqa: E402

app.command("gnn")(handle_errors(gnn))

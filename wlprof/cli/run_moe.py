"""`wlprof run moe`: an MoE layer, routing x dispatch, at the same useful FLOPs.

Registered on `wlprof.cli.run.app` (wrapped in `handle_errors` there):

    wlprof run moe --routing dispersed
    wlprof run moe --routing concentrated,balanced,dispersed --dispatch loop,padded,grouped
    wlprof run moe --routing zipf:0,0.5,1.2,2 --experts 64 --top-k 2 --tokens 8192
"""

from __future__ import annotations

from typing import Annotated

import typer

from wlprof.cli.common import DEFAULT_OUT
from wlprof.cli.run import Device, Dtype, Out, Quiet, Reps, Resume, Steps, Warmup, _go


def moe(
    routing: Annotated[str | None, typer.Option(
        "--routing", help="concentrated[:N], balanced, dispersed, zipf:s (zipf:0,0.5,1.2 sweeps s), "
        "explicit:AxM[+BxN] (A experts get M tokens each), router. Default: concentrated,balanced,dispersed")] = None,
    dispatch: Annotated[str | None, typer.Option(
        "--dispatch", help="loop (HF eager), padded (capacity buffers + bmm), grouped (torch._grouped_mm). "
        "Default: all three")] = None,
    tokens: Annotated[str | None, typer.Option("--tokens", help="Tokens per step, e.g. 128,8192 (GPU 128, CPU 64)")] = None,
    experts: Annotated[int | None, typer.Option("--experts", help="Experts (GPU 64, CPU 32)")] = None,
    top_k: Annotated[int | None, typer.Option("--top-k", help="Experts per token (default 1)")] = None,
    d_model: Annotated[int | None, typer.Option("--d-model", help="Model width (GPU 4096, CPU 256)")] = None,
    d_ff: Annotated[int | None, typer.Option("--d-ff", help="Expert hidden width (GPU 14336, CPU 512)")] = None,
    ffn: Annotated[str | None, typer.Option("--ffn", help="Expert FFN: swiglu (default) or gelu")] = None,
    capacity_factor: Annotated[float | None, typer.Option(
        "--capacity-factor", help="padded: capacity = ceil(cf * tokens * top_k / experts); 0 = dropless (default)")] = None,
    seed: Annotated[int | None, typer.Option(
        "--seed", help="Seed of the routing draw (dispersed counts, token order, gates), input and weights "
        "(default 0)")] = None,
    device: Device = None, dtype: Dtype = None, out: Out = DEFAULT_OUT, steps: Steps = 5, warmup: Warmup = 5,
    reps: Reps = 30, quiet: Quiet = False, resume: Resume = None,
) -> None:
    """An MoE layer: controlled routing x dispatch implementation (loop, padded, grouped)."""
    _go("moe", {"routing": routing, "dispatch": dispatch, "tokens": tokens, "experts": experts, "top_k": top_k,
                "d_model": d_model, "d_ff": d_ff, "ffn": ffn, "capacity_factor": capacity_factor,
                "seed": seed},
        device, dtype, out, steps, warmup, reps, quiet, resume)

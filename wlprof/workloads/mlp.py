"""A dense MLP block at varying batch sizes: FLOPs grow with the batch, latency does not (at first).

One block: Linear(d_model, d_ff) -> activation -> Linear(d_ff, d_model), with
biases, in inference mode. Regions: mlp/fc1, mlp/act, mlp/fc2. GPU defaults:
d_model 4096, d_ff 16384 (the 1x4096 by 4096x16384 GEMM of the core issue),
batches 1, 8, 64, 512, 4096. CPU defaults: d_model 512, d_ff 2048.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from wlprof.workloads.base import (
    Built,
    Parsed,
    Point,
    Workload,
    argname,
    int_list,
    positive_int,
    register,
    reject_unknown,
    str_list,
)

ACTIVATIONS = ["gelu", "relu", "silu"]


@dataclass(frozen=True)
class MlpSpec:
    batches: tuple[int, ...]
    d_model: int
    d_ff: int
    activation: str


@register
class Mlp(Workload):
    name = "mlp"
    summary = "a dense MLP block (Linear -> activation -> Linear) at varying batch sizes"

    def parse(self, params: Mapping[str, Any], device, dtype, prefix: str = "--") -> Parsed:
        reject_unknown(params, {"batch", "d_model", "d_ff", "activation"}, prefix)
        gpu = device.type == "cuda"
        notes = []
        batch = params.get("batch")
        batches = int_list(batch, argname("batch", prefix)) if batch is not None else (
            [1, 8, 64, 512, 4096] if gpu else [1, 8, 64, 512])
        if params.get("d_model") is None and params.get("d_ff") is None and not gpu:
            notes.append("CPU: d_model 512, d_ff 2048 (GPU default 4096, 16384)")
        d_model = positive_int(params.get("d_model") or (4096 if gpu else 512), argname("d_model", prefix))
        d_ff = positive_int(params.get("d_ff") or (16384 if gpu else 2048), argname("d_ff", prefix))
        act = str_list(params.get("activation") or "gelu", argname("activation", prefix), ACTIVATIONS)
        if len(act) != 1:
            from wlprof.errors import InputError

            raise InputError(argname("activation", prefix), "must name one activation", params.get("activation"))
        return Parsed(MlpSpec(tuple(batches), d_model, d_ff, act[0]), tuple(notes))

    def points(self, spec: MlpSpec) -> list[Point]:
        return [Point(f"batch {b}", {"batch": b, "d_model": spec.d_model, "d_ff": spec.d_ff,
                                     "activation": spec.activation}) for b in spec.batches]

    def estimate_bytes(self, point: Point, dtype) -> int:
        p = point.params
        weights = 2 * p["d_model"] * p["d_ff"] + p["d_model"] + p["d_ff"]
        acts = p["batch"] * (2 * p["d_model"] + 2 * p["d_ff"])
        return (weights + acts) * dtype.itemsize

    def build(self, point: Point, device, dtype) -> Built:
        import torch
        from torch.profiler import record_function

        p = point.params
        torch.manual_seed(0)
        fc1 = torch.nn.Linear(p["d_model"], p["d_ff"], device=device, dtype=dtype)
        fc2 = torch.nn.Linear(p["d_ff"], p["d_model"], device=device, dtype=dtype)
        act = {"gelu": torch.nn.functional.gelu, "relu": torch.relu, "silu": torch.nn.functional.silu}[p["activation"]]
        gen = torch.Generator(device=device).manual_seed(1)
        x = torch.randn(p["batch"], p["d_model"], device=device, dtype=dtype, generator=gen)

        def step():
            with record_function("mlp/fc1"):
                h = fc1(x)
            with record_function("mlp/act"):
                h = act(h)
            with record_function("mlp/fc2"):
                return fc2(h)

        return Built(step=step)

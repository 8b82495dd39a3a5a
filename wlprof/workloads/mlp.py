"""A dense MLP block at several batch sizes: Linear(d_model, d_ff) -> activation -> Linear(d_ff, d_model).

With biases, in inference mode; regions mlp/fc1, mlp/act, mlp/fc2.
"""

from __future__ import annotations

from dataclasses import dataclass

from wlprof.params import Param, PerDevice, Values
from wlprof.schema import I64, Column, S
from wlprof.workloads.base import Built, Parsed, Point, Workload, column

ACTIVATIONS = ("gelu", "relu", "silu")
SMALL_BATCH = 512  # batches below this are "small batch" in the report: their GEMMs are skinny


@dataclass(frozen=True)
class MlpSpec:
    batches: tuple[int, ...]
    d_model: int
    d_ff: int
    activation: str


class Mlp(Workload):
    name = "mlp"
    summary = "a dense MLP block (Linear -> activation -> Linear) at several batch sizes"
    label = "MLP"
    phases = True
    rate_axis = "batch"
    figure = "rate"
    params = (
        Param("batch", "int", "Batch sizes (rows) to sweep", many=True, unit="rows",
              default=PerDevice([1, 8, 64, 512, 4096], [1, 8, 64, 512])),
        Param("d_model", "int", "Model width", default=PerDevice(4096, 512)),
        Param("d_ff", "int", "Hidden width", default=PerDevice(16384, 2048)),
        Param("activation", "str", "Activation between the two layers", choices=ACTIVATIONS, default="gelu"),
    )
    columns = (
        Column("batch", I64, "rows", "MLP: batch size (tokens); training layers: batch N"),
        Column("d_model", I64, "", "MLP/MoE: model width"),
        Column("d_ff", I64, "", "MLP/MoE: hidden width of the feed-forward layer"),
        Column("activation", S, "", "MLP/MoE: activation (gelu, relu, silu, swiglu)"),
    )
    examples = (
        "wlprof run mlp --batch 1,8,64,512,4096",
        "wlprof run mlp --batch 1,16,256 --d-model 1024 --d-ff 4096 --activation silu",
    )

    def spec(self, values: Values, device, dtype) -> Parsed:
        notes = []
        if device.type != "cuda" and not {"d_model", "d_ff"} & values.given:
            notes.append("CPU: d_model 512, d_ff 2048 (GPU default 4096, 16384)")
        return Parsed(MlpSpec(tuple(values["batch"]), values["d_model"], values["d_ff"], values["activation"]),
                      tuple(notes))

    def points(self, spec: MlpSpec) -> list[Point]:
        return [Point(f"batch {b}", {"batch": b, "d_model": spec.d_model, "d_ff": spec.d_ff,
                                     "activation": spec.activation}) for b in spec.batches]

    def family(self, rows) -> list[str]:
        import pandas as pd

        batch = pd.to_numeric(pd.Series(column(rows, "batch"), dtype=object), errors="coerce")
        return ["dense MLP (large batch)" if b >= SMALL_BATCH else "MLP (small batch)" for b in batch]

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


WORKLOAD = Mlp()

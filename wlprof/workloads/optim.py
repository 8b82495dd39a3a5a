"""Optimizer steps: one `step()` of AdamW, Adam or SGD with momentum over a list of parameter tensors
with their gradients set, in torch's foreach or fused implementation: the `_foreach_*` and
`_fused_*` kernels a training step ends with, over as many tensors and elements as a model has.

The parameters (`--tensors` tensors of `--numel` elements each) and their gradients are in the run's
dtype; the optimizer's states are created by a step when the point is built, so every step measured
(or listed by `predict --spec`) updates them in place as a training step does; region optim/step.
"""

from __future__ import annotations

from dataclasses import dataclass

from wlprof.params import Param, PerDevice, Values
from wlprof.schema import I64, Column, S
from wlprof.workloads.base import Built, Parsed, Point, Workload

OPTIMIZERS = ("adamw", "adam", "sgd")
IMPLS = ("foreach", "fused")
STATES = {"adamw": 2, "adam": 2, "sgd": 1}  # state tensors per parameter (moments; the momentum buffer)


@dataclass(frozen=True)
class OptimSpec:
    optimizers: tuple[str, ...]
    impls: tuple[str, ...]
    tensors: tuple[int, ...]
    numel: tuple[int, ...]


class Optim(Workload):
    name = "optim"
    summary = "optimizer steps: AdamW, Adam, SGD with momentum, foreach or fused, over a list of parameters"
    label = "optimizer steps"
    params = (
        Param("optimizer", "str", "Optimizers (sgd: momentum 0.9)", many=True, choices=OPTIMIZERS,
              default=["adamw", "sgd"]),
        Param("impl", "str", "torch's implementation: foreach (the _foreach_* kernels) or fused (one kernel)",
              many=True, choices=IMPLS, default=list(IMPLS)),
        Param("tensors", "int", "Parameter tensors in the list", many=True, default=PerDevice([8, 64], [4])),
        Param("numel", "int", "Elements of each parameter tensor", many=True, unit="elements",
              default=PerDevice([1 << 20], [1 << 12])),
    )
    columns = (
        Column("optimizer", S, "", "optimizer step: adamw, adam, sgd"),
        Column("impl", S, "", "optimizer step: foreach or fused"),
        Column("tensors", I64, "", "optimizer step: parameter tensors in the list"),
        Column("param_numel", I64, "elements", "optimizer step: elements of each parameter tensor"),
    )
    examples = (
        "wlprof run optim",
        "wlprof run optim --optimizer adamw --impl foreach,fused --tensors 16 --numel 4096,262144",
    )

    def spec(self, values: Values, device, dtype) -> Parsed:
        notes = []
        if device.type != "cuda" and not {"tensors", "numel"} & values.given:
            notes.append("CPU: 4 tensors of 2^12 elements (GPU default 8, 64 tensors of 2^20)")
        return Parsed(OptimSpec(tuple(values["optimizer"]), tuple(values["impl"]), tuple(values["tensors"]),
                                tuple(values["numel"])), tuple(notes))

    def points(self, spec: OptimSpec) -> list[Point]:
        return [Point(f"{o} {i} T{t} n={n}", {"optimizer": o, "impl": i, "tensors": t, "param_numel": n})
                for o in spec.optimizers for i in spec.impls for t in spec.tensors for n in spec.numel]

    def size_params(self) -> tuple[str, ...]:
        return ("tensors", "numel")

    def estimate_bytes(self, point: Point, dtype) -> int:
        p = point.params
        # parameters, gradients and the states, each tensors x numel elements
        return (2 + STATES[p["optimizer"]]) * p["tensors"] * p["param_numel"] * dtype.itemsize

    def build(self, point: Point, device, dtype) -> Built:
        import torch

        from wlprof.cost.tensor_lists import recording_lists
        from wlprof.errors import InputError, Key

        p = point.params
        gen = torch.Generator(device=device).manual_seed(0)
        params = []
        for _ in range(p["tensors"]):
            w = torch.randn(p["param_numel"], device=device, dtype=dtype, generator=gen).requires_grad_(True)
            w.grad = torch.randn(p["param_numel"], device=device, dtype=dtype, generator=gen)
            params.append(w)
        kind = {"foreach": True} if p["impl"] == "foreach" else {"fused": True}
        cls = {"adamw": torch.optim.AdamW, "adam": torch.optim.Adam, "sgd": torch.optim.SGD}[p["optimizer"]]
        extra = {"momentum": 0.9} if p["optimizer"] == "sgd" else {}
        try:
            opt = cls(params, lr=1e-4, **extra, **kind)
        except (RuntimeError, TypeError, ValueError) as e:
            raise InputError(Key("impl"), f"{p['impl']} is not available for {p['optimizer']} on "
                             f"{device.type} in {dtype} with this torch ({e})", p["impl"]) from e

        # one step now: the optimizer creates its states (zeroed moments, momentum buffers) on its first step,
        # so that every step measured or listed updates them in place
        with torch.inference_mode(False), torch.no_grad():
            opt.step()
            # a second step under a recorder: the lists' shapes, which the profiler does not record past
            # 30 tensors (the step's list ops are the same every step from now on)
            with recording_lists() as rec:
                opt.step()

        def step():
            from torch.profiler import record_function

            with torch.inference_mode(False), record_function("optim/step"):
                opt.step()
        return Built(step=step, graph_safe=False, tensor_lists=tuple(rec.calls))


WORKLOAD = Optim()

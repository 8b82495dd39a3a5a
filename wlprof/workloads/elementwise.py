"""The roofline note's micro-kernels: one op each, intensities from 1/4 to n/3.

In bf16 (seed note 000, section 2): ReLU 1/4 FLOP/byte, GELU 5, dot product 1/2,
matrix-vector 1, matrix-matrix n/3. A copy is the bandwidth reference; `mul` and
`add` (two same-size inputs, 1/6) are the binary kernels MoE and GNN steps are full of. GPU
defaults: 2^28 elements (512 MiB per bf16 tensor, far past the 60 MB L2), a
16384^2 matrix for matvec, 8192^2 for matmul. CPU defaults: 2^24 elements,
4096^2 and 1024^2.
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
    register,
    reject_unknown,
    str_list,
)

OPS = ["copy", "relu", "gelu", "silu", "mul", "add", "dot", "matvec", "matmul"]
VECTOR_OPS = {"copy", "relu", "gelu", "silu", "mul", "add", "dot"}


@dataclass(frozen=True)
class ElementwiseSpec:
    ops: tuple[str, ...]
    numel: tuple[int, ...]
    matvec_n: tuple[int, ...]
    matmul_n: tuple[int, ...]


@register
class Elementwise(Workload):
    name = "elementwise"
    summary = "roofline micro-kernels: copy, relu, gelu, silu, mul, add, dot, matvec, matmul"

    def parse(self, params: Mapping[str, Any], device, dtype, prefix: str = "--") -> Parsed:
        reject_unknown(params, {"ops", "numel", "matvec_n", "matmul_n"}, prefix)
        gpu = device.type == "cuda"
        notes = []
        ops = str_list(params.get("ops") or ",".join(OPS), argname("ops", prefix), OPS)
        if not gpu and not any(params.get(k) for k in ("numel", "matvec_n", "matmul_n")):
            notes.append("CPU: 2^24 elements, matvec 4096^2, matmul 1024^2 (GPU default 2^28, 16384^2, 8192^2)")
        numel = int_list(params.get("numel") or (1 << 28 if gpu else 1 << 24), argname("numel", prefix))
        mv = int_list(params.get("matvec_n") or (16384 if gpu else 4096), argname("matvec_n", prefix))
        mm = int_list(params.get("matmul_n") or (8192 if gpu else 1024), argname("matmul_n", prefix))
        return Parsed(ElementwiseSpec(tuple(ops), tuple(numel), tuple(mv), tuple(mm)), tuple(notes))

    def points(self, spec: ElementwiseSpec) -> list[Point]:
        out = []
        for op in spec.ops:
            if op in VECTOR_OPS:
                out += [Point(f"{op} n={x}", {"op": op, "numel": x}) for x in spec.numel]
            else:
                sides = spec.matvec_n if op == "matvec" else spec.matmul_n
                out += [Point(f"{op} n={n}", {"op": op, "n": n, "numel": n * n}) for n in sides]
        return out

    def estimate_bytes(self, point: Point, dtype) -> int:
        p = point.params
        return 3 * p["numel"] * dtype.itemsize

    def build(self, point: Point, device, dtype) -> Built:
        import torch
        import torch.nn.functional as F

        p = point.params
        gen = torch.Generator(device=device).manual_seed(0)

        def randn(*shape):
            return torch.randn(*shape, device=device, dtype=dtype, generator=gen)

        op = p["op"]
        if op in VECTOR_OPS:
            x = randn(p["numel"])
            if op == "copy":
                dst = torch.empty_like(x)
                step = lambda: dst.copy_(x)  # noqa: E731
            elif op == "relu":
                step = lambda: torch.relu(x)  # noqa: E731
            elif op == "gelu":
                step = lambda: F.gelu(x)  # noqa: E731
            elif op == "silu":
                step = lambda: F.silu(x)  # noqa: E731
            elif op in ("mul", "add"):
                y = randn(p["numel"])
                step = (lambda: torch.mul(x, y)) if op == "mul" else (lambda: torch.add(x, y))
            else:
                y = randn(p["numel"])
                step = lambda: torch.dot(x, y)  # noqa: E731
        elif op == "matvec":
            a, v = randn(p["n"], p["n"]), randn(p["n"])
            step = lambda: torch.mv(a, v)  # noqa: E731
        else:
            a, b = randn(p["n"], p["n"]), randn(p["n"], p["n"])
            step = lambda: torch.mm(a, b)  # noqa: E731
        return Built(step=step)

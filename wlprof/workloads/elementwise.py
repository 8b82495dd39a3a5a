"""The roofline micro-kernels: one op per point, intensities from 1/4 FLOP/byte (ReLU) to n/3 (matmul).

A copy is the bandwidth reference; mul and add (two inputs) are the binary kernels MoE
and GNN steps are full of; matvec and matmul run on an n x n matrix. cast and add_mixed are
the mixed-dtype kernels of mixed-precision training: a tensor copied to float32 and back
(torch.autocast's casts; bfloat16 and back in a float32 run), and a float32 tensor plus one of
the run's dtype (bfloat16 in a float32 run), whose loads convert each element.
"""

from __future__ import annotations

from dataclasses import dataclass

from wlprof.params import Param, PerDevice, Values
from wlprof.schema import I64, Column, S
from wlprof.workloads.base import Built, Parsed, Point, Workload

OPS = ("copy", "relu", "gelu", "silu", "mul", "add", "dot", "cast", "add_mixed", "matvec", "matmul")
VECTOR_OPS = {"copy", "relu", "gelu", "silu", "mul", "add", "dot", "cast", "add_mixed"}
MIXED_OPS = {"cast", "add_mixed"}


@dataclass(frozen=True)
class ElementwiseSpec:
    ops: tuple[str, ...]
    numel: tuple[int, ...]
    matvec_n: tuple[int, ...]
    matmul_n: tuple[int, ...]


class Elementwise(Workload):
    name = "elementwise"
    summary = "roofline micro-kernels: copy, relu, gelu, silu, mul, add, dot, cast, add_mixed, matvec, matmul"
    label = "roofline micro-kernels"
    params = (
        Param("ops", "str", "Micro-kernels to run", many=True, choices=OPS, default=list(OPS)),
        # 2^28 elements: 512 MiB per bf16 tensor, far past an H200's 60 MB L2
        Param("numel", "int", "Elements of copy, relu, gelu, silu, mul, add, dot, cast, add_mixed", many=True,
              unit="elements", default=PerDevice([1 << 28], [1 << 24])),
        Param("matvec_n", "int", "Matrix sides for matvec", many=True, default=PerDevice([16384], [4096])),
        Param("matmul_n", "int", "Matrix sides for matmul", many=True, default=PerDevice([8192], [1024])),
    )
    columns = (
        Column("op", S, "", "micro-kernel: copy, relu, gelu, silu, mul, add, dot, cast, add_mixed, matvec, matmul"),
        Column("numel", I64, "elements", "micro-kernel: elements of the main operand"),
        Column("n", I64, "", "GEMM: columns of B and C; matvec/matmul micro-kernels: matrix side"),
    )
    examples = (
        "wlprof run elementwise",
        "wlprof run elementwise --ops relu,gelu,copy --numel 65536,16777216",
        "wlprof run elementwise --ops matvec,matmul --matvec-n 1024,4096 --matmul-n 256,1024",
    )

    def spec(self, values: Values, device, dtype) -> Parsed:
        notes = []
        if device.type != "cuda" and not {"numel", "matvec_n", "matmul_n"} & values.given:
            notes.append("CPU: 2^24 elements, matvec 4096^2, matmul 1024^2 (GPU default 2^28, 16384^2, 8192^2)")
        return Parsed(ElementwiseSpec(tuple(values["ops"]), tuple(values["numel"]), tuple(values["matvec_n"]),
                                      tuple(values["matmul_n"])), tuple(notes))

    def points(self, spec: ElementwiseSpec) -> list[Point]:
        out = []
        for op in spec.ops:
            if op in VECTOR_OPS:
                out += [Point(f"{op} n={x}", {"op": op, "numel": x}) for x in spec.numel]
            else:
                sides = spec.matvec_n if op == "matvec" else spec.matmul_n
                out += [Point(f"{op} n={n}", {"op": op, "n": n, "numel": n * n}) for n in sides]
        return out

    def size_params(self) -> tuple[str, ...]:
        return ("numel", "matvec_n", "matmul_n")

    def estimate_bytes(self, point: Point, dtype) -> int:
        if point.params["op"] in MIXED_OPS:  # float32 tensors beside the run's dtype
            return 3 * point.params["numel"] * max(dtype.itemsize, 4)
        return 3 * point.params["numel"] * dtype.itemsize

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
            elif op in MIXED_OPS:
                # the other dtype: float32 beside a 16-bit run, bfloat16 beside a 32- or 64-bit one
                other = torch.float32 if dtype.itemsize <= 2 else torch.bfloat16
                y = torch.randn(p["numel"], device=device, dtype=other, generator=gen)
                if op == "cast":
                    back = torch.empty_like(x)
                    step = lambda: back.copy_(y.copy_(x))  # noqa: E731  (to the other dtype and back)
                else:  # float32 + the run's dtype, or the run's + bfloat16: promoted to the wider one
                    step = lambda: torch.add(y, x)  # noqa: E731
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


WORKLOAD = Elementwise()

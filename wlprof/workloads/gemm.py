"""GEMMs of equal FLOPs and different shapes: C[M,N] = A[M,K] @ B[K,N]."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from wlprof.errors import InputError, Key
from wlprof.params import Param, PerDevice, Values, parse_int
from wlprof.schema import I64, Column, S
from wlprof.workloads.base import Built, Parsed, Point, Workload

# Three shapes of 2*M*K*N = 21.47 GFLOP: balanced, medium-skinny, tall-skinny (M x K x N).
REFERENCE_SHAPES = [(2048, 2048, 2560), (32, 4096, 81920), (1, 4096, 2621440)]
# The same three classes at 1/64 of the FLOPs (335.5 MFLOP each), for the CPU.
CPU_SHAPES = [(512, 512, 640), (32, 1024, 5120), (1, 1024, 163840)]
LAYOUTS = ("nn", "nt", "linear")  # A @ B; A @ W.T (nn.Linear without bias); nn.Linear with bias
_SHAPE_RE = re.compile(r"^\s*(\S+?)\s*[xX*]\s*(\S+?)\s*[xX*]\s*(\S+?)\s*$")


SKINNY = 8  # a dimension is skinny when the largest is at least this many times it


def shape_class(m: int, k: int, n: int) -> str:
    """Skinny in M or N: tall-skinny when that dimension is 1 (a matrix-vector product), medium-skinny when
    it is under 128 and an eighth of the largest or less. low-K: the reduction dimension alone is that small
    (an outer product at K = 1: each output element takes few products, so writing C decides the time).
    Else balanced (64x64x64 is)."""
    small, large = min(m, k, n), max(m, k, n)
    if large < SKINNY * small or small >= 128:
        return "balanced"
    if min(m, n) == small:
        return "tall-skinny" if small == 1 else "medium-skinny"
    return "low-K"


def parse_shape(item: Any, key: Key) -> tuple[int, int, int]:
    """'2048x2048x2560' or [2048, 2048, 2560] -> (M, K, N), each a positive integer."""
    rule = "must be shapes MxKxN of positive integers, comma-separated (e.g. 2048x2048x2560)"
    if isinstance(item, (list, tuple)):
        parts = list(item)
    else:
        match = _SHAPE_RE.match(str(item))
        parts = list(match.groups()) if match else []
    if len(parts) != 3:
        raise InputError(key, rule, item)
    try:
        dims = tuple(parse_int(p, key) for p in parts)
    except InputError:
        raise InputError(key, rule, item) from None
    if min(dims) < 1:
        raise InputError(key, rule, item)
    return dims


def _fmt(shapes) -> list[str]:
    return [f"{m}x{k}x{n}" for m, k, n in shapes]


@dataclass(frozen=True)
class GemmSpec:
    shapes: tuple[tuple[int, int, int], ...]
    layout: str = "nn"


class Gemm(Workload):
    name = "gemm"
    summary = "GEMMs of equal FLOPs and different shapes (C[M,N] = A[M,K] @ B[K,N])"
    label = "GEMM shapes"
    params = (
        Param("shapes", "str", "GEMM shapes MxKxN to sweep", many=True, item=parse_shape, metavar="MxKxN,...",
              default=PerDevice(_fmt(REFERENCE_SHAPES), _fmt(CPU_SHAPES))),
        Param("layout", "str", "nn: A[M,K] @ B[K,N]; nt: A @ W.T with W[N,K] stored as nn.Linear stores it; "
              "linear: nn.functional.linear with a bias", choices=LAYOUTS, default="nn"),
    )
    columns = (
        Column("m", I64, "rows", "GEMM: rows of A and C"),
        Column("k", I64, "", "GEMM: inner dimension"),
        Column("n", I64, "", "GEMM: columns of B and C; matvec/matmul micro-kernels: matrix side"),
        Column("shape_class", S, "", "GEMM: balanced, medium-skinny, tall-skinny, low-K"),
        Column("layout", S, "", "GEMM: operand layout (nn: A @ B; nt: A @ W.T; linear: with a bias)"),
    )
    examples = (
        "wlprof run gemm",
        "wlprof run gemm --shapes 1024x1024x1024,8x1024x1024",
        "wlprof run gemm --shapes 1x4096x4096 --dtype float16",
    )

    def size_params(self) -> tuple[str, ...]:
        return ("shapes",)

    def spec(self, values: Values, device, dtype) -> Parsed:
        notes = []
        if device.type != "cuda" and "shapes" not in values.given:
            notes.append("CPU: the three 21.5-GFLOP shapes scaled to 1/64 of the FLOPs "
                         f"({', '.join(_fmt(CPU_SHAPES))}); pass --shapes to choose")
        return Parsed(GemmSpec(tuple(values["shapes"]), values["layout"]), tuple(notes))

    def points(self, spec: GemmSpec) -> list[Point]:
        out = []
        suffix = "" if spec.layout == "nn" else f" {spec.layout}"
        for m, k, n in spec.shapes:
            cls = shape_class(m, k, n)
            out.append(Point(f"{cls} {m}x{k}x{n}{suffix}", {"m": m, "k": k, "n": n, "shape_class": cls,
                                                             "layout": spec.layout}))
        return out

    def estimate_bytes(self, point: Point, dtype) -> int:
        p = point.params
        return (p["m"] * p["k"] + p["k"] * p["n"] + p["m"] * p["n"]) * dtype.itemsize

    def build(self, point: Point, device, dtype) -> Built:
        import torch

        p = point.params
        gen = torch.Generator(device=device).manual_seed(0)
        a = torch.randn(p["m"], p["k"], device=device, dtype=dtype, generator=gen)
        layout = p.get("layout") or "nn"
        if layout == "nn":
            b = torch.randn(p["k"], p["n"], device=device, dtype=dtype, generator=gen)

            def step():
                return torch.matmul(a, b)
        else:
            import torch.nn.functional as F

            w = torch.randn(p["n"], p["k"], device=device, dtype=dtype, generator=gen)
            bias = torch.randn(p["n"], device=device, dtype=dtype, generator=gen) if layout == "linear" else None

            def step():
                return F.linear(a, w, bias)

        return Built(step=step)


WORKLOAD = Gemm()

"""GEMMs of equal FLOPs and different shapes: the seed note's first surprise.

The note's three shapes (M x K x N) all cost 2*M*K*N = 21.47 GFLOP:
balanced 2048x2048x2560, medium-skinny 32x4096x81920, tall-skinny 1x4096x2621440.
On the CPU the default is the same three classes at 1/64 of the FLOPs
(512x512x640, 32x1024x5120, 1x1024x163840: 335.5 MFLOP each).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from wlprof.errors import InputError
from wlprof.workloads.base import (
    Built,
    Parsed,
    Point,
    Workload,
    argname,
    positive_int,
    register,
    reject_unknown,
)

NOTE_SHAPES = [(2048, 2048, 2560), (32, 4096, 81920), (1, 4096, 2621440)]
CPU_SHAPES = [(512, 512, 640), (32, 1024, 5120), (1, 1024, 163840)]
_SHAPE_RE = re.compile(r"^\s*(\d+)\s*[xX*]\s*(\d+)\s*[xX*]\s*(\d+)\s*$")


def shape_class(m: int) -> str:
    if m == 1:
        return "tall-skinny"
    if m < 128:
        return "medium-skinny"
    return "balanced"


def parse_shapes(value: Any, arg: str) -> list[tuple[int, int, int]]:
    items = value.split(",") if isinstance(value, str) else list(value)
    shapes = []
    for item in items:
        if isinstance(item, (list, tuple)) and len(item) == 3:
            m, k, n = (positive_int(x, arg) for x in item)
        else:
            match = _SHAPE_RE.match(str(item))
            if not match:
                raise InputError(arg, "must be shapes MxKxN with positive integers, comma-separated", item)
            m, k, n = (positive_int(x, arg) for x in match.groups())
        shapes.append((m, k, n))
    if not shapes:
        raise InputError(arg, "must list at least one shape MxKxN", value)
    return shapes


@dataclass(frozen=True)
class GemmSpec:
    shapes: tuple[tuple[int, int, int], ...]


@register
class Gemm(Workload):
    name = "gemm"
    summary = "GEMMs of equal FLOPs and different shapes (C[M,N] = A[M,K] @ B[K,N])"

    def parse(self, params: Mapping[str, Any], device, dtype, prefix: str = "--") -> Parsed:
        reject_unknown(params, {"shapes"}, prefix)
        notes = []
        if params.get("shapes") is None:
            if device.type == "cuda":
                shapes = NOTE_SHAPES
            else:
                shapes = CPU_SHAPES
                notes.append("CPU: the note's three shapes scaled to 1/64 of the FLOPs "
                             "(512x512x640, 32x1024x5120, 1x1024x163840); pass --shapes to choose")
        else:
            shapes = parse_shapes(params["shapes"], argname("shapes", prefix))
        return Parsed(GemmSpec(tuple(shapes)), tuple(notes))

    def points(self, spec: GemmSpec) -> list[Point]:
        out = []
        for m, k, n in spec.shapes:
            cls = shape_class(m)
            out.append(Point(f"{cls} {m}x{k}x{n}", {"m": m, "k": k, "n": n, "shape_class": cls}))
        return out

    def estimate_bytes(self, point: Point, dtype) -> int:
        p = point.params
        return (p["m"] * p["k"] + p["k"] * p["n"] + p["m"] * p["n"]) * dtype.itemsize

    def build(self, point: Point, device, dtype) -> Built:
        import torch

        p = point.params
        gen = torch.Generator(device=device).manual_seed(0)
        a = torch.randn(p["m"], p["k"], device=device, dtype=dtype, generator=gen)
        b = torch.randn(p["k"], p["n"], device=device, dtype=dtype, generator=gen)

        def step():
            return torch.matmul(a, b)

        return Built(step=step)

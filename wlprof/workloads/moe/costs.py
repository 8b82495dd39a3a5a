"""MoE expert costs: FLOPs per routed row, the grouped dispatch's stated GEMM cost, padded capacity."""

from __future__ import annotations

import math

import numpy as np

FFNS = ["swiglu", "gelu"]



GROUPED_OPS = ("aten::_grouped_mm",)  # the ops the grouped dispatch's stated cost is for


def grouped_expert_cost(rows: int, active: int, experts: int, d_model: int, d_ff: int, ffn: str,
                        itemsize: int, dtype: str | None):
    """The grouped dispatch's stated cost of its `_grouped_mm` calls in moe/expert, per step.

    torch._grouped_mm's shapes say how many experts there are, not which received
    tokens: an expert with an empty group has its weights skipped, so the formula
    (every expert's weights read) overstates the bytes when routing is concentrated.
    Per call, as the formula counts it but with only the `active` experts' weights:
    x@W (R*d + A*d*f + R*f, writes R*f) for W1 and W3 (SwiGLU) or W1 (GELU), h@W2
    (R*f + A*f*d + R*d, writes R*d), and each call's int32 offs (4*E). FLOPs: 2*R*d*f
    per call (no padding in this dispatch). The activation and gating ops between
    the calls keep their own formulas.
    """
    from wlprof.cost.registry import MATRIX, Cost

    if ffn not in FFNS:
        raise ValueError(f"ffn must be one of {FFNS} (got {ffn!r})")
    r, a, d, f = rows, active, d_model, d_ff
    calls = 3 if ffn == "swiglu" else 2
    nbytes = itemsize * calls * (r * d + a * d * f + r * f) + 4 * experts * calls
    written = itemsize * ((calls - 1) * r * f + r * d)
    return Cost(float(calls * 2 * r * d * f), float(nbytes), MATRIX, dtype, written=float(written))


def flops_per_row(d_model: int, d_ff: int, ffn: str) -> int:
    """Expert FFN FLOPs for one token-expert row, as wlprof's formulas count its kernels."""
    from wlprof.cost.elementwise import BINARY_FLOPS, UNARY_FLOPS

    if ffn == "swiglu":  # W1, W3: 2*d*f each; W2: 2*f*d; silu(h1) * h3 over d_ff
        return 3 * 2 * d_model * d_ff + (UNARY_FLOPS["silu"] + BINARY_FLOPS["mul"]) * d_ff
    if ffn == "gelu":  # W1, W2: 2*d*f each; gelu over d_ff
        return 2 * 2 * d_model * d_ff + UNARY_FLOPS["gelu"] * d_ff
    raise ValueError(f"ffn must be one of {FFNS} (got {ffn!r})")


def capacity(capacity_factor: float, counts: np.ndarray, tokens: int, top_k: int) -> int:
    """Rows per expert buffer: ceil(cf * tokens * top_k / experts) (GShard); cf 0: the largest load."""
    experts = len(counts)
    if capacity_factor == 0:
        return int(max(1, counts.max()))
    return max(1, math.ceil(capacity_factor * tokens * top_k / experts))

"""MoE expert costs: FLOPs per routed row, the grouped dispatch's stated cost, padded capacity."""

from __future__ import annotations

import math

import numpy as np

FFNS = ["swiglu", "gelu"]



def grouped_expert_cost(rows: int, active: int, experts: int, d_model: int, d_ff: int, ffn: str,
                        itemsize: int, dtype: str | None):
    """The grouped dispatch's moe/expert cost, stated by the workload.

    torch._grouped_mm's shapes say how many experts there are, not which received
    tokens: an expert with an empty group has its weights skipped, so the formula
    (every expert's weights read) overstates the bytes when routing is concentrated.
    Per op, as the formulas count them, with only the `active` experts' weights read:
    SwiGLU: x@W1 and x@W3 (R*d + A*d*f + R*f each), silu (2*R*f), gating mul (3*R*f),
    h@W2 (R*f + A*f*d + R*d), and the int32 offs of each grouped call (4*E each):
    s*(3*R*d + 3*A*d*f + 8*R*f) + 12*E bytes. GELU: s*(2*R*d + 2*A*d*f + 4*R*f) + 8*E.
    Written: each op's output, s*(4*R*f + R*d) (SwiGLU), s*(2*R*f + R*d) (GELU).
    FLOPs: rows * flops_per_row (no padding in this dispatch).
    """
    from wlprof.cost.registry import MATRIX, Cost

    r, a, d, f = rows, active, d_model, d_ff
    if ffn == "swiglu":
        nbytes = itemsize * (3 * r * d + 3 * a * d * f + 8 * r * f) + 12 * experts
        written = itemsize * (4 * r * f + r * d)
    else:
        nbytes = itemsize * (2 * r * d + 2 * a * d * f + 4 * r * f) + 8 * experts
        written = itemsize * (2 * r * f + r * d)
    return Cost(float(rows * flops_per_row(d_model, d_ff, ffn)), float(nbytes), MATRIX, dtype, written=float(written))


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

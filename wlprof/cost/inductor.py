"""Inductor's Triton kernels: a launch is a cpu_op named after the kernel, chosen by its `kernel_backend` arg.

torch (2.11 and later) records each Triton launch of a compiled graph as a `cpu_op` named
after the kernel (`triton_poi_fused_gelu_view_8`) with `Input Dims`/`Input type`/`Input
Strides` of its arguments (the buffers, then the scalar numels) and `kernel_backend:
triton`. With `torch._inductor.config.benchmark_kernel` (or `profile_bandwidth`) the launch
also carries Inductor's own estimates (`codegen/simd.py`): `kernel_num_gb`, the bytes of
every buffer the kernel accesses (a buffer larger than the kernel's numel counted per
slice it reads, an in-place buffer twice: read and written), and `kernel_flop`, the
FlopCounterMode count of the aten ops the kernel was generated from (0 for pointwise and
reduction kernels: FlopCounterMode counts none of their ops).

- Bytes: `kernel_num_gb` * 1e9 when recorded and positive (flops_source `inductor`), else
  the compulsory bytes of the buffers: each tensor argument once at its dtype and stored
  size, scalars skipped (flops_source `formula`). The two differ where Inductor counts an
  in-place buffer twice or a sliced buffer per slice; `benchmarks/coverage.md` reports by
  how much on a real pair of traces.
- FLOPs: `kernel_flop` when positive (a matrix kernel: the matmul or convolution it
  implements); else, for a GEMM template (`triton_tem_fused_..._mm_...`, `..._bmm_...`: one
  matmul with fused prologue and epilogue), 2*M*N*K from its buffers (`template_gemm_flops`);
  else unknown (None): a fused pointwise kernel's arithmetic is not recorded, and guessing it
  from the kernel's name (as TraceLens does) is not done here.
- Bytes written are not stated: which arguments are outputs is not recorded.
"""

from __future__ import annotations

import math
from itertools import combinations

from wlprof.cost.registry import FORMULA, INDUCTOR, MATRIX, VECTOR, Cost, OpCall, arg_formula

_MM_TOKENS = frozenset(("mm", "addmm"))
_BMM_TOKENS = frozenset(("bmm", "baddbmm"))


def _positive(v) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v) if v > 0 else None


def buffer_bytes(call: OpCall) -> int:
    """Each tensor argument once at its dtype (stored elements: a broadcast buffer's storage)."""
    return sum(t.nbytes_read for t in call.tensors)


def _square_root(n: int) -> int | None:
    r = math.isqrt(n) if n >= 0 else -1
    return r if r >= 0 and r * r == n else None


def _has_factor(dims: tuple[int, ...], factor: int) -> bool:
    """Whether some of `dims` (any subset: a permuted view) multiply to `factor`."""
    return any(math.prod(c) == factor for r in range(1, len(dims) + 1) for c in combinations(dims, r))


def _triple_dims(dims: tuple[tuple[int, ...], ...], numels: tuple[int, ...]) -> tuple[int, int, int] | None:
    """(x, y, z) where three buffers of these numels are [x, y], [x, z] and [y, z] matrices (each
    splittable into its two factors), else None: x the dim the first two share, y the first and
    third, z the second and third. For a GEMM's [M, K], [K, N] and [M, N] in that order: (K, M, N)."""
    a, b, c = numels
    x2, rem_x = divmod(a * b, c)  # the dim the first two share
    y2, rem_y = divmod(a * c, b)
    z2, rem_z = divmod(b * c, a)
    if rem_x or rem_y or rem_z:
        return None
    x, y, z = _square_root(x2), _square_root(y2), _square_root(z2)
    if not x or not y or not z:
        return None
    if not (_has_factor(dims[0], x) and _has_factor(dims[1], x) and _has_factor(dims[2], y)
            and _has_factor(dims[0], y) and _has_factor(dims[1], z) and _has_factor(dims[2], z)):
        return None
    return x, y, z


def gemm_template(name: str) -> str | None:
    """'mm' or 'bmm' where `name` is an Inductor GEMM template kernel (`triton_tem_fused_..._mm_...`), else None."""
    if not isinstance(name, str) or not name.startswith("triton_tem_"):
        return None
    tokens = set(name.split("_"))
    if tokens & _BMM_TOKENS:
        return "bmm"
    return "mm" if tokens & _MM_TOKENS else None


def template_gemm_shape(call: OpCall) -> tuple[int, int, int, int] | None:
    """(batch, M, N, K) of an Inductor GEMM template launch, or None.

    A template kernel (`triton_tem_...`) implements one matmul with pointwise prologue and
    epilogue ops fused in; its name lists the aten ops it was generated from (`mm`, `addmm`,
    `bmm`, `baddbmm`). Its buffers are the two operands, the output and the epilogue's other
    inputs. Every three buffers (of at least two dims, for a batched template three dims sharing
    the leading one) whose sizes are [M, K], [K, N] and [M, N] for whole M, N, K give M*N*K; the
    shape is known only where every such triple gives the same product (an epilogue buffer that
    makes another triple makes it unknown). Which of the three dims is K: the one the triple's
    first two buffers share (a template's operands come before its output among its arguments),
    M the one the first shares with the third.
    """
    kind = gemm_template(call.name)
    if kind is None:
        return None
    batched = kind == "bmm"
    shapes = [t.dims for t in call.tensors if len(t.dims) >= (3 if batched else 2) and t.numel > 0]
    found: dict[int, tuple[int, int, int, int]] = {}
    for trio in combinations(shapes, 3):
        batch = trio[0][0] if batched else 1
        if batched and any(d[0] != batch for d in trio):
            continue
        inner = tuple(d[1:] for d in trio) if batched else trio
        xyz = _triple_dims(inner, tuple(math.prod(d) for d in inner))
        if xyz is not None:
            k, m, n = xyz
            found.setdefault(batch * m * n * k, (batch, m, n, k))
    return next(iter(found.values())) if len(found) == 1 else None


def template_gemm_flops(call: OpCall) -> float | None:
    """2*M*N*K (times the batch) of an Inductor GEMM template launch (`template_gemm_shape`), or None."""
    shape = template_gemm_shape(call)
    return 2.0 * math.prod(shape) if shape is not None else None


@arg_formula("kernel_backend", "triton")
def triton_launch(call: OpCall) -> Cost | None:
    tensors = call.tensors
    if not tensors:
        return None
    gb = _positive(call.arg("kernel_num_gb"))
    stated = _positive(call.arg("kernel_flop"))
    flops = stated if stated is not None else template_gemm_flops(call)
    nbytes = float(round(gb * 1e9)) if gb is not None else float(buffer_bytes(call))  # Inductor wrote bytes / 1e9
    source = INDUCTOR if gb is not None or stated is not None else FORMULA
    dtype = max(tensors, key=lambda t: t.stored * t.itemsize).dtype
    return Cost(flops, nbytes, MATRIX if flops is not None else VECTOR, dtype, source=source)

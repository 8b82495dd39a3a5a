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
  implements), else unknown (None): a fused pointwise kernel's arithmetic is not recorded,
  and guessing it from the kernel's name (as TraceLens does) is not done here.
- Bytes written are not stated: which arguments are outputs is not recorded.
"""

from __future__ import annotations

from wlprof.cost.registry import FORMULA, INDUCTOR, MATRIX, VECTOR, Cost, OpCall, arg_formula


def _positive(v) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v) if v > 0 else None


def buffer_bytes(call: OpCall) -> int:
    """Each tensor argument once at its dtype (stored elements: a broadcast buffer's storage)."""
    return sum(t.nbytes_read for t in call.tensors)


@arg_formula("kernel_backend", "triton")
def triton_launch(call: OpCall) -> Cost | None:
    tensors = call.tensors
    if not tensors:
        return None
    gb = _positive(call.arg("kernel_num_gb"))
    flops = _positive(call.arg("kernel_flop"))
    nbytes = float(round(gb * 1e9)) if gb is not None else float(buffer_bytes(call))  # Inductor wrote bytes / 1e9
    source = INDUCTOR if gb is not None or flops is not None else FORMULA
    dtype = max(tensors, key=lambda t: t.stored * t.itemsize).dtype
    return Cost(flops, nbytes, MATRIX if flops is not None else VECTOR, dtype, source=source)

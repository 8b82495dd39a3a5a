"""Triton launches of compiled graphs: Inductor's own numbers when recorded, else the buffers' bytes."""

from __future__ import annotations

import pandas as pd
from cost_calls import BF16, F32, S, T, op

import wlprof.cost  # noqa: F401  (registers every formula)
from wlprof.cost import MATRIX, VECTOR, cost_of
from wlprof.cost.attribution import flag_ops
from wlprof.cost.registry import registered_args

# triton_poi_fused_gelu_view_8(in_ptr0 [4096, 4096] bf16, out_ptr0 [4096, 4096] bf16, xnumel)
ARGS = (T([4096, 4096], BF16), T([4096, 4096], BF16), S(16777216))


def test_registered_by_kernel_backend():
    assert ("kernel_backend", "triton") in registered_args()


def test_buffer_estimate_without_inductor_metadata():
    # each tensor argument once: 2 * 2*4096*4096 = 67108864 bytes; the scalar numel skipped; FLOPs unknown
    c = cost_of(op("triton_poi_fused_gelu_view_8", *ARGS, kernel_backend="triton"))
    assert (c.flops, c.bytes, c.source, c.unit, c.dtype) == (None, 67108864, "formula", VECTOR, "bfloat16")


def test_inductor_numbers_when_recorded():
    # benchmark_kernel: kernel_num_gb 0.100663296 (the in-place buffer counted read and written) -> bytes;
    # kernel_flop 0 (a pointwise kernel) -> FLOPs unknown
    c = cost_of(op("triton_poi_fused_gelu_gelu_backward_view_7", *ARGS, kernel_backend="triton",
                   kernel_num_gb=0.100663296, kernel_flop=0))
    assert (c.flops, c.bytes, c.source) == (None, 100663296.0, "inductor")
    # a template (a Triton matmul): kernel_flop 2*64*64*64 = 524288 is the matrix FLOPs
    c = cost_of(op("triton_tem_fused_mm_0", T([64, 64], BF16), T([64, 64], BF16), T([64, 64], BF16),
                   kernel_backend="triton", kernel_num_gb=2.4576e-05, kernel_flop=524288))
    assert (c.flops, c.bytes, c.source, c.unit) == (524288.0, 24576.0, "inductor", MATRIX)


def test_broadcast_buffer_counts_its_storage():
    # a [4, 1024, 1] fp32 buffer expanded over 1024 columns (stride 0): 4096 stored elements, 16384 bytes
    c = cost_of(op("triton_per_fused_0", T([4, 1024, 1024], F32, strides=[1024, 1, 0]), S(4096), S(1024),
                   kernel_backend="triton"))
    assert c.bytes == 4 * 4096


def test_other_backends_and_names_are_not_costed_by_it():
    assert cost_of(op("triton_poi_fused_add_0", *ARGS)) is None  # no kernel_backend recorded
    assert cost_of(op("some_kernel", *ARGS, kernel_backend="cutedsl")) is None


def test_launches_count_as_costed_ops():
    ops = pd.DataFrame({"name": ["CompiledFunction", "triton_poi_fused_add_0"], "parent": [-1, 0], "args_id": [0, 1]})
    f = flag_ops(ops, [{}, {"kernel_backend": "triton"}])
    assert list(f.has_formula) == [False, True]

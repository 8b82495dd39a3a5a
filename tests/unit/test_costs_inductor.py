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


def _tem(name, *dims, dtype=BF16):
    return cost_of(op(name, *(T(list(d), dtype) for d in dims), S(1), S(1), S(1), kernel_backend="triton"))


def test_gemm_template_flops_from_its_buffers():
    # the buffers of real max-autotune launches (H200, torch 2.11), in the order Inductor passed them:
    # x [2, 1024, 8192] as [2048, 8192] @ w [8192, 1024] -> [2048, 1024]: 2*2048*8192*1024 = 34359738368
    c = _tem("triton_tem_fused_mm_t_view_0", (2, 1024, 8192), (8192, 1024), (2048, 1024))
    assert (c.flops, c.unit, c.source) == (34359738368.0, MATRIX, "formula")
    # a backward GEMM whose fused silu-mul epilogue reads the [2048, 2816] gate: 2*2048*1024*2816 = 11811160064
    c = _tem("triton_tem_fused__unsafe_view_mm_mul_silu_t_view_6", (2, 1024, 2816), (2048, 1024), (2816, 1024))
    assert c.flops == 11811160064.0
    # the attention output [2, 16, 1024, 64] read as [2048 tokens, 1024 features] through a permute:
    # grad [1024, 2048] @ attn [2048, 1024] -> [1024, 1024]: 2*1024*2048*1024 = 4294967296
    c = _tem("triton_tem_fused_mm_t_transpose_view_10", (2, 1024, 1024), (2, 16, 1024, 64), (1024, 1024))
    assert c.flops == 4294967296.0
    # addmm with an addend of the output's shape: the triples (a, b, out) and (a, b, addend) agree:
    # [8192, 2048] @ [2048, 1024] -> [8192, 1024]: 2*8192*2048*1024 = 34359738368
    c = _tem("triton_tem_fused_addmm_embedding_dense_backward_t_view_22",
             (8192, 1024), (2, 1024, 8192), (2048, 1024), (8192, 1024))
    assert c.flops == 34359738368.0


def test_batched_gemm_template_flops():
    # bmm [8, 128, 64] @ [8, 64, 256] -> [8, 128, 256]: 2*8*128*64*256 = 33554432
    assert _tem("triton_tem_fused_bmm_3", (8, 128, 64), (8, 64, 256), (8, 128, 256)).flops == 33554432.0
    # a batch that the buffers do not share is no bmm
    assert _tem("triton_tem_fused_bmm_3", (8, 128, 64), (4, 64, 256), (8, 128, 256)).flops is None


def test_gemm_template_flops_stay_unknown_where_the_buffers_do_not_decide():
    # [32, 1024] @ [1024, 1024] -> [32, 1024] (2*32*1024*1024) and, with the [32, 32] epilogue buffer,
    # [32, 32] @ [32, 1024] -> [32, 1024] (2*32*32*1024) both fit: unknown
    assert _tem("triton_tem_fused_addmm_mul_1", (32, 1024), (1024, 1024), (32, 1024), (32, 32)).flops is None
    # a [256, 1] buffer has the numel of a [16, 16] but no split into 16 x 16: only the three [16, 16] fit
    assert _tem("triton_tem_fused_mm_mul_2", (16, 16), (16, 16), (16, 16), (256, 1)).flops == 2.0 * 16 ** 3
    # a pointwise kernel, a convolution or flex-attention template: no GEMM FLOPs
    assert _tem("triton_poi_fused_mm_0", (64, 64), (64, 64), (64, 64)).flops is None
    assert _tem("triton_tem_fused_convolution_0", (8, 64, 32, 32), (64, 64, 3, 3), (8, 64, 32, 32)).flops is None
    assert _tem("triton_tem_fused_flex_attention_0", (4, 16, 2048, 64), (4, 16, 2048, 64),
                (4, 16, 2048, 64)).flops is None

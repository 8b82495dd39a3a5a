"""vLLM's custom ops (`_C`, `_C_cache_ops`): FLOPs per element as wlprof.cost.serving states, bytes by hand."""

from __future__ import annotations

import pytest
from cost_calls import BF16, F32, I64, NONE, S, T, op

import wlprof.cost  # noqa: F401  (registers every formula)
from wlprof.cost import VECTOR, Cost, cost_of

FP8 = "c10::Float8_e4m3fn"


@pytest.mark.parametrize("name,per", [("silu_and_mul", 6), ("mul_and_silu", 6), ("gelu_and_mul", 21),
                                      ("gelu_tanh_and_mul", 21)])
def test_gated_activations(name, per):
    # out [16, 64] from input [16, 128] bf16: per x 1,024 FLOPs; reads 4,096 bytes, writes 2,048
    c = cost_of(op(f"_C::{name}", T([16, 64], BF16), T([16, 128], BF16)))
    assert c == Cost(per * 1024, 4096 + 2048, VECTOR, "bfloat16", written=2048)


def test_plain_activations():
    # gelu_new over [16, 64] bf16: 20 per element; reads and writes 2,048 bytes each
    assert cost_of(op("_C::gelu_new", T([16, 64], BF16), T([16, 64], BF16))) == Cost(
        20 * 1024, 4096, VECTOR, "bfloat16", written=2048)
    # gelu_quick: x * sigmoid(1.702 x): sigmoid 4 + 2 multiplies
    assert cost_of(op("_C::gelu_quick", T([16, 64], BF16), T([16, 64], BF16))).flops == 6 * 1024


def test_rms_norms():
    # rms_norm(result, input [8, 256] bf16, weight [256], eps): 4 per element = 8,192 FLOPs; reads
    # 4,096 + 512, writes 4,096
    c = cost_of(op("_C::rms_norm", T([8, 256], BF16), T([8, 256], BF16), T([256], BF16), S(1e-6)))
    assert c == Cost(8192, 4096 + 512 + 4096, VECTOR, "bfloat16", written=4096)
    # fused_add_rms_norm(input!, residual!, weight, eps): 5 per element; reads 4,096 x 2 + 512, writes 8,192
    c = cost_of(op("_C::fused_add_rms_norm", T([8, 256], BF16), T([8, 256], BF16), T([256], BF16), S(1e-6)))
    assert c == Cost(10240, 8192 + 512 + 8192, VECTOR, "bfloat16", written=8192)


def test_rotary_embedding():
    # 4 tokens, q 8 heads x 64, k 2 heads x 64, bf16, a cos/sin cache [2048, 64] fp32 (rot_dim 64):
    # rotated 4*8*64 + 4*2*64 = 2,560 elements, 3 FLOPs each; read and written 5,120 bytes each;
    # reads 4 int64 positions 32 and 4 cache rows 4*64*4 = 1,024
    c = cost_of(op("_C::rotary_embedding", T([4], I64), T([4, 512], BF16), T([4, 128], BF16), S(64),
                   T([2048, 64], F32), S(True)))
    assert c == Cost(7680, 32 + 1024 + 5120 + 5120, VECTOR, "bfloat16", written=5120)
    # a partial rotary (rot_dim 32 of head 64) rotates half; without a key only the query
    half = cost_of(op("_C::rotary_embedding", T([4], I64), T([4, 512], BF16), NONE, S(64), T([2048, 32], F32),
                      S(False)))
    assert half.flops == 3 * 4 * 8 * 32 and half.written == 4 * 8 * 32 * 2


def test_kv_cache_write_and_quantization():
    # reshape_and_cache_flash(key [4, 2, 64] bf16, value, key_cache! fp8, value_cache! fp8, slots [4], ...):
    # reads 1,024 + 1,024 + 32, writes 512 + 512 (1 byte per fp8 element)
    kc = T([100, 16, 2, 64], FP8)
    c = cost_of(op("_C_cache_ops::reshape_and_cache_flash", T([4, 2, 64], BF16), T([4, 2, 64], BF16), kc, kc,
                   T([4], I64), NONE, T([], F32), T([], F32)))
    assert c == Cost(0, 2048 + 32 + 1024, VECTOR, "bfloat16", written=1024)
    # static fp8 quant of [8, 256] bf16 with a scalar fp32 scale: 2 per element; reads 4,096 + 4,
    # writes 2,048
    s = cost_of(op("_C::static_scaled_fp8_quant", T([8, 256], FP8), T([8, 256], BF16), T([1], F32)))
    assert s == Cost(4096, 4096 + 4 + 2048, VECTOR, "bfloat16", written=2048)
    # per-token dynamic: 3 per element; writes the result and 8 fp32 scales
    d = cost_of(op("_C::dynamic_per_token_scaled_fp8_quant", T([8, 256], FP8), T([8, 256], BF16), T([8, 1], F32),
                   NONE))
    assert d == Cost(6144, 4096 + 2048 + 32, VECTOR, "bfloat16", written=2048 + 32)

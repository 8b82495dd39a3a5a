"""bitsandbytes' custom ops: 2·M·N·K per GEMM, (de)quantization per element, bytes by hand."""

from __future__ import annotations

from cost_calls import BF16, F32, NONE, S, T, op

import wlprof.cost  # noqa: F401  (registers every formula)
from wlprof.cost import MATRIX, VECTOR, Cost, cost_of

I8, U8, I32 = "signed char", "unsigned char", "int"


def test_int8_gemms():
    # int8_linear_matmul(A [2, 8, 64] int8, B [32, 64] int8): M = 16, 2*16*32*64 = 65,536; reads 1,024 +
    # 2,048, writes 16*32 int32 = 2,048
    assert cost_of(op("bitsandbytes::int8_linear_matmul", T([2, 8, 64], I8), T([32, 64], I8))) == Cost(
        65_536, 1024 + 2048 + 2048, MATRIX, "int8", written=2048)
    # int8_scaled_mm with row stats [16] and col stats [32] fp32, no bias, dtype bf16 (code 15): writes
    # 16*32*2 = 1,024; reads 1,024 + 2,048 + 64 + 128
    c = cost_of(op("bitsandbytes::int8_scaled_mm", T([16, 64], I8), T([32, 64], I8), T([16], F32), T([32], F32),
                   NONE, S(15)))
    assert c == Cost(65_536, 1024 + 2048 + 64 + 128 + 1024, MATRIX, "int8", written=1024)


def test_4bit_gemv_and_dequantize():
    # gemv_4bit(A [1, 1, 64] bf16, B packed [1024, 1] uint8 (32 x 64 4-bit weights), shapeB [32, 64],
    # absmax [32] fp32, code [16] fp32, blocksize 64): 2*1*32*64 = 4,096; reads 128 + 1,024 + 128 + 64,
    # writes 32 bf16 = 64
    c = cost_of(op("bitsandbytes::gemv_4bit", T([1, 1, 64], BF16), T([1024, 1], U8), S([32, 64]), T([32], F32),
                   T([16], F32), S(64)))
    assert c == Cost(4096, 128 + 1024 + 128 + 64 + 64, MATRIX, "bfloat16", written=64)
    # dequantize_4bit(A [1024, 1] uint8, absmax [32], blocksize 64, 'nf4', shape [32, 64], bf16): 2,048
    # elements written at 2 bytes; reads 1,024 + 128
    d = cost_of(op("bitsandbytes::dequantize_4bit", T([1024, 1], U8), T([32], F32), S(64), NONE, S([32, 64]), S(15)))
    assert d == Cost(2048, 1024 + 128 + 4096, VECTOR, "bfloat16", written=4096)
    # without its shape recorded: unknown
    assert cost_of(op("bitsandbytes::gemv_4bit", T([1, 64], BF16), T([1024, 1], U8), NONE, T([32], F32))) is None


def test_int8_quantization_round_trip():
    # int8_vectorwise_quant(A [16, 64] bf16, 0.0): 3 per element; reads 2,048, writes 1,024 int8 + 16 fp32
    q = cost_of(op("bitsandbytes::int8_vectorwise_quant", T([16, 64], BF16), S(0.0)))
    assert q == Cost(3072, 2048 + 1024 + 64, VECTOR, "bfloat16", written=1024 + 64)
    # int8_mm_dequant(A [16, 32] int32, row [16], col [32] fp32, dtype default fp16): 2 per element;
    # reads 2,048 + 64 + 128, writes 16*32*2 = 1,024
    m = cost_of(op("bitsandbytes::int8_mm_dequant", T([16, 32], I32), T([16], F32), T([32], F32), NONE, NONE))
    assert m == Cost(1024, 2048 + 64 + 128 + 1024, VECTOR, "int32", written=1024)

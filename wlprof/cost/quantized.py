"""bitsandbytes' custom ops (`bitsandbytes::`, registered with torch.library since 0.45): int8 and 4-bit
GEMMs and their (de)quantization, as a trace of a quantized model (QLoRA, LLM.int8()) records them.

A GEMM counts 2·M·N·K whatever its element types (M the rows of A, N and K from B or `shapeB`);
a packed 4-bit weight is read at its stored size. Dequantization counts 1 FLOP per output element
(a code lookup times its block's scale), quantization 2 (scale and round). The output's element
type is the op's `dtype` argument where it has one (bitsandbytes' default float16).
"""

from __future__ import annotations

import math

from wlprof.cost import dtypes
from wlprof.cost.registry import MATRIX, VECTOR, Cost, OpCall, formula

NS = "bitsandbytes"


def _dtype_size(code, default: str = "float16") -> int:
    name = dtypes.SCALAR_TYPE_CODES.get(code) if isinstance(code, int) else None
    return dtypes.size_of_dtype(name or default)


def _rows(a, k: int) -> int:
    return a.numel // k if k else 0


@formula(f"{NS}::int8_linear_matmul")
def int8_linear_matmul(call: OpCall) -> Cost | None:
    # (A [..., K] int8, B [N, K] int8) -> int32 [..., N]
    a, b = call.tensor(0), call.tensor(1)
    n, k = b.dims
    m = _rows(a, k)
    written = m * n * 4
    return Cost(2 * m * n * k, a.nbytes_read + b.nbytes_read + written, MATRIX, a.dtype, written=written)


@formula(f"{NS}::int8_scaled_mm")
def int8_scaled_mm(call: OpCall) -> Cost | None:
    # (A [..., K] int8, B [N, K] int8, row_stats, col_stats, bias?, dtype?): the int8 product and its
    # dequantization into `dtype`
    a, b = call.tensor(0), call.tensor(1)
    n, k = b.dims
    m = _rows(a, k)
    written = m * n * _dtype_size(call.scalar(5))
    reads = sum(t.nbytes_read for t in call.tensors)
    return Cost(2 * m * n * k, reads + written, MATRIX, a.dtype, written=written)


def _gemm_4bit(call: OpCall) -> Cost | None:
    # (A [..., K], B packed, shapeB [N, K], absmax, ...): reads every tensor argument, writes [..., N] in A's type
    a, shape = call.tensor(0), call.scalar(2)
    if not (isinstance(shape, list) and len(shape) == 2 and all(isinstance(v, int) for v in shape)):
        return None
    n, k = shape
    m = _rows(a, k)
    written = m * n * a.itemsize
    reads = sum(t.nbytes_read for t in call.tensors)
    return Cost(2 * m * n * k, reads + written, MATRIX, a.dtype, written=written)


formula(f"{NS}::gemv_4bit", f"{NS}::gemm_4bit")(_gemm_4bit)


@formula(f"{NS}::dequantize_4bit")
def dequantize_4bit(call: OpCall) -> Cost | None:
    # (A packed, absmax, blocksize, quant_type, shape, dtype) -> shape in dtype
    shape = call.scalar(4)
    if not (isinstance(shape, list) and all(isinstance(v, int) for v in shape)):
        return None
    n = math.prod(shape)
    written = n * _dtype_size(call.scalar(5))
    reads = call.tensor(0).nbytes_read + call.tensor(1).nbytes_read
    return Cost(n, reads + written, VECTOR, dtypes.SCALAR_TYPE_CODES.get(call.scalar(5)), written=written)


@formula(f"{NS}::dequantize_blockwise")
def dequantize_blockwise(call: OpCall) -> Cost | None:
    # (A uint8, absmax, code, blocksize, dtype) -> A's shape in dtype
    a = call.tensor(0)
    written = a.numel * _dtype_size(call.scalar(4))
    reads = sum(t.nbytes_read for t in call.tensors)
    return Cost(a.numel, reads + written, VECTOR, dtypes.SCALAR_TYPE_CODES.get(call.scalar(4)), written=written)


@formula(f"{NS}::int8_vectorwise_quant")
def int8_vectorwise_quant(call: OpCall) -> Cost | None:
    # (A [..., K], threshold) -> int8 A, one fp32 scale per row (an absmax: 1 more per element)
    a = call.tensor(0)
    rows = _rows(a, a.dims[-1]) if a.dims else 1
    written = a.numel + rows * 4
    return Cost(3 * a.numel, a.nbytes_read + written, VECTOR, a.dtype, written=written)


@formula(f"{NS}::int8_mm_dequant")
def int8_mm_dequant(call: OpCall) -> Cost | None:
    # (A int32 [..., N], row_stats, col_stats, dtype?, bias?): each element times its row's and its
    # column's scale
    a = call.tensor(0)
    written = a.numel * _dtype_size(call.scalar(3))
    reads = sum(t.nbytes_read for t in call.tensors)
    return Cost(2 * a.numel, reads + written, VECTOR, a.dtype, written=written)

"""Matrix products: FLOPs 2*M*N*K (a multiply and an add per term), as FlopCounterMode counts them.

Bytes are the operands read once and the result written once. The bias of
addmm/baddbmm is read; its add is not counted as FLOPs (FlopCounterMode does not
count it either, and it is M*N against 2*M*N*K).
"""

from __future__ import annotations

import math

from wlprof.cost import dtypes
from wlprof.cost.registry import MATRIX, VECTOR, Cost, OpCall, TensorArg, formula, register_wrapper

# Composite ops that always dispatch to the products below (or to elementwise ops).
register_wrapper(
    "aten::linear", "aten::matmul", "aten::einsum", "aten::tensordot", "aten::bilinear",
    "aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::convolution", "aten::_convolution_mode",
    "aten::conv_transpose1d", "aten::conv_transpose2d", "aten::conv_transpose3d",
    "aten::thnn_conv2d",  # -> aten::_slow_conv2d_forward
    "aten::slow_conv3d",  # -> aten::slow_conv3d_forward
    "aten::_trilinear",  # bilinear's product and its backward: nested bmm, mul, sum and add_
)


def _under_sparse(call: OpCall) -> bool:
    # torch.sparse.mm(csr, X) records aten::_sparse_mm -> _sparse_addmm -> aten::addmm with the
    # sparse operand's *dense* sizes: nnz is not in the trace, so the dense formula would be wrong.
    return any("sparse" in a for a in call.ancestors) or "sparse" in call.name


def _out_bytes(n: int, like: TensorArg) -> int:
    return n * like.itemsize


def _mm(a: TensorArg, b: TensorArg, extra_reads: int = 0) -> Cost:
    m, k = a.dims
    k2, n = b.dims
    if k != k2:
        raise ValueError("inner dimensions differ")
    flops = 2 * m * n * k
    if m * n == 0:
        # an empty product (a group with no rows: _grouped_mm on the CPU calls mm for every
        # group) reads nothing it must
        return Cost(0, 0, MATRIX, a.dtype, written=0)
    out = _out_bytes(m * n, a)
    return Cost(flops, a.nbytes_read + b.nbytes_read + extra_reads + out, MATRIX, a.dtype, written=out)


@formula("aten::mm")
def mm(call: OpCall) -> Cost | None:
    if _under_sparse(call):
        return None
    return _mm(call.tensor(0), call.tensor(1))


@formula("aten::addmm", "aten::addmm_", aux_children=True)
def addmm(call: OpCall) -> Cost | None:
    # addmm(bias, mat1, mat2, beta, alpha); on the CPU the bias is first copied into the
    # output by a nested aten::copy_, which is its own (auxiliary) traffic. addmm_ accumulates
    # into its first input, read and written (PyTorch <= 1.10's CPU convolution: one per image).
    if _under_sparse(call):
        return None
    bias = call.tensor(0)
    return _mm(call.tensor(1), call.tensor(2), extra_reads=bias.nbytes_read if bias else 0)


@formula("aten::_addmm_activation", aux_children=True)
def addmm_activation(call: OpCall) -> Cost | None:
    # _addmm_activation(bias, mat1, mat2, beta, alpha, use_gelu): addmm with a ReLU or GELU epilogue (the
    # transformer fast path's first FFN layer). The product is counted as addmm's; the activation too
    # where it runs as a nested relu_/gelu_ (the CPU, costed on its own), not where it is fused into the
    # GEMM's epilogue (cuBLASLt), as the bias add is not.
    if _under_sparse(call):
        return None
    bias = call.tensor(0)
    return _mm(call.tensor(1), call.tensor(2), extra_reads=bias.nbytes_read if bias else 0)


def _bmm(a: TensorArg, b: TensorArg, extra_reads: int = 0) -> Cost:
    batch, m, k = a.dims
    batch2, k2, n = b.dims
    if k != k2 or batch != batch2:
        raise ValueError("batch or inner dimensions differ")
    flops = 2 * batch * m * n * k
    out = _out_bytes(batch * m * n, a)
    return Cost(flops, a.nbytes_read + b.nbytes_read + extra_reads + out, MATRIX, a.dtype, written=out)


@formula("aten::bmm")
def bmm(call: OpCall) -> Cost | None:
    if _under_sparse(call):
        return None
    return _bmm(call.tensor(0), call.tensor(1))


@formula("aten::baddbmm", "aten::baddbmm_", aux_children=True)
def baddbmm(call: OpCall) -> Cost | None:
    if _under_sparse(call):
        return None
    bias = call.tensor(0)
    return _bmm(call.tensor(1), call.tensor(2), extra_reads=bias.nbytes_read if bias else 0)


@formula("aten::_scaled_mm")
def scaled_mm(call: OpCall) -> Cost | None:
    # _scaled_mm(a, b, scale_a, scale_b, bias?, scale_result?, out_dtype?, use_fast_accum)
    a, b = call.tensor(0), call.tensor(1)
    m, k = a.dims
    _, n = b.dims
    out_code = call.scalar(6)
    out_dtype = dtypes.SCALAR_TYPE_CODES.get(out_code) if isinstance(out_code, int) else a.dtype
    reads = sum(t.nbytes_read for t in call.tensors)
    out = m * n * dtypes.size_of_dtype(out_dtype) if out_dtype else None
    return Cost(2 * m * n * k, reads + out if out is not None else None, MATRIX, a.dtype, written=out)


@formula("aten::_grouped_mm")
def grouped_mm(call: OpCall) -> Cost | None:
    """_grouped_mm(a, b, offs?, bias?, out_dtype?).

    With `offs`, the group boundaries are data (int32 cumulative ends) that the trace
    does not record. The count assumes every row of `a` (2-D a, 3-D b), every
    column of K (2-D a, 2-D b) or every column of `b` (3-D a, 2-D b) belongs to a
    group, i.e. offs[-1] equals that size:
    true when the caller sizes `a` to the routed tokens, an upper bound otherwise
    (rows past offs[-1] are left unwritten). A workload that knows the counts states
    its cost in its region instead.
    """
    return _grouped(call, offs_at=2)


def _grouped(call: OpCall, offs_at: int, scales: tuple[int, ...] = (), out_size: int | None = None) -> Cost | None:
    """A grouped GEMM's cost from `a` (input 0), `b` (input 1), the group ends at `offs_at`, the
    scales read at `scales`, and an output element of `out_size` bytes (default: a's)."""
    a, b = call.tensor(0), call.tensor(1)
    offs = call.tensor(offs_at)
    offs_bytes = offs.nbytes_read if offs is not None else 0
    if len(a.dims) == 2 and len(b.dims) == 3:  # tokens x K, groups x K x N: MoE forward
        m, k = a.dims
        g, k2, n = b.dims
        flops, out = 2 * m * k * n, m * n
    elif len(a.dims) == 3 and len(b.dims) == 3:  # batched
        g, m, k = a.dims
        _, k2, n = b.dims
        flops, out = 2 * g * m * k * n, g * m * n
    elif len(a.dims) == 2 and len(b.dims) == 2:  # offs split K: weight-gradient form
        m, k = a.dims
        k2, n = b.dims
        g = offs.numel if offs is not None else 1
        flops, out = 2 * m * k * n, g * m * n
    elif len(a.dims) == 3 and len(b.dims) == 2:  # offs split N: group i is a[i] @ b[:, its columns]
        g, m, k = a.dims
        k2, n = b.dims
        flops, out = 2 * m * k * n, m * n  # the output is [m, N], not [g, m, N]
    else:
        return None
    if k != k2:
        return None
    written = out * out_size if out_size is not None else _out_bytes(out, a)
    scale_bytes = sum(t.nbytes_read for i in scales if (t := call.tensor(i)) is not None)
    return Cost(flops, a.nbytes_read + b.nbytes_read + offs_bytes + scale_bytes + written, MATRIX, a.dtype,
                written=written)


@formula("aten::_scaled_grouped_mm")
def scaled_grouped_mm(call: OpCall) -> Cost | None:
    # _scaled_grouped_mm(a, b, scale_a, scale_b, offs?, bias?, scale_result?, out_dtype?, use_fast_accum):
    # FP8 groups as _grouped_mm counts them, the scales read; the output bf16 unless out_dtype says
    code = call.scalar(7)
    out_dtype = dtypes.SCALAR_TYPE_CODES.get(code) if isinstance(code, int) else "bfloat16"
    return _grouped(call, offs_at=4, scales=(2, 3), out_size=dtypes.size_of_dtype(out_dtype))


@formula("aten::mv")
def mv(call: OpCall) -> Cost | None:
    # mv(A[M, N], x[N]): 2*M*N; a memory-bound product (intensity about 1 in bf16).
    a, x = call.tensor(0), call.tensor(1)
    m, n = a.dims
    return Cost(2 * m * n, a.nbytes_read + x.nbytes_read + m * a.itemsize, VECTOR, a.dtype, written=m * a.itemsize)


@formula("aten::addmv", "aten::addmv_", aux_children=True)
def addmv(call: OpCall) -> Cost | None:
    # addmv(bias, A, x): torch.mv runs as addmv_ into its output on CPU and CUDA (cuBLAS
    # gemv), so mv is then a dispatcher and the cost lands here once.
    bias, a, x = call.tensor(0), call.tensor(1), call.tensor(2)
    m, n = a.dims
    reads = a.nbytes_read + x.nbytes_read + (bias.nbytes_read if bias else 0)
    return Cost(2 * m * n, reads + m * a.itemsize, VECTOR, a.dtype, written=m * a.itemsize)


@formula("aten::dot", "aten::vdot")
def dot(call: OpCall) -> Cost | None:
    # n multiplies and n adds: 2*n (counting one add fewer, 2n - 1, changes nothing that matters).
    a, b = call.tensor(0), call.tensor(1)
    return Cost(2 * a.numel, a.nbytes_read + b.nbytes_read + a.itemsize, VECTOR, a.dtype, written=a.itemsize)


# Convolutions: implementations that launch the kernels, with the positions of their
# (stride, padding, dilation, groups) arguments; conv2d/convolution are wrappers.
# Positions are those of the ops' schemas, checked against CPU traces (torch 2.13):
#   mkldnn_convolution(self, weight, bias?, padding, stride, dilation, groups)
#   _slow_conv2d_forward(self, weight, kernel_size, bias?, stride, padding)
#   slow_conv_transpose2d(self, weight, kernel_size, bias?, stride, padding, output_padding, dilation)
_CONV_ARGS = {
    # name: (stride, padding, dilation, groups, transposed, output_padding)
    "aten::cudnn_convolution": (3, 2, 4, 5, False, None),
    "aten::cudnn_convolution_transpose": (4, 2, 5, 6, True, 3),
    "aten::cudnn_convolution_relu": (3, 4, 5, 6, False, None),
    "aten::cudnn_convolution_add_relu": (5, 6, 7, 8, False, None),
    "aten::mkldnn_convolution": (4, 3, 5, 6, False, None),
    "aten::miopen_convolution": (4, 3, 5, 6, False, None),
    "aten::miopen_depthwise_convolution": (4, 3, 5, 6, False, None),
    "aten::miopen_convolution_transpose": (5, 3, 6, 7, True, 4),
    "aten::_mps_convolution": (4, 3, 5, 6, False, None),
    "aten::_slow_conv2d_forward": (4, 5, None, None, False, None),
    "aten::slow_conv3d_forward": (4, 5, None, None, False, None),
    "aten::slow_conv_dilated2d": (4, 5, 6, None, False, None),
    "aten::slow_conv_dilated3d": (4, 5, 6, None, False, None),
    "aten::_conv_depthwise2d": (4, 5, 6, None, False, None),  # CUDA depthwise: groups = C_in
    "aten::conv_depthwise3d": (4, 5, 6, None, False, None),
    "aten::slow_conv_transpose2d": (4, 5, 7, None, True, 6),
    "aten::slow_conv_transpose3d": (4, 5, 7, None, True, 6),
    "aten::_nnpack_spatial_convolution": (4, 3, None, None, False, None),
    "aten::convolution_overrideable": (3, 4, 5, 8, None, 7),
    # _convolution(input, weight, bias?, stride, padding, dilation, transposed, output_padding,
    # groups, ...) chooses the backend. It usually runs one of the ops above (and is then a
    # dispatcher), but the CPU's oneDNN transposed convolution (conv_transpose1d/2d/3d in
    # float32 or bfloat16) runs inside it with no implementation op nested: it must carry
    # the formula too, or those FLOPs are lost.
    "aten::_convolution": (3, 4, 5, 8, None, 7),
}


def _as_list(v, n: int, default: int) -> list[int]:
    if v is None:
        return [default] * n
    if isinstance(v, (int, float)):
        return [int(v)] * n
    v = [int(x) for x in v]
    return v * n if len(v) == 1 else v


def convolution(call: OpCall) -> Cost | None:
    """2 * batch * C_out * prod(out spatial) * (C_in / groups) * prod(kernel), as FlopCounterMode.

    C_in / groups is read from the weight ([C_out, C_in/groups, *kernel]), so ops whose
    groups are implicit (depthwise) or applied by a caller looping over groups (the slow
    CPU kernels) need no groups argument. For a transposed convolution (weight
    [C_in, C_out/groups, *kernel]) the roles of input and output spatial sizes swap.
    """
    x, w = call.tensor(0), call.tensor(1)
    si, pi, di, gi, transposed, opi = _CONV_ARGS[call.name]
    # stride, padding and dilation set the output size: a trace that did not record their values
    # (no `Concrete Inputs` in PyTorch 1.13 and earlier) leaves it unknown, unless the trace's backwards of
    # the same shapes give it (`output_dims`, a convolution that is not transposed)
    unrecorded = any(i is not None and call.scalar(i) is None for i in (si, pi, di))
    if unrecorded and (transposed is not False or not call.output_dims):
        return None
    if transposed is None:  # convolution_overrideable and _convolution carry `transposed`
        if call.scalar(6) is None:
            return None
        transposed = bool(call.scalar(6))
    if transposed and any(i is not None and call.scalar(i) is None for i in (gi, opi)):
        return None  # C_out is the weight's dim 1 x groups; the output padding adds to the output size
    nsp = len(x.dims) - 2
    if nsp < 1 or len(w.dims) != nsp + 2:
        return None
    stride = _as_list(call.scalar(si), nsp, 1)
    padding = _as_list(call.scalar(pi), nsp, 0)
    dilation = _as_list(call.scalar(di) if di is not None else None, nsp, 1)
    groups = int(call.scalar(gi) or 1) if gi is not None else 1
    out_pad = _as_list(call.scalar(opi) if opi is not None else None, nsp, 0)
    batch, c_in = x.dims[0], x.dims[1]
    kernel = w.dims[2:]
    if transposed:
        c_out = w.dims[1] * groups
        out_sp = [
            (i - 1) * s - 2 * p + d * (k - 1) + op + 1
            for i, s, p, d, k, op in zip(x.dims[2:], stride, padding, dilation, kernel, out_pad, strict=True)
        ]
        # each input position scatters into a kernel window of the output
        flops = 2 * batch * math.prod(x.dims[2:]) * c_in * w.dims[1] * math.prod(kernel)
    elif unrecorded:
        c_out, out = w.dims[0], call.output_dims
        if len(out) != len(x.dims) or out[0] != batch or out[1] != c_out:
            return None
        out_sp = list(out[2:])
        flops = 2 * batch * math.prod(out_sp) * c_out * w.dims[1] * math.prod(kernel)
    else:
        c_out = w.dims[0]
        out_sp = [
            (i + 2 * p - d * (k - 1) - 1) // s + 1
            for i, s, p, d, k in zip(x.dims[2:], stride, padding, dilation, kernel, strict=True)
        ]
        flops = 2 * batch * math.prod(out_sp) * c_out * w.dims[1] * math.prod(kernel)
    out = batch * c_out * math.prod(out_sp)
    reads = sum(t.nbytes_read for t in call.tensors)
    return Cost(flops, reads + out * x.itemsize, MATRIX, x.dtype, written=out * x.itemsize)


# An implementation's nested ops (the bias added by an aten::add_ in slow_conv_transpose2d,
# zero_, copies) are auxiliary work: they must not make it a dispatcher. _convolution is
# the exception: with an implementation nested inside, it is the dispatcher.
formula(*(n for n in _CONV_ARGS if n != "aten::_convolution"), aux_children=True, uses_backward=True)(convolution)
formula("aten::_convolution", uses_backward=True)(convolution)


@formula("aten::_int_mm")
def int_mm(call: OpCall) -> Cost | None:
    # _int_mm(a [M, K] int8, b [K, N] int8) -> int32 [M, N]: 2*M*N*K integer operations
    a, b = call.tensor(0), call.tensor(1)
    m, k = a.dims
    k2, n = b.dims
    if k != k2:
        return None
    written = m * n * 4
    return Cost(2 * m * n * k, a.nbytes_read + b.nbytes_read + written, MATRIX, a.dtype, written=written)


@formula("aten::_weight_int8pack_mm")
def weight_int8pack_mm(call: OpCall) -> Cost | None:
    # _weight_int8pack_mm(A [M, K], B int8 [N, K], scales [N]) -> [M, N] in A's dtype: weight-only
    # int8, dequantized on the fly
    a, b, scales = call.tensor(0), call.tensor(1), call.tensor(2)
    m, k = a.dims
    n, k2 = b.dims
    if k != k2:
        return None
    written = m * n * a.itemsize
    return Cost(2 * m * n * k, a.nbytes_read + b.nbytes_read + scales.nbytes_read + written, MATRIX, a.dtype,
                written=written)


@formula("aten::_weight_int4pack_mm", "aten::_weight_int4pack_mm_for_cpu")
def weight_int4pack_mm(call: OpCall) -> Cost | None:
    # _weight_int4pack_mm(A [M, K], B packed int4, qGroupSize, qScaleAndZeros [K / group, N, 2]):
    # the packed layout differs by backend; N comes from the scales, the weights are N*K/2 bytes
    a, sz = call.tensor(0), call.tensor(3)
    if sz is None or len(sz.dims) != 3:
        return None
    m, k = a.dims
    n = sz.dims[1]
    written = m * n * a.itemsize
    return Cost(2 * m * n * k, a.nbytes_read + n * k // 2 + sz.nbytes_read + written, MATRIX, a.dtype,
                written=written)

"""Scaled dot-product attention, every backend, forward and backward.

FLOPs are counted as `torch.utils.flop_counter` counts them: the two products of the
forward, 2*B*Hq*Sq*Sk*D (Q @ K^T) + 2*B*Hq*Sq*Sk*Dv (P @ V), and five in the backward
(the scores recomputed, dP, dV, dQ, dK): 2*B*Hq*Sq*Sk*(3*D + 2*Dv). Causal masking is
not discounted (FlopCounterMode does not: a causal kernel skips about half of these),
nor are the softmax's exponentials; grouped-query K/V are counted at the query's heads.

Layouts: the `_scaled_dot_product_*` ops, cuDNN's and the CPU kernel take
[B, H, S, D]; `_flash_attention_*` and `_efficient_attention_*` take [B, S, H, D] (the
SDPA op transposes before calling them). FlopCounterMode reads those two as [B, H, S, D]
too when called directly, which it never is under eager SDPA (it counts the enclosing
op); wlprof reads their layout as it is, so that the inner op, which launches the
kernels and carries the cost, gets the FLOPs FlopCounterMode gives the enclosing op.
Variable-length (nested) calls pass 3-D [total, H, D] tensors and cumulative sequence
lengths whose values are data: their FLOPs are unknown (FlopCounterMode itself assumes
every sequence at the maximum length when it cannot read them), their bytes are not.

Bytes: every tensor argument read once at its stored size (Q, K, V, a mask or bias;
dO, O and the log-sum-exp in the backward), the output and its fp32 log-sum-exp (one
per query and head) written once; the backward writes dQ, dK and dV (and a bias
gradient when asked).
"""

from __future__ import annotations

from wlprof.cost.registry import MATRIX, VECTOR, Cost, OpCall, TensorArg, formula, register_wrapper

# The dispatching entry point, and the math backend whose bmm/softmax/... children are costed.
register_wrapper("aten::scaled_dot_product_attention", "aten::_scaled_dot_product_attention_math")
# nn.MultiheadAttention's and nn.TransformerEncoderLayer's inference fast path: projections (mm, addmm,
# _addmm_activation), _transform_bias_rescale_qkv, bmm, _masked_softmax and layer_norm nested inside
register_wrapper("aten::_native_multi_head_attention", "aten::_transformer_encoder_layer_fwd")

BHSD, BSHD = "bhsd", "bshd"


def _heads_seq_dim(t: TensorArg, layout: str) -> tuple[int, int, int, int]:
    b, x, y, d = t.dims
    return (b, x, y, d) if layout == BHSD else (b, y, x, d)


def fwd_flops(q, k, v) -> int:
    """2*B*Hq*Sq*Sk*D + 2*B*Hq*Sq*Sk*Dv from (B, H, S, D) shapes."""
    b, hq, sq, d = q
    _, _, sk, dv = v
    if k[3] != d or k[2] != sk:
        raise ValueError("key and query or value shapes do not match")
    return 2 * b * hq * sq * sk * d + 2 * b * hq * sq * sk * dv


def bwd_flops(q, k, v) -> int:
    """Scores recomputed (D), dP (Dv), dV (Dv), dQ (D), dK (D): 2*B*Hq*Sq*Sk*(3*D + 2*Dv)."""
    b, hq, sq, d = q
    _, _, sk, dv = v
    if k[3] != d or k[2] != sk:
        raise ValueError("key and query or value shapes do not match")
    return 2 * b * hq * sq * sk * (3 * d + 2 * dv)


def _reads(call: OpCall) -> int:
    return sum(t.nbytes_read for t in call.tensors)


def _forward(call: OpCall, layout: str, lse: bool, varlen_at: int | None) -> Cost:
    q, k, v = call.tensor(0), call.tensor(1), call.tensor(2)
    varlen = len(q.dims) == 3 or (varlen_at is not None and call.tensor(varlen_at) is not None)
    if varlen:  # [total, H, D]: per-sequence lengths are data
        total, h, _ = q.dims
        dv = v.dims[-1]
        flops, out, rows = None, total * h * dv, total * h
    else:
        qs, ks, vs = (_heads_seq_dim(t, layout) for t in (q, k, v))
        flops = fwd_flops(qs, ks, vs)
        b, hq, sq, _ = qs
        out, rows = b * hq * sq * vs[3], b * hq * sq
    written = out * q.itemsize + (rows * 4 if lse else 0)
    return Cost(flops, _reads(call) + written, MATRIX, q.dtype, written=written)


def _backward(call: OpCall, layout: str, q_at: int, varlen_at: int | None, bias_grad: bool = False,
              bias_at: int | None = None) -> Cost:
    q, k, v = call.tensor(q_at), call.tensor(q_at + 1), call.tensor(q_at + 2)
    varlen = len(q.dims) == 3 or (varlen_at is not None and call.tensor(varlen_at) is not None)
    flops = None if varlen else bwd_flops(*(_heads_seq_dim(t, layout) for t in (q, k, v)))
    written = sum(t.numel * t.itemsize for t in (q, k, v))
    bias = call.tensor(bias_at) if bias_at is not None else None
    if bias_grad and bias is not None:
        written += bias.numel * bias.itemsize
    return Cost(flops, _reads(call) + written, MATRIX, q.dtype, written=written)


# ---- forward. Positions from the ops' schemas (torch 2.13), checked against H200 traces (torch 2.11).
# The implementation ops (`_flash_*`, `_efficient_*`, `_cudnn_attention_forward`) launch the kernels
# themselves: what they run nested (a contiguous copy, a dropout mask's multiply, a bias gradient's
# sum) is their auxiliary work, costed on its own, and never makes them dispatchers.


@formula("aten::_scaled_dot_product_flash_attention")
def sdpa_flash(call: OpCall) -> Cost | None:
    # (query, key, value, dropout_p, is_causal, return_debug_mask, scale): always returns the lse
    return _forward(call, BHSD, lse=True, varlen_at=None)


@formula("aten::_scaled_dot_product_flash_attention_for_cpu")
def sdpa_flash_cpu(call: OpCall) -> Cost | None:
    # (query, key, value, dropout_p, is_causal, attn_mask, scale). FlopCounterMode has no entry
    # for this op (it counts 0 for SDPA on the CPU); wlprof counts what it counts on CUDA.
    return _forward(call, BHSD, lse=True, varlen_at=None)


@formula("aten::_scaled_dot_product_efficient_attention")
def sdpa_efficient(call: OpCall) -> Cost | None:
    # (query, key, value, attn_bias, compute_log_sumexp, dropout_p, is_causal, scale)
    return _forward(call, BHSD, lse=call.scalar(4) is True, varlen_at=None)


@formula("aten::_scaled_dot_product_cudnn_attention")
def sdpa_cudnn(call: OpCall) -> Cost | None:
    # (query, key, value, attn_bias, compute_log_sumexp, dropout_p, is_causal, return_debug_mask, scale)
    return _forward(call, BHSD, lse=call.scalar(4) is True, varlen_at=None)


@formula("aten::_cudnn_attention_forward", aux_children=True)
def cudnn_attention_forward(call: OpCall) -> Cost | None:
    # (query, key, value, attn_bias, cum_seq_q, cum_seq_k, max_q, max_k, compute_log_sumexp,
    #  dropout_p, is_causal, return_debug_mask, scale)
    return _forward(call, BHSD, lse=call.scalar(8) is True, varlen_at=4)


@formula("aten::_flash_attention_forward", aux_children=True)
def flash_attention_forward(call: OpCall) -> Cost | None:
    # (query, key, value, cum_seq_q, cum_seq_k, max_q, max_k, dropout_p, is_causal, return_debug_mask,
    #  scale, window_size_left, window_size_right, seqused_k, alibi_slopes): [B, S, H, D], lse always
    return _forward(call, BSHD, lse=True, varlen_at=3)


@formula("aten::_efficient_attention_forward", aux_children=True)
def efficient_attention_forward(call: OpCall) -> Cost | None:
    # (query, key, value, bias, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p,
    #  custom_mask_type, compute_log_sumexp, scale, seqlen_k, window_size): [B, S, H, D]
    return _forward(call, BSHD, lse=call.scalar(10) is True, varlen_at=4)


# ---- backward


@formula("aten::_scaled_dot_product_flash_attention_backward")
def sdpa_flash_backward(call: OpCall) -> Cost | None:
    # (grad_out, query, key, value, out, logsumexp, cum_seq_q, cum_seq_k, max_q, max_k, dropout_p,
    #  is_causal, philox_seed, philox_offset, scale)
    return _backward(call, BHSD, q_at=1, varlen_at=None)


@formula("aten::_scaled_dot_product_flash_attention_for_cpu_backward")
def sdpa_flash_cpu_backward(call: OpCall) -> Cost | None:
    # (grad_out, query, key, value, out, logsumexp, dropout_p, is_causal, attn_mask, scale)
    return _backward(call, BHSD, q_at=1, varlen_at=None)


@formula("aten::_scaled_dot_product_efficient_attention_backward")
def sdpa_efficient_backward(call: OpCall) -> Cost | None:
    # (grad_out, query, key, value, attn_bias, out, logsumexp, philox_seed, philox_offset, dropout_p,
    #  grad_input_mask, is_causal, scale): grad_input_mask[3] asks for the bias gradient
    mask = call.scalar(10)
    wants_bias = isinstance(mask, list) and len(mask) > 3 and mask[3] is True
    return _backward(call, BHSD, q_at=1, varlen_at=None, bias_grad=wants_bias, bias_at=4)


@formula("aten::_scaled_dot_product_cudnn_attention_backward", "aten::_cudnn_attention_backward")
def sdpa_cudnn_backward(call: OpCall) -> Cost | None:
    # (grad_out, query, key, value, out, logsumexp, philox_seed, philox_offset, attn_bias, cum_seq_q,
    #  cum_seq_k, max_q, max_k, dropout_p, is_causal, scale)
    return _backward(call, BHSD, q_at=1, varlen_at=9)


@formula("aten::_flash_attention_backward", aux_children=True)
def flash_attention_backward(call: OpCall) -> Cost | None:
    # (grad_out, query, key, value, out, logsumexp, cum_seq_q, cum_seq_k, max_q, max_k, dropout_p,
    #  is_causal, philox_seed, philox_offset, scale, window_size_left, window_size_right): [B, S, H, D]
    return _backward(call, BSHD, q_at=1, varlen_at=6)


@formula("aten::_efficient_attention_backward", aux_children=True)
def efficient_attention_backward(call: OpCall) -> Cost | None:
    # (grad_out, query, key, value, bias, out, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
    #  logsumexp, dropout_p, philox_seed, philox_offset, custom_mask_type, bias_requires_grad, scale,
    #  num_splits_key, window_size, shared_storage_dqdk_dqdv): [B, S, H, D]
    return _backward(call, BSHD, q_at=1, varlen_at=6, bias_grad=call.scalar(15) is True, bias_at=4)


@formula("aten::_transform_bias_rescale_qkv")
def transform_bias_rescale_qkv(call: OpCall) -> Cost | None:
    """_transform_bias_rescale_qkv(qkv [B, T, 3*D], qkv_bias [3*D], num_heads) -> q, k, v [B, H, T, D/H].

    The fast path's packed projection split into heads: the bias added to every element (1) and q
    scaled by 1/sqrt(D/H) (1 per q element): 4/3 per element. Reads qkv and the bias, writes q, k
    and v (as many elements as qkv)."""
    qkv, bias = call.tensor(0), call.tensor(1)
    if qkv is None or bias is None:
        return None
    n = qkv.numel
    written = n * qkv.itemsize
    return Cost(n + n // 3, qkv.nbytes_read + bias.nbytes_read + written, VECTOR, qkv.dtype, written=written)


# ---- the flash-attn package's custom ops (flash-attn 2.6 and later register them with torch.library;
# the namespace is `flashattn`, `flash_attn` in some releases). [B, S, H, D] as PyTorch's own flash
# ops; the varlen forms take [total, H, D] and cumulative sequence lengths (FLOPs unknown). The
# backward writes into the dq, dk, dv it is passed (positions 6-8): written, not read.
FLASH_ATTN_NAMESPACES = ("flashattn", "flash_attn")


def _flash_pkg_backward(call: OpCall, varlen_at: int | None) -> Cost:
    q, k, v = call.tensor(1), call.tensor(2), call.tensor(3)
    varlen = len(q.dims) == 3 or (varlen_at is not None and call.tensor(varlen_at) is not None)
    flops = None if varlen else bwd_flops(*(_heads_seq_dim(t, BSHD) for t in (q, k, v)))
    written = sum(t.numel * t.itemsize for t in (q, k, v))
    reads = sum(t.nbytes_read for i in range(len(call.types)) if i not in (6, 7, 8) and (t := call.tensor(i)))
    return Cost(flops, reads + written, MATRIX, q.dtype, written=written)


@formula(*(f"{ns}::_flash_attn_forward" for ns in FLASH_ATTN_NAMESPACES), aux_children=True)
def flash_pkg_forward(call: OpCall) -> Cost | None:
    # (q, k, v, dropout_p, softmax_scale, causal, window_size_left, window_size_right, softcap,
    #  alibi_slopes, return_softmax): the lse always written
    return _forward(call, BSHD, lse=True, varlen_at=None)


@formula(*(f"{ns}::_flash_attn_varlen_forward" for ns in FLASH_ATTN_NAMESPACES), aux_children=True)
def flash_pkg_varlen_forward(call: OpCall) -> Cost | None:
    # (q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p, ...)
    return _forward(call, BSHD, lse=True, varlen_at=3)


@formula(*(f"{ns}::_flash_attn_backward" for ns in FLASH_ATTN_NAMESPACES), aux_children=True)
def flash_pkg_backward(call: OpCall) -> Cost | None:
    # (dout, q, k, v, out, softmax_lse, dq, dk, dv, dropout_p, softmax_scale, causal, ...)
    return _flash_pkg_backward(call, varlen_at=None)


@formula(*(f"{ns}::_flash_attn_varlen_backward" for ns in FLASH_ATTN_NAMESPACES), aux_children=True)
def flash_pkg_varlen_backward(call: OpCall) -> Cost | None:
    # (dout, q, k, v, out, softmax_lse, dq, dk, dv, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, ...)
    return _flash_pkg_backward(call, varlen_at=9)


# ---- xformers' memory-efficient attention ops: [B, M, H, K] (as PyTorch's flash ops). Their schemas
# changed across releases (a bias, cumulative sequence starts, dropout, mask type in various places):
# q, k, v lead (grad_out first in the backward) and a 1-D integer tensor among the rest marks the
# variable-length form (FLOPs unknown).
def _first_seqstart(call: OpCall, start: int) -> int | None:
    for i in range(start, len(call.types)):
        t = call.tensor(i)
        if t is not None and len(t.dims) == 1 and t.dtype in ("int32", "int64"):
            return i
    return None


@formula("xformers::efficient_attention_forward_cutlass", "xformers::efficient_attention_forward_small_k",
         "xformers::efficient_attention", aux_children=True)
def xformers_forward(call: OpCall) -> Cost | None:
    return _forward(call, BSHD, lse=True, varlen_at=_first_seqstart(call, 3))


@formula("xformers::efficient_attention_backward_cutlass", "xformers::efficient_attention_backward_small_k",
         "xformers::efficient_attention_backward", aux_children=True)
def xformers_backward(call: OpCall) -> Cost | None:
    return _backward(call, BSHD, q_at=1, varlen_at=_first_seqstart(call, 4))

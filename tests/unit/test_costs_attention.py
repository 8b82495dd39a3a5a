"""SDPA formulas, every backend: FLOPs as FlopCounterMode counts them, bytes by hand.

Shapes: B=2, H=3, S=4 (keys 5 where they differ), D=8, bf16 (2 bytes); the log-sum-exp is fp32.
"""

from __future__ import annotations

import pytest
from cost_calls import BF16, F32, I64, NONE, S, T, op

import wlprof.cost  # noqa: F401  (registers every formula)
from wlprof.cost import MATRIX, cost_of, is_wrapper

B, H, SQ, SK, D = 2, 3, 4, 5, 8
# forward: 2*B*H*Sq*Sk*D + 2*B*H*Sq*Sk*Dv = 2*2*3*4*5*8 * 2 = 3840
FWD = 2 * 2 * 3 * 4 * 5 * 8 * 2
# backward: 2*B*H*Sq*Sk*(3*D + 2*Dv) = 2*2*3*4*5*(24 + 16) = 9600 (2.5x the forward)
BWD = 2 * 2 * 3 * 4 * 5 * 40
# bytes: q 2*2*3*4*8 = 384, k and v 2*2*3*5*8 = 480 each, out 384, lse 4*2*3*4 = 96
Q, KV, OUT, LSE = 384, 480, 384, 96


def q_bhsd():
    return T([B, H, SQ, D], BF16), T([B, H, SK, D], BF16), T([B, H, SK, D], BF16)


def q_bshd():
    return T([B, SQ, H, D], BF16), T([B, SK, H, D], BF16), T([B, SK, H, D], BF16)


FORWARD = [
    ("flash", op("aten::_scaled_dot_product_flash_attention", *q_bhsd(), S(0.0), S(True), S(False), S(0.125)),
     Q + 2 * KV, OUT + LSE),
    ("flash_cpu", op("aten::_scaled_dot_product_flash_attention_for_cpu", *q_bhsd(), S(0.0), S(True), NONE, NONE),
     Q + 2 * KV, OUT + LSE),
    # compute_log_sumexp False: no lse written
    ("efficient_no_lse", op("aten::_scaled_dot_product_efficient_attention", *q_bhsd(), NONE, S(False), S(0.0),
                            S(True), NONE), Q + 2 * KV, OUT),
    # a bf16 additive mask [B, H, Sq, Sk] is read: 2*2*3*4*5 = 240 bytes
    ("efficient_bias", op("aten::_scaled_dot_product_efficient_attention", *q_bhsd(), T([B, H, SQ, SK], BF16),
                          S(True), S(0.0), S(False), NONE), Q + 2 * KV + 240, OUT + LSE),
    ("cudnn", op("aten::_scaled_dot_product_cudnn_attention", *q_bhsd(), NONE, S(True), S(0.0), S(True), S(False),
                 NONE), Q + 2 * KV, OUT + LSE),
    ("cudnn_inner", op("aten::_cudnn_attention_forward", *q_bhsd(), NONE, NONE, NONE, S(SQ), S(SK), S(True), S(0.0),
                       S(True), S(False), NONE), Q + 2 * KV, OUT + LSE),
    # [B, S, H, D] layout: the same FLOPs
    ("flash_inner", op("aten::_flash_attention_forward", *q_bshd(), NONE, NONE, S(SQ), S(SK), S(0.0), S(True),
                       S(False), S(0.125), NONE, NONE, NONE, NONE), Q + 2 * KV, OUT + LSE),
    ("efficient_inner", op("aten::_efficient_attention_forward", *q_bshd(), NONE, NONE, NONE, NONE, NONE, S(0.0),
                           S(1), S(True), NONE, NONE, NONE), Q + 2 * KV, OUT + LSE),
]


@pytest.mark.parametrize(("call", "reads", "written"), [pytest.param(c, r, w, id=k) for k, c, r, w in FORWARD])
def test_forward(call, reads, written):
    c = cost_of(call)
    assert c.unit == MATRIX and c.dtype == "bfloat16"
    assert (c.flops, c.bytes, c.written) == (FWD, reads + written, written)


GRAD_OUT = T([B, H, SQ, D], BF16, strides=[0, 0, 0, 0])  # o.sum().backward(): one stored element, 2 bytes
LSE_T = T([B, H, SQ], F32)

BACKWARD = [
    # reads dO 2 (broadcast), q, k, v, out, lse; writes dq, dk, dv = 384 + 480 + 480 = 1344
    ("flash", op("aten::_scaled_dot_product_flash_attention_backward", GRAD_OUT, *q_bhsd(), T([B, H, SQ, D], BF16),
                 LSE_T, NONE, NONE, S(SQ), S(SK), S(0.0), S(True), T([], I64), T([], I64), S(0.125)),
     2 + Q + 2 * KV + OUT + LSE + 16),
    ("flash_cpu", op("aten::_scaled_dot_product_flash_attention_for_cpu_backward", GRAD_OUT, *q_bhsd(),
                     T([B, H, SQ, D], BF16), LSE_T, S(0.0), S(True), NONE, NONE), 2 + Q + 2 * KV + OUT + LSE),
    ("efficient", op("aten::_scaled_dot_product_efficient_attention_backward", GRAD_OUT, *q_bhsd(), NONE,
                     T([B, H, SQ, D], BF16), LSE_T, T([], I64), T([], I64), S(0.0), S([True, True, True, False]),
                     S(True), NONE), 2 + Q + 2 * KV + OUT + LSE + 16),
    ("cudnn", op("aten::_scaled_dot_product_cudnn_attention_backward", GRAD_OUT, *q_bhsd(), T([B, H, SQ, D], BF16),
                 T([B, H, SQ, 1], F32), T([], I64), T([], I64), NONE, NONE, NONE, S(SQ), S(SK), S(0.0), S(True),
                 NONE), 2 + Q + 2 * KV + OUT + LSE + 16),
    ("cudnn_inner", op("aten::_cudnn_attention_backward", GRAD_OUT, *q_bhsd(), T([B, H, SQ, D], BF16),
                       T([B, H, SQ, 1], F32), T([], I64), T([], I64), NONE, NONE, NONE, S(SQ), S(SK), S(0.0),
                       S(True), NONE), 2 + Q + 2 * KV + OUT + LSE + 16),
    ("flash_inner", op("aten::_flash_attention_backward", T([B, SQ, H, D], BF16, strides=[0, 0, 0, 0]), *q_bshd(),
                       T([B, SQ, H, D], BF16), LSE_T, NONE, NONE, S(SQ), S(SK), S(0.0), S(True), T([2], I64),
                       NONE, S(0.125), NONE, NONE), 2 + Q + 2 * KV + OUT + LSE + 16),
    ("efficient_inner", op("aten::_efficient_attention_backward", T([B, SQ, H, D], BF16, strides=[0, 0, 0, 0]),
                           *q_bshd(), NONE, T([B, SQ, H, D], BF16), NONE, NONE, S(SQ), S(SK), LSE_T, S(0.0),
                           T([], I64), T([], I64), S(1), S(False), NONE, NONE, NONE, S(False)),
     2 + Q + 2 * KV + OUT + LSE + 16),
]


@pytest.mark.parametrize(("call", "reads"), [pytest.param(c, r, id=k) for k, c, r in BACKWARD])
def test_backward(call, reads):
    c = cost_of(call)
    written = Q + 2 * KV
    assert (c.flops, c.bytes, c.written) == (BWD, reads + written, written)
    assert c.unit == MATRIX and c.dtype == "bfloat16"


def test_grouped_query_heads_count_at_the_query_heads():
    # K/V with 1 head against 3 query heads: FLOPs as if K/V had 3 (FlopCounterMode's count);
    # bytes read k and v at their own size, 2*2*1*5*8 = 160 each
    k1 = T([B, 1, SK, D], BF16)
    c = cost_of(op("aten::_scaled_dot_product_flash_attention", T([B, H, SQ, D], BF16), k1, k1, S(0.0), S(False),
                   S(False), NONE))
    assert c.flops == FWD and c.bytes == Q + 2 * 160 + OUT + LSE


def test_varlen_flops_unknown_bytes_known():
    # nested/varlen: [total=7, H, D] with cumulative lengths [3] (int32): lengths are data
    q = T([7, H, D], BF16)
    c = cost_of(op("aten::_flash_attention_forward", q, q, q, T([3], "int"), T([3], "int"), S(4), S(4), S(0.0),
                   S(False), S(False), NONE, NONE, NONE, NONE, NONE))
    # reads 3 * 2*7*3*8 = 1008 + 2 * 12 (offsets); writes out 336 + lse 4*7*3 = 84
    assert c.flops is None and c.bytes == 1008 + 24 + 336 + 84


def test_a_value_head_size_unlike_the_keys_forward_and_backward():
    # v with Dv = 4 (q and k keep D = 8): 2*2*3*5*4 = 240 bytes; out [B, H, Sq, Dv] 2*2*3*4*4 = 192 bytes
    q, k, _ = q_bhsd()
    v4, out4 = T([B, H, SK, 4], BF16), T([B, H, SQ, 4], BF16)
    fwd = cost_of(op("aten::_scaled_dot_product_flash_attention", q, k, v4, S(0.0), S(False), S(False), NONE))
    # 2*B*H*Sq*Sk*(D + Dv) = 2*2*3*4*5*12 = 2880
    assert (fwd.flops, fwd.bytes, fwd.written) == (2880, Q + KV + 240 + 192 + LSE, 192 + LSE)
    bwd = cost_of(op("aten::_scaled_dot_product_flash_attention_for_cpu_backward", GRAD_OUT, q, k, v4, out4, LSE_T,
                     S(0.0), S(False), NONE, NONE))
    # 2*B*H*Sq*Sk*(3*D + 2*Dv) = 240 * 32 = 7680; writes dq 384, dk 480, dv 240
    assert (bwd.flops, bwd.written) == (7680, 384 + 480 + 240)
    assert bwd.bytes == 2 + Q + KV + 240 + 192 + LSE + bwd.written


def test_the_bias_gradient_is_written_only_when_asked_for():
    # efficient backward with a bf16 bias [B, H, Sq, Sk] (240 bytes, read); grad_input_mask[3] asks for its
    # gradient, 240 bytes more written
    bias = T([B, H, SQ, SK], BF16)

    def bwd(mask):
        return cost_of(op("aten::_scaled_dot_product_efficient_attention_backward", GRAD_OUT, *q_bhsd(), bias,
                          T([B, H, SQ, D], BF16), LSE_T, T([], I64), T([], I64), S(0.0), S(mask), S(False), NONE))

    reads = 2 + Q + 2 * KV + 240 + OUT + LSE + 16
    on, off = bwd([True, True, True, True]), bwd([True, True, True, False])
    assert (on.flops, on.bytes, on.written) == (BWD, reads + Q + 2 * KV + 240, Q + 2 * KV + 240)
    assert (off.flops, off.bytes, off.written) == (BWD, reads + Q + 2 * KV, Q + 2 * KV)


def test_packed_varlen_without_offsets_is_still_varlen():
    # q, k, v [total=7, H, D] with no cumulative lengths recorded: 3-d is varlen, FLOPs unknown;
    # each is 2*7*3*8 = 336 bytes, the lse 4*3*7 = 84
    q = T([7, H, D], BF16)
    fwd = cost_of(op("aten::_flash_attention_forward", q, q, q, NONE, NONE, S(4), S(4), S(0.0), S(False), S(False),
                     NONE, NONE, NONE, NONE, NONE))
    assert (fwd.flops, fwd.bytes, fwd.written) == (None, 3 * 336 + 336 + 84, 336 + 84)
    bwd = cost_of(op("aten::_flash_attention_backward", q, q, q, q, q, T([H, 7], F32), NONE, NONE, S(4), S(4),
                     S(0.0), S(False), NONE, NONE, NONE, NONE, NONE))
    # reads dO, q, k, v, out (5 x 336) and the lse; writes dq, dk, dv (3 x 336)
    assert (bwd.flops, bwd.bytes, bwd.written) == (None, 5 * 336 + 84 + 3 * 336, 3 * 336)


def test_math_backend_and_entry_point_are_wrappers():
    # their bmm / softmax / ... children are costed; they never are
    assert is_wrapper("aten::scaled_dot_product_attention")
    assert is_wrapper("aten::_scaled_dot_product_attention_math")


def test_transform_bias_rescale_qkv():
    # _transform_bias_rescale_qkv(qkv [2, 16, 96], bias [96], num_heads 4): the bias added to 3,072 elements
    # and q's 1,024 scaled = 4,096; reads 12,288 + 384 bytes, writes q, k, v (3,072 floats)
    c = cost_of(op("aten::_transform_bias_rescale_qkv", T([2, 16, 96]), T([96]), S(4)))
    assert (c.flops, c.bytes, c.written) == (4_096, 12_288 + 384 + 12_288, 12_288)
    # the fast path's entry points run their projections, softmax and norms nested inside
    assert is_wrapper("aten::_native_multi_head_attention") and is_wrapper("aten::_transformer_encoder_layer_fwd")


@pytest.mark.parametrize("ns", ["flashattn", "flash_attn"])
def test_the_flash_attn_packages_custom_ops(ns):
    q, k, v = q_bshd()
    # forward (q, k, v, dropout_p, softmax_scale, causal, window_left, window_right, softcap, alibi,
    # return_softmax): reads q, k, v; writes out and the lse
    fwd = cost_of(op(f"{ns}::_flash_attn_forward", q, k, v, S(0.0), S(0.35), S(True), S(-1), S(0), S(0.0), NONE,
                     S(False)))
    assert (fwd.flops, fwd.bytes, fwd.written, fwd.unit) == (FWD, Q + 2 * KV + OUT + LSE, OUT + LSE, MATRIX)
    # backward (dout, q, k, v, out, lse, dq, dk, dv, ...): dq, dk, dv are written into, not read:
    # reads dout 384 + q 384 + k, v 960 + out 384 + lse [B, H, Sq] fp32 96; writes 384 + 960
    lse = T([B, H, SQ], F32)
    bwd = cost_of(op(f"{ns}::_flash_attn_backward", q, q, k, v, q, lse, q, k, v, S(0.0), S(0.35), S(True), S(-1),
                     S(0), S(0.0), NONE, S(False), NONE))
    assert (bwd.flops, bwd.bytes, bwd.written) == (BWD, 3 * Q + 2 * KV + LSE + Q + 2 * KV, Q + 2 * KV)
    # varlen: [total, H, D] with cumulative lengths: the FLOPs are data, the bytes are not
    # (q 8 x 3 x 8 bf16 = 384, k, v 10 x 3 x 8 = 480 each, two int64 [3] offsets 48; out 384, lse 8*3*4 = 96)
    qv, kv = T([8, H, D], BF16), T([10, H, D], BF16)
    var = cost_of(op(f"{ns}::_flash_attn_varlen_forward", qv, kv, kv, T([3], I64), T([3], I64), S(4), S(5), S(0.0)))
    assert var.flops is None and var.bytes == 384 + 960 + 48 + 384 + 96


def test_a_custom_ops_kernel_carries_its_formula(tmp_path):
    import json

    from wlprof import pipeline
    from wlprof.trace.parse import read_trace

    def x(cat, name, ts, dur, tid=1, pid=1, **args):
        return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": pid, "tid": tid, "args": args}

    q = [2, 128, 4, 64]  # B, S, H, D bf16: forward 2*2*4*128*128*(64 + 64) = 33,554,432 FLOPs
    events = [
        x("user_annotation", "ProfilerStep#1", 0, 500),
        x("cpu_op", "flashattn::_flash_attn_forward", 10, 50, **{
            "External id": 1, "Input Dims": [q, q, q, *[[]] * 8],
            "Input type": ["c10::BFloat16"] * 3 + ["Scalar"] * 6 + ["", "Scalar"],
            "Input Strides": [[32768, 256, 64, 1]] * 3 + [[]] * 8,
            "Concrete Inputs": ["", "", "", "0.", "0.125", "True", "-1", "0", "0.", "", "False"]}),
        x("cpu_op", "aten::empty_like", 12, 2, **{"External id": 2, "Input Dims": [q], "Input type": ["c10::BFloat16"]}),
        x("cuda_runtime", "cudaLaunchKernel", 20, 2, correlation=5, **{"External id": 1}),
        x("kernel", "flash_fwd_kernel", 100, 30, tid=7, pid=0, correlation=5, stream=7, device=0, grid=[1, 1, 1],
          block=[128, 1, 1]),
    ]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    k = pipeline.costed(read_trace(path)).kernels
    assert k.op_name.tolist() == ["flashattn::_flash_attn_forward"]
    # reads q, k, v 3 x 131,072; writes out 131,072 and the lse 2*4*128*4 = 4,096
    assert k[["flops", "bytes", "flops_source"]].values.tolist() == [[33_554_432, 528_384, "formula"]]


def test_xformers_memory_efficient_ops_in_two_schemas():
    q, k, v = q_bshd()
    # a recent schema: (query, key, value, bias?, cu_seqlens_q?, cu_seqlens_k?, max_q, max_k, dropout_p,
    # custom_mask_type, compute_lse, ...): no sequence starts, so the full count
    recent = cost_of(op("xformers::efficient_attention_forward_cutlass", q, k, v, NONE, NONE, NONE, S(4), S(5),
                        S(0.0), S(1), S(True)))
    assert (recent.flops, recent.bytes, recent.written) == (FWD, Q + 2 * KV + OUT + LSE, OUT + LSE)
    # an old one: (query, key, value, cu_seqlens_q?, cu_seqlens_k?, max_seqlen_q?, compute_lse, causal)
    # with [total, H, D] tensors and int32 starts [3]: FLOPs unknown, bytes read (two 12-byte starts)
    qv, kv = T([8, H, D], BF16), T([10, H, D], BF16)
    old = cost_of(op("xformers::efficient_attention_forward_cutlass", qv, kv, kv, T([3], "int"), T([3], "int"),
                     S(4), S(True), S(False)))
    assert old.flops is None and old.bytes == 384 + 960 + 24 + 384 + 96
    # backward (grad_out, query, key, value, logsumexp, output, causal): dq, dk, dv written
    bwd = cost_of(op("xformers::efficient_attention_backward_cutlass", q, q, k, v, T([B, H, SQ], F32), q, S(False)))
    assert (bwd.flops, bwd.written) == (BWD, Q + 2 * KV)
    assert bwd.bytes == 3 * Q + 2 * KV + LSE + Q + 2 * KV

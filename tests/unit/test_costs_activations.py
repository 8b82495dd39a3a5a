"""Activation backward and softmax backward formulas: FLOPs per element as stated, bytes by hand."""

from __future__ import annotations

import pandas as pd
import pytest
from cost_calls import BF16, F32, NONE, S, T, op

import wlprof.cost  # noqa: F401  (registers every formula)
from wlprof.cost import cost_of, is_wrapper
from wlprof.cost.attribution import flag_ops

G, X = T([4, 6], BF16), T([4, 6], BF16)  # 24 elements, 48 bytes each

# (op, args, FLOPs per element); bytes: dy 48 + x (or y) 48 read, dx 48 written = 144
CASES = [
    ("tanh_backward", (G, X), 3),
    ("sigmoid_backward", (G, X), 3),
    ("hardtanh_backward", (G, X, S(-1.0), S(1.0)), 2),
    ("leaky_relu_backward", (G, X, S(0.01), S(False)), 2),
    ("softplus_backward", (G, X, S(1), S(20)), 5),
    ("hardswish_backward", (G, X), 5),
    ("hardsigmoid_backward", (G, X), 3),
    ("mish_backward", (G, X), 14),
    ("softshrink_backward", (G, X, S(0.5)), 2),
    ("hardshrink_backward", (G, X, S(0.5)), 2),
    ("logit_backward", (G, X, NONE), 3),
    ("threshold_backward", (G, X, S(0)), 1),
    ("gelu_backward", (G, X, NONE), 20),
    ("silu_backward", (G, X), 7),
    # elu_backward(grad_output, alpha, scale, input_scale, is_result, self_or_result): tensors at 0 and 5
    ("elu_backward", (G, S(1.0), S(1.0), S(1.0), S(False), X), 4),
]


@pytest.mark.parametrize(("name", "args", "per"), CASES, ids=[c[0] for c in CASES])
def test_activation_backward(name, args, per):
    c = cost_of(op(f"aten::{name}", *args))
    assert (c.flops, c.bytes) == (per * 24, 144)
    # 24 bf16 outputs: 48 bytes written, whichever formula costs it
    assert c.written == 48


def test_log_sigmoid_backward_with_an_empty_cuda_buffer():
    # log_sigmoid_backward(grad_output, self, buffer): CUDA passes an empty buffer [0]: 5 * 24 = 120
    c = cost_of(op("aten::log_sigmoid_backward", G, X, T([0], BF16)))
    assert (c.flops, c.bytes) == (120, 144)
    # the CPU's buffer has the input's size: read too, 48 more bytes
    assert cost_of(op("aten::log_sigmoid_backward", G, X, T([4, 6], BF16))).bytes == 192


def test_forward_activations():
    # log_sigmoid_forward: 5 * 24; reads 48, writes the output 48 (the buffer is not counted)
    assert cost_of(op("aten::log_sigmoid_forward", X)).flops == 120
    # glu over dim -1 of [4, 6]: output [4, 3]: 5 * 12 = 60; reads 48, writes 24
    c = cost_of(op("aten::glu", X, S(-1)))
    assert (c.flops, c.bytes) == (60, 72)
    # glu_backward(grad [4,3], self [4,6], dim): 9 * 12 = 108; reads 24 + 48, writes 48
    c = cost_of(op("aten::glu_backward", T([4, 3], BF16), X, S(-1)))
    assert (c.flops, c.bytes) == (108, 120)
    # _prelu_kernel(x [2,3,4] fp32, w [3,1]): 2 * 24 = 48; reads 96 + 12, writes 96
    c = cost_of(op("aten::_prelu_kernel", T([2, 3, 4]), T([3, 1])))
    assert (c.flops, c.bytes) == (48, 204)
    assert is_wrapper("aten::prelu") and is_wrapper("aten::celu") and is_wrapper("aten::log_sigmoid")


def test_softmax_backward():
    # _softmax_backward_data(grad_output, output, dim, input_dtype=6 float32) over [8, 16] fp32:
    # 4 * 128 = 512; reads 512 + 512, writes 512
    dy = T([8, 16], F32)
    c = cost_of(op("aten::_softmax_backward_data", dy, dy, S(-1), S(6)))
    assert (c.flops, c.bytes, c.written) == (512, 1536, 512)
    # log-softmax backward of a bf16 forward (input_dtype 15) on fp32 gradients: dx written in bf16, 256
    c = cost_of(op("aten::_log_softmax_backward_data", dy, dy, S(1), S(15)))
    assert (c.flops, c.written) == (512, 256)


def test_softmax_backward_with_its_nested_mul_stays_costed():
    ops = pd.DataFrame({"name": ["aten::_softmax_backward_data", "aten::mul"], "parent": [-1, 0]})
    assert not flag_ops(ops).dispatcher[0]


def test_gradient_dtype_is_grad_outputs_and_glu_halves_only_an_even_dim():
    # tanh_backward(dy [4, 6] bf16, y [4, 6] fp32): the gradient has dy's dtype: 24 * 2 = 48 written;
    # reads 48 + 96
    c = cost_of(op("aten::tanh_backward", G, T([4, 6], F32)))
    assert (c.flops, c.bytes, c.written, c.dtype) == (72, 48 + 96 + 48, 48, "bfloat16")
    # glu over a dim of 4: output [4, 2], 5 * 8 = 40 (an integer count); reads 2*16 = 32, writes 16
    c = cost_of(op("aten::glu", T([4, 4], BF16), S(-1)))
    assert (c.flops, c.bytes) == (40, 48) and type(c.flops) is int
    # an odd dim cannot be halved: nothing computed or written; reads 2*20 = 40
    c = cost_of(op("aten::glu", T([4, 5], BF16), S(-1)))
    assert (c.flops, c.bytes) == (0, 40)


def test_softmax_backward_reads_a_broadcast_gradient_once_and_its_dtype_code_only_when_known():
    # softmax(x).sum().backward(): dy [8, 16] fp32 expanded from one element (4 bytes), y 512 bytes;
    # writes dx 128 * 4 = 512
    dy, y = T([8, 16], F32, strides=[0, 0]), T([8, 16], F32)
    c = cost_of(op("aten::_softmax_backward_data", dy, y, S(-1), S(6)))
    assert (c.flops, c.bytes, c.written, c.dtype) == (512, 4 + 512 + 512, 512, "float32")
    # input_dtype not recorded, or a code that is no ScalarType: dx in grad_output's dtype (bf16: 256)
    g = T([8, 16], BF16)
    assert cost_of(op("aten::_softmax_backward_data", g, g, S(-1), NONE)).written == 256
    assert cost_of(op("aten::_softmax_backward_data", g, g, S(-1), S(99))).written == 256

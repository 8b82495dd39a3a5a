"""Backward of the elementwise activations and of softmax, and the activations `elementwise` lacks.

FLOPs per element follow the elementwise convention (docs/costs.md): each arithmetic
operation, comparison or transcendental of the defining formula counts 1 (a comparison
with its select counts 1, as in threshold_backward). The backward of f multiplies the
incoming gradient by f'(x): the count is f''s arithmetic plus that multiply, stated
beside each entry. Bytes: every tensor argument read once at its stored size, the
gradient written once at grad_output's shape and dtype.
"""

from __future__ import annotations

import math

from wlprof.cost import dtypes
from wlprof.cost.elementwise import _broadcast
from wlprof.cost.registry import VECTOR, Cost, OpCall, formula, register_wrapper

register_wrapper(
    "aten::celu", "aten::selu",  # -> elu
    "aten::log_sigmoid",  # -> log_sigmoid_forward
    "aten::prelu",  # -> _prelu_kernel
)

# name -> FLOPs per element of the gradient
BACKWARD_FLOPS: dict[str, int] = {
    "tanh_backward": 3,  # dy * (1 - y*y)
    "hardtanh_backward": 2,  # two comparisons selecting dy or 0
    "leaky_relu_backward": 2,  # compare, multiply the negative side by the slope
    "elu_backward": 4,  # x <= 0: dy * input_scale * (y + alpha * scale) (or exp of x): 4; else dy * scale
    "softplus_backward": 5,  # dy * sigmoid(beta * x): multiply, exp, add, divide, multiply
    "hardswish_backward": 5,  # two comparisons, x / 3 + 0.5, times dy
    "hardsigmoid_backward": 3,  # two comparisons, dy / 6
    # t = tanh(softplus(x)) (exp, add, log, tanh: 4), s = sigmoid(x) (4),
    # dy * (t + x * s * (1 - t*t)) (6) = 14
    "mish_backward": 14,
    "log_sigmoid_backward": 5,  # dy * sigmoid(-x): negate, exp, add, divide, multiply
    "softshrink_backward": 2,  # two comparisons
    "hardshrink_backward": 2,
    "logit_backward": 3,  # dy / (x * (1 - x)): subtract, multiply, divide
    "rrelu_with_noise_backward": 2,  # compare, multiply by the noise (or the slope)
}
# positions of the tensor arguments read (grad_output first: its shape and dtype are the result's)
_TENSORS: dict[str, tuple[int, ...]] = {
    "elu_backward": (0, 5),
    "log_sigmoid_backward": (0, 1, 2),
    "rrelu_with_noise_backward": (0, 1, 2),
}


def _gradient(call: OpCall, per: int, positions: tuple[int, ...]) -> Cost:
    ts = [t for i in positions if (t := call.tensor(i)) is not None]
    grad = call.tensor(positions[0])
    n = math.prod(_broadcast([t.dims for t in ts if t.numel > 0 or not t.dims]))
    written = n * grad.itemsize
    return Cost(per * n, sum(t.nbytes_read for t in ts) + written, VECTOR, grad.dtype, written=written)


def _make(name: str, per: int):
    positions = _TENSORS.get(name, (0, 1))

    def backward(call: OpCall) -> Cost | None:
        return _gradient(call, per, positions)

    backward.__name__ = name
    return backward


for _name, _per in BACKWARD_FLOPS.items():
    formula(f"aten::{_name}")(_make(_name, _per))


@formula("aten::log_sigmoid_forward")
def log_sigmoid_forward(call: OpCall) -> Cost | None:
    # -softplus(-x): negate, exp, add, log, negate = 5. Returns (output, buffer); the CPU kernel
    # fills a buffer of the input's size, the CUDA one an empty one: only the output is counted.
    x = call.tensor(0)
    written = x.numel * x.itemsize
    return Cost(5 * x.numel, x.nbytes_read + written, VECTOR, x.dtype, written=written)


@formula("aten::hardshrink", "aten::softshrink")
def shrink(call: OpCall) -> Cost | None:
    # |x| > lambda ? x (- sign(x) * lambda) : 0: two comparisons (softshrink's subtraction folded in)
    x = call.tensor(0)
    written = x.numel * x.itemsize
    return Cost(2 * x.numel, x.nbytes_read + written, VECTOR, x.dtype, written=written)


@formula("aten::logit", "aten::logit_")
def logit(call: OpCall) -> Cost | None:
    # log(x / (1 - x)): subtract, divide, log = 3, plus the clamp's 2 comparisons when eps is given
    x = call.tensor(0)
    per = 3 + (2 if call.scalar(1) is not None else 0)
    written = x.numel * x.itemsize
    return Cost(per * x.numel, x.nbytes_read + written, VECTOR, x.dtype, written=written)


@formula("aten::_prelu_kernel")
def prelu(call: OpCall) -> Cost | None:
    # x > 0 ? x : w * x with w broadcast over the channels: compare, multiply = 2
    return _gradient(call, 2, (0, 1))


@formula("aten::_prelu_kernel_backward")
def prelu_backward(call: OpCall) -> Cost | None:
    # (grad_output, self, weight) -> (grad_input, grad_weight), both of the input's shape (the caller
    # reduces grad_weight to the weight's): grad_input compare, multiply (2); grad_weight x * dy (2)
    g, x = call.tensor(0), call.tensor(1)
    n = x.numel
    written = n * g.itemsize + n * x.itemsize
    reads = sum(t.nbytes_read for t in call.tensors)
    return Cost(4 * n, reads + written, VECTOR, g.dtype, written=written)


def _half_dim(x, dim) -> int:
    d = int(dim) % len(x.dims)
    return x.numel // 2 if x.dims[d] % 2 == 0 else 0


@formula("aten::glu")
def glu(call: OpCall) -> Cost | None:
    # glu(self, dim): a * sigmoid(b) over the two halves along dim: sigmoid 4 + multiply 1 = 5 per output
    x = call.tensor(0)
    n = _half_dim(x, call.scalar(1) if call.scalar(1) is not None else -1)
    written = n * x.itemsize
    return Cost(5 * n, x.nbytes_read + written, VECTOR, x.dtype, written=written)


@formula("aten::glu_backward")
def glu_backward(call: OpCall) -> Cost | None:
    # (grad_output, self, dim): per output element s = sigmoid(b) (4), da = dy * s (1),
    # db = dy * a * s * (1 - s) (4) = 9; writes a gradient of the input's size
    g, x = call.tensor(0), call.tensor(1)
    n = _half_dim(x, call.scalar(2))
    written = x.numel * g.itemsize
    return Cost(9 * n, g.nbytes_read + x.nbytes_read + written, VECTOR, g.dtype, written=written)


# ---------------------------------------------------------------- softmax backward


def _softmax_backward(call: OpCall) -> Cost | None:
    # (grad_output, output, dim, input_dtype): softmax dx = y * (dy - sum(dy * y)): multiply, sum,
    # subtract, multiply = 4; log_softmax dx = dy - exp(y) * sum(dy): sum, exp, multiply, subtract = 4.
    # The gradient has the forward input's dtype (the ScalarType code recorded), else grad_output's.
    g, y = call.tensor(0), call.tensor(1)
    code = call.scalar(3)
    size = (dtypes.size_of_dtype(dtypes.SCALAR_TYPE_CODES[code])
            if isinstance(code, int) and not isinstance(code, bool) and code in dtypes.SCALAR_TYPE_CODES
            else g.itemsize)
    written = g.numel * size
    return Cost(4 * g.numel, g.nbytes_read + y.nbytes_read + written, VECTOR, g.dtype, written=written)


# On CUDA a softmax backward over long rows first multiplies dy by y with a nested aten::mul,
# its own pass (costed on the mul), then reduces: the mul is auxiliary work, not a dispatch.
formula("aten::_softmax_backward_data", "aten::_log_softmax_backward_data",
        aux_children=("aten::mul",))(_softmax_backward)


@formula("aten::_masked_softmax")
def masked_softmax(call: OpCall) -> Cost | None:
    # (self, mask, dim?, mask_type?): the softmax's 5 per element plus the mask's select (1)
    x, m = call.tensor(0), call.tensor(1)
    written = x.numel * x.itemsize
    return Cost(6 * x.numel, x.nbytes_read + m.nbytes_read + written, VECTOR, x.dtype, written=written)


@formula("aten::_masked_softmax_backward")
def masked_softmax_backward(call: OpCall) -> Cost | None:
    # (grad_output, output, mask, dim?): the softmax backward's 4 plus the mask's select (1)
    g, y, m = call.tensor(0), call.tensor(1), call.tensor(2)
    written = g.numel * g.itemsize
    reads = g.nbytes_read + y.nbytes_read + m.nbytes_read
    return Cost(5 * g.numel, reads + written, VECTOR, g.dtype, written=written)

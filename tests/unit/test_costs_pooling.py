"""Pooling formulas: output sizes as ATen computes them, FLOPs per window, bytes by hand."""

from __future__ import annotations

import pytest
from cost_calls import BF16, I64, NONE, S, T, op

import wlprof.cost  # noqa: F401  (registers every formula)
from wlprof.cost import cost_of, is_wrapper
from wlprof.cost.pooling import out_size


@pytest.mark.parametrize(("args", "expected"), [
    ((32, 3, 2, 1, 1, False), 16),  # (32 + 2 - 2 - 1) // 2 + 1
    ((7, 2, 2, 0, 1, False), 3),
    ((7, 2, 2, 0, 1, True), 4),  # ceil_mode keeps the last partial window
    ((5, 2, 2, 1, 1, True), 3),  # ... unless it would start in the padding: ceil gives 4, then 3
    ((10, 3, 1, 0, 2, False), 6),  # dilation 2: 10 - 2*2 - 1 + 1
])
def test_out_size(args, expected):
    assert out_size(*args) == expected


def test_max_pool2d_with_indices():
    # x [2, 4, 8, 8] bf16, k 3, s 2, p 1: out [2, 4, 4, 4] = 128 elements; 9 comparisons each = 1152;
    # reads 2*512 = 1024, writes values 2*128 = 256 + int64 indices 8*128 = 1024
    c = cost_of(op("aten::max_pool2d_with_indices", T([2, 4, 8, 8], BF16), S([3, 3]), S([2, 2]), S([1, 1]),
                   S([1, 1]), S(False)))
    assert (c.flops, c.bytes, c.written) == (1152, 1024 + 1280, 1280)
    # stride [] means the kernel size: k 2 -> out 4x4
    c = cost_of(op("aten::max_pool2d_with_indices", T([2, 4, 8, 8], BF16), S([2, 2]), S([]), S([0, 0]),
                   S([1, 1]), S(False)))
    assert c.flops == 4 * 128


def test_max_pool2d_with_indices_backward():
    # (grad_output [2,4,4,4], self [2,4,8,8], k, s, p, d, ceil, indices [2,4,4,4] int64): 128 adds;
    # reads grad 256 + indices 1024, writes grad_input 2*512 = 1024 (self is not read)
    c = cost_of(op("aten::max_pool2d_with_indices_backward", T([2, 4, 4, 4], BF16), T([2, 4, 8, 8], BF16),
                   S([3, 3]), S([2, 2]), S([1, 1]), S([1, 1]), S(False), T([2, 4, 4, 4], I64)))
    assert (c.flops, c.bytes, c.written) == (128, 1280 + 1024, 1024)


def test_avg_pool2d_and_backward():
    # avg_pool2d(x [1, 2, 6, 6] fp32, k 2, s 2): out [1,2,3,3] = 18; (4 + 1) * 18 = 90; bytes 288 + 72
    c = cost_of(op("aten::avg_pool2d", T([1, 2, 6, 6]), S([2, 2]), S([2, 2]), S([0, 0]), S(False), S(True), NONE))
    assert (c.flops, c.bytes) == (90, 360)
    c = cost_of(op("aten::avg_pool2d_backward", T([1, 2, 3, 3]), T([1, 2, 6, 6]), S([2, 2]), S([2, 2]), S([0, 0]),
                   S(False), S(True), NONE))
    # 18 grads x (4 + 1) = 90; reads 72, writes 288
    assert (c.flops, c.bytes) == (90, 360)


def test_adaptive_pools():
    # _adaptive_avg_pool2d(x [2, 3, 8, 8] fp32, [2, 2]): out 2*3*4 = 24; 384 adds + 24 divides;
    # bytes 4*384 + 4*24
    c = cost_of(op("aten::_adaptive_avg_pool2d", T([2, 3, 8, 8]), S([2, 2])))
    assert (c.flops, c.bytes) == (408, 1536 + 96)
    c = cost_of(op("aten::_adaptive_avg_pool2d_backward", T([2, 3, 2, 2]), T([2, 3, 8, 8])))
    assert (c.flops, c.bytes) == (384, 96 + 1536)
    # adaptive_max_pool2d: 384 comparisons; writes 24 values + 24 int64 indices
    c = cost_of(op("aten::adaptive_max_pool2d", T([2, 3, 8, 8]), S([2, 2])))
    assert (c.flops, c.bytes) == (384, 1536 + 96 + 192)
    c = cost_of(op("aten::adaptive_max_pool2d_backward", T([2, 3, 2, 2]), T([2, 3, 8, 8]), T([2, 3, 2, 2], I64)))
    assert (c.flops, c.bytes) == (24, 96 + 192 + 1536)
    # the composite forms dispatch: a mean for a 1x1 output, _adaptive_avg_pool2d otherwise
    assert is_wrapper("aten::adaptive_avg_pool2d")


def test_pooling_parameters_defaults_and_lengths():
    from wlprof.cost.pooling import _ints

    assert _ints(3, 2, None) == [3, 3] and _ints(2.0, 3, None) == [2, 2, 2]  # a bare number, every dim
    assert _ints([2], 3, None) == [2, 2, 2] and _ints([2, 3], 2, None) == [2, 3]
    assert _ints([], 2, [0, 0]) == [0, 0] and _ints(None, 2, [1, 1]) == [1, 1]
    with pytest.raises(ValueError, match="^missing pooling parameter$"):
        _ints([], 2, None)
    x = T([2, 4, 8, 8], BF16)
    # padding and dilation recorded empty mean 0 and 1: k 2, s 2 -> out [2, 4, 4, 4] = 128 x 4 comparisons
    # (padding 1 would give 5x5 outputs, dilation 2 3x3)
    c = cost_of(op("aten::max_pool2d_with_indices", x, S([2, 2]), S([2, 2]), S([]), S([]), S(False)))
    assert c.flops == 4 * 128
    # no kernel size, or three kernel sizes for two spatial dims: unknown
    assert cost_of(op("aten::max_pool2d_with_indices", x, S([]), S([2, 2]), S([0, 0]), S([1, 1]), S(False))) is None
    assert cost_of(op("aten::max_pool2d_with_indices", x, S([2, 2, 2]), S([2, 2]), S([0, 0]), S([1, 1]),
                      S(False))) is None
    # a backward without its indices recorded: reads the gradient 256 only, writes 2*512 = 1024
    c = cost_of(op("aten::max_pool2d_with_indices_backward", T([2, 4, 4, 4], BF16), x, S([3, 3]), S([2, 2]),
                   S([1, 1]), S([1, 1]), S(False), NONE))
    assert (c.flops, c.bytes, c.written) == (128, 256 + 1024, 1024)


def test_max_unpool_writes_each_input_where_its_index_points():
    # max_unpool2d(x [2, 8, 8, 8] fp32, indices int64, output_size [16, 16]): reads 4,096 + 8,192 bytes,
    # writes the 1,024 values (4,096 bytes); the zeroed rest of the output is a nested zero_
    c = cost_of(op("aten::max_unpool2d", T([2, 8, 8, 8]), T([2, 8, 8, 8], I64), S([16, 16])))
    assert (c.flops, c.bytes, c.written) == (0, 4_096 + 8_192 + 4_096, 4_096)


def test_a_forward_recorded_without_its_window_has_bytes_from_its_output_dims_and_no_flops():
    from dataclasses import replace

    # PyTorch 1.8-1.13 without Concrete Inputs: max_pool2d_with_indices(x, ?, ?, ?, ?, ?), ResNet's stem pool
    x, out = [5, 64, 112, 112], (5, 64, 56, 56)
    call = op("aten::max_pool2d_with_indices", T(x), *[NONE] * 5)
    assert cost_of(call) is None  # neither the window nor the output: nothing
    c = cost_of(replace(call, output_dims=out))
    # reads x (5*64*112*112 fp32), writes the output (5*64*56*56 fp32) and its int64 indices;
    # the FLOPs count the window's elements, which the trace does not give
    n_in, n_out = 5 * 64 * 112 * 112, 5 * 64 * 56 * 56
    assert c.flops is None
    assert (c.bytes, c.written) == (4 * n_in + 12 * n_out, 12 * n_out)
    # avg_pool2d: the output only
    c = cost_of(replace(op("aten::avg_pool2d", T(x), *[NONE] * 6), output_dims=out))
    assert (c.flops, c.bytes, c.written) == (None, 4 * n_in + 4 * n_out, 4 * n_out)
    # a recorded window keeps its formula (3x3: 9 comparisons per output element)
    rec = op("aten::max_pool2d_with_indices", T(x), S([3, 3]), S([2, 2]), S([1, 1]), S([1, 1]), S(False))
    assert cost_of(replace(rec, output_dims=out)).flops == 9 * n_out


def test_an_unrecorded_pool_takes_its_output_dims_from_the_op_run_next():
    import pandas as pd

    from wlprof.cost.convolution import consumer_outputs

    x, out = [5, 64, 112, 112], [5, 64, 56, 56]

    def trace(after: list) -> tuple[pd.DataFrame, list[dict]]:
        # max_pool2d > max_pool2d_with_indices (no window recorded), then a sibling of max_pool2d
        # whose first input is `after`
        args = [{"Input Dims": [x, [], [], [], [], []]}] * 2 + [{"Input Dims": [after, [64, 64, 3, 3]]}]
        ops = pd.DataFrame({"name": ["aten::max_pool2d", "aten::max_pool2d_with_indices", "aten::conv2d"],
                            "parent": [-1, 0, -1], "args_id": [0, 1, 2], "ts_ns": [0, 10, 1000],
                            "pid": 1, "tid": 1})
        return ops, args

    assert consumer_outputs(*trace(out), [1]) == {(tuple(x), ()): tuple(out)}
    # not a pooling of x: other channels, another batch, a larger size
    for other in ([5, 32, 56, 56], [4, 64, 56, 56], [5, 64, 224, 224]):
        assert consumer_outputs(*trace(other), [1]) == {}

"""The result dtype of an elementwise op with a 0-d operand: the dimensioned tensor's, in either order.

A 0-d tensor (a Python number, or a one-element state such as an optimizer's step) does not promote
a dimensioned tensor of the same category: mul(0-d double, [1] float) is float, like
mul([1] float, 0-d double). An optimizer over one-element parameters (`optim --numel 1`) records
both orders on the CPU.
"""

from __future__ import annotations

import pytest
from cost_calls import F32, F64, S, T, op

import wlprof.cost  # noqa: F401  (registers every formula)
from wlprof.cost import cost_of


@pytest.mark.parametrize("order", ["scalar first", "scalar second"])
def test_a_zero_dim_operand_does_not_set_the_result_dtype_of_a_one_element_tensor(order):
    args = [T([], F64), T([1], F32)]
    c = cost_of(op("aten::mul", *(args if order == "scalar first" else args[::-1])))
    # one product; the 0-d double read (8) and the float read (4), one float written (4): 16 bytes
    assert (c.flops, c.bytes, c.written, c.dtype) == (1, 16, 4, "float32")


def test_an_empty_tensor_with_a_zero_dim_operand_writes_nothing():
    # add(0-d float, [0] float): no element, the 0-d operand read (4 bytes), nothing written
    c = cost_of(op("aten::add", T([], F32), T([0], F32)))
    assert (c.flops, c.bytes, c.written) == (0, 4, 0)


@pytest.mark.parametrize("int64", ["long int", "long long", "__int64"])
def test_int64_is_read_in_each_compiler_spelling(int64):
    # GCC (Linux) writes 'long int', Clang (macOS) 'long long', MSVC (Windows) '__int64'. A BatchNorm's
    # running count: add_(0-d int64, 0-d int64, alpha): one add, 8 + 8 bytes read and 8 written
    c = cost_of(op("aten::add_", T([], int64), T([], int64), S(1)))
    assert (c.flops, c.bytes, c.written, c.dtype) == (1, 24, 8, "int64")
    # an index tensor of that spelling: gathering 3 rows of a [10, 4] float table reads 3 int64 indices
    # (24 bytes) and 3 x 4 floats (48), and writes 48
    c = cost_of(op("aten::index_select", T([10, 4]), S(0), T([3], int64)))
    assert (c.bytes, c.written) == (24 + 48 + 48, 48)

"""Ops met in CPU traces of plain-torch models: small formulas, and the composites that are wrappers."""

from __future__ import annotations

import pandas as pd
import pytest
from cost_calls import BF16, F32, I64, NONE, S, T, op

import wlprof.cost  # noqa: F401  (registers every formula)
from wlprof.cost import MATRIX, cost_of, is_view, is_wrapper
from wlprof.cost.attribution import flag_ops


def test_aminmax_and_equal():
    # aminmax(x [4] int64, dim None, keepdim): 2 comparisons per element, min and max written (16 bytes)
    c = cost_of(op("aten::aminmax", T([4], I64), NONE, S(False)))
    assert (c.flops, c.bytes, c.written) == (8, 32 + 16, 16)
    # aminmax(x [4, 6] fp32, dim 1): 48 comparisons, 2 x 4 results
    c = cost_of(op("aten::aminmax", T([4, 6], F32), S(1), S(False)))
    assert (c.flops, c.bytes, c.written) == (48, 96 + 32, 32)
    # equal(a [3, 4], b [3, 4]): 12 comparisons, both read, a Python bool (nothing written)
    c = cost_of(op("aten::equal", T([3, 4]), T([3, 4])))
    assert (c.flops, c.bytes, c.written) == (12, 96, 0)


def test_scalar_tensor_writes_one_element_of_its_dtype():
    # scalar_tensor(1e-08, dtype 6 = float32): 4 bytes; dtype 15 = bfloat16: 2; no dtype: float32
    assert cost_of(op("aten::scalar_tensor", S(1e-08), S(6), NONE, NONE, NONE)).bytes == 4
    assert cost_of(op("aten::scalar_tensor", S(0), S(15), NONE, NONE, NONE)).bytes == 2
    assert cost_of(op("aten::scalar_tensor", S(0), NONE, NONE, NONE, NONE)).written == 4


def test_addmm_activation_counts_its_product():
    # _addmm_activation(bias [64], mat1 [32, 32], mat2 [32, 64], beta, alpha, use_gelu False): 2*32*64*32;
    # reads 4,096 + 8,192 + 256, writes 8,192 (the ReLU on the CPU is a nested relu_, costed on its own)
    c = cost_of(op("aten::_addmm_activation", T([64]), T([32, 32]), T([32, 64]), S(1), S(1), S(False)))
    assert (c.flops, c.bytes, c.unit) == (131_072, 20_736, MATRIX)
    ops = pd.DataFrame({"name": ["aten::_addmm_activation", "aten::copy_", "aten::relu_"], "parent": [-1, 0, 0]})
    assert not flag_ops(ops).dispatcher[0]
    _ = BF16


@pytest.mark.parametrize("name", ["repeat", "select_backward", "slice_backward", "quantile", "nanquantile",
                                  "one_hot", "embedding_bag", "_embedding_bag_backward", "grid_sampler",
                                  "affine_grid_generator", "lstm", "gru", "rnn_tanh", "_pack_padded_sequence",
                                  "_pad_packed_sequence"])
def test_composites_that_run_their_work_nested_are_wrappers(name):
    assert is_wrapper(f"aten::{name}")


@pytest.mark.parametrize("name", ["cudnn_is_acceptable", "unsafe_split", "unsafe_chunk", "resize_as_"])
def test_metadata_and_split_views(name):
    assert is_view(f"aten::{name}")

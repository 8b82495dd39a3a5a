"""Ops recorded the way torch 1.13 records them (no `Concrete Inputs`; an int list's `Input type` is ''):
what their tensors determine is read from them, what they do not stays unknown."""

from __future__ import annotations

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

import wlprof.cost  # noqa: F401  (registers every formula)
from wlprof.cost import OpCall, cost_of


def legacy(name: str, dims: list, types: list, children=(), parent=None) -> OpCall:
    """An op call as torch 1.13 records it: dims and types, no Concrete Inputs, no strides."""
    kids = [OpCall.from_args(n, {"Input Dims": d, "Input type": t}) for n, d, t in children]
    return OpCall.from_args(name, {"Input Dims": dims, "Input type": types}, children=kids, parent=parent)


def conv_bwd(go, x, w, allocated=()):
    """convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
    output_padding, groups, output_mask) as 1.13 records it, with an `aten::as_strided_` inside per dims in
    `allocated` (its CPU backward restrides an empty tensor to each gradient's dims)."""
    kids = [("aten::as_strided_", [list(d), [], [], []], ["float", "", "", ""]) for d in allocated]
    return legacy("aten::convolution_backward", [go, x, w] + [[]] * 8,
                  ["float"] * 3 + ["", "", "", "", "Scalar", "", "Scalar", ""], kids)


def fcm_backward(module: torch.nn.Module, x: torch.Tensor, input_grad: bool) -> int:
    """FlopCounterMode's count of convolution_backward for one backward of `module` on `x`."""
    x = x.requires_grad_(input_grad)
    with FlopCounterMode(display=False) as fc:
        module(x).sum().backward()
    return int(fc.get_flop_counts()["Global"][torch.ops.aten.convolution_backward])


def test_transposed_is_read_from_the_channels():
    # ConvTranspose2d(8, 4, 3, stride 2, padding 1, output_padding 1): weight [8, 4, 3, 3], input [2, 8, 4, 4],
    # output [2, 4, 8, 8]; grad_output's 4 channels are not the weight's dim 0 (8): only the transposed reading fits
    m = torch.nn.ConvTranspose2d(8, 4, 3, stride=2, padding=1, output_padding=1)
    ref = fcm_backward(m, torch.randn(2, 8, 4, 4), input_grad=True)
    c = cost_of(conv_bwd([2, 4, 8, 8], [2, 8, 4, 4], [8, 4, 3, 3], [[2, 8, 4, 4], [4], [8, 4, 3, 3]]))
    assert c is not None and c.flops == ref == 36_864  # 2 x (16 * 9 * 2 * 8 * 4 * 2)


@pytest.mark.parametrize("input_grad", [True, False])
def test_output_mask_is_read_from_the_gradients_allocated(input_grad):
    # Conv2d(4, 6, 3, stride 2, padding 1) on [2, 4, 9, 9]: grad_output [2, 6, 5, 5]; the first layer of a model
    # (its input needs no gradient) allocates no [2, 4, 9, 9] gradient and computes no grad_input
    m = torch.nn.Conv2d(4, 6, 3, stride=2, padding=1)
    ref = fcm_backward(m, torch.randn(2, 4, 9, 9), input_grad)
    made = ([[2, 4, 9, 9]] if input_grad else []) + [[6], [6, 4, 3, 3]]
    c = cost_of(conv_bwd([2, 6, 5, 5], [2, 4, 9, 9], [6, 4, 3, 3], made))
    assert c is not None and c.flops == ref == (43_200 if input_grad else 21_600)  # 2*2*6*4*25*9 per gradient


def test_both_readings_of_the_same_cost_are_taken():
    # Conv2d(4, 4, 3, padding 1) on [2, 4, 8, 8]: a transposed convolution of weight [4, 4, 3, 3] fits the same
    # dims, and both readings count the same products: the cost is known
    m = torch.nn.Conv2d(4, 4, 3, padding=1)
    ref = fcm_backward(m, torch.randn(2, 4, 8, 8), input_grad=True)
    c = cost_of(conv_bwd([2, 4, 8, 8], [2, 4, 8, 8], [4, 4, 3, 3], [[2, 4, 8, 8], [4], [4, 4, 3, 3]]))
    assert c is not None and c.flops == ref


def test_unknown_without_the_allocations_or_a_fitting_reading():
    # no gradient seen allocated (a GPU backward allocates with aten::empty, whose sizes are not recorded)
    assert cost_of(conv_bwd([2, 6, 5, 5], [2, 4, 9, 9], [6, 4, 3, 3])) is None
    # grad_output's channels fit neither reading (7 is neither the weight's dim 0 nor a multiple of its dim 1)
    assert cost_of(conv_bwd([2, 7, 5, 5], [2, 4, 9, 9], [6, 4, 3, 3], [[2, 4, 9, 9], [6, 4, 3, 3]])) is None
    # the input's and the weight's dims are the same: an allocation would not say which gradient it is
    assert cost_of(conv_bwd([4, 4, 3, 3], [4, 4, 3, 3], [4, 4, 3, 3], [[4, 4, 3, 3]])) is None


def test_index_select_dim_inside_an_embedding_or_on_a_vector():
    # 32 rows of a [64, 32] float table: 32*32*4 read + 32*8 index + 32*32*4 written = 8,448 bytes
    emb = OpCall.from_args("aten::embedding", {"Input Dims": [[64, 32], [2, 16], [], [], []],
                                               "Input type": ["float", "long int", "Scalar", "Scalar", "Scalar"]})
    dims, types = [[64, 32], [], [32]], ["float", "Scalar", "long int"]
    assert cost_of(legacy("aten::index_select", dims, types, parent=emb)).bytes == 8_448
    assert cost_of(legacy("aten::index_select", dims, types)) is None  # dim 0 or 1: not known
    # a 1-d source has one dim: 10 of 100 floats, 40 + 80 + 40 = 160 bytes
    assert cost_of(legacy("aten::index_select", [[100], [], [10]], types)).bytes == 160


def test_embedding_backward_rows_from_its_zero_fill():
    # grad_output [2, 16, 32], indices [2, 16]: 1,024 adds; num_weights 64 from the [64, 32] grad_weight it
    # zero-fills inside: 4,096 + 256 read, 32 rows of 32 floats written (4,096): 8,448 bytes
    dims, types = [[2, 16, 32], [2, 16], [], [], []], ["float", "long int", "Scalar", "Scalar", "Scalar"]
    c = cost_of(legacy("aten::embedding_dense_backward", dims, types,
                       [("aten::zero_", [[64, 32]], ["float"])]))
    assert (c.flops, c.bytes) == (1_024, 8_448)
    # the fill nested deeper (inside a zeros): FLOPs known, bytes not
    c = cost_of(legacy("aten::embedding_dense_backward", dims, types, [("aten::zeros", [[], [], [], [], []],
                                                                        ["", "Scalar", "Scalar", "", ""])]))
    assert (c.flops, c.bytes) == (1_024, None)


def test_cat_of_an_unexpanded_list_has_unknown_bytes():
    # torch 2.1 and earlier record a TensorList as []: a cat of no tensors is refused by torch, so the sizes
    # are unknown, not 0
    c = cost_of(legacy("aten::cat", [[], []], ["TensorList", "Scalar"]))
    assert c.flops == 0 and c.bytes is None

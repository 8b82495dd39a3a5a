"""Ops the round-5 CPU zoo ran without a cost: pairwise distances, reflection and replication pads,
unfold_backward, eye and randperm, the conjugate views, the composites that are wrappers, and
index_put_ run as one masked_fill_. Bytes by hand (fp32 = 4, int64 = 8, bool = 1)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
from cost_calls import BOOL, F32, I64, NONE, S, T, op

import wlprof.cost  # noqa: F401  (registers every formula)
from wlprof.cost import cost_of, is_view, is_wrapper
from wlprof.cost.attribution import flag_ops
from wlprof.cost.registry import records_strides


def test_cdist_forward_by_pairs_and_coordinates():
    # x1 [16, 8], x2 [12, 8], p = 2: 16 * 12 = 192 pairs of (3 * 8 + 1) = 25 FLOPs = 4,800;
    # reads 128 + 96 floats = 896 B, writes 192 floats = 768 B
    c = cost_of(op("aten::_cdist_forward", T([16, 8]), T([12, 8]), S("2."), NONE))
    assert (c.flops, c.bytes, c.written) == (4_800, 896 + 768, 768)
    # batched [3, 4, 5] x [3, 6, 5], p = 1: 3 * 4 * 6 = 72 pairs of 3 * 5 = 15 FLOPs = 1,080
    c = cost_of(op("aten::_cdist_forward", T([3, 4, 5]), T([3, 6, 5]), S("1."), NONE))
    assert (c.flops, c.written) == (1_080, 72 * 4)
    # p = 3: 4 * 5 + 1 = 21 per pair; p = inf: 3 * 5
    assert cost_of(op("aten::_cdist_forward", T([3, 4, 5]), T([3, 6, 5]), S("3."), NONE)).flops == 72 * 21
    assert cost_of(op("aten::_cdist_forward", T([3, 4, 5]), T([3, 6, 5]), S("inf"), NONE)).flops == 72 * 15
    # a negative p is refused: unknown, never a guess
    assert cost_of(op("aten::_cdist_forward", T([4, 5]), T([6, 5]), S("-1."), NONE)) is None


def test_cdist_backward_writes_the_gradient_of_x1():
    # grad [16, 16], x1 = x2 = [16, 8], p = 2, cdist [16, 16]: 256 pairs of (3 * 8 + 1) = 6,400 FLOPs;
    # reads 256 + 128 + 128 + 256 floats = 3,072 B, writes 128 floats = 512 B
    c = cost_of(op("aten::_cdist_backward", T([16, 16]), T([16, 8]), T([16, 8]), S("2."), T([16, 16])))
    assert (c.flops, c.bytes, c.written) == (6_400, 3_072 + 512, 512)
    # p = 1: 4 per coordinate, 256 * 32 = 8,192; p = 3: 5 * 8 + 2 = 42 per pair
    assert cost_of(op("aten::_cdist_backward", T([16, 16]), T([16, 8]), T([16, 8]), S("1."),
                      T([16, 16]))).flops == 8_192
    assert cost_of(op("aten::_cdist_backward", T([16, 16]), T([16, 8]), T([16, 8]), S("3."),
                      T([16, 16]))).flops == 256 * 42


def test_pdist_forward_and_backward():
    # x [10, 4], p = 2: 45 pairs of 13 FLOPs = 585; reads 40 floats, writes 45
    c = cost_of(op("aten::_pdist_forward", T([10, 4]), S("2.")))
    assert (c.flops, c.bytes, c.written) == (585, 160 + 180, 180)
    # backward: 45 pairs of (3 * 4 + 1) + 4 (the second row's adds) = 17: 765; reads 45 + 40 + 45 floats,
    # writes the [10, 4] gradient
    c = cost_of(op("aten::_pdist_backward", T([45]), T([10, 4]), S("2."), T([45])))
    assert (c.flops, c.bytes, c.written) == (765, 520 + 160, 160)


def test_reflection_and_replication_pads():
    # reflection_pad1d of [1, 2, 512] by [32, 32]: output [1, 2, 576]; reads 1,024 floats, writes 1,152
    c = cost_of(op("aten::reflection_pad1d", T([1, 2, 512]), S([32, 32])))
    assert (c.flops, c.bytes, c.written) == (0, 4_096 + 4_608, 4_608)
    # replication_pad2d of [2, 3, 8, 8] by [1, 2, 3, 4]: output [2, 3, 15, 11] = 990 floats
    c = cost_of(op("aten::replication_pad2d", T([2, 3, 8, 8]), S([1, 2, 3, 4])))
    assert c.written == 990 * 4 and c.bytes == 384 * 4 + 990 * 4
    # reflection_pad3d of [1, 1, 4, 4, 4] by 1 on every side: [1, 1, 6, 6, 6]
    assert cost_of(op("aten::reflection_pad3d", T([1, 1, 4, 4, 4]), S([1] * 6))).written == 216 * 4
    # backward: grad_output [1, 2, 576] added into the [1, 2, 512] gradient: 1,152 adds; reads 1,152, writes 1,024
    c = cost_of(op("aten::reflection_pad1d_backward", T([1, 2, 576]), T([1, 2, 512]), S([32, 32])))
    assert (c.flops, c.bytes, c.written) == (1_152, 4_608 + 4_096, 4_096)
    # a padding list that pads more dims than the input has is refused
    assert cost_of(op("aten::reflection_pad1d", T([4]), S([1, 1, 1, 1]))) is None


def test_unfold_backward_overlap_adds_the_windows():
    # istft's overlap-add: grad [2, 33, 64] of x [2, 576] unfolded along 1 by size 64, step 16: the 33 windows
    # cover (33 - 1) * 16 + 64 = 576 elements per row; 4,224 adds; reads 4,224 floats, reads and writes 1,152
    c = cost_of(op("aten::unfold_backward", T([2, 33, 64]), S([2, 576]), S(1), S(64), S(16)))
    assert (c.flops, c.bytes, c.written) == (4_224, 16_896 + 2 * 4_608, 4_608)
    # the window envelope: a [1, 33, 64] gradient broadcast from 64 stored values (strides 0, 0, 1)
    c = cost_of(op("aten::unfold_backward", T([1, 33, 64], strides=[0, 0, 1]), S([1, 576]), S(1), S(64), S(16)))
    assert (c.flops, c.bytes) == (2_112, 256 + 2 * 2_304)
    # windows apart (step 10 > size 4): 5 windows of a length-50 dim cover 20 elements
    c = cost_of(op("aten::unfold_backward", T([5, 4]), S([50]), S(0), S(4), S(10)))
    assert c.written == 20 * 4


def test_eye_and_randperm_write_their_results():
    # eye.m_out(16, 11, out bool): the 11 ones of the diagonal written (the zero fill is a nested zero_)
    c = cost_of(op("aten::eye", S(16), S(11), T([0], BOOL)))
    assert (c.flops, c.bytes, c.written) == (0, 11, 11)
    # eye.out(8, out float): 8 ones
    assert cost_of(op("aten::eye", S(8), T([0], F32))).written == 32
    # the functional form (n, dtype, layout, device, pin_memory) names no out tensor: it runs the out form
    assert cost_of(op("aten::eye", S(16), S(11), NONE, NONE, S(False))) is None
    # randperm.out(2, generator, out int64): 2 values written
    c = cost_of(op("aten::randperm", S(2), NONE, T([2], I64)))
    assert (c.flops, c.bytes, c.written) == (0, 16, 16)
    assert cost_of(op("aten::randperm", S(2), S(4), NONE, NONE, S(False))) is None


def test_conjugate_views_and_composite_wrappers():
    for name in ("aten::_conj", "aten::conj", "aten::_neg_view"):
        assert is_view(name), name
    for name in ("aten::stft", "aten::istft", "aten::_trilinear", "aten::cdist", "aten::_euclidean_dist",
                 "aten::pdist", "aten::gather_backward", "aten::_embedding_bag_sparse_backward",
                 "aten::embedding_sparse_backward"):
        assert is_wrapper(name), name


def _ops(names, parents):
    return pd.DataFrame({"name": pd.Series(names, dtype=object), "parent": np.array(parents, dtype=np.int64)})


def test_index_put_with_a_nested_masked_fill_dispatches_to_it():
    # index_put_(grad, (mask,), 0-d value): _index_put_impl_ runs one masked_fill_ (item() first); the
    # masked fill does the work, so _index_put_impl_ is a dispatcher although its other nested ops
    # (as_strided, reshape) are its own
    names = ["aten::index_put_", "aten::_index_put_impl_", "aten::item", "aten::_local_scalar_dense",
             "aten::masked_fill_"]
    out = flag_ops(_ops(names, [-1, 0, 1, 2, 1]))
    assert out.dispatcher.tolist() == [False, True, False, False, False]
    assert out.is_wrapper.tolist()[0] and not out.is_wrapper.tolist()[1]
    # the accumulating path with index tensors (a costed copy_ nested, its own work): costed itself
    out = flag_ops(_ops(["aten::_index_put_impl_", "aten::copy_", "aten::reshape"], [-1, 0, 0]))
    assert not out.dispatcher.iat[0]


def test_a_sparse_input_is_not_costed_at_its_dense_sizes():
    # SGD's momentum on a sparse embedding gradient: add(buf, grad, alpha, out) of sparse COO tensors,
    # recorded with their dense sizes [50, 8] and empty strides in a trace that records strides; the dense
    # formula would count 400 elements where 24 rows (192 values) are stored: unknown instead
    def traced(call):
        return replace(call, strides_recorded=True)

    sparse = T([50, 8], strides=[])
    assert cost_of(traced(op("aten::add", sparse, sparse, S(1), sparse))) is None
    # a dense parameter plus a sparse update: one sparse input is enough
    assert cost_of(traced(op("aten::add", T([50, 8]), sparse, S(1), T([50, 8])))) is None
    # the same call with every input strided is the dense add: 400 adds, 3 x 1,600 B
    c = cost_of(traced(op("aten::add", T([50, 8]), T([50, 8]), S(1), T([50, 8]))))
    assert (c.flops, c.bytes) == (400, 4_800)
    # a 0-d tensor records no strides either: not sparse
    assert cost_of(traced(op("aten::mul", T([], "double"), T([24, 8])))).flops == 192
    # a trace that records no strides for any tensor (empty lists throughout, or none) tells no layout:
    # costed as dense
    assert cost_of(op("aten::add", sparse, sparse, S(1), sparse)).flops == 400
    bare = replace(op("aten::add", T([50, 8]), T([50, 8]), S(1), T([50, 8])), strides=(), strides_recorded=True)
    assert cost_of(bare).flops == 400
    # what tells that a trace records strides: a tensor of non-empty dims with a non-empty strides list
    assert records_strides({"Input Dims": [[50, 8], []], "Input type": ["float", "Scalar"],
                            "Input Strides": [[8, 1], []]})
    assert not records_strides({"Input Dims": [[50, 8], []], "Input type": ["float", "Scalar"],
                                "Input Strides": [[], []]})
    assert not records_strides({"Input Dims": [[[2, 3]]], "Input type": ["TensorList"], "Input Strides": [[[3, 1]]]})
    # _coalesce reads its sparse input from its nested calls: still costed
    coalesce = replace(op("aten::_coalesce", sparse), strides_recorded=True,
                       children=(op("aten::clone", T([1, 30], I64)),
                                 op("aten::_sparse_coo_tensor_with_dims_and_tensors", S(1), S(1), S([50, 8]),
                                    T([1, 24], I64), T([24, 8]), NONE, NONE)))
    c = cost_of(coalesce)
    # 30 entries in, 24 out: reads 30 * 8 + 30 * 8 * 4 = 1,200 B, writes 24 * 8 + 24 * 8 * 4 = 960 B;
    # 6 merged entries of 8 values: 48 adds
    assert (c.flops, c.bytes, c.written) == (48, 2_160, 960)


def test_complex_arithmetic_counts_real_operations():
    c64 = "c10::complex<float>"
    # rotary embeddings as a complex multiply: [2, 16, 2, 8] x [1, 16, 1, 8] complex64 -> 512 products of
    # 6 real operations = 3,072 FLOPs; bytes as for any elementwise op: 4,096 + 1,024 read, 4,096 written
    c = cost_of(op("aten::mul", T([2, 16, 2, 8], c64), T([1, 16, 1, 8], c64)))
    assert (c.flops, c.bytes, c.written) == (3_072, 9_216, 4_096)
    # add 2 per element, with an alpha 2 more; divide 11
    assert cost_of(op("aten::add", T([10], c64), T([10], c64), S(1))).flops == 20
    assert cost_of(op("aten::add_", T([10], c64), T([10], c64), S(2))).flops == 40
    assert cost_of(op("aten::div", T([10], c64), T([10], c64))).flops == 110
    # a real tensor times a complex scalar tensor is complex arithmetic too
    assert cost_of(op("aten::mul", T([10]), T([], c64))).flops == 60
    # real operands keep 1 per element
    assert cost_of(op("aten::mul", T([10]), T([10]))).flops == 10

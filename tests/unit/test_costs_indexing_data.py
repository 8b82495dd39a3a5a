"""Data-dependent indexing (nonzero, index, index_put, masked_select), cat by kernel names,
embedding backward, predicates and tril: the sizes the nested calls record, bytes by hand."""

from __future__ import annotations

from dataclasses import replace

from cost_calls import BF16, BOOL, F32, I32, I64, NONE, TL, S, T, op

import wlprof.cost  # noqa: F401  (registers every formula)
from wlprof.cost import cost_of, is_wrapper


def nested(name, *args):
    return op(name, *args)


def _with_children(call, *children):
    return replace(call, children=tuple(children))


def test_nonzero_counts_what_the_nested_resize_records():
    # CUDA: resize_ of the empty result to [ndim=1, count=47]: writes 47 int64 = 376; reads 100 bools
    c = cost_of(_with_children(op("aten::nonzero", T([100], BOOL)),
                               nested("aten::resize_", T([0], I64), S([1, 47]), NONE)))
    assert (c.flops, c.bytes, c.written) == (100, 100 + 376, 376)
    # CPU: as_strided_ of the resized [47, 2] result of a 2-d input: 94 int64 written
    c = cost_of(_with_children(op("aten::nonzero", T([10, 10], BOOL)),
                               nested("aten::as_strided_", T([47, 2], I64), S([47, 2]), S([2, 1]), NONE)))
    assert c.written == 94 * 8
    # a resize_ whose size is not recorded, an as_strided_ of a 1-d tensor and another op with a [2, 3] input
    # record no count: nothing written
    for child in (nested("aten::resize_", T([0], I64), NONE, NONE), nested("aten::as_strided_", T([6], I64),
                                                                          S([6]), S([1]), NONE),
                  nested("aten::empty", T([2, 3], I64))):
        assert cost_of(_with_children(op("aten::nonzero", T([100], BOOL)), child)).written == 0
    # nothing nested: the input read only, a lower bound
    c = cost_of(op("aten::nonzero", T([100], BOOL)))
    assert (c.bytes, c.written) == (100, 0)


def test_index_by_a_mask_and_by_integers():
    # x [100, 8] fp32 [mask]: nested nonzero (costed on its own), the source restrided to the result
    # [47, 8] and the positions reshaped (47 int64): reads 47*8*4 = 1504 + 376, writes 1504
    call = _with_children(op("aten::index", T([100, 8]), NONE),
                          nested("aten::nonzero", T([100], BOOL)),
                          nested("aten::as_strided", T([100, 8]), S([47, 8]), S([0, 1]), NONE),
                          nested("aten::reshape", T([47], I64), S([47, 1])))
    c = cost_of(call)
    assert (c.flops, c.bytes, c.written) == (0, 1504 + 376 + 1504, 1504)
    # x[i, j] with two int64 index tensors of 30: result [30]: reads 120 + 2 * 240, writes 120
    call = _with_children(op("aten::index", T([100, 8]), NONE),
                          nested("aten::as_strided", T([100, 8]), S([30]), S([0]), NONE),
                          nested("aten::reshape", T([30], I64), S([30])),
                          nested("aten::reshape", T([30], I64), S([30])))
    assert cost_of(call).bytes == 120 + 480 + 120
    # no nested calls (the list's dtype is not recorded): bytes unknown
    assert cost_of(op("aten::index", T([100, 8]), NONE)).bytes is None


def test_index_put():
    # x[idx] += ones([30, 8]) (accumulate): 240 adds; reads values 960 + indices 240 + destination 960,
    # writes 960
    call = _with_children(op("aten::_index_put_impl_", T([100, 8]), NONE, T([30, 8]), S(True), S(False)),
                          nested("aten::as_strided", T([100, 8]), S([30, 8]), S([0, 1]), NONE),
                          nested("aten::reshape", T([30], I64), S([30, 1])))
    c = cost_of(call)
    assert (c.flops, c.bytes, c.written) == (240, 960 + 240 + 960 + 960, 960)
    # x[idx] = 1.0 (a 0-d value): no adds; reads 4 + 240, writes 960
    call = _with_children(op("aten::_index_put_impl_", T([100, 8]), NONE, T([]), S(False), S(False)),
                          nested("aten::as_strided", T([100, 8]), S([30, 8]), S([0, 1]), NONE),
                          nested("aten::reshape", T([30], I32), S([30, 1])))
    assert cost_of(call).bytes == 4 + 120 + 960
    # CUDA's accumulating path sorts the linearized index and broadcasts the values with a nested
    # expand: x[idx] += v for x [3, 8], v [4, 8] fp32, idx [4]: 32 adds; reads v 128 + idx 32 + the
    # min(32, 24) = 24 touched destinations 96, writes 96
    call = _with_children(op("aten::_index_put_impl_", T([3, 8]), NONE, T([4, 8]), S(True), S(False)),
                          nested("aten::expand", T([4, 8]), S([4, 8]), S(False)),
                          nested("aten::reshape", T([4], I64), S([4])))
    c = cost_of(call)
    assert (c.flops, c.bytes, c.written) == (32, 128 + 32 + 96 + 96, 96)
    assert is_wrapper("aten::index_put_")


def test_assert_async_reads_its_one_element():
    c = cost_of(op("aten::_assert_async", T([], BOOL)))
    assert (c.flops, c.bytes, c.written) == (0, 1, 0)


def test_masked_select_lower_bound():
    # reads x 3200 + mask [100, 1] 100 (broadcast over 8 columns: 800 selects); writes counted 0
    c = cost_of(op("aten::masked_select", T([100, 8]), T([100, 1], BOOL)))
    assert (c.flops, c.bytes, c.written) == (800, 3300, 0)


def test_cat_element_size_from_the_kernel():
    ns = "at::native::(anonymous namespace)::"
    k = (f"void {ns}CatArrayBatchedCopy<{ns}OpaqueType<2u>, unsigned int, 4, 64, 64>(...)",)
    # three [4, 5] inputs, 2-byte elements: reads 60 * 2 = 120, writes 120
    c = cost_of(op("aten::cat", TL([4, 5], [4, 5], [4, 5]), S(0), kernels=k))
    assert (c.flops, c.bytes, c.written) == (0, 240, 120)
    assert cost_of(op("aten::cat", TL([4, 5], [4, 5]), S(0))).bytes is None  # no kernel names it


def test_cat_element_size_from_the_views_a_cpu_cat_takes_of_its_output():
    from dataclasses import replace

    # a CPU cat of int64 [2, 16] and [2, 1] at dim 1 narrows its [2, 17] output once per input, each
    # narrow (slice, as_strided) recording the output's dtype: 34 elements of 8 bytes read and written
    views = tuple(op(n, T([2, 17], I64), S(1), S(0), S(16)) for n in ("aten::narrow", "aten::slice", "aten::as_strided"))
    c = cost_of(replace(op("aten::cat", TL([2, 16], [2, 1]), S(1)), children=views))
    assert (c.flops, c.bytes, c.written) == (0, 544, 272)
    # views of two dtypes, or a nested copy_ (costed on its own): the element size stays unknown
    mixed = (views[0], op("aten::narrow", T([2, 17], F32), S(1), S(0), S(16)))
    assert cost_of(replace(op("aten::cat", TL([2, 16], [2, 1]), S(1)), children=mixed)).bytes is None
    copies = (*views, op("aten::copy_", T([2, 16], I64), T([2, 16], I64), S(False)))
    assert cost_of(replace(op("aten::cat", TL([2, 16], [2, 1]), S(1)), children=copies)).bytes is None


def test_chunk_cat_reads_every_input_and_writes_the_padded_output():
    k = ("void at::native::detail::chunk_cat_cuda_kernel<char, char>(char**, char*, long*, long*, long*, long*, "
         "long*, long*, long, long, long)",)
    # FSDP2's gradient flattening: a [1024, 2048] weight and a [1024] bias into a float [1, 2098176] out
    # (num_chunks 1): reads (2097152 + 1024) * 4 = 8392704, writes 2098176 * 4 = 8392704
    c = cost_of(op("aten::_chunk_cat", TL([1024, 2048], [1024]), S(0), S(1), T([1, 2098176]), kernels=k))
    assert (c.flops, c.bytes, c.written, c.dtype) == (0, 16785408, 8392704, "float32")
    # without out, 3 chunks of [10] and [4] at dim 0: ceil(10/3) + ceil(4/3) = 4 + 2 per chunk, 18 written;
    # the byte copy's element size needs the out tensor's dtype: unknown here
    c = cost_of(op("aten::_chunk_cat", TL([10], [4]), S(0), S(3), kernels=k))
    assert (c.flops, c.bytes) == (0, None)
    # a kernel that names its element types: float -> 14 * 4 read + 18 * 4 written
    k2 = ("void at::native::detail::chunk_cat_cuda_kernel<float, float>(...)",)
    c = cost_of(op("aten::_chunk_cat", TL([10], [4]), S(0), S(3), kernels=k2))
    assert (c.bytes, c.written) == (56 + 72, 72)


def test_embedding_dense_backward():
    # grad [4, 16, 32] fp32, indices [4, 16], 1000 rows: 2048 adds; reads 8192 + 512;
    # writes at most min(64, 1000) = 64 rows of 32 fp32: 8192
    c = cost_of(op("aten::embedding_dense_backward", T([4, 16, 32]), T([4, 16], I64), S(1000), S(-1), S(False)))
    assert (c.flops, c.bytes, c.written) == (2048, 8192 + 512 + 8192, 8192)
    assert is_wrapper("aten::embedding_backward")


def test_predicates_and_tril():
    # isneginf [4, 16] fp32: 64 comparisons; reads 256, writes 64 bools
    c = cost_of(op("aten::isneginf", T([4, 16])))
    assert (c.flops, c.bytes, c.written) == (64, 320, 64)
    # tril of a [32, 32] bool mask: 1024 selects; reads 1024, writes 1024
    c = cost_of(op("aten::tril", T([32, 32], BOOL), S(0)))
    assert (c.flops, c.bytes) == (1024, 2048)
    _ = (BF16, F32)


def test_where_with_one_argument_is_not_a_select():
    assert cost_of(op("aten::where", T([10], BOOL))) is None
    assert is_wrapper("aten::nonzero_numpy")


def test_item_reads_one_element():
    from wlprof.cost import is_view

    assert cost_of(op("aten::_local_scalar_dense", T([], F32))).bytes == 4
    assert is_wrapper("aten::item") and is_view("aten::as_strided_")


def test_in_place_views_and_axis_swaps_are_views():
    from wlprof.cost import is_view

    # they change a tensor's metadata only: no kernel, no FLOPs, no bytes
    for name in ("t_", "transpose_", "unsqueeze_", "squeeze_", "swapaxes", "swapaxes_", "swapdims", "swapdims_"):
        assert is_view(f"aten::{name}"), name
    assert not is_view("aten::transpose_copy")  # a copy is work


def test_coalesce_reads_the_nested_calls_for_its_entry_counts():
    # a sparse [1048576, 128] float gradient of 131072 entries (sparse_dim 1) coalesced into 123130:
    # the nested squeeze of the [1, 131072] indices and the result's [1, 123130] indices, [123130, 128] values
    sparse = op("aten::_coalesce", T([1048576, 128]))
    children = (op("aten::squeeze", T([1, 131072], I64), S(0)),
                op("aten::_sparse_coo_tensor_with_dims_and_tensors", S(1), S(1), S([1048576, 128]),
                   T([1, 123130], I64), T([123130, 128])))
    c = cost_of(_with_children(sparse, *children))
    # reads 131072 * 8 + 131072 * 128 * 4 = 68157440; writes 123130 * 8 + 123130 * 128 * 4 = 64027600;
    # FLOPs: (131072 - 123130) merged entries * 128 adds = 1016576
    assert (c.flops, c.bytes, c.written, c.dtype) == (1016576, 68157440 + 64027600, 64027600, "float32")
    assert cost_of(sparse) is None  # without its nested calls: unknown


def test_unique_reads_its_input_and_writes_the_inverse_it_is_asked_for():
    # _unique2(x [20] int64, sorted, return_inverse True, return_counts True): reads 160, writes the
    # 20 int64 inverse indices (160); the unique values and counts (data-dependent) count 0
    c = cost_of(op("aten::_unique2", T([20], I64), S(True), S(True), S(True)))
    assert (c.flops, c.bytes, c.written) == (0, 320, 160)
    assert cost_of(op("aten::_unique2", T([20], I64), S(True), S(False), S(True))).written == 0
    # unique_dim(x [6, 3], dim 0, sorted, return_inverse True, counts): one inverse index per row
    c = cost_of(op("aten::unique_dim", T([6, 3], I64), S(0), S(True), S(True), S(False)))
    assert (c.bytes, c.written) == (144 + 48, 48)


def test_searchsorted_and_bucketize():
    # searchsorted(sorted [9] fp32, values [20] fp32, out_int32 False, right False): ceil(log2(10)) = 4
    # comparisons per value, 80; reads 36 + 80, writes 20 int64 = 160
    c = cost_of(op("aten::searchsorted", T([9]), T([20]), S(False), S(False), NONE, NONE))
    assert (c.flops, c.bytes, c.written) == (80, 36 + 80 + 160, 160)
    # bucketize(values [4], boundaries [2], out_int32 True): ceil(log2(3)) = 2 each; int32 results
    c = cost_of(op("aten::bucketize", T([4]), T([2]), S(True), S(False)))
    assert (c.flops, c.bytes, c.written) == (8, 16 + 8 + 16, 16)


def test_multinomial_with_replacement_reads_rows_and_writes_samples():
    # multinomial(probs [8, 32000] fp32, 1, replacement True): 256,000 adds; reads 1,024,000 bytes,
    # writes 8 int64
    c = cost_of(op("aten::multinomial", T([8, 32000]), S(1), S(True), NONE))
    assert (c.flops, c.bytes, c.written) == (256_000, 1_024_064, 64)


def test_python_bitwise_operators():
    from wlprof.cost import is_wrapper

    assert all(is_wrapper(f"aten::{n}") for n in ("__and__", "__iand__", "__or__", "__ior__", "__xor__", "__ixor__"))
    # x << 1 over [4] int64: 4 shifts; reads 32 (and the 0-d scalar), writes 32
    c = cost_of(op("aten::__lshift__", T([4], I64), S(1)))
    assert (c.flops, c.written) == (4, 32)


def test_cat_element_size_from_the_op_that_reads_its_result_next():
    from dataclasses import replace

    # a CPU cat of a bf16 KV cache [2, 2, 16, 16] and the new [2, 2, 1, 16] at dim 2, then attention
    # reading the [2, 2, 17, 16] key: 2 * 2 * 17 * 16 = 1,088 elements of 2 bytes read and written
    cat = op("aten::cat", TL([2, 2, 16, 16], [2, 2, 1, 16]), S(2))
    sdpa = op("aten::_scaled_dot_product_flash_attention_for_cpu", T([2, 2, 1, 16], BF16), T([2, 2, 17, 16], BF16),
              T([2, 2, 17, 16], BF16))
    other = op("aten::cat", TL([2, 2, 16, 16], [2, 2, 1, 16]), S(2))  # the value's cat, untyped
    c = cost_of(replace(cat, following=(other, sdpa)))
    assert (c.flops, c.bytes, c.written) == (0, 4_352, 2_176)
    # nothing that follows reads the result's dims: unknown
    assert cost_of(replace(cat, following=(op("aten::relu", T([2, 2, 16, 16], BF16)),))).bytes is None
    # a negative dim: -1 over [4, 3] and [4, 5] makes [4, 8]
    c = cost_of(replace(op("aten::cat", TL([4, 3], [4, 5]), S(-1)), following=(op("aten::relu", T([4, 8], F32)),)))
    assert c.bytes == 2 * 32 * 4

"""Data-dependent indexing: nonzero, index_put, masked_select, unique, searches, sampling, embedding backward.

These ops' output sizes depend on the data (how many elements are nonzero, how many rows
an index touches). Where the trace records the size anyway, nested inside the call (the
count `nonzero` resizes its output to; the shape `index_put` restrides its destination
to), it is used; otherwise the bytes are a stated lower bound: the inputs read once and
nothing written.
"""

from __future__ import annotations

import math

from wlprof.cost.registry import VECTOR, Cost, OpCall, formula, register_wrapper

register_wrapper(
    "aten::argwhere",  # -> nonzero
    "aten::nonzero_numpy",  # torch.where(cond): -> nonzero
    "aten::index_put_", "aten::index_put",  # -> _index_put_impl_
    "aten::embedding_backward",  # -> embedding_dense_backward (or the sparse form)
    # a sparse gradient of the indices and grad_output rows as they are (views); with a padding_idx the
    # rows kept are selected by index ops nested inside
    "aten::embedding_sparse_backward",
    "aten::index_select_backward",  # -> zeros + index_add_
    "aten::item",  # -> _local_scalar_dense
    "aten::diff",  # -> narrow views and a sub (a cat first with prepend/append, a diff per order above 1)
)


def _nonzero_count(call: OpCall) -> int | None:
    """Elements of nonzero's int64 result, as its nested calls record them: CUDA resizes the empty
    result to [ndim, count] (`aten::resize_`, then transposes it); the CPU restrides the resized
    result (`aten::as_strided_` of a [count, ndim] tensor)."""
    for ch in call.children:
        if ch.name == "aten::resize_":
            size = ch.scalar(1)
            if isinstance(size, list) and all(isinstance(v, int) for v in size):
                return math.prod(size)
        if ch.name == "aten::as_strided_" and ch.dims and isinstance(ch.dims[0], tuple) and len(ch.dims[0]) == 2:
            return math.prod(ch.dims[0])
    return None


@formula("aten::nonzero", uses_children=True)
def nonzero(call: OpCall) -> Cost | None:
    # One comparison per element. Reads the input once; writes count * ndim int64 positions when the
    # trace records the count (see _nonzero_count), else nothing: the bytes are then a lower bound.
    # The count's device-to-host copy is a memcpy of its own.
    x = call.tensor(0)
    n = _nonzero_count(call)
    written = n * 8 if n is not None else 0
    return Cost(x.numel, x.nbytes_read + written, VECTOR, x.dtype, written=written)


@formula("aten::nonzero_static")
def nonzero_static(call: OpCall) -> Cost | None:
    # nonzero_static(self, size, fill_value): the result is [size, ndim] int64, padded with fill_value
    x, size = call.tensor(0), call.scalar(1)
    if not isinstance(size, int):
        return None
    written = size * max(len(x.dims), 1) * 8
    return Cost(x.numel, x.nbytes_read + written, VECTOR, x.dtype, written=written)


# a boolean mask with a 0-d value is run as one masked_fill_ nested inside: that op does the work
@formula("aten::_index_put_impl_", "aten::_unsafe_index_put", aux_children=True, uses_children=True,
         dispatches_to=("aten::masked_fill_",))
def index_put(call: OpCall) -> Cost | None:
    """self[indices] = values (accumulate: +=). As for `aten::index`, the index list is not
    recorded; the call's nested `aten::as_strided` of `self` (CPU), or `aten::expand` of the
    values (CUDA, accumulating), records the shape the values are scattered into and its
    `aten::reshape`s the index tensors. Writes one destination element
    per scattered element (accumulate reads it too and adds: 1 FLOP each); reads the values
    (broadcast: their stored elements) and the indices. Unknown without the nested calls."""
    dst, values = call.tensor(0), call.tensor(2)
    accumulate = call.scalar(3) is True
    shape, idx_bytes = None, 0
    for ch in call.children:
        if ch.name == "aten::as_strided" and shape is None and ch.dims and tuple(ch.dims[0]) == dst.dims:
            size = ch.scalar(1)
            if isinstance(size, list) and all(isinstance(v, int) for v in size):
                shape = size
        elif ch.name == "aten::reshape":
            t = ch.tensor(0)
            if t is not None and t.dtype in ("int64", "int32"):
                idx_bytes += t.nbytes_read
        elif ch.name == "aten::expand" and shape is None and values is not None and ch.dims \
                and tuple(ch.dims[0]) == values.dims:
            # CUDA's accumulate path (a sort by index) broadcasts the values to the scattered shape
            size = ch.scalar(1)
            if isinstance(size, list) and all(isinstance(v, int) for v in size):
                shape = size
    if shape is None or not idx_bytes:
        return Cost(None, None, VECTOR, dst.dtype)
    n = math.prod(shape)
    touched = min(n, dst.numel)
    written = touched * dst.itemsize
    reads = (values.nbytes_read if values is not None else 0) + idx_bytes + (written if accumulate else 0)
    return Cost(n if accumulate else 0, reads + written, VECTOR, dst.dtype, written=written)


@formula("aten::masked_select")
def masked_select(call: OpCall) -> Cost | None:
    # masked_select(self, mask): one select per (broadcast) element; reads both once. The result's
    # length is the mask's count, which the call does not record: nothing written is counted (a lower
    # bound). Where it runs as a count and an index nested inside (CPU), those are costed instead.
    x, m = call.tensor(0), call.tensor(1)
    n = max(x.numel, m.numel)
    return Cost(n, x.nbytes_read + m.nbytes_read, VECTOR, x.dtype, written=0)


@formula("aten::embedding_dense_backward", uses_children=True)
def embedding_dense_backward(call: OpCall) -> Cost | None:
    """(grad_output [..., D], indices [...], num_weights, padding_idx, scale_grad_by_freq).

    One add per grad_output element (rows summed into their embedding row). Reads grad_output
    and the indices; writes each embedding row touched once, at most min(rows, num_weights) of
    them (as the combining scatters count; the zeroed grad_weight is a nested fill_, costed on
    its own; sorting the indices by row is the implementation's, not compulsory). Where
    num_weights was not recorded (no `Concrete Inputs`, torch 1.13 and earlier), it is the
    rows of the [num_weights, D] grad_weight the call zero-fills directly inside; where that
    fill is not seen (nested deeper, in a zeros), the bytes are unknown and the FLOPs known."""
    g, idx = call.tensor(0), call.tensor(1)
    if g is None or idx is None or not g.dims:
        return None
    v = call.scalar(2)
    if v is None and not call.concrete:
        v = _zeroed_rows(call, g.dims[-1])
        if v is None:
            return Cost(g.numel, None, VECTOR, g.dtype)
    if not isinstance(v, int):
        return None
    d = g.dims[-1]
    rows = idx.numel
    written = min(rows, v) * d * g.itemsize
    return Cost(g.numel, g.nbytes_read + idx.nbytes_read + written, VECTOR, g.dtype, written=written)


def _zeroed_rows(call: OpCall, width: int) -> int | None:
    """The rows of the one 2-d tensor of `width` columns the call zero-fills inside (zero_ or fill_)."""
    rows = {c.dims[0][0] for c in call.children if c.name in ("aten::zero_", "aten::fill_") and c.dims
            and isinstance(c.dims[0], tuple) and len(c.dims[0]) == 2 and c.dims[0][1] == width}
    return rows.pop() if len(rows) == 1 else None


@formula("aten::_local_scalar_dense")
def local_scalar_dense(call: OpCall) -> Cost | None:
    # tensor.item(): one element read (on CUDA, a device-to-host copy of it: the op's only activity,
    # whose bytes count as written, as a memcpy's do)
    t = call.tensor(0)
    return Cost(0, t.itemsize, VECTOR, t.dtype, written=t.itemsize)


@formula("aten::_assert_async")
def assert_async(call: OpCall) -> Cost | None:
    # torch._assert_async(cond[, msg]): a device-side check of one element (an index bound, a value's
    # sign); nothing is written
    t = call.tensor(0)
    return Cost(0, t.itemsize * max(t.numel, 1), VECTOR, t.dtype, written=0)


@formula("aten::_coalesce", aux_children=True, uses_children=True, sparse_inputs=True)
def coalesce(call: OpCall) -> Cost | None:
    """Sort a sparse COO tensor's entries by index and sum the duplicates. The sparse input is
    recorded by its dense shape alone; the nested calls record the rest: the result is built by
    `aten::_sparse_coo_tensor_with_dims_and_tensors` (its indices [sparse_dim, nnz_out] and values
    [nnz_out, *dense]), and the input's [sparse_dim, nnz_in] indices are the first nested input of
    that shape. Reads the input's indices and values, writes the result's; one add per dense element
    of each merged duplicate. Unknown without the nested calls."""
    out_idx = out_val = None
    for ch in call.children:
        if ch.name == "aten::_sparse_coo_tensor_with_dims_and_tensors":
            out_idx, out_val = ch.tensor(3), ch.tensor(4)
    if out_idx is None or out_val is None or len(out_idx.dims) != 2 or not out_val.dims:
        return None
    sparse_dim, nnz_out = out_idx.dims
    nnz_in = None
    for ch in call.children:
        t = ch.tensor(0)
        if t is not None and t.dtype == "int64" and len(t.dims) == 2 and t.dims[0] == sparse_dim \
                and ch.name != "aten::_sparse_coo_tensor_with_dims_and_tensors":
            nnz_in = t.dims[1]
            break
    if nnz_in is None or nnz_in < nnz_out:
        return None
    dense = math.prod(out_val.dims[1:])
    size = out_val.itemsize
    read = nnz_in * sparse_dim * 8 + nnz_in * dense * size
    written = nnz_out * sparse_dim * 8 + nnz_out * dense * size
    return Cost((nnz_in - nnz_out) * dense, read + written, VECTOR, out_val.dtype, written=written)


@formula("aten::_unique2", "aten::_unique", "aten::unique_consecutive", "aten::unique_dim",
         "aten::unique_dim_consecutive", aux_children=True)
def unique(call: OpCall) -> Cost | None:
    # _unique2(self, sorted, return_inverse, return_counts) and its kin: reads the input once and writes
    # the inverse (one int64 per element) when asked for; the unique values and counts are as many as
    # the data has distinct values, counted 0: a lower bound. Comparisons are not counted. A CPU
    # unique sorts with nested ops (costed on their own): the pass over the sorted values is its own.
    x = call.tensor(0)
    if x is None:
        return None
    inverse_at = {"aten::_unique": 2, "aten::_unique2": 2, "aten::unique_consecutive": 1,
                  "aten::unique_dim": 3, "aten::unique_dim_consecutive": 2}[call.name]
    rows = x.numel
    if call.name.startswith("aten::unique_dim"):
        d = call.scalar(1)
        rows = x.dims[d % len(x.dims)] if isinstance(d, int) and x.dims else x.numel
    written = rows * 8 if call.scalar(inverse_at) is True else 0
    return Cost(0, x.nbytes_read + written, VECTOR, x.dtype, written=written)


@formula("aten::searchsorted", "aten::bucketize")
def searchsorted(call: OpCall) -> Cost | None:
    # searchsorted(sorted [.., m], values [.., n], out_int32, right, ...) and bucketize(values, boundaries
    # [m], out_int32, right): a binary search per value, ceil(log2(m + 1)) comparisons each; reads both,
    # writes one int64 (int32 with out_int32) per value
    first, second = call.tensor(0), call.tensor(1)
    seq, values = (second, first) if call.name == "aten::bucketize" else (first, second)
    if seq is None or not seq.dims:
        return None
    if values is None:  # a Python number searched: one value
        n, read = 1, 0
    else:
        n, read = values.numel, values.nbytes_read
    width = 4 if call.scalar(2) is True else 8
    flops = n * max(1, math.ceil(math.log2(seq.dims[-1] + 1)))
    return Cost(flops, seq.nbytes_read + read + n * width, VECTOR, seq.dtype, written=n * width)


@formula("aten::multinomial")
def multinomial(call: OpCall) -> Cost | None:
    # multinomial(probs [.., k], num_samples, replacement): a cumulative sum over each row (one add per
    # probability), reads the probabilities, writes num_samples int64 per row. Where it samples through
    # nested ops (without replacement: exponential_, div and topk, costed on their own) it dispatches.
    p, samples = call.tensor(0), call.scalar(1)
    if p is None or not p.dims or not isinstance(samples, int):
        return None
    rows = p.numel // p.dims[-1] if p.dims[-1] else 0
    written = rows * samples * 8
    return Cost(p.numel, p.nbytes_read + written, VECTOR, p.dtype, written=written)


def _repeat_output(call: OpCall) -> int | None:
    """Elements of repeat_interleave's result: its `output_size` where given, else the size of the
    empty result it allocates once it has read the total from the device (a nested `aten::empty`)."""
    n = call.scalar(1)
    if isinstance(n, int) and not isinstance(n, bool):
        return n
    for ch in reversed(call.children):
        size = ch.scalar(0) if ch.name == "aten::empty" else None
        if isinstance(size, list) and len(size) == 1 and isinstance(size[0], int):
            return size[0]
    return None


@formula("aten::repeat_interleave", aux_children=("aten::cumsum", "aten::ge", "aten::all"), uses_children=True,
         dispatches_to=("aten::clone",))
def repeat_interleave(call: OpCall) -> Cost | None:
    """repeat_interleave(repeats [L], output_size?): index i written repeats[i] times. The forms that
    take a tensor to repeat dispatch to this one and an index_select (nested, of their own name). Reads
    the repeats and their int64 cumulative sum (a nested cumsum and the check that no repeat is
    negative, costed on their own), writes the result at the repeats' dtype; its length is the data's,
    recorded as `output_size` or as the size of the nested `aten::empty` result. No FLOPs. Unknown
    bytes without either. The overloads with a tensor to repeat (four inputs) dispatch to this one
    and an index_select, or with an int repeat to a copy of an expanded view."""
    r = call.tensor(0)
    if r is None or len(call.types) > 2:
        return None
    n = _repeat_output(call)
    if n is None:
        return Cost(0, None, VECTOR, r.dtype)
    written = n * r.itemsize
    return Cost(0, r.nbytes_read + r.numel * 8 + written, VECTOR, r.dtype, written=written)


@formula("aten::_convert_indices_from_coo_to_csr")
def coo_to_csr(call: OpCall) -> Cost | None:
    # _convert_indices_from_coo_to_csr(rows [nnz] sorted, size, out_int32): the size + 1 row offsets
    # of a CSR matrix, found by a pass over the sorted row indices; reads them, writes the offsets
    # (int32 with out_int32, else int64). No FLOPs (comparisons are not counted).
    rows, size = call.tensor(0), call.scalar(1)
    if rows is None or not isinstance(size, int):
        return None
    written = (size + 1) * (4 if call.scalar(2) is True else 8)
    return Cost(0, rows.nbytes_read + written, VECTOR, rows.dtype, written=written)


@formula("aten::_convert_indices_from_csr_to_coo")
def csr_to_coo(call: OpCall) -> Cost | None:
    # _convert_indices_from_csr_to_coo(crow [n + 1], col [nnz], out_int32, transpose): the [2, nnz] COO
    # indices; reads both, writes 2 x nnz (int32 with out_int32, else int64). No FLOPs.
    crow, col = call.tensor(0), call.tensor(1)
    if crow is None or col is None:
        return None
    written = 2 * col.numel * (4 if call.scalar(2) is True else 8)
    return Cost(0, crow.nbytes_read + col.nbytes_read + written, VECTOR, col.dtype, written=written)


@formula("aten::_validate_compressed_sparse_indices")
def validate_compressed_indices(call: OpCall) -> Cost | None:
    # _validate_compressed_sparse_indices(is_crow, compressed [n + 1], plain [nnz], cdim, dim, nnz): a
    # check of a CSR/CSC tensor's invariants (offsets sorted, indices in range); reads both index
    # tensors, writes nothing. One comparison per element.
    ts = call.tensors
    if not ts:
        return None
    return Cost(sum(t.numel for t in ts), sum(t.nbytes_read for t in ts), VECTOR, ts[0].dtype, written=0)

"""Gather/scatter, indexing, concatenation, sorting and counting ops.

Data movement does no arithmetic; combining scatters count one add per source element,
sorts and top-k their comparisons (stated at each formula; `docs/costs.md`).
"""

from __future__ import annotations

import math
import re

from wlprof.cost import dtypes
from wlprof.cost.kernel_types import opaque_size
from wlprof.cost.registry import VECTOR, Cost, OpCall, formula, register_wrapper

# pad -> constant_pad_nd (or a reflection/replication/circular pad); constant_pad_nd fills a new
# output with the value (fill_) and copies the input into its middle (copy_), or, where every pad
# is negative, clones a narrowed view (copy_): the nested ops are costed.
register_wrapper("aten::pad", "aten::constant_pad_nd")
# Composites whose work is nested: repeat copies the input into an unfolded view of its result (copy_);
# select_backward and slice_backward zero a gradient and copy into its slice (zeros, copy_); quantile
# sorts, gathers and lerps; one_hot checks the range (aminmax) and scatters ones into zeros (scatter_).
# gather_backward zeros a gradient and scatter_adds into it (new_zeros, scatter_add_).
register_wrapper("aten::repeat", "aten::select_backward", "aten::slice_backward", "aten::quantile",
                 "aten::nanquantile", "aten::one_hot", "aten::gather_backward")


def _row_numel(t, dim) -> int:
    nd = len(t.dims)
    d = int(dim) % nd if nd else 0
    return t.numel // t.dims[d] if nd and t.dims[d] else 0


# Ops that run index_select along dim 0 (rows of a table)
_ROW_SELECTORS = frozenset(("aten::embedding",))


@formula("aten::index_select", uses_parent=True)
def index_select(call: OpCall) -> Cost | None:
    # index_select(self, dim, index): |index| slices of `self` along `dim` are copied. A dim that was not
    # recorded (no `Concrete Inputs`, torch 1.13 and earlier) is 0 for a 1-d source or inside an embedding.
    src, dim, idx = call.tensor(0), call.scalar(1), call.tensor(2)
    if dim is None and not call.concrete and src is not None and (
            len(src.dims) == 1 or (call.parent is not None and call.parent.name in _ROW_SELECTORS)):
        dim = 0
    if src is None or idx is None or not isinstance(dim, int):
        return None
    out = idx.numel * _row_numel(src, dim)
    return Cost(0, out * src.itemsize + idx.nbytes_read + out * src.itemsize, VECTOR, src.dtype,
                written=out * src.itemsize)


@formula("aten::embedding")
def embedding(call: OpCall) -> Cost | None:
    # embedding(weight[V, D], indices): |indices| rows of D. On CUDA it runs as
    # index_select (then gather): a dispatcher there, costed once on the innermost op.
    w, idx = call.tensor(0), call.tensor(1)
    out = idx.numel * (w.numel // w.dims[0])
    return Cost(0, out * w.itemsize + idx.nbytes_read + out * w.itemsize, VECTOR, w.dtype, written=out * w.itemsize)


@formula("aten::gather")
def gather(call: OpCall) -> Cost | None:
    # gather(self, dim, index, sparse_grad[, out]): one element read per index element.
    # CUDA's index_select gathers with an index expanded by a zero stride: stored size counts.
    src, idx = call.tensor(0), call.tensor(2)
    n = idx.numel
    return Cost(0, n * src.itemsize + idx.nbytes_read + n * src.itemsize, VECTOR, src.dtype, written=n * src.itemsize)


def _scatter(call: OpCall, combine: bool) -> Cost:
    # scatter*(self, dim, index, src | value[, reduce]); self is updated (in-place) or its
    # copy is (functional: the copy is a nested aten::copy_, costed on its own).
    # Only src's elements at the index positions are read (src may be larger than index).
    dst, idx = call.tensor(0), call.tensor(2)
    src = call.tensor(3)
    n = idx.numel
    touched = min(n, dst.numel)
    reads = idx.nbytes_read + (min(n, src.stored) * src.itemsize if src is not None else 0)
    if combine:
        return Cost(n, reads + 2 * touched * dst.itemsize, VECTOR, dst.dtype, written=touched * dst.itemsize)
    return Cost(0, reads + touched * dst.itemsize, VECTOR, dst.dtype, written=touched * dst.itemsize)


@formula("aten::scatter_add_", "aten::scatter_add", aux_children=True)
def scatter_add(call: OpCall) -> Cost | None:
    return _scatter(call, combine=True)


@formula("aten::scatter_reduce_", "aten::scatter_reduce", aux_children=True)
def scatter_reduce(call: OpCall) -> Cost | None:
    return _scatter(call, combine=True)


@formula("aten::scatter_", "aten::scatter", aux_children=True)
def scatter(call: OpCall) -> Cost | None:
    # scatter(self, dim, index, src, reduce=None): with a reduce it combines values.
    reduce = call.scalar(4) if len(call.types) > 4 else None
    return _scatter(call, combine=isinstance(reduce, str) and reduce != "")


@formula("aten::index_add_", "aten::index_add")
def index_add(call: OpCall) -> Cost | None:
    # index_add_(self, dim, index, source, alpha): one add per source element (and a
    # multiply when alpha != 1); each destination row touched is read and written.
    # No nested op is its own work: on the CPU it runs a nested scatter_add_ (costed there,
    # this op a dispatcher), and out of place it copies self in (a support op) and adds.
    dst, dim, idx, src = call.tensor(0), call.scalar(1), call.tensor(2), call.tensor(3)
    alpha = call.scalar(4)
    n = src.numel
    touched = min(n, dst.numel)
    flops = n * (2 if isinstance(alpha, (int, float)) and alpha != 1 else 1)
    _ = dim
    return Cost(flops, idx.nbytes_read + src.nbytes_read + 2 * touched * dst.itemsize, VECTOR, dst.dtype,
                written=touched * dst.itemsize)


@formula("aten::segment_reduce")
def segment_reduce(call: OpCall) -> Cost | None:
    # segment_reduce(data, reduce, lengths?, indices?, offsets?, axis, unsafe, initial): the slices
    # of `data` along `axis` reduced in segments given by `lengths` (one per segment) or `offsets`
    # (segments + 1 bounds). One combine per data element; `reduce` is a string the profiler does not
    # record, so a mean's per-output divide is counted only where it is. Reads data and the segment
    # bounds, writes one slice per segment.
    data, lengths, offsets = call.tensor(0), call.tensor(2), call.tensor(4)
    axis = call.scalar(5) or 0
    if not data.dims:
        return None
    d = int(axis) % len(data.dims)
    if offsets is not None and offsets.dims:
        segments, bounds = offsets.dims[-1] - 1, offsets
    elif lengths is not None and lengths.dims:
        segments, bounds = lengths.dims[-1], lengths
    else:
        return None
    slice_numel = data.numel // data.dims[d] if data.dims[d] else 0
    out = max(segments, 0) * slice_numel
    flops = data.numel + (out if call.scalar(1) == "mean" else 0)
    return Cost(flops, data.nbytes_read + bounds.nbytes_read + out * data.itemsize, VECTOR, data.dtype,
                written=out * data.itemsize)


@formula("aten::index_copy_", "aten::index_copy", "aten::index_fill_", aux_children=True)
def index_copy(call: OpCall) -> Cost | None:
    dst, dim, idx = call.tensor(0), call.scalar(1), call.tensor(2)
    src = call.tensor(3)
    n = idx.numel * _row_numel(dst, dim)
    reads = idx.nbytes_read + (src.nbytes_read if src is not None else 0)
    return Cost(0, reads + n * dst.itemsize, VECTOR, dst.dtype, written=n * dst.itemsize)


# ops a CPU cat runs inside itself on its output (views of it): their input's dtype is the cat's
_CAT_OUTPUT_VIEWS = frozenset({"aten::narrow", "aten::slice", "aten::as_strided", "aten::select"})


def _cat_output(call: OpCall) -> tuple[int, ...] | None:
    """The dims of a cat's result (legacy empty [0] inputs skipped), or None."""
    dims, dim = (call.dims[0] if call.dims else None), call.scalar(1)
    if not isinstance(dims, tuple) or not all(isinstance(d, tuple) for d in dims) or not isinstance(dim, int):
        return None
    shapes = [d for d in dims if d != (0,)]
    if not shapes or not shapes[0] or any(len(d) != len(shapes[0]) for d in shapes):
        return None
    d = dim % len(shapes[0])
    out = list(shapes[0])
    out[d] = sum(s[d] for s in shapes)
    return tuple(out)


def _cat_itemsize(call: OpCall) -> int | None:
    """Bytes per element of a cat: CUDA's batched copy kernel names it (CatArrayBatchedCopy<OpaqueType<2u>,
    ...>); on a CPU, the views of the output the cat takes inside itself record its dtype (all of them
    agreeing), or else the first of the ops run next on its thread that reads a tensor of the result's dims
    (its consumer: attention reading the key a KV cache's cat grew). None where none says."""
    size = opaque_size(call.kernels, "CatArrayBatchedCopy")
    if size is not None:
        return size
    if call.children:
        if any(ch.name not in _CAT_OUTPUT_VIEWS for ch in call.children):
            return None  # it copies input by input (copy_ ops nested), each costed on its own
        sizes = {t.itemsize for ch in call.children if (t := ch.tensor(0)) is not None}
        return sizes.pop() if len(sizes) == 1 and 0 not in sizes else None
    out = _cat_output(call)
    if out is None or math.prod(out) == 0:
        return None
    for nxt in call.following:
        for t in nxt.tensors:
            if t.dims == out:
                return t.itemsize or None
    return None


@formula("aten::cat", "aten::_cat", uses_kernels=True, uses_children=True, uses_next=True)
def cat(call: OpCall) -> Cost | None:
    # cat(tensors, dim): every input read once, the output written once; FLOPs 0. The trace records
    # a TensorList's shapes but not its dtype (see _cat_itemsize); without it (or a cat that copies
    # input by input with copy_ ops nested, each costed on its own) the bytes are unknown.
    # An empty list is one the profiler did not expand (torch 2.1 and earlier record no TensorList's
    # shapes; later versions none of more than 30 tensors): cat refuses an empty list, so its sizes are unknown.
    size = _cat_itemsize(call)
    dims = call.dims[0] if call.dims else None
    if size is None or not isinstance(dims, tuple) or not dims or not all(isinstance(d, tuple) for d in dims):
        return Cost(0, None, VECTOR, None)
    n = sum(math.prod(d) for d in dims if d != (0,))  # legacy empty [0] inputs are skipped by cat
    return Cost(0, 2 * n * size, VECTOR, None, written=n * size)


_CHUNK_CAT = re.compile(r"chunk_cat_cuda_kernel<\s*([\w:]+(?: [\w:]+)?)\s*,\s*([\w:]+(?: [\w:]+)?)\s*>")


def _chunk_cat_itemsize(kernels, out) -> int | None:
    """Bytes per input element of a `_chunk_cat`: CUDA's kernel names its source and destination
    element types (`chunk_cat_cuda_kernel<char, char>`: a byte copy, the inputs are of the
    output's dtype); None where no kernel says (a CPU trace)."""
    for name in kernels:
        m = _CHUNK_CAT.search(name)
        if m:
            src, dst = m.group(1), m.group(2)
            if src == dst and out is not None:
                return out.itemsize
            return dtypes.element_size(src) or None
    return None


@formula("aten::_chunk_cat", uses_kernels=True)
def chunk_cat(call: OpCall) -> Cost | None:
    # _chunk_cat(tensors, dim, num_chunks[, out]): each tensor split into num_chunks along dim
    # (its trailing size padded up to a multiple of num_chunks), the chunks interleaved into one
    # output: every input read once, the whole output (padding included) written once; FLOPs 0.
    # The TensorList's dtype is not recorded: the element size comes from the kernel's name.
    dims = call.dims[0] if call.dims else None
    if not isinstance(dims, tuple) or not dims or not all(isinstance(d, tuple) for d in dims):
        return None
    dim, chunks = call.scalar(1), call.scalar(2)
    out = call.tensor(3)
    if not isinstance(dim, int) or not isinstance(chunks, int) or chunks < 1:
        return None
    if out is not None:
        written = out.numel
    else:
        d0 = dim % len(dims[0]) if dims[0] else 0
        lead = math.prod(dims[0][:d0])
        written = lead * chunks * sum(-(-math.prod(d[d0:]) // chunks) for d in dims)
    size = _chunk_cat_itemsize(call.kernels, out)
    out_size = out.itemsize if out is not None else size
    if size is None or not out_size:
        return Cost(0, None, VECTOR, None)
    read = sum(math.prod(d) for d in dims) * size
    return Cost(0, read + written * out_size, VECTOR, out.dtype if out is not None else None,
                written=written * out_size)


@formula("aten::topk")
def topk(call: OpCall) -> Cost | None:
    # topk(self, k, dim, largest, sorted): one comparison per element to select, and
    # k*ceil(log2 k) per slice to sort the k winners. Writes k values and int64 indices.
    t, k, dim = call.tensor(0), int(call.scalar(1)), call.scalar(2)
    dim = -1 if dim is None else dim
    length = t.dims[int(dim) % len(t.dims)] if t.dims else 1
    slices = t.numel // length if length else 0
    flops = t.numel + slices * k * max(0, math.ceil(math.log2(k))) if k > 0 else 0
    out = slices * k * (t.itemsize + 8)
    return Cost(flops, t.nbytes_read + out, VECTOR, t.dtype, written=out)


@formula("aten::sort", aux_children=True)
def sort(call: OpCall) -> Cost | None:
    # sort(self, dim, descending) or sort.stable(self, stable, dim, descending):
    # n*ceil(log2 L) comparisons for slices of length L; writes values and int64 indices.
    # On CUDA the values are first copied into the output by a nested (auxiliary) copy_.
    t = call.tensor(0)
    dim = call.scalar(2) if len(call.types) >= 4 else call.scalar(1)
    dim = -1 if dim is None or isinstance(dim, bool) else dim
    length = t.dims[int(dim) % len(t.dims)] if t.dims else 1
    flops = t.numel * max(0, math.ceil(math.log2(length))) if length > 1 else 0
    out = t.numel * (t.itemsize + 8)
    return Cost(flops, t.nbytes_read + out, VECTOR, t.dtype, written=out)


@formula("aten::bincount", aux_children=True)
def bincount(call: OpCall) -> Cost | None:
    # bincount(self, weights?, minlength): one increment per element (a multiply-add with
    # weights). The number of bins is max(self)+1, data the trace does not hold: only
    # `minlength` bins are counted as written, a lower bound. On CUDA it runs min/max
    # reductions first (auxiliary, costed on their own). The counts are int64; weighted
    # sums are float32 for float32 weights and float64 for any other weights (CPU and CUDA).
    t, w = call.tensor(0), call.tensor(1)
    minlength = call.scalar(2) or 0
    out_dtype = None if w is None else ("float32" if w.dtype == "float32" else "float64")
    out_size = dtypes.size_of_dtype(out_dtype) if out_dtype else 8
    flops = t.numel * (2 if w is not None else 1)
    reads = t.nbytes_read + (w.nbytes_read if w is not None else 0)
    return Cost(flops, reads + int(minlength) * out_size, VECTOR, out_dtype, written=int(minlength) * out_size)


@formula("aten::histc", aux_children=True)
def histc(call: OpCall) -> Cost | None:
    # histc(self, bins, min, max): per element subtract, scale, increment = 3.
    t, bins = call.tensor(0), int(call.scalar(1) or 100)
    return Cost(3 * t.numel, t.nbytes_read + bins * t.itemsize, VECTOR, t.dtype, written=bins * t.itemsize)


@formula("aten::index", "aten::_unsafe_index", aux_children=True, uses_children=True)
def index(call: OpCall) -> Cost | None:
    """self[indices]: advanced indexing by integer tensors or boolean masks, any number of them.

    The profiler records the index list (`Tensor?[]`) as '' with no shapes. What the trace
    does record is nested inside the call: the source restrided to the result's shape
    (`aten::as_strided` of `self` with the result's sizes) and each index tensor reshaped
    for the kernel (`aten::reshape` of an integer tensor: its shape and dtype; a boolean
    mask appears as the int64 positions its nested `aten::nonzero` produced, costed there).
    Bytes: one source element read and one result element written per result element (a
    gather, as `gather` counts), each index tensor read once. Without those nested calls
    (another torch version) the sizes are unknown; an old trace that recorded the list's
    shapes still lacks their dtype (int64, int32 or a mask): bytes unknown, never guessed.
    Nested ops (nonzero, a dtype conversion of the indices) are auxiliary, costed on their own.
    """
    src = call.tensor(0)
    out_shape, idx_bytes = None, 0
    for ch in call.children:
        if ch.name == "aten::as_strided" and out_shape is None and ch.dims and tuple(ch.dims[0]) == src.dims:
            size = ch.scalar(1)
            if isinstance(size, list) and all(isinstance(v, int) for v in size):
                out_shape = size
        elif ch.name == "aten::reshape":
            t = ch.tensor(0)
            if t is not None and t.dtype in _INDEX_DTYPES:
                idx_bytes += t.nbytes_read
    if out_shape is None or not idx_bytes:
        return Cost(0, None, VECTOR, src.dtype)
    n = math.prod(out_shape)
    written = n * src.itemsize
    return Cost(0, n * src.itemsize + idx_bytes + written, VECTOR, src.dtype, written=written)


_INDEX_DTYPES = {"int64", "int32"}


def _padded_dims(x, padding) -> list[int] | None:
    """The dims of `x` padded by `padding` ([left, right] for the last dim, then the one before, ...)."""
    if not isinstance(padding, list) or len(padding) % 2 or len(padding) // 2 > len(x.dims) \
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in padding):
        return None
    dims = list(x.dims)
    for k in range(len(padding) // 2):
        dims[-1 - k] += padding[2 * k] + padding[2 * k + 1]
    return dims if all(d >= 0 for d in dims) else None


_PADS = [f"aten::{kind}_pad{n}d" for kind in ("reflection", "replication") for n in (1, 2, 3)]


@formula(*_PADS)
def reflection_pad(call: OpCall) -> Cost | None:
    # reflection_pad2d(self, padding) and the replication pads: every output element copied from the input
    # element it mirrors or repeats; reads the input once, writes the padded output once, no arithmetic
    x = call.tensor(0)
    dims = _padded_dims(x, call.scalar(1))
    if dims is None:
        return None
    written = math.prod(dims) * x.itemsize
    return Cost(0, x.nbytes_read + written, VECTOR, x.dtype, written=written)


@formula(*(f"{n}_backward" for n in _PADS))
def reflection_pad_backward(call: OpCall) -> Cost | None:
    # reflection_pad2d_backward(grad_output, self, padding): each grad_output element added into the input
    # element it came from (1 add each, as the combining scatters count); reads grad_output, writes the
    # gradient of `self` (its zero fill, where nested, is a zero_ of its own); `self` gives only the size
    g, x = call.tensor(0), call.tensor(1)
    if g is None or x is None:
        return None
    written = x.numel * g.itemsize
    return Cost(g.numel, g.nbytes_read + written, VECTOR, g.dtype, written=written)


@formula("aten::unfold_backward")
def unfold_backward(call: OpCall) -> Cost | None:
    """unfold_backward(grad_in, input_sizes, dim, size, step): the gradient of `x.unfold(dim, size, step)`,
    each window's elements added back where they came from (overlap-add: istft runs it). grad_in is
    [..., windows, ..., size]; one add per element of it. Reads grad_in (a broadcast one at its stored
    size), and reads and writes each input element a window covers, at most the input's size (as the
    combining scatters count; the zeroed result is a nested zero_, costed on its own)."""
    g, sizes, dim, size, step = call.tensor(0), call.scalar(1), call.scalar(2), call.scalar(3), call.scalar(4)
    if g is None or not isinstance(sizes, list) or not sizes or not all(isinstance(v, int) for v in (dim, size, step)):
        return None
    if not all(isinstance(v, int) for v in sizes) or step <= 0 or len(g.dims) != len(sizes) + 1:
        return None
    d = dim % len(sizes)
    windows = g.dims[d]
    span = min(sizes[d], (windows - 1) * step + size if step <= size else windows * size)
    covered = math.prod(sizes) // max(sizes[d], 1) * span
    written = covered * g.itemsize
    return Cost(g.numel, g.nbytes_read + 2 * written, VECTOR, g.dtype, written=written)

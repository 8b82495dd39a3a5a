"""What decides an op call's time, from its recorded shapes and its workload's data facts.

Every call gets an op class (`CLASSES`), a group (the calls whose times are comparable:
op, dtypes, memory layout, reduced dims), coordinates (log2 of the sizes that set its
time within the group) and the physical quantities its base time needs. Nothing here
reads a duration: the measured time of a call never enters its own features (a stated
cost split by duration would, so costs are recomputed from the shapes).

Shapes are parsed once per distinct call (op, dims, dtypes, strides, scalars): a step of
a thousand calls has a few dozen distinct ones.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import pandas as pd

from wlprof.cost.dtypes import INTEGER_SPELLINGS

try:  # orjson parses the recorded JSON 5-10x faster; the standard module where it is missing
    from orjson import loads as _loads
except ImportError:  # pragma: no cover
    from json import loads as _loads

CLASSES = ("gemm", "grouped", "spmm", "index", "compute", "norm", "scan", "memory", "link", "other")
# a copy across the host link (the ops table's `transfer`) by an op that only copies: bounded by that link, not by
# device memory (an op that reads a count or a value back beside its kernels stays in its class)
LINK_TRANSFERS = frozenset(("HtoD", "DtoH", "HtoD pageable", "DtoH pageable"))
COPY_OPS = frozenset(("aten::copy_", "aten::_copy_from", "aten::_copy_from_and_resize"))
NCOORDS = 5  # coordinates per call (log2 sizes), zero-padded per class

GEMM_OPS = frozenset("aten::" + n for n in "mm addmm bmm baddbmm mv addmv addmv_ _scaled_mm".split())
INDEX_OPS = frozenset("aten::" + n for n in (
    "gather scatter scatter_ scatter_add scatter_add_ scatter_reduce scatter_reduce_ index_add index_add_ "
    "index_copy index_copy_ index_fill_ index_select index index_put_ _index_put_impl_ segment_reduce "
    "_segment_reduce_backward embedding take put_ masked_select masked_scatter_ masked_fill_ nonzero "
    "unique_consecutive _unique2 unique_dim repeat_interleave bincount histc searchsorted "
    "_convert_indices_from_coo_to_csr _convert_indices_from_csr_to_coo").split())
# ops whose recorded scalars choose what they compute (the reduced dim, k): part of the group
DIM_OPS = frozenset("aten::" + n for n in (
    "sum mean amax amin max min prod all any norm linalg_vector_norm std var softmax _softmax log_softmax "
    "_log_softmax cumsum cumprod topk sort argsort argmax argmin logsumexp _log_softmax_backward_data "
    "_softmax_backward_data kthvalue median mode").split())
# ops that wait for the device (their output size is data, or they read a value back)
SYNC_OPS = frozenset("aten::" + n for n in (
    "nonzero _local_scalar_dense item masked_select _unique2 unique_consecutive unique_dim "
    "repeat_interleave").split())
INDEX_TYPES = INTEGER_SPELLINGS


def _is_norm(name: str) -> bool:
    """A normalization layer, forward or backward (batch, layer, group, RMS norm): a reduction per channel
    or row and a pass over it, slower per byte than a stream, so a class of its own."""
    op = name.removeprefix("aten::")
    return name not in DIM_OPS and ("batch_norm" in op or op.endswith(("_norm", "_norm_backward")))


def _odd_rows(k: float, n: float, itemsize: int) -> str:
    """'|odd' where a GEMM's rows of K or N elements are not 16-byte multiples (cuBLAS cannot use its aligned
    kernels), else ''."""
    return "|odd" if (k * itemsize) % 16 or (n * itemsize) % 16 else ""


def _log2(x: float) -> float:
    return math.log2(x) if x and x > 0 else 0.0


def _contiguous(dims, strides) -> bool:
    expect = 1
    for d, s in zip(reversed(dims), reversed(strides), strict=True):
        if d != 1 and s != expect:
            return False
        expect *= d
    return True


def _layout(dims, strides) -> str:
    """'c' contiguous, 'b' broadcast (a zero stride), 't' any other strides, 's' sparse (no strides)."""
    if not isinstance(strides, list) or len(strides) != len(dims):
        return "s" if dims else "-"
    if any(s == 0 and d != 1 for d, s in zip(dims, strides, strict=True)):
        return "b"
    return "c" if _contiguous(dims, strides) else "t"


def _matrix_layout(strides) -> str:
    """A GEMM operand: 'n' row-major (last stride 1), 't' column-major, 's' sparse or unknown."""
    if not isinstance(strides, list) or len(strides) < 2:
        return "s"
    return "n" if strides[-1] == 1 else "t"


def _stored(dims, strides) -> int:
    if not isinstance(strides, list) or len(strides) != len(dims):
        return math.prod(dims)
    return math.prod(d for d, s in zip(dims, strides, strict=True) if s != 0)


@lru_cache(maxsize=200_000)
def parse_call(name: str, dims_s: str, types_s: str, strides_s: str, concrete_s: str) -> tuple:
    """(class, group, relaxed group, coords, quantities) of one distinct call.

    quantities: dict of M, N, K, B (GEMMs), itemsize, flops and bytes by the cost registry's
    formula (NaN where it cannot tell), the first tensor's stored elements.
    """
    from wlprof.cost import OpCall, cost_of
    from wlprof.cost.dtypes import canonical, element_size
    from wlprof.cost.inductor import template_gemm_shape
    from wlprof.cost.registry import MATRIX

    def load(s):
        try:
            v = _loads(s) if isinstance(s, str) and s else []
        except ValueError:
            v = []
        return v if isinstance(v, list) else []

    dims, types, strides, concrete = load(dims_s), load(types_s), load(strides_s), load(concrete_s)
    tensors = []  # (position, dims, type, strides)
    for i, t in enumerate(types):
        if element_size(t) is None:
            continue
        d = dims[i] if i < len(dims) else []
        if not isinstance(d, list) or not all(isinstance(x, int) for x in d):
            continue
        st = strides[i] if i < len(strides) else None
        ok = isinstance(st, list) and len(st) == len(d) and all(isinstance(x, int) for x in st)
        tensors.append((i, d, t, st if ok else None))  # None: a sparse tensor (recorded without strides)
    if name in SCALAR_OPERAND_OPS and any(math.prod(d) > 1 for _, d, _, _ in tensors):
        # a 0-d operand beside a tensor (a Python number torch wrapped as a float64 or int64 tensor, a 0-d
        # scale) is read once, as a scalar argument: x * 0.5 runs the kernel x * Scalar does
        tensors = [x for x in tensors if x[1]] or tensors
    float_types = [t for _, _, t, _ in tensors if t not in INDEX_TYPES]
    main_type = float_types[0] if float_types else (tensors[0][2] if tensors else "")
    itemsize = element_size(main_type) or 4
    dtype = canonical(main_type) or "?"
    type_sig = ",".join(sorted({canonical(t) or t for _, _, t, _ in tensors}))

    def tup(x):
        return tuple(tup(v) for v in x) if isinstance(x, list) else x

    call = OpCall(name=name, dims=tup(dims), types=tuple(v if isinstance(v, str) else "" for v in types),
                  strides=tup(strides), concrete=tuple(v if isinstance(v, str) else "" for v in concrete))
    cost = cost_of(call)
    flops = float(cost.flops) if cost is not None and cost.flops is not None else math.nan
    nbytes = float(cost.bytes) if cost is not None and cost.bytes is not None else math.nan
    stored = [_stored(d, st) for _, d, _, st in tensors]
    numel0 = stored[0] if stored else 0
    if math.isnan(nbytes):  # the inputs read once and an output of the first input's size written
        nbytes = float((sum(stored) + numel0) * itemsize) if stored else 0.0
    q = {"M": math.nan, "N": math.nan, "K": math.nan, "B": math.nan, "itemsize": itemsize, "dtype": dtype,
         "flops": flops, "bytes": nbytes, "numel0": float(numel0), "L": math.nan, "W": math.nan,
         "R": math.nan, "sync": name in SYNC_OPS, "rows_unknown": False, "lists_unrecorded": False, "launches": 1.0,
         "matrix_unit": bool(cost is not None and cost.unit == MATRIX)}
    layouts = "".join(_layout(d, st) for _, d, _, st in tensors)
    # a sparse tensor is recorded without strides beside dense ones with theirs; a trace that records no
    # strides at all (before torch 2.0) holds no sparse tensor this can tell
    sparse = any(st is not None for _, _, _, st in tensors) and any(
        st is None and len(d) >= 2 for _, d, _, st in tensors)

    mats = [(d, st) for _, d, _, st in tensors if len(d) == 2]
    at = next((j for j, (d, st) in enumerate(mats) if st is None), None) if sparse else None
    if name in GEMM_OPS and at is not None and len(tensors) >= 2:
        # CSR SpMM: addmm(out, adj[N, N], x[N, F]) or mm(adj, x); nnz is data (the workload's edges)
        adj = mats[at][0]
        # the dense operand: the matrix after the sparse one (an `out` argument may follow, empty)
        dense = [d for d, st in mats[at + 1:] if st is not None and math.prod(d) > 0]
        dense = dense or [d for d, st in mats if st is not None and math.prod(d) > 0]
        f = dense[0][1] if dense else 1
        q.update(R=float(adj[0]), W=float(f), M=float(adj[0]), N=float(f), K=float(adj[1]))
        group = f"spmm|{name}|{type_sig}"
        coords = (0.0, _log2(f), _log2(adj[0]), 0.0, 0.0)  # coords[0] (log2 nnz) and [3] come from the data
        return "spmm", group, f"spmm|{type_sig}", coords, q

    if name == "aten::_grouped_mm" and len(tensors) >= 2:
        a, w = tensors[0][1], tensors[1][1]
        if len(a) == 2 and len(w) == 3:
            q.update(M=float(a[0]), K=float(a[1]), N=float(w[2]), B=float(w[0]))
            group = f"grouped|{type_sig}|{_matrix_layout(tensors[0][3])}{_matrix_layout(tensors[1][3])}"
            coords = (_log2(a[0]), _log2(w[2]), _log2(a[1]), 0.0, 0.0)  # [3]: from the expert counts
            return "grouped", group, f"grouped|{type_sig}", coords, q

    template = template_gemm_shape(call) if name.startswith("triton_tem_") else None
    if template is not None:
        # an Inductor GEMM template: a matmul whatever it fused around it. Its own group is never profiled
        # (the name is the compiled graph's), so the GEMMs of its dtype (the relaxed group) answer it at its shape
        b, m, n, k = template
        q.update(M=float(m), N=float(n), K=float(k), B=float(b), flops=2.0 * b * m * n * k, matrix_unit=True)
        odd = _odd_rows(k, n, itemsize)
        coords = (_log2(m), _log2(n), _log2(k), _log2(b), 0.0)
        return "gemm", f"gemm|{name}|{type_sig}||{odd}", f"gemm|{type_sig}{odd}", coords, q

    if name in GEMM_OPS:
        from wlprof.analysis.models import matrix_dims

        m, n, k, b = matrix_dims(name, dims)
        if not any(math.isnan(v) for v in (m, n, k, b)):
            q.update(M=float(m), N=float(n), K=float(k), B=float(b))
            mats = [st for _, d, _, st in tensors if len(d) >= 2]
            lay = "".join(_matrix_layout(st) for st in mats[-2:])
            bias = "bias" if name in ("aten::addmm", "aten::baddbmm", "aten::addmv", "aten::addmv_") else ""
            odd = _odd_rows(k, n, itemsize)
            group = f"gemm|{name}|{type_sig}|{lay}|{bias}{odd}"
            coords = (_log2(m), _log2(n), _log2(k), _log2(b), 0.0)
            return "gemm", group, f"gemm|{type_sig}{odd}", coords, q

    if name in INDEX_OPS:
        # L: indexed rows (the index tensor's stored length), W: elements per row, R: rows of the table
        idx = [(i, d, st) for i, d, t, st in tensors if t in INDEX_TYPES and t != "bool"]
        vals = [(i, d, st) for i, d, t, st in tensors if t not in INDEX_TYPES]
        table = vals[0][1] if vals else (tensors[0][1] if tensors else [])
        if idx:
            d, st = idx[0][1], idx[0][2]
            length = d[0] if len(d) >= 1 and st is not None and len(d) >= 2 and st[1:] == [0] * (len(d) - 1) \
                else _stored(d, st)
        else:  # the index tensors are not recorded (a list of optional tensors): as many rows as the table's
            length = table[0] if table else numel0
            q["rows_unknown"] = True
        rows = table[0] if table else 0
        if name == "aten::segment_reduce" and len(idx):  # data [E, F], offsets [N + 1]
            length, rows = (table[0] if table else 0), max(idx[-1][1][0] - 1 if idx[-1][1] else 0, 1)
        width = max(math.prod(table[1:]) if len(table) > 1 else 1, 1)
        q.update(L=float(length), W=float(width), R=float(rows))
        group = f"index|{name}|{type_sig}|{layouts}|{_scalars(name, concrete)}"
        coords = (_log2(length), _log2(width), _log2(rows), 0.0, 0.0)
        return "index", group, f"index|{name}|{type_sig}", coords, q

    if not tensors or (types and types[0] == "TensorList"):
        # tensor lists (cat, stack, the _foreach_ ops): their shapes are recorded, their dtype is not;
        # a list op is compared with its own calls by element counts (its bytes: the recorded cost's), its
        # plain tensors aside (a fused optimizer's 0-d grad_scale and found_inf, AMP's inv_scale)
        lists = [[x for x in dims[i] if isinstance(x, list) and all(isinstance(v, int) for v in x)]
                 for i, t in enumerate(types) if t == "TensorList" and i < len(dims) and isinstance(dims[i], list)]
        lists = [lst for lst in lists if lst]
        if not lists:
            # a list recorded as [] (torch.profiler past 30 tensors) says nothing of its size: such calls
            # are left out of a profile's tables, so that no call of another size stands in for them
            q["lists_unrecorded"] = any(t == "TensorList" for t in types)
            return "other", f"other|{name}", f"other|{name}", (0.0,) * NCOORDS, q
        sizes = [math.prod(x) for x in lists[0]]
        total = float(sum(math.prod(x) for lst in lists for x in lst))
        from wlprof.cost.tensor_lists import depth, launches

        # a multi-tensor-apply call's kernels: each launch pays the floor
        q.update(numel0=float(sum(sizes)), bytes=math.nan, list_elements=total,
                 launches=float(max(launches(sizes, depth(name, lists)), 1)))
        group = f"memory|{name}|list{len(lists)}|{_scalars(name, concrete)}"
        coords = (_log2(sum(sizes)), _log2(max(sizes)), _log2(len(sizes)), _log2(q["launches"]), 0.0)
        return "memory", group, f"memory|{name}|list", coords, q
    d0 = tensors[0][1]
    inner = d0[-1] if d0 else 1
    n1 = stored[1] if len(stored) > 1 else 0
    if "batch_norm" in name and len(d0) >= 2:
        # a batch norm reduces N x spatial per channel, its channels the units it runs in parallel: the
        # forward's second tensor is a [C] weight, the backward's the input's gradient, so C is taken from
        # the first tensor's shape for both
        n1 = d0[1]
    extra = 0.0
    if name == "aten::topk" and len(concrete) > 1:
        try:
            extra = _log2(float(concrete[1]))
        except ValueError:
            pass
    # 'r': an operand smaller than the first (broadcast by its shape: a row or column vector), or the first
    # itself where a later operand is larger (a [rows, 1] scale times [rows, features] values)
    widest = max(stored[1:], default=0)
    layouts = "".join("r" if j and _stored(d, st) < numel0 else
                      "r" if not j and len(d) and widest > numel0 > 0 and name in BROADCAST_OPS
                      else _layout(d, st) for j, (_, d, _, st) in enumerate(tensors))
    # an op on the matrix unit that is no GEMM (a convolution, attention, an RNN) is a class of its own:
    # its time follows its FLOPs, and it must not stand in for the memory-bound ops
    cls = "compute" if q["matrix_unit"] else "norm" if _is_norm(name) else "memory"
    steps = _outer_scan_steps(name, d0, concrete)
    if cls == "memory" and steps > 1:
        # a scan along a dimension that is not the innermost: each thread walks one column's values one after
        # another, so its time follows the scanned extent (a chain of dependent steps), not its bytes
        cls = "scan"
        columns = max(math.prod(d0) // steps, 1)
        q.update(L=float(steps), R=float(columns), W=1.0)
        group = f"{cls}|{name}|{type_sig}|{layouts}|{_scalars(name, concrete)}"
        coords = (_log2(steps), _log2(columns), 0.0, 0.0, 0.0)
        return cls, group, f"{cls}|{name}|{dtype}", coords, q
    if cls == "norm":
        units, outer, span = norm_units(name, d0, concrete)
        # R: the units reduced in parallel, W: the values each reduces per outer index, L: a block's steps
        q.update(R=float(units), W=float(span), L=float(block_steps(outer, span)))
    group = f"{cls}|{name}|{type_sig}|{layouts}|{_scalars(name, concrete)}"
    # a copy into a wider float (bfloat16 to float32) runs other kernels, about half as fast, than one into a
    # narrower float over the same bytes: the direction is its own group (the sorted dtypes cannot tell it)
    widen = "|widen" if name in WIDENING_OPS and _widens(tensors) else ""
    group += widen
    if cls == "compute" and flops > 0:
        # a convolution's or attention's work is not its first tensor's size: a batch of 8 at 256 channels
        # and one of 32 at 64 hold as many values and differ 4x in FLOPs (its weight, its sequence squared)
        extra = _log2(flops)
    elif name != "aten::topk":
        extra = _alignment(numel0)
    coords = (_log2(numel0), _log2(inner), _log2(n1), extra, _log2(max((_spread(d, st) for _, d, _, st in tensors),
                                                                        default=1.0)))
    # the relaxed group keeps the first floating dtype only: a batch norm's float32 weights beside bfloat16
    # activations (torch.autocast) and its bfloat16 ones run the same per-element work; a reduction that
    # keeps its input's innermost dim (a bias gradient's sum over rows) is apart from one that reduces it
    outer = "|outer" if _reduces_outer(name, d0, tensors[0][3], concrete) else ""
    # an in-place op (add_) does its out-of-place twin's work: one relaxed group answers both
    twin = name[:-1] if cls == "memory" and name.endswith("_") and not name.endswith("__") and \
        name not in _NO_TWIN else name
    if cls == "memory" and stored and max(stored) <= 1:
        # scalars only (an item() read back, a 0-d add): its launch is its time, whatever the dtype, so its op's
        # scalars of every dtype answer it (a float32 item() the profile's int64 and bool ones)
        return cls, group, f"{cls}|{twin}|scalar", coords, q
    return cls, group, f"{cls}|{twin}|{dtype}{outer}{widen}", coords, q


# binary elementwise ops whose first operand may be the smaller one, broadcast over a later one
BROADCAST_OPS = frozenset("aten::" + n for n in "mul add sub div mul_ add_ sub_ div_ where maximum minimum".split())
# elementwise ops whose 0-d operands are scalar arguments
SCALAR_OPERAND_OPS = BROADCAST_OPS | frozenset("aten::" + n for n in (
    "pow pow_ remainder remainder_ fmod fmod_ floor_divide floor_divide_ eq ne lt le gt ge masked_fill masked_fill_ "
    "clamp clamp_ clamp_min clamp_max lerp lerp_ addcmul addcmul_ addcdiv addcdiv_").split())
WIDENING_OPS = frozenset(("aten::copy_",))  # ops whose first tensor is written from the second's values


def _widens(tensors: list) -> bool:
    """Whether a copy's destination (its first tensor) is a float of more bytes than its source (the second)."""
    from wlprof.cost.dtypes import element_size

    if len(tensors) < 2 or tensors[0][2] in INDEX_TYPES or tensors[1][2] in INDEX_TYPES:
        return False
    dst, src = element_size(tensors[0][2]), element_size(tensors[1][2])
    return bool(dst and src and dst > src)


ALIGN_BITS = 10  # a size that is a multiple of 2^10 ends on a kernel's block as a power of two does
SCAN_OPS = frozenset("aten::" + n for n in "cumsum cumprod _cumsum _cumprod logcumsumexp _logcumsumexp".split())


def _outer_scan_steps(name: str, dims0: list, concrete: list) -> int:
    """The extent a scan (`SCAN_OPS`, its dim the second input) walks where that dim is not the innermost one
    of more than one element (0 elsewhere): CUDA scans such a dim one thread per column, step by step."""
    if name not in SCAN_OPS or len(dims0) < 2 or len(concrete) < 2:
        return 0
    try:
        dim = int(concrete[1])
    except (TypeError, ValueError):
        return 0
    dim = dim + len(dims0) if dim < 0 else dim
    if not 0 <= dim < len(dims0) - 1 or math.prod(dims0[dim + 1:]) <= 1:
        return 0
    return int(dims0[dim])


# the position of the reduced dim (or dims) among a reduction's inputs
_DIM_ARG = {**{"aten::" + n: 1 for n in (
    "sum mean amax amin max min prod all any std var softmax _softmax log_softmax _log_softmax argmax argmin "
    "logsumexp").split()}, **{"aten::" + n: 2 for n in (
        "topk kthvalue norm linalg_vector_norm _softmax_backward_data _log_softmax_backward_data").split()}}


def _reduces_outer(name: str, dims0: list, strides0: list | None, concrete: list) -> bool:
    """Whether a reduction (`_DIM_ARG`) keeps its input's innermost dim in memory (the least stride of the
    dims of more than one element; the last where strides are unknown) and reduces another: each thread
    then sums one column down the rows, a kernel that runs at other rates than a reduction along rows."""
    at = _DIM_ARG.get(name)
    if at is None or len(concrete) <= at or len(dims0) < 2:
        return False
    text = str(concrete[at]).strip()
    try:
        dims = [int(v) for v in text.strip("[]").split(",") if v.strip()]
    except ValueError:
        return False
    if not dims:  # every dim (no dim given): the innermost among them
        return False
    n = len(dims0)
    reduced = {d + n if d < 0 else d for d in dims}
    big = [i for i in range(n) if dims0[i] > 1]
    if not big:
        return False
    inner = min(big, key=lambda i: (strides0[i], -i)) if strides0 and len(strides0) == n else big[-1]
    return inner not in reduced and any(i in reduced for i in big)


# in-place ops whose name without the underscore is no op of the same work
_NO_TWIN = frozenset(("aten::copy_", "aten::fill_", "aten::zero_", "aten::normal_", "aten::uniform_"))


REDUCE_THREADS = 512  # the threads of a block that reduces one unit of a norm (a channel, a row, a group)


def norm_units(name: str, dims0: list, concrete: list) -> tuple[int, int, int]:
    """(units, outer, inner) of a normalization call: the units it reduces one per block (a batch norm's
    channels, a group norm's samples x groups, a layer norm's rows), and each unit's values as `outer`
    slices of `inner` contiguous values (a batch norm's channel: the batch's images, each H x W values)."""
    numel = math.prod(dims0) if dims0 else 0
    if numel <= 0:
        return 1, 1, 1
    if "batch_norm" in name and len(dims0) >= 2:
        return max(dims0[1], 1), max(dims0[0], 1), max(math.prod(dims0[2:]), 1)
    ints = [int(c) for c in concrete if isinstance(c, str) and c.lstrip("-").isdigit()]
    if "group_norm" in name and len(ints) >= 4 and ints[0] > 0 and ints[3] > 0:
        units = ints[0] * ints[3]  # (N, C, HxW, group) follow the tensors, forward and backward
        return units, 1, max(numel // units, 1)
    width = dims0[-1] if dims0 else 1
    if "layer_norm" in name or "rms_norm" in name:  # the normalized shape, a list scalar ("[1024]")
        shape = next((c for c in concrete if isinstance(c, str) and c.startswith("[") and c[1:2].isdigit()), "")
        try:
            width = math.prod(int(v) for v in shape.strip("[]").split(",") if v.strip()) if shape else width
        except ValueError:
            pass
    width = max(min(width, numel), 1)
    return max(numel // width, 1), 1, width


def block_steps(outer: int, inner: int, threads: int = REDUCE_THREADS) -> int:
    """The steps one block takes over a unit of `outer` x `inner` values: its threads laid along the inner
    values in the least power of two from 32 that covers them (at most `threads`), the rest along the outer
    slices, each thread stepping over its share (a 12 x 12 plane fills 144 of 256 lanes: 2 slices a step)."""
    lanes = next((t for t in (32, 64, 128, 256) if inner <= t), threads)
    lanes = min(lanes, threads)
    rows = max(threads // lanes, 1)
    return math.ceil(max(outer, 1) / rows) * math.ceil(max(inner, 1) / lanes)


def _alignment(numel: int) -> float:
    """A coordinate for how a size ends: the power of two it is a multiple of (up to 2^10), scaled to
    0..2 so that it tells an odd size from a round one without outweighing the size itself. A kernel's
    last, partial block costs its own time when the whole is small."""
    n = int(numel)
    bits = ALIGN_BITS if n <= 0 else min((n & -n).bit_length() - 1, ALIGN_BITS)
    return 2.0 * bits / ALIGN_BITS


def _spread(dims, strides) -> float:
    """How far apart a strided tensor's elements lie: the memory its view spans over its elements (1 for
    a contiguous or transposed tensor; a slice that steps over other data reads its sectors sparsely)."""
    if _layout(dims, strides) != "t":
        return 1.0
    n = math.prod(dims)
    if n <= 1:
        return 1.0
    span = 1 + sum((d - 1) * abs(s) for d, s in zip(dims, strides, strict=True) if d > 0)
    return max(span / n, 1.0)


def _scalars(name: str, concrete: list) -> str:
    """The scalars that choose what an op computes (the reduced dims, keepdim, k's dim)."""
    if name not in DIM_OPS:
        return ""
    if name == "aten::topk":
        return "|".join(str(c) for c in concrete[2:4])
    return "|".join(str(c) for c in concrete[1:4])


# ---------------------------------------------------------------------------- per row


def _text(col: pd.Series) -> np.ndarray:
    return col.astype(object).where(col.notna(), "").map(str).to_numpy()


def describe(ops: pd.DataFrame) -> pd.DataFrame:
    """The calls of an ops table with their class, groups, coordinates and quantities (same index).

    Data features come from the workload's fact columns where the row has them: the
    expert counts of a grouped GEMM (rows per group, active groups), the edges and the
    in-degree skew of a graph for sparse and index ops, and whether the aggregation's
    indices were sorted by destination.
    """
    cols = ("op_name", "op_input_dims", "op_input_types", "op_input_strides", "op_concrete_inputs")
    parts = [_text(ops[c]) if c in ops else np.full(len(ops), "", dtype=object) for c in cols]
    key = pd.Series(parts[0] + "\x1f" + parts[1] + "\x1f" + parts[2] + "\x1f" + parts[3] + "\x1f" + parts[4])
    codes, uniques = pd.factorize(key)
    parsed = [parse_call(*u.split("\x1f")) for u in uniques]
    cls = np.array([p[0] for p in parsed], dtype=object)[codes]
    group = np.array([p[1] for p in parsed], dtype=object)[codes]
    relaxed = np.array([p[2] for p in parsed], dtype=object)[codes]
    coords = np.array([p[3] for p in parsed], dtype=float).reshape(len(parsed), NCOORDS)[codes]
    qframe = pd.DataFrame([p[4] for p in parsed]).iloc[codes].reset_index(drop=True)
    out = pd.DataFrame({"cls": cls, "group": group, "relaxed": relaxed}, index=ops.index)
    for c in qframe.columns:
        out[c] = qframe[c].to_numpy()
    for c in QUANTITIES:  # an empty table has them too
        if c not in out:
            out[c] = np.full(len(out), np.nan)
    # the device activities the call ran, as its trace counts them (NaN where the table has no count)
    out["kernels"] = _num(ops, "kernel_count")
    for c, empty in (("dtype", "?"), ("sync", False), ("rows_unknown", False), ("lists_unrecorded", False),
                     ("matrix_unit", False)):
        if c not in out:
            out[c] = np.full(len(out), empty, dtype=object if c == "dtype" else bool)
    coords = coords.copy()
    if "list_elements" in out:  # a tensor list's bytes: the recorded cost's, else its elements read and written
        lst = np.flatnonzero(np.isfinite(out.list_elements.to_numpy(dtype=float)))
        rec = _num(ops, "bytes")[lst]
        if "flops_source" in ops:  # a formula's bytes (from the shapes and kernel names), never a stated cost
            rec = np.where(_text(ops["flops_source"])[lst] == "formula", rec, np.nan)
        listed = _list_dtypes(ops, lst)
        if listed is not None:
            # the list's dtype (named by its kernels): a bfloat16 list streams fewer bytes per block than a
            # float32 one, so the two are groups of their own, and one answers the other as another dtype
            known = np.flatnonzero(listed != "")
            rows = lst[known]
            tag = "|" + listed[known]
            for c in ("group", "relaxed"):
                out.iloc[rows, out.columns.get_loc(c)] = out[c].to_numpy(dtype=object)[rows] + tag
            out.iloc[rows, out.columns.get_loc("dtype")] = listed[known]
        run_dtype = _text(ops["dtype"])[lst] if "dtype" in ops else np.full(len(lst), "float32", dtype=object)
        run_dtype = np.where(_ingested(ops, lst), "float32", run_dtype)  # a list of unnamed dtype: float32
        if listed is not None:
            run_dtype = np.where(listed != "", listed, run_dtype)
        size = np.array([_itemsize(t) for t in run_dtype]) if len(lst) else np.zeros(0)
        out.iloc[lst, out.columns.get_loc("bytes")] = np.where(
            np.isfinite(rec) & (rec > 0), rec, 2 * out.list_elements.to_numpy(dtype=float)[lst] * size)
    _data_features(ops, out, coords)
    _link_features(ops, out, coords)
    _tf32_feature(ops, out)
    for j in range(NCOORDS):
        out[f"c{j}"] = coords[:, j]
    return out


TF32_TAG = "|tf32"


def _tf32_feature(ops: pd.DataFrame, out: pd.DataFrame) -> None:
    """`tf32`: the float32 matrix calls that ran in TF32 (placed under `compute:tf32`: the run's setting or
    their kernels' names). Their groups end in `TF32_TAG`, apart from float32 calls on the CUDA cores, so
    those never answer them; their base time is at TF32's matrix peak."""
    tf = np.zeros(len(out), dtype=bool)
    if "compute_roof" in ops and len(out):
        tf = (_text(ops["compute_roof"]) == "compute:tf32") & (out.dtype.to_numpy(dtype=object) == "float32")
    out["tf32"] = tf
    if tf.any():
        for c in ("group", "relaxed"):
            v = out[c].to_numpy(dtype=object).copy()
            v[tf] = v[tf] + TF32_TAG
            out[c] = v


def _link_features(ops: pd.DataFrame, out: pd.DataFrame, coords: np.ndarray) -> None:
    """Copies across the host link (a copy op whose `transfer` is HtoD or DtoH, pinned or pageable host
    memory): class `link`, grouped by direction, host memory and dtype, its bytes the ones that cross (its
    first tensor's, the copy's destination), its coordinate their log2."""
    if "transfer" not in ops or "op_name" not in ops or not len(out):
        return
    tr = _text(ops["transfer"])
    rows = np.flatnonzero(np.isin(tr, list(LINK_TRANSFERS)) & np.isin(_text(ops["op_name"]), list(COPY_OPS)))
    if not len(rows):
        return
    crossing = out.numel0.to_numpy(dtype=float)[rows] * out.itemsize.to_numpy(dtype=float)[rows]
    dtype = out.dtype.to_numpy(dtype=object)[rows]
    out.iloc[rows, out.columns.get_loc("cls")] = "link"
    out.iloc[rows, out.columns.get_loc("group")] = [f"link|{t}|{d}" for t, d in zip(tr[rows], dtype, strict=True)]
    out.iloc[rows, out.columns.get_loc("relaxed")] = [f"link|{t}" for t in tr[rows]]
    out.iloc[rows, out.columns.get_loc("bytes")] = crossing
    out["link"] = ""
    out.iloc[rows, out.columns.get_loc("link")] = [t.split()[0] for t in tr[rows]]
    coords[rows] = 0.0
    coords[rows, 0] = [_log2(b) for b in crossing]


def _list_dtypes(ops: pd.DataFrame, rows: np.ndarray) -> np.ndarray | None:
    """The floating dtype of the tensor-list calls at `rows`: the cost's dtype (the one their kernels
    name), else the run's dtype (a `--spec` step lists no kernels); '' where neither is a floating dtype;
    None where the table has neither column."""
    if not len(rows) or not ({"cost_dtype", "dtype"} & set(ops.columns)):
        return None
    from wlprof.cost.dtypes import FLOATING, canonical

    def floating(col):
        if col not in ops:
            return np.full(len(rows), "", dtype=object)
        out = np.array([t if t in FLOATING else canonical(t) or "" for t in _text(ops[col])[rows]], dtype=object)
        return np.where(np.isin(out, list(FLOATING)), out, "")

    named = floating("cost_dtype")
    return np.where(named != "", named, np.where(_ingested(ops, rows), "", floating("dtype")))


def _ingested(ops: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    """Whether each row at `rows` is of an ingested trace, whose `dtype` column names its matrix kernels' dtype
    (bfloat16 under autocast), not its tensor lists' (an optimizer's float32 parameters and states)."""
    if "workload" not in ops:
        return np.zeros(len(rows), dtype=bool)
    return _text(ops["workload"])[rows] == "ingest"


def _itemsize(dtype: str) -> int:
    from wlprof.cost.dtypes import size_of_dtype

    try:
        return size_of_dtype(dtype)
    except (KeyError, ValueError):
        return 4


def _num(ops: pd.DataFrame, name: str) -> np.ndarray:
    if name not in ops:
        return np.full(len(ops), np.nan)
    return pd.to_numeric(ops[name], errors="coerce").to_numpy(dtype=float)


QUANTITIES = ("M", "N", "K", "B", "itemsize", "flops", "bytes", "numel0", "L", "W", "R", "launches")
CONTEXT_COLUMNS = ("dispatch",)
DST_SORTED_BACKENDS = ("segment", "csr", "pyg:gcn-csr", "pyg:sage-csr")
# GAT over a CSR adjacency (rows = destinations) has no fused aggregation: PyG turns the CSR back into edge indices
# in its row order, so its scatters run over edges sorted by destination, whatever a run's `dst_sorted` says
DST_ORDERED_BACKENDS = ("pyg:gat-csr",)
# index ops that write their table's rows at the indices (atomics or a copy): how the indices are ordered decides
# how often neighbouring threads write the same row
SCATTER_OPS = frozenset("aten::" + n for n in (
    "scatter scatter_ scatter_add scatter_add_ scatter_reduce scatter_reduce_ index_add index_add_ index_copy "
    "index_copy_ index_put_ _index_put_impl_ put_").split())


def _loop_rows(ops: pd.DataFrame, out: pd.DataFrame, coords: np.ndarray) -> None:
    """The rows an MoE loop dispatch's `x[top_x]` gathers, from the expert counts, in place.

    Its index tensor is not recorded (a list of optional tensors), so the call's shapes say
    only the table it reads. The loop visits the experts that got tokens in expert order,
    each once, so in a step the j-th call of one input signature gathers the j-th such
    expert's rows. A step whose calls do not pair one to one with those experts is left as is.
    """
    need = ("expert_counts", "dispatch", "op_name", "op_input_dims")
    if not all(c in ops for c in need):
        return
    cand = np.flatnonzero((out.cls.to_numpy() == "index") & (ops.op_name.to_numpy() == "aten::index")
                          & (_text(ops["dispatch"]) == "loop")
                          & out.rows_unknown.to_numpy(dtype=bool))
    if not len(cand):
        return
    keys = [c for c in ("run_id", "point", "step") if c in ops]
    sub = ops.iloc[cand]
    frame = pd.DataFrame({k: sub[k].to_numpy() for k in keys})
    frame["sig"] = _text(sub["op_input_dims"])
    frame["order"] = sub["ts_us"].to_numpy(dtype=float) if "ts_us" in sub else np.arange(len(cand), dtype=float)
    frame["pos"] = cand
    counts = ops.expert_counts.to_numpy()
    rows_col = out.columns.get_loc("L")
    for _, g in frame.groupby([*keys, "sig"], sort=False, dropna=False):
        c = counts[g.pos.iat[0]]
        if c is None or (isinstance(c, float) and math.isnan(c)):
            continue
        hit = np.asarray(c, dtype=float)
        hit = hit[hit > 0]
        if len(hit) != len(g):
            continue
        pos = g.sort_values("order", kind="stable").pos.to_numpy()
        out.iloc[pos, rows_col] = hit
        out.iloc[pos, out.columns.get_loc("rows_unknown")] = False
        coords[pos, 0] = np.log2(hit)


SEGMENT_BYTES = 64  # the bytes one miss brings into the L2 around a strided element (two 32-byte sectors)


def _loop_copies(ops: pd.DataFrame, out: pd.DataFrame, coords: np.ndarray) -> None:
    """Where an MoE loop dispatch's copy of its expert's slice of the routing mask reads from, in place.

    The loop copies the mask's slice of each expert in turn (`expert_mask[e]`, a view whose elements
    lie an expert count apart), so a slice's elements share their 64-byte segments with its
    neighbours': the copy of expert e finds its segments in the L2 where the copy before it fetched
    them (e's offset is not a segment's start) and the expert between them streamed too little to
    evict them (its weights and its tokens' activations, beside the mask itself). The coordinates
    become the working set between the two copies (log2 bytes: the mask, plus the previous expert's
    weights and activations; the mask alone for the first, which reads the mask just written) in place
    of the second operand's size, and 2 where e starts a segment (0 else) in place of the alignment.
    A step whose copies do not pair one to one with the experts is left as is."""
    need = ("dispatch", "experts", "expert_counts", "d_model", "d_ff", "op_input_dims")
    if not all(c in ops for c in need):
        return
    cand = np.flatnonzero((out.cls.to_numpy() == "memory") & (_text(ops["dispatch"]) == "loop")
                          & (ops.op_name.to_numpy() == "aten::copy_") & (coords[:, 4] > 0))
    if not len(cand):
        return
    keys = [c for c in ("run_id", "point", "step") if c in ops]
    sub = ops.iloc[cand]
    frame = pd.DataFrame({k: sub[k].to_numpy() for k in keys})
    frame["sig"] = _text(sub["op_input_dims"]) + _text(sub["op_input_strides"]) if "op_input_strides" in sub \
        else _text(sub["op_input_dims"])
    frame["order"] = sub["ts_us"].to_numpy(dtype=float) if "ts_us" in sub else np.arange(len(cand), dtype=float)
    frame["pos"] = cand
    experts = _num(ops, "experts")
    dm, dff = _num(ops, "d_model"), _num(ops, "d_ff")
    gated = _text(ops["activation"]) != "gelu" if "activation" in ops else np.ones(len(ops), dtype=bool)
    wsize = np.array([_itemsize(t) for t in _text(ops["dtype"])]) if "dtype" in ops else np.full(len(ops), 2)
    counts = ops.expert_counts.to_numpy()
    item = out.itemsize.to_numpy(dtype=float)
    for _, g in frame.groupby([*keys, "sig"], sort=False, dropna=False):
        i = g.pos.iat[0]
        c = counts[i]
        if c is None or (isinstance(c, float) and math.isnan(c)) or len(g) != experts[i] or len(c) != len(g):
            continue
        pos = g.sort_values("order", kind="stable").pos.to_numpy()
        e = np.arange(len(pos))
        mask = out.numel0.to_numpy(dtype=float)[pos] * experts[i] * item[pos]  # every expert's slice
        mats = 3.0 if gated[i] else 2.0
        prev = np.concatenate([[0.0], np.asarray(c, dtype=float)[:-1]])
        stream = (mats * dm[i] * dff[i] + prev * (2 * dm[i] + mats * dff[i])) * wsize[i]
        ws = mask + np.where(e > 0, stream, 0.0)
        coords[pos, 2] = np.log2(np.maximum(ws, 1.0))
        coords[pos, 3] = np.where((e > 0) & ((e * item[pos]) % SEGMENT_BYTES == 0), 2.0, 0.0)


GROUP_TILE_ROWS = (64, 128, 256)  # the tile heights of `model.TILES`


def _data_features(ops: pd.DataFrame, out: pd.DataFrame, coords: np.ndarray) -> None:
    """Fill the data-dependent coordinates and group parts in place."""
    cls = out.cls.to_numpy()
    # grouped GEMMs: active groups, the largest group and the rows in whole tiles, from the expert counts
    g = np.flatnonzero(cls == "grouped")
    if len(g) and "expert_counts" in ops:
        counts = ops.expert_counts.to_numpy()
        for i in g:
            c = counts[i]
            groups = out.B.iat[i]
            if c is None or (isinstance(c, float) and math.isnan(c)) or len(c) != groups:
                rows = out.M.iat[i]
                active, largest = groups, rows / max(groups, 1)
            else:
                arr = np.asarray(c, dtype=float)
                # the workload's counts sum to the routed rows; a grouped call of other rows keeps their shares
                arr = arr * (out.M.iat[i] / arr.sum()) if arr.sum() > 0 else arr
                active, largest = float((arr > 0).sum()), float(arr.max()) if len(arr) else 0.0
                # each group's rows padded to whole tiles, per tile height the base tries
                for tm in GROUP_TILE_ROWS:
                    out.loc[out.index[i], f"padded{tm}"] = float(np.ceil(np.round(arr, 6) / tm).sum() * tm)
            # the largest group is no coordinate: its padding is in the base, by the rows of every group
            coords[i, 3] = _log2(active)
            out.loc[out.index[i], "active"] = active
            out.loc[out.index[i], "largest"] = largest
    elif len(g):
        coords[g, 3] = np.log2(np.maximum(out.B.to_numpy()[g], 1))
    _loop_rows(ops, out, coords)
    _loop_copies(ops, out, coords)
    # graphs: the skew of the in-degrees (max over mean) and the sparse matrix's nonzeros
    mx = _num(ops, "max_in_degree")
    skew = np.log2(np.maximum(mx, 1) / np.maximum(_num(ops, "mean_in_degree"), 1e-9))
    skew = np.where(np.isfinite(skew), np.maximum(skew, 0), 0.0)
    # a hub's work: the elements reduced into the most-targeted destination, serial or contended
    w = out.W.to_numpy(dtype=float)
    out["hub"] = np.where(np.isin(cls, ("index", "spmm")) & np.isfinite(mx) & np.isfinite(w), mx * w, 0.0)
    # and its chain: the edges into that destination, reduced one after another whatever the width
    out["chain"] = np.where(np.isin(cls, ("index", "spmm")) & np.isfinite(mx), mx, 0.0)
    for c in ("index", "spmm"):
        rows = np.flatnonzero(cls == c)
        coords[rows, 3] = skew[rows]
    sp = np.flatnonzero(cls == "spmm")
    if len(sp):
        edges = _num(ops, "edges")[sp]
        nodes = out.R.to_numpy()[sp]
        nnz = np.where(np.isfinite(edges) & (edges > 0), edges, nodes * 16)
        coords[sp, 0] = np.log2(np.maximum(nnz, 1))
        out.loc[out.index[sp], "L"] = nnz
        # its bytes: the nonzeros' indices and values, a dense row gathered per nonzero, the output read and
        # written (the cost formula counts the sparse operand as dense)
        w, size = out.W.to_numpy(dtype=float)[sp], out.itemsize.to_numpy(dtype=float)[sp]
        out.loc[out.index[sp], "bytes"] = nnz * (8 + size) + nnz * w * size + 2 * nodes * w * size
        out.loc[out.index[sp], "flops"] = 2 * nnz * w  # a multiply and an add per nonzero and feature
    # the order of the indices: an aggregation over destination-sorted edges contends less
    sorted_dst = _text(ops["dst_sorted"]) if "dst_sorted" in ops else None
    if sorted_dst is None or not (sorted_dst != "").any():
        backend = _text(ops["backend"]) if "backend" in ops else np.full(len(ops), "", dtype=object)
        sorted_dst = np.where(np.isin(backend, DST_SORTED_BACKENDS), "True",
                              np.where(backend == "", "", "False"))
    if "backend" in ops and "op_name" in ops:
        ordered = np.isin(_text(ops["backend"]), DST_ORDERED_BACKENDS) & np.isin(_text(ops["op_name"]), list(SCATTER_OPS))
        sorted_dst = np.where(ordered, "True", sorted_dst)
    idx = np.flatnonzero(np.isin(cls, ("index", "spmm")) & (sorted_dst != ""))
    group = out.group.to_numpy(dtype=object).copy()
    if len(idx):
        group[idx] = group[idx] + np.where(sorted_dst[idx] == "True", "|dst-sorted", "|dst-unsorted")
    # the context a call ran in: a kernel's time depends on what ran before it (an input still in
    # the L2 or evicted by a weight stream), so calls of one workload's dispatch are compared first
    context = _text(ops["workload"]) if "workload" in ops else np.full(len(ops), "", dtype=object)
    for c in CONTEXT_COLUMNS:
        if c in ops:
            v = _text(ops[c])
            context = np.where(v != "", context + ":" + v, context)
    out["group"] = group + "|@" + context

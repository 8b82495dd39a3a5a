"""Reductions, softmax and normalization layers.

FLOPs: one per input element for a sum-like reduction (n - 1 adds, counted as n),
plus the per-element arithmetic of the layer (stated at each formula). Bytes:
the input read once, outputs (and saved statistics) written once.
"""

from __future__ import annotations

import math

from wlprof.cost import dtypes
from wlprof.cost.registry import VECTOR, Cost, OpCall, TensorArg, formula, register_wrapper

register_wrapper("aten::softmax", "aten::log_softmax", "aten::layer_norm", "aten::argsort",
                 "aten::msort", "aten::group_norm", "aten::batch_norm", "aten::instance_norm")
# the scans with a helper or an implementation op nested (cummax -> _cummax_helper, logcumsumexp ->
# _logcumsumexp), and the scans' backward composites (cumprod's: mul, cumsum, div, flip; cummax's and
# cummin's: zeros and a scatter_add_ of the gradient at the indices)
register_wrapper("aten::cummax", "aten::cummin", "aten::logcumsumexp", "aten::cumprod_backward",
                 "aten::cummaxmin_backward")

# FLOPs per input element, and whether an int64 index tensor is written beside the values
_REDUCE: dict[str, tuple[int, bool]] = {
    "sum": (1, False),
    "nansum": (2, False),
    "mean": (1, False),  # plus one divide per output element
    "prod": (1, False),
    "amax": (1, False),
    "amin": (1, False),
    "max": (1, True),  # max.dim returns values and indices; max(self) only a value
    "min": (1, True),
    "argmax": (1, False),
    "argmin": (1, False),
    "any": (1, False),
    "all": (1, False),
    "norm": (2, False),  # square and add
    "linalg_vector_norm": (2, False),
    "var": (3, False),  # subtract mean, square, add (mean counted separately)
    "std": (3, False),
    "var_mean": (4, False),
    "std_mean": (4, False),
    "logsumexp": (4, False),  # max, subtract, exp, add
    "count_nonzero": (1, False),
}
_INDEX_OUT = {"argmax", "argmin", "count_nonzero"}  # int64 results
_BOOL_OUT = {"any", "all"}
_TWO_OUT = {"var_mean", "std_mean"}  # two results of the reduced shape
# Reductions with an optional `dtype` argument: its position by argument count
# (sum(self, dtype) / sum(self, dim, keepdim, dtype)); without it an integral or bool
# input accumulates into int64 (sum, prod), a floating one keeps its dtype.
_DTYPE_ARG: dict[str, dict[int, int]] = {
    "sum": {2: 1, 4: 3, 5: 3}, "nansum": {4: 3}, "prod": {2: 1, 4: 3}, "mean": {2: 1, 4: 3, 5: 3},
}
_INT_PROMOTES = {"sum", "prod", "nansum"}


def _out_itemsize(t: TensorArg, code, promote_int: bool) -> int:
    """Bytes per result element: the `dtype` argument's (a ScalarType code), else the input's,
    widened to int64 for an integral or bool input where the op accumulates (`promote_int`)."""
    if isinstance(code, int) and not isinstance(code, bool) and code in dtypes.SCALAR_TYPE_CODES:
        return dtypes.size_of_dtype(dtypes.SCALAR_TYPE_CODES[code])
    integral = t.dtype is not None and t.dtype not in dtypes.FLOATING and not t.dtype.startswith("complex")
    if promote_int and integral:
        return 8
    return t.itemsize


def _reduced_out(t: TensorArg, dims) -> int:
    """Elements left after reducing `dims` (None or [] means all)."""
    if dims is None or dims == []:
        return 1
    if isinstance(dims, (int, float)):
        dims = [int(dims)]
    nd = len(t.dims)
    keep = [d for i, d in enumerate(t.dims) if i not in {int(x) % nd for x in dims}] if nd else []
    return math.prod(keep)


def _make_reduction(base: str, per: int, with_indices: bool):
    def reduction(call: OpCall) -> Cost | None:
        t = call.tensor(0)
        n_args = len(call.types)
        # Overloads: op(self) / op(self, dtype) reduce everything; op(self, dim, keepdim, ...)
        # reduce `dim`. max(self, other) is elementwise and not handled here.
        if call.tensor(1) is not None:
            return None
        if base == "linalg_vector_norm":  # (self, ord, dim, keepdim, dtype)
            dims = call.scalar(2)
        elif base == "norm":  # (self, p) / (self, p, dtype) / (self, p, dim, keepdim[, dtype])
            dims = call.scalar(2) if n_args >= 4 else None
        elif base == "count_nonzero":  # (self, dim?): the dim form has two arguments
            dims = call.scalar(1)
        else:
            dims = call.scalar(1) if n_args >= 3 else None
        out = _reduced_out(t, dims)
        flops = per * t.numel + (out if base in ("mean", "var_mean", "std_mean") else 0)
        if base in _INDEX_OUT:
            out_bytes = out * 8
        elif base in _BOOL_OUT:
            out_bytes = out
        else:
            pos = _DTYPE_ARG.get(base, {}).get(n_args)
            size = _out_itemsize(t, call.scalar(pos) if pos is not None else None, base in _INT_PROMOTES)
            out_bytes = out * size * (2 if base in _TWO_OUT else 1)
            out_bytes += out * 8 if with_indices and dims is not None else 0
        return Cost(flops, t.nbytes_read + out_bytes, VECTOR, t.dtype, written=out_bytes)

    reduction.__name__ = f"reduce_{base}"
    return reduction


# var and std over a whole tensor run aten::mean first on the CPU (a nested, costed op)
# and then their own pass: the nested mean is auxiliary, counted on its own, and must
# not make them dispatchers (their per-element count excludes the mean).
_AUX = {"var", "std"}
for _base, (_per, _idx) in _REDUCE.items():
    formula(f"aten::{_base}", aux_children=_base in _AUX)(_make_reduction(_base, _per, _idx))


@formula("aten::_softmax", "aten::_log_softmax", "aten::_safe_softmax")
def softmax(call: OpCall) -> Cost | None:
    # Per element: find the max (1), subtract it (1), exp (1), sum (1), divide or
    # subtract the log (1) = 5. _softmax(self, dim, half_to_float).
    # _safe_softmax(self, dim, dtype?) carries a ScalarType code there instead.
    t = call.tensor(0)
    arg = call.scalar(2)
    if arg is True:
        out_size = 4
    elif call.name == "aten::_safe_softmax":
        out_size = _out_itemsize(t, arg, promote_int=False)
    else:
        out_size = t.itemsize
    return Cost(5 * t.numel, t.nbytes_read + t.numel * out_size, VECTOR, t.dtype, written=t.numel * out_size)


@formula("aten::native_layer_norm")
def layer_norm(call: OpCall) -> Cost | None:
    # native_layer_norm(x, normalized_shape, weight?, bias?, eps): per element mean (1),
    # subtract (1), square (1), sum (1), scale by rstd (1) = 5, plus 1 for the weight and
    # 1 for the bias. Saves mean and rstd (fp32) per row.
    x = call.tensor(0)
    w, b = call.tensor(2), call.tensor(3)
    normalized = call.scalar(1)
    inner = math.prod(normalized) if isinstance(normalized, list) else x.dims[-1]
    rows = x.numel // inner if inner else 0
    per = 5 + (1 if w is not None else 0) + (1 if b is not None else 0)
    reads = x.nbytes_read + (w.nbytes_read if w else 0) + (b.nbytes_read if b else 0)
    out = x.numel * x.itemsize + 2 * rows * 4
    return Cost(per * x.numel, reads + out, VECTOR, x.dtype, written=out)


@formula("aten::rms_norm", "aten::_fused_rms_norm")
def rms_norm(call: OpCall) -> Cost | None:
    # rms_norm(x, normalized_shape, weight?, eps): per element square (1), sum (1),
    # scale by rstd (1) = 3, plus 1 for the weight. Where rms_norm is decomposed into
    # pow/mean/rsqrt/mul (the CPU), those ops are costed and rms_norm is a dispatcher.
    x = call.tensor(0)
    w = call.tensor(2)
    normalized = call.scalar(1)
    inner = math.prod(normalized) if isinstance(normalized, list) else x.dims[-1]
    rows = x.numel // inner if inner else 0
    per = 3 + (1 if w is not None else 0)
    reads = x.nbytes_read + (w.nbytes_read if w else 0)
    out = x.numel * x.itemsize + rows * 4
    return Cost(per * x.numel, reads + out, VECTOR, x.dtype, written=out)


@formula("aten::cumsum", "aten::cumprod", "aten::_cumsum", "aten::_cumprod")
def cumsum(call: OpCall) -> Cost | None:
    # cumsum(self, dim, dtype?): one add (multiply) per element. The output has the
    # `dtype` argument's type if given, else the input's, widened to int64 for an
    # integral or bool input (as torch.cumsum does). _cumsum(self, dim) has no dtype.
    t = call.tensor(0)
    size = _out_itemsize(t, call.scalar(2), promote_int=not call.name.startswith("aten::_"))
    return Cost(t.numel, t.nbytes_read + t.numel * size, VECTOR, t.dtype, written=t.numel * size)


@formula("aten::_logcumsumexp")
def logcumsumexp(call: OpCall) -> Cost | None:
    # _logcumsumexp(self, dim): out_i = log(exp(out_{i-1}) + exp(x_i)), evaluated stably as
    # max + log1p(exp(min - max)): a max, a min, a subtract, an exp, a log1p and an add = 6 FLOPs
    # per element. Reads the input, writes a result of its shape and dtype.
    t = call.tensor(0)
    written = t.numel * t.itemsize
    return Cost(6 * t.numel, t.nbytes_read + written, VECTOR, t.dtype, written=written)


@formula("aten::_cummax_helper", "aten::_cummin_helper")
def cummax_helper(call: OpCall) -> Cost | None:
    # _cummax_helper(self, values, indices, dim): one comparison per element; reads the input,
    # writes the running values (the input's dtype) and their int64 indices into the given buffers.
    t, idx = call.tensor(0), call.tensor(2)
    written = t.numel * t.itemsize + t.numel * (idx.itemsize if idx is not None else 8)
    return Cost(t.numel, t.nbytes_read + written, VECTOR, t.dtype, written=written)


@formula("aten::aminmax", "aten::_aminmax")
def aminmax(call: OpCall) -> Cost | None:
    # aminmax(self, dim?, keepdim) -> (min, max): two comparisons per element, two results of the
    # reduced shape. _aminmax(self) / _aminmax(self, dim, keepdim) as well. The results' initial fill
    # on the CPU is a nested fill_ (costed on its own).
    t = call.tensor(0)
    dim = call.scalar(1) if len(call.types) >= 2 else None
    out = _reduced_out(t, dim if isinstance(dim, (int, list)) and not isinstance(dim, bool) else None)
    written = 2 * out * t.itemsize
    return Cost(2 * t.numel, t.nbytes_read + written, VECTOR, t.dtype, written=written)


@formula("aten::equal")
def equal(call: OpCall) -> Cost | None:
    # equal(self, other) -> bool (a Python value, not a tensor): one comparison per element, both read
    a, b = call.tensor(0), call.tensor(1)
    if a is None or b is None:
        return None
    return Cost(a.numel, a.nbytes_read + b.nbytes_read, VECTOR, a.dtype, written=0)

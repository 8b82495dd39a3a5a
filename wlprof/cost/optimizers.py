"""Optimizer steps: every `_foreach_*` op and the fused optimizers (`_fused_adam(w)_`, `_fused_sgd_`,
`_fused_adagrad_`).

Their tensors come as TensorLists, whose shapes the trace records and whose dtype it
does not. The element type is read from the launched multi-tensor-apply kernel's name
(`kernel_types.multi_tensor_dtype`: `BinaryOpScalarFunctor<c10::BFloat16, ...>`); every
list of one call has that type (the kernels' fast path requires it). Without such a
kernel (a CPU trace, where a foreach op runs one op per tensor nested inside it and is
then a dispatcher anyway, or a fused optimizer's CPU kernel) the bytes stay unknown and
the FLOPs, which need only the shapes, are still counted.

Bytes: every list read once (except a list the op only writes: `_foreach_copy_`'s and
`_foreach_zero_`'s destination), every result written once (in-place ops write `self`).
FLOPs per element follow the elementwise convention (`elementwise.UNARY_FLOPS`,
`BINARY_FLOPS`: add 1, lerp 3, addcdiv 3, sqrt 1, ...); the fused optimizers count the
arithmetic of their update rule per parameter element, stated at each formula.
"""

from __future__ import annotations

import math

from wlprof.cost import dtypes
from wlprof.cost.elementwise import BINARY_FLOPS, UNARY_FLOPS
from wlprof.cost.kernel_types import multi_tensor_dtype
from wlprof.cost.registry import MATRIX, VECTOR, Cost, OpCall, formula

LIST = "TensorList"

# Every foreach op of torch 2.13 by its base name (without `_foreach_` and the in-place `_`),
# with its FLOPs per element: the elementwise tables' counts where they have the op, 1 for
# the other transcendentals and roundings, 0 for copies; the per-tensor reductions count
# as reductions do (norm squares and adds: 2, max compares: 1, powsum raises and adds: 2).
_BASES = ("abs acos add addcdiv addcmul asin atan ceil clamp_max clamp_min clone copy cos cosh div erf erfc "
          "exp expm1 floor frac lerp lgamma log log10 log1p log2 max maximum minimum mul neg norm pow powsum "
          "reciprocal round rsqrt sigmoid sign sin sinh sqrt sub tan tanh trunc zero").split()
_OWN = {"clone": 0, "copy": 0, "zero": 0, "norm": 2, "max": 1, "powsum": 2}
FOREACH_FLOPS: dict[str, int] = {b: _OWN.get(b, UNARY_FLOPS.get(b, BINARY_FLOPS.get(b, 1))) for b in _BASES}
_REDUCING = {"norm", "max", "powsum"}  # one result per tensor
_WRITE_ONLY_SELF = {"copy", "zero"}  # self is written, not read
_ALPHA = {"add", "sub"}  # List / Tensor overloads carry `alpha`: alpha != 1 costs a multiply more


LIST_DTYPE = "List dtype"  # an arg wlprof adds where it knows the lists' dtype (cost.tensor_lists)


def _list_dtype(call: OpCall) -> str | None:
    """The lists' canonical dtype: the one the multi-tensor-apply kernels name, else the one the workload
    or the backward's gradients gave the recovered lists (a CPU fused optimizer launches no kernel)."""
    dt = multi_tensor_dtype(call.kernels)
    if dt is None:
        given = call.arg(LIST_DTYPE)
        dt = given if isinstance(given, str) and given in dtypes.FLOATING else None
    return dt


def _list_numels(call: OpCall, i: int) -> list[int] | None:
    dims = call.dims[i] if i < len(call.dims) else None
    if not isinstance(dims, tuple) or not all(isinstance(d, tuple) for d in dims):
        return None
    return [math.prod(d) for d in dims]


def _self_numels(call: OpCall, i: int) -> list[int] | None:
    """The numels of the list the op works on; None when the trace left it empty.

    torch.profiler writes `[]` for a TensorList whose shapes it did not record; a call on a
    truly empty list launches nothing, so an empty first list means the shapes are unknown.
    """
    numels = _list_numels(call, i)
    return numels or None


def _tensor_bytes(call: OpCall, skip: set[int]) -> int:
    """Bytes of the plain (non-list) tensor arguments: a 0-d `other`, a `scalars` tensor."""
    return sum(call.tensor(i).nbytes_read for i in range(len(call.types))
               if i not in skip and call.tensor(i) is not None)


def _foreach(base: str, in_place: bool):
    per = FOREACH_FLOPS[base]

    def cost(call: OpCall) -> Cost | None:
        lists = [i for i, t in enumerate(call.types) if t == LIST]
        if not lists:
            return None
        numels = [_self_numels(call, lists[0])] + [_list_numels(call, i) for i in lists[1:]]
        if any(n is None for n in numels):
            return None
        self_numels = numels[0]
        n = sum(self_numels)
        extra = 0
        if base in _ALPHA:
            alpha = call.scalar(len(call.types) - 1) if len(call.types) >= 3 else None
            if isinstance(alpha, (int, float)) and not isinstance(alpha, bool) and alpha != 1:
                extra = 1
        flops = (per + extra) * n
        dt = _list_dtype(call)
        if dt is None:
            return Cost(flops, None, VECTOR, None)
        size = dtypes.size_of_dtype(dt)
        read_lists = numels[1:] if base in _WRITE_ONLY_SELF else numels
        reads = sum(sum(x) for x in read_lists) * size + _tensor_bytes(call, set(lists))
        if base in _REDUCING:
            written = len(self_numels) * _reduced_size(call, size)
        else:
            written = n * size  # in place: self; out of place: a new list of self's shapes
        return Cost(flops, reads + written, VECTOR, dt, written=written)

    cost.__name__ = f"foreach_{base}{'_' if in_place else ''}"
    return cost


def _reduced_size(call: OpCall, size: int) -> int:
    # _foreach_norm(self, ord, dtype?): the result's dtype is `dtype` (a ScalarType code) or the input's
    if call.name == "aten::_foreach_norm":
        code = call.scalar(2)
        if isinstance(code, int) and not isinstance(code, bool) and code in dtypes.SCALAR_TYPE_CODES:
            return dtypes.size_of_dtype(dtypes.SCALAR_TYPE_CODES[code])
    return size


_OUT_OF_PLACE_ONLY = {"clone", "max", "norm", "powsum"}  # no in-place form
for _base in FOREACH_FLOPS:
    formula(f"aten::_foreach_{_base}", uses_kernels=True)(_foreach(_base, False))
    if _base not in _OUT_OF_PLACE_ONLY:
        formula(f"aten::_foreach_{_base}_", uses_kernels=True)(_foreach(_base, True))


@formula("aten::_foreach_mm", uses_kernels=True)
def foreach_mm(call: OpCall) -> Cost | None:
    # _foreach_mm(self[], mat2[]): one [M, K] @ [K, N] product per pair: 2*M*N*K each.
    a, b = call.dims[0], call.dims[1]
    if not a:  # the shapes were not recorded
        return None
    flops = 0
    for x, y in zip(a, b, strict=True):
        (m, k), (k2, n) = x, y
        if k != k2:
            return None
        flops += 2 * m * n * k
    return Cost(flops, None, MATRIX, _list_dtype(call))


# ---------------------------------------------------------------- fused optimizers


def _fused(call: OpCall, read_lists: list[int], written_lists: list[int], per: int,
           steps: int | None) -> Cost | None:
    """Bytes: the lists at `read_lists` read, those at `written_lists` written, each a list of
    the parameters' shapes (empty lists, e.g. max_exp_avg_sqs without amsgrad, add nothing);
    `steps`: the position of the state_steps list, 0-d step counters the kernels read as float
    (4 bytes each); optional tensors (grad_scale, found_inf, a tensor lr) read at their dtype."""
    params = _self_numels(call, 0)
    if params is None:
        return None
    n = sum(params)
    flops = per * n
    dt = _list_dtype(call)
    if dt is None:
        return Cost(flops, None, VECTOR, None)
    size = dtypes.size_of_dtype(dt)
    total = {i: sum(_list_numels(call, i) or []) for i in set(read_lists) | set(written_lists)}
    reads = sum(total[i] for i in read_lists) * size
    written = sum(total[i] for i in written_lists) * size
    if steps is not None:
        reads += len(_list_numels(call, steps) or []) * 4
    skip = {i for i, t in enumerate(call.types) if t == LIST}
    reads += _tensor_bytes(call, skip)
    return Cost(flops, reads + written, VECTOR, dt, written=written)


def _flag(call: OpCall, i: int) -> bool:
    return call.scalar(i) is True


def _has_tensor(call: OpCall, i: int) -> bool:
    return call.tensor(i) is not None


@formula("aten::_fused_adam_", "aten::_fused_adamw_", "aten::_fused_adam", uses_kernels=True)
def fused_adam(call: OpCall) -> Cost | None:
    """_fused_adam(w)_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr, beta1,
    beta2, weight_decay, eps, amsgrad, maximize, grad_scale?, found_inf?).

    Per parameter element (the bias corrections are per tensor): m = beta1*m + (1-beta1)*g (3),
    v = beta2*v + (1-beta2)*g*g (4), denom = sqrt(v) / sqrt(bias_correction2) + eps (3),
    p -= step_size * m / denom (3) = 13; weight decay adds 1 (AdamW: p *= 1 - lr*wd) or 2
    (Adam: g += wd*p), amsgrad's running max 1, maximize's negation 1, unscaling by
    grad_scale 1. Reads params, grads, both moments (and max_exp_avg_sqs), writes params and
    the moments (grads too when unscaled).
    """
    wd = call.scalar(9)
    amsgrad, maximize = _flag(call, 11), _flag(call, 12)
    scaled = _has_tensor(call, 13)
    per = 13 + (0 if not wd else (1 if "adamw" in call.name else 2)) + amsgrad + maximize + scaled
    reads = [0, 1, 2, 3] + ([4] if amsgrad else [])
    written = [0, 2, 3] + ([4] if amsgrad else []) + ([1] if scaled else [])
    return _fused(call, reads, written, per, steps=5)


@formula("aten::_fused_sgd_", "aten::_fused_sgd", uses_kernels=True)
def fused_sgd(call: OpCall) -> Cost | None:
    """_fused_sgd_(params, grads, momentum_buffer_list, weight_decay, momentum, lr, dampening,
    nesterov, maximize, is_first_step, grad_scale?, found_inf?).

    Per element: p -= lr * g (2); weight decay g += wd*p (2); momentum buf = momentum*buf +
    (1-dampening)*g (3; 2 without dampening, as the foreach path's mul_ and add_ with alpha 1 count;
    the buffer is only written on the first step), nesterov g += momentum*buf
    (2); maximize 1, unscaling 1. Reads params and grads (and the buffers after the first step),
    writes params (and the buffers; grads when unscaled).
    """
    wd, momentum, dampening = call.scalar(3), call.scalar(4), call.scalar(6)
    nesterov, maximize, first = _flag(call, 7), _flag(call, 8), _flag(call, 9)
    scaled = _has_tensor(call, 10)
    has_buf = bool(momentum) and bool(_list_numels(call, 2))
    buf = 2 + (1 if dampening else 0)
    per = 2 + (2 if wd else 0) + (buf if has_buf else 0) + (2 if has_buf and nesterov else 0) + maximize + scaled
    reads = [0, 1] + ([2] if has_buf and not first else [])
    written = [0] + ([2] if has_buf else []) + ([1] if scaled else [])
    return _fused(call, reads, written, per, steps=None)


@formula("aten::_fused_adagrad_", "aten::_fused_adagrad", uses_kernels=True)
def fused_adagrad(call: OpCall) -> Cost | None:
    """_fused_adagrad_(params, grads, state_sums, state_steps, lr, lr_decay, weight_decay, eps,
    maximize, grad_scale?, found_inf?).

    Per element: state_sum += g*g (2), std = sqrt(state_sum) + eps (2), p -= clr * g / std (3)
    = 7; weight decay 2, maximize 1, unscaling 1. Reads params, grads, sums; writes params, sums.
    """
    wd = call.scalar(6)
    maximize, scaled = _flag(call, 8), _has_tensor(call, 9)
    per = 7 + (2 if wd else 0) + maximize + scaled
    return _fused(call, [0, 1, 2], [0, 2] + ([1] if scaled else []), per, steps=3)


# ---------------------------------------------------------------- AMP gradient scaling


@formula("aten::_amp_foreach_non_finite_check_and_unscale_", uses_kernels=True)
def amp_unscale(call: OpCall) -> Cost | None:
    """_amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inv_scale): every gradient
    element tested for finiteness (a compare: 1) and multiplied by inv_scale (1) in place, 2 FLOPs
    per element. Reads the gradients and inv_scale, writes the gradients (found_inf is written only
    when a value is not finite: not compulsory)."""
    numels = _self_numels(call, 0)
    if numels is None:
        return None
    n = sum(numels)
    dt = _list_dtype(call)
    if dt is None:
        return Cost(2 * n, None, VECTOR, None)
    size = dtypes.size_of_dtype(dt)
    scale = call.tensor(2)
    reads = n * size + (scale.nbytes_read if scale is not None else 0)
    return Cost(2 * n, reads + n * size, VECTOR, dt, written=n * size)


@formula("aten::_amp_update_scale_", "aten::_amp_update_scale")
def amp_update_scale(call: OpCall) -> Cost | None:
    """_amp_update_scale_(scale, growth_tracker, found_inf, growth_factor, backoff_factor,
    growth_interval): one thread reads the three 0-d tensors and writes the scale and the tracker;
    1 FLOP (the scale multiplied by the growth or the backoff factor)."""
    scale, tracker, found = call.tensor(0), call.tensor(1), call.tensor(2)
    if scale is None or tracker is None or found is None:
        return None
    written = scale.nbytes_read + tracker.nbytes_read
    return Cost(1, scale.nbytes_read + tracker.nbytes_read + found.nbytes_read + written, VECTOR, scale.dtype,
                written=written)

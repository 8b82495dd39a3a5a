"""Elementwise ops and plain data movement (copy, fill).

FLOPs per output element are a convention (`docs/costs.md`): each arithmetic operation,
comparison or transcendental in the defining formula counts 1; GELU counts 20. Bytes:
each input read once at its stored size, the output written once.
"""

from __future__ import annotations

import math
from dataclasses import replace

from wlprof.cost import dtypes
from wlprof.cost.registry import VECTOR, Cost, OpCall, TensorArg, formula, register_wrapper

# name -> FLOPs per output element
UNARY_FLOPS: dict[str, int] = {
    "relu": 1,  # max(x, 0): one comparison
    "clamp_min": 1,  # relu runs as clamp_min(x, 0) on CPU and CUDA
    "clamp_max": 1,
    "clamp": 2,  # min(max(x, lo), hi)
    "threshold": 1,
    "hardtanh": 2,
    "relu6": 2,
    "leaky_relu": 2,  # compare, multiply
    "gelu": 20,  # erf evaluated by a polynomial (docs/costs.md)
    "sigmoid": 4,  # 1 / (1 + exp(-x)): neg, exp, add, div
    "silu": 5,  # x * sigmoid(x)
    "tanh": 1,
    "exp": 1,
    "exp2": 1,
    "expm1": 1,
    "log": 1,
    "log2": 1,
    "log1p": 1,
    "sqrt": 1,
    "rsqrt": 1,
    "reciprocal": 1,
    "neg": 1,
    "abs": 1,
    "sign": 1,
    "sin": 1,
    "cos": 1,
    "tan": 1,
    "sinh": 1,
    "cosh": 1,
    "asin": 1,
    "acos": 1,
    "atan": 1,
    "asinh": 1,
    "acosh": 1,
    "atanh": 1,
    "erf": 1,
    "square": 1,
    "softplus": 3,  # log(1 + exp(x))
    "mish": 5,  # x * tanh(softplus(x))
    "elu": 3,
    "hardswish": 4,
    "hardsigmoid": 3,
    "logical_not": 1,
    "bitwise_not": 1,
    "floor": 1,
    "ceil": 1,
    "round": 1,
    "trunc": 1,
    "frac": 1,
    "sgn": 1,
    "isnan": 1,
    "nan_to_num": 2,
}

# name -> FLOPs per output element; inputs broadcast to the output shape
BINARY_FLOPS: dict[str, int] = {
    "add": 1,
    "sub": 1,
    "rsub": 1,
    "mul": 1,
    "div": 1,
    "true_divide": 1,
    "floor_divide": 1,
    "remainder": 1,
    "fmod": 1,
    "pow": 1,
    "maximum": 1,
    "minimum": 1,
    "fmax": 1,
    "fmin": 1,
    "atan2": 1,
    "eq": 1,
    "ne": 1,
    "lt": 1,
    "le": 1,
    "gt": 1,
    "ge": 1,
    "logical_and": 1,
    "logical_or": 1,
    "logical_xor": 1,
    "bitwise_and": 1,
    "bitwise_or": 1,
    "bitwise_xor": 1,
    "bitwise_left_shift": 1,
    "bitwise_right_shift": 1,
    "masked_fill": 1,  # one select per element
    "where": 1,  # one select per element
    "lerp": 3,  # a + w * (b - a)
    "addcmul": 3,  # self + value * t1 * t2
    "addcdiv": 3,
    "hypot": 3,
    "xlogy": 2,
    "copysign": 1,
    "heaviside": 1,
    "sigmoid_backward": 3,
    "threshold_backward": 1,
    "gelu_backward": 20,
    "silu_backward": 7,
}
_BOOL_OUT = {"eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor",
             "logical_not", "isnan"}

# Positional arguments before any `out=` tensor (the schema's own arguments): a unary op
# has 1 unless listed, a binary op 2. The trace names the op without its overload
# (aten::exp, never aten::exp.out) and records `out=` as one more tensor input after
# these, often still empty ([0], resized by the kernel): tensors past this count are
# outputs, never operands. div's third argument is `rounding_mode` (a string) or, in
# div.out, the out tensor: div has two operands.
_ARITY: dict[str, int] = {
    "clamp_min": 2, "clamp_max": 2, "clamp": 3, "threshold": 3, "hardtanh": 3, "leaky_relu": 2,
    "gelu": 2, "elu": 4, "softplus": 3, "nan_to_num": 4,
    "add": 3, "sub": 3, "rsub": 3, "masked_fill": 3, "where": 3, "lerp": 3,
    "addcmul": 4, "addcdiv": 4, "threshold_backward": 3, "gelu_backward": 3,
}
_ALPHA_ARG = {"add": 2, "sub": 2, "rsub": 2}  # position of `alpha`: alpha != 1 costs a multiply more

register_wrapper(
    "aten::to", "aten::_to_copy", "aten::clone", "aten::contiguous", "aten::type_as",  # -> copy_
    "aten::zeros", "aten::ones", "aten::full", "aten::zeros_like", "aten::ones_like",
    "aten::full_like", "aten::new_zeros", "aten::new_ones", "aten::new_full",  # -> fill_ / zero_
    # -> fill_; but on the CPU a dense tensor under 32768 elements is zeroed by a memset
    # inside zero_ itself, with no fill_ nested: those few bytes go uncounted.
    "aten::zero_",
    "aten::stack", "aten::hstack", "aten::vstack",  # -> cat
    "aten::dropout", "aten::feature_dropout",  # identity in eval, -> mul / bernoulli_ in train
    "aten::lift_fresh_copy",
    "aten::randn", "aten::rand", "aten::randint", "aten::randn_like", "aten::rand_like",
    "aten::randint_like",  # -> normal_ / uniform_ / random_ on a new tensor
)

# NumPy-style aliases: each runs its canonical op nested inside (greater -> gt, clip -> clamp)
_ALIASES = (
    "greater greater_equal less less_equal not_equal multiply divide subtract clip absolute negative "
    "arcsin arccos arctan arcsinh arccosh arctanh fix"
).split()
register_wrapper(*(f"aten::{n}{s}" for n in _ALIASES for s in ("", "_")))
register_wrapper("aten::special_expit", "aten::special_erf", "aten::special_logsumexp",  # -> sigmoid, erf, logsumexp
                 "aten::concat", "aten::concatenate",  # -> cat
                 "aten::outer", "aten::ger", "aten::inner", "aten::float_power", "aten::nanmean",  # -> mul, mm, pow, ...
                 "aten::linalg_multi_dot", "aten::linalg_matrix_power",  # -> mm
                 # Python's &, |, ^ and their in-place forms: -> bitwise_and, bitwise_or, bitwise_xor
                 "aten::__and__", "aten::__iand__", "aten::__or__", "aten::__ior__", "aten::__xor__", "aten::__ixor__")


def _broadcast(shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(ndim):
        sizes = {s[len(s) - ndim + i] for s in shapes if len(s) - ndim + i >= 0}
        sizes.discard(1)
        if len(sizes) > 1:
            raise ValueError(f"shapes do not broadcast: {shapes}")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def _result_like(tensors: list[TensorArg]) -> TensorArg:
    # Result dtype: that of the largest non-bool operand (a `where` condition or a
    # mask does not set it). A Python number appears as a 0-d tensor ('double' for
    # 2.0) and does not promote a float32 tensor, even one of one element or none.
    values = [t for t in tensors if t.dtype != "bool"] or tensors
    return max(values, key=lambda t: (len(t.dims) > 0, t.numel))


def _elementwise(call: OpCall, flops_per_element: int, bool_out: bool, arity: int) -> Cost:
    ts = [t for i in range(min(arity, len(call.types))) if (t := call.tensor(i)) is not None]
    out_shape = _broadcast([t.dims for t in ts])
    n = math.prod(out_shape)
    like = _result_like(ts)
    # an in-place comparison (gt_) stores its 0 or 1 in self, at self's dtype
    in_place = call.name.endswith("_")
    out_size = (ts[0].itemsize if in_place and ts else 1) if bool_out else like.itemsize
    reads = sum(t.nbytes_read for t in ts)
    return Cost(flops_per_element * n, reads + n * out_size, VECTOR, like.dtype, written=n * out_size)


def _make_unary(base: str, per: int):
    def unary(call: OpCall) -> Cost | None:
        return _elementwise(call, per, base in _BOOL_OUT, _ARITY.get(base, 1))

    unary.__name__ = f"unary_{base}"
    return unary


# The arithmetic ops on complex values, in real operations per element: an add or subtract is 2 (the
# real and imaginary parts), a multiply 6 (4 products, 2 sums), a divide 11 (the multiply by the
# conjugate 6, the denominator's c^2 + d^2 3, two divides). An alpha scales a complex value: 2 more.
COMPLEX_BINARY_FLOPS: dict[str, int] = {"add": 2, "sub": 2, "rsub": 2, "mul": 6, "div": 11, "true_divide": 11}


def _make_binary(base: str, per: int):
    def binary(call: OpCall) -> Cost | None:
        if base == "where" and len(call.types) == 1:
            return None  # where(condition) is nonzero(condition) (nonzero_numpy nested): costed there
        extra = 0
        pos = _ALPHA_ARG.get(base)
        if pos is not None:
            alpha = call.scalar(pos)
            if isinstance(alpha, (int, float)) and alpha != 1:
                extra = 1
        cost = _elementwise(call, per + extra, base in _BOOL_OUT, _ARITY.get(base, 2))
        if base in COMPLEX_BINARY_FLOPS and cost.flops and any(t.dtype in dtypes.COMPLEX for t in call.tensors[:2]):
            n = cost.flops // (per + extra)
            return replace(cost, flops=n * (COMPLEX_BINARY_FLOPS[base] + 2 * extra))
        return cost

    binary.__name__ = f"binary_{base}"
    return binary


# aten::relu itself dispatches to aten::clamp_min on CPU and CUDA; as a costed op with a
# costed op nested inside, it is then a dispatcher and the cost lands on clamp_min once.
for _base, _per in UNARY_FLOPS.items():
    names = [f"aten::{_base}", f"aten::{_base}_"]
    formula(*names)(_make_unary(_base, _per))

for _base, _per in BINARY_FLOPS.items():
    names = [f"aten::{_base}"] + ([] if _base.endswith("_backward") else [f"aten::{_base}_"])
    formula(*names)(_make_binary(_base, _per))


# Python's << and >> (and <<=, >>=) run their own kernels: shifts, one operation per element
formula("aten::__lshift__", "aten::__ilshift__")(_make_binary("bitwise_left_shift", 1))
formula("aten::__rshift__", "aten::__irshift__")(_make_binary("bitwise_right_shift", 1))


@formula("aten::copy_")
def copy_(call: OpCall) -> Cost | None:
    # copy_(dst, src): read src (at its stored size), write dst; dst is not read.
    dst, src = call.tensor(0), call.tensor(1)
    return Cost(0, src.nbytes_read + dst.numel * dst.itemsize, VECTOR, dst.dtype, written=dst.numel * dst.itemsize)


@formula("aten::fill_", "aten::normal_", "aten::uniform_", "aten::bernoulli_", "aten::random_",
         "aten::exponential_")
def fill_(call: OpCall) -> Cost | None:
    # Writes every element once; random generators' arithmetic is not counted.
    t = call.tensor(0)
    return Cost(0, t.numel * t.itemsize, VECTOR, t.dtype, written=t.numel * t.itemsize)


@formula("aten::arange")
def arange(call: OpCall) -> Cost | None:
    # Overloads by argument count: arange(end, dtype, layout, device, pin_memory),
    # arange(start, end, dtype, ...), arange(start, end, step, dtype, ...), and the out
    # forms arange(end, out), arange(start, end, step, out). The functional forms run the
    # out form nested inside (then a dispatcher): on the CPU the cost lands on the latter.
    n_args = len(call.concrete)
    out = call.tensor(n_args - 1) if n_args in (2, 4) else None
    if out is not None:
        n_scalars = n_args - 1
    else:
        n_scalars = {5: 1, 6: 2, 7: 3}.get(n_args)
        if n_scalars is None:
            return None
    vals = [call.scalar(i) for i in range(n_scalars)]
    if n_scalars == 1:
        start, end, step = 0, vals[0], 1
    else:
        start, end = vals[0], vals[1]
        step = vals[2] if n_scalars == 3 else 1
    code = call.scalar(n_scalars)
    if out is not None and out.dtype is not None:
        dtype = out.dtype
    elif isinstance(code, int) and code in dtypes.SCALAR_TYPE_CODES:
        dtype = dtypes.SCALAR_TYPE_CODES[code]
    else:
        dtype = "int64" if all(isinstance(v, int) for v in (start, end, step)) else "float32"
    n = max(0, math.ceil((end - start) / step))
    return Cost(0, n * dtypes.size_of_dtype(dtype), VECTOR, dtype, written=n * dtypes.size_of_dtype(dtype))


@formula("aten::linspace")
def linspace(call: OpCall) -> Cost | None:
    # linspace(start, end, steps, dtype, layout, device, pin_memory) or the out form
    # linspace(start, end, steps, out): `steps` elements written, FLOPs 0 (as arange). start and
    # end may be 0-dim tensors (read). The functional form runs the out form nested inside (then
    # a dispatcher). The out tensor may be recorded before its resize: `steps` gives the count.
    n_args = len(call.concrete)
    steps = call.scalar(2)
    if n_args not in (4, 7) or not isinstance(steps, int) or isinstance(steps, bool) or steps < 0:
        return None
    code = call.scalar(3) if n_args == 7 else None
    out = call.tensor(3) if n_args == 4 else None
    if out is not None and out.dtype is not None:
        dtype = out.dtype
    elif n_args == 7 and isinstance(code, int) and code in dtypes.SCALAR_TYPE_CODES:
        dtype = dtypes.SCALAR_TYPE_CODES[code]
    elif n_args == 7 and code is None:
        dtype = "float32"  # torch's default dtype
    else:
        return None
    ends = sum(t.nbytes_read for i in (0, 1) if (t := call.tensor(i)) is not None)
    written = steps * dtypes.size_of_dtype(dtype)
    return Cost(0, ends + written, VECTOR, dtype, written=written)


@formula("aten::scalar_tensor")
def scalar_tensor(call: OpCall) -> Cost | None:
    # scalar_tensor(s, dtype?, layout?, device?, pin_memory?): one element written, of the `dtype`
    # argument's type (float32, torch's default, when not given)
    code = call.scalar(1)
    if code is None:
        dtype = "float32"
    elif isinstance(code, int) and not isinstance(code, bool) and code in dtypes.SCALAR_TYPE_CODES:
        dtype = dtypes.SCALAR_TYPE_CODES[code]
    else:
        return None
    size = dtypes.size_of_dtype(dtype)
    return Cost(0, size, VECTOR, dtype, written=size)


def _factory_out(call: OpCall, count_args: int):
    """The out tensor of a factory's out form (the argument after its `count_args` sizes), else None."""
    return call.tensor(count_args) if len(call.types) == count_args + 1 else None


@formula("aten::eye")
def eye(call: OpCall) -> Cost | None:
    # eye(n, out) or eye(n, m, out): the out form (the functional eye(n[, m], dtype, layout, device,
    # pin_memory) runs it nested: then a dispatcher) zeroes the result with a nested zero_ (costed on its
    # own) and writes the min(n, m) ones of the diagonal; the out tensor may be recorded before its resize
    n = call.scalar(0)
    two = len(call.types) == 3
    m = call.scalar(1) if two else n
    out = _factory_out(call, 2 if two else 1)
    if out is None or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in (n, m)):
        return None
    written = min(n, m) * out.itemsize
    return Cost(0, written, VECTOR, out.dtype, written=written)


@formula("aten::randperm")
def randperm(call: OpCall) -> Cost | None:
    # randperm(n, generator?, out): the out form (the functional randperm(n, [generator,] dtype, layout,
    # device, pin_memory) runs it nested: then a dispatcher) writes the n values of a permutation; the
    # random draws and swaps are not counted, as for the random generators
    n = call.scalar(0)
    out = call.tensor(len(call.types) - 1) if call.types else None
    if out is None or not isinstance(n, int) or isinstance(n, bool) or n < 0:
        return None
    written = n * out.itemsize
    return Cost(0, written, VECTOR, out.dtype, written=written)

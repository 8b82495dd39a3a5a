"""The cost registry: FLOPs and compulsory bytes of an op call, from its recorded shapes.

A formula is a pure function of one `OpCall` (name, input dims, dtypes, strides and
scalars as torch.profiler recorded them) returning a `Cost`, or None when the shapes
cannot tell; registering a name twice is an error. Conventions: `docs/costs.md`.
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

from wlprof.cost import dtypes

MATRIX = "matrix"  # runs on the matrix units: ceiling is the measured GEMM rate of its dtype
VECTOR = "vector"  # elementwise, reductions, data movement: ceiling is the vector (SIMT) rate
FORMULA = "formula"  # a cost computed from the recorded call (shapes, dtypes, scalars, kernel names)
INDUCTOR = "inductor"  # a cost Inductor recorded for its own kernel (kernel_num_gb, kernel_flop)
SOURCES = (FORMULA, INDUCTOR)


@dataclass(frozen=True)
class Cost:
    """FLOPs and compulsory bytes of one op call (or what a workload states for its ops).

    `flops` None: the FLOPs cannot be known honestly (a Triton kernel's), the bytes can;
    `bytes` None: the reverse. `written`: the part of `bytes` that is written (None: not
    stated), which decides whether a kernel is placed against the read, write or copy roof.
    `source`: where the numbers come from, FORMULA or INDUCTOR (the `flops_source` column).
    """

    flops: float | None
    bytes: float | None
    unit: str = VECTOR  # MATRIX or VECTOR: which compute ceiling bounds it
    dtype: str | None = None  # canonical dtype of the arithmetic, for the ceiling lookup
    written: float | None = None
    source: str = FORMULA

    def __post_init__(self):
        if self.unit not in (MATRIX, VECTOR):
            raise ValueError(f"Cost.unit must be {MATRIX!r} or {VECTOR!r} (got {self.unit!r})")
        if self.source not in SOURCES:
            raise ValueError(f"Cost.source must be one of {SOURCES} (got {self.source!r})")
        for name in ("flops", "bytes", "written"):
            v = getattr(self, name)
            if v is not None and v < 0:
                raise ValueError(f"Cost.{name} must be non-negative (got {v})")
        if self.written is not None and self.bytes is not None and self.written > self.bytes:
            raise ValueError(f"Cost.written must be at most bytes (got {self.written} > {self.bytes})")


@dataclass(frozen=True)
class TensorArg:
    dims: tuple[int, ...]
    type: str
    strides: tuple[int, ...] | None = None

    @property
    def numel(self) -> int:
        return math.prod(self.dims)

    @property
    def stored(self) -> int:
        """Distinct elements: dims with a zero stride (broadcast) do not add storage."""
        if self.strides is None or len(self.strides) != len(self.dims):
            return self.numel
        return math.prod(d for d, s in zip(self.dims, self.strides, strict=True) if s != 0)

    @property
    def itemsize(self) -> int:
        return dtypes.element_size(self.type) or 0

    @property
    def dtype(self) -> str | None:
        return dtypes.canonical(self.type)

    @property
    def nbytes_read(self) -> int:
        return self.stored * self.itemsize


@dataclass(frozen=True)
class OpCall:
    """One op call as torch.profiler recorded it (`record_shapes=True`)."""

    name: str
    dims: tuple = ()
    types: tuple = ()
    strides: tuple = ()
    concrete: tuple = ()
    ancestors: tuple[str, ...] = ()  # names of enclosing ops, innermost first
    extra: tuple[tuple[str, object], ...] = ()  # other recorded args (Inductor metadata, a collective's message)
    # Names of the device kernels the call launched, distinct, in launch order. Filled only
    # for formulas registered with `uses_kernels=True` (a TensorList's element type is named
    # only by the kernel's template arguments); empty on a CPU trace.
    kernels: tuple[str, ...] = ()
    # The ops nested directly inside the call, in time order, each with its own recorded inputs
    # (no ancestors, kernels or children of their own). Filled only for formulas registered with
    # `uses_children=True`: a data-dependent size the call's own inputs do not record (the count
    # `aten::nonzero` resizes its output to, the shape `aten::index` restrides its source to).
    children: tuple[OpCall, ...] = ()
    # The op the call is nested directly in, with its own recorded inputs (typed by the call's
    # kernels where the trace wrote no dtypes). Filled only for formulas registered with
    # `uses_parent=True`: inputs the call's own record leaves out that its caller's record holds
    # (PyTorch 1.8's cuDNN backward halves record their size arguments, lists, as `[]`).
    parent: OpCall | None = None
    # The output's dims where the call's record holds neither them nor what sets them (a PyTorch
    # 1.8-1.12 convolution records no stride or padding): the grad_output dims of every backward of
    # the same input and weight dims in the trace, where they all agree. Filled only for formulas
    # registered with `uses_backward=True`.
    output_dims: tuple[int, ...] = ()
    # The ops its thread runs next once the call has ended (a few, at any depth), each with its own
    # recorded inputs: its result's consumers among them. Filled only for formulas registered with
    # `uses_next=True`, and only where the call launched no kernel (a CPU trace): a result's dtype the
    # call's own record leaves out (a TensorList's).
    following: tuple[OpCall, ...] = ()
    # Whether the trace records the strides of its strided tensors (some call of it records a non-empty
    # strides list for a tensor of non-empty dims): only then does an empty list mark a sparse layout
    # (`non_strided`).
    strides_recorded: bool = False

    @classmethod
    def from_args(cls, name: str, args: dict, ancestors: Sequence[str] = (),
                  kernels: Sequence[str] = (), children: Sequence[OpCall] = (),
                  parent: OpCall | None = None, output_dims: Sequence[int] = (),
                  following: Sequence[OpCall] = (), strides_recorded: bool = False) -> OpCall:
        def tup(x):
            return tuple(tup(v) if isinstance(v, list) else v for v in x) if isinstance(x, list) else ()

        def strs(x):  # a recorded list of strings; anything else in a foreign trace is ignored
            return tuple(v if isinstance(v, str) else "" for v in x) if isinstance(x, list) else ()

        return cls(
            name=name,
            dims=tup(args.get("Input Dims", [])),
            types=strs(args.get("Input type", [])),
            strides=tup(args.get("Input Strides", [])),
            concrete=strs(args.get("Concrete Inputs", [])),
            ancestors=tuple(ancestors),
            extra=tuple((k, v) for k, v in args.items() if k not in _INPUT_KEYS and not isinstance(v, (list, dict))),
            kernels=tuple(kernels),
            children=tuple(children),
            parent=parent,
            output_dims=tuple(output_dims),
            following=tuple(following),
            strides_recorded=strides_recorded,
        )

    def arg(self, key: str, default=None):
        """A recorded arg beside the inputs (`kernel_num_gb`, `Collective name`, ...)."""
        for k, v in self.extra:
            if k == key:
                return v
        return default

    def tensor(self, i: int) -> TensorArg | None:
        """Input i as a tensor, or None when it is not a tensor (a scalar, None, a list)."""
        if i >= len(self.types) or not dtypes.is_tensor_type(self.types[i]):
            return None
        dims = self.dims[i] if i < len(self.dims) else ()
        if not all(isinstance(d, int) for d in dims):
            return None
        strides = self.strides[i] if i < len(self.strides) else None
        if strides is not None and not (isinstance(strides, tuple) and all(isinstance(s, int) for s in strides)):
            strides = None
        return TensorArg(tuple(dims), self.types[i], tuple(strides) if strides is not None else None)

    @cached_property
    def tensors(self) -> list[TensorArg]:
        """Every tensor input, in order (scalars and lists skipped)."""
        return [t for i in range(len(self.types)) if (t := self.tensor(i)) is not None]

    def scalar(self, i: int):
        """Input i's concrete value parsed as JSON-ish ('1' -> 1, '[1, 0]' -> [1, 0], '' -> None)."""
        return parse_scalar(self.concrete[i]) if i < len(self.concrete) else None


def parse_scalar(raw):
    """A recorded `Concrete Inputs` string as a value: '1' -> 1, '[1, 0]' -> [1, 0], 'False' -> False,
    '[True, True, False]' -> [True, True, False], '1.0000000000000001e-05' -> 1e-05, '' -> None;
    anything else stays the string it is."""
    if raw in ("", None):
        return None
    try:
        return json.loads(raw)
    except (TypeError, ValueError):
        if isinstance(raw, str) and raw.startswith("[") and raw.endswith("]"):
            try:  # a list Python printed: booleans as True/False, floats as '0.'
                value = ast.literal_eval(raw)
                if isinstance(value, list):
                    return value
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                pass
        low = str(raw).strip().lower()
        if low in ("true", "false"):
            return low == "true"
        try:
            return float(raw)
        except (TypeError, ValueError):
            return raw


_INPUT_KEYS = frozenset(("Input Dims", "Input type", "Input Strides", "Concrete Inputs"))
Formula = Callable[[OpCall], "Cost | None"]


@dataclass(frozen=True)
class Entry:
    formula: Formula
    aux_children: bool
    uses_kernels: bool = False
    aux_ops: frozenset[str] = frozenset()  # nested ops of these names only are auxiliary
    uses_children: bool = False
    uses_parent: bool = False
    uses_backward: bool = False
    uses_next: bool = False
    dispatches_to: frozenset[str] = frozenset()  # nested ops of these names do the work instead
    sparse_inputs: bool = False  # the formula reads sparse inputs as what they are (see `non_strided`)


_FORMULAS: dict[str, Entry] = {}
_WRAPPERS: set[str] = set()
# Formulas chosen by a recorded arg rather than the op's name: (arg key, value) -> entry.
# An Inductor Triton launch is a cpu_op named after its kernel (`triton_poi_fused_add_0`),
# with `kernel_backend: triton` among its args.
_ARG_FORMULAS: dict[tuple[str, str], Entry] = {}

# Ops that never do work on a device: views, metadata and allocation.
VIEW_OPS: frozenset[str] = frozenset(
    "aten::" + n
    for n in (
        "as_strided as_strided_ view _unsafe_view reshape _reshape_alias view_as expand expand_as t transpose "
        "permute numpy_T unsqueeze squeeze select slice narrow unbind split split_with_sizes chunk "
        "t_ transpose_ unsqueeze_ squeeze_ swapaxes swapaxes_ swapdims swapdims_ "
        "alias detach detach_ lift_fresh resolve_conj resolve_neg empty empty_strided empty_like "
        # a complex tensor's conjugate and a negation as views: a bit set on the result, no data moved
        "conj _conj _neg_view "
        "new_empty new_empty_strided resize_ set_ _nnz crow_indices col_indices values indices "
        "_indices _values size stride is_same_size is_nonzero unflatten flatten movedim moveaxis diagonal "
        "unfold real imag view_as_real view_as_complex _has_compatible_shallow_copy_type "
        "record_stream contiguous_format _to_dense lift mT mH matrix_H adjoint broadcast_tensors result_type "
        "_nnpack_available cudnn_is_acceptable unsafe_split unsafe_split_with_sizes unsafe_chunk resize_as_ "
        "dense_dim sparse_dim is_coalesced is_pinned _coalesced_ "
        # sparse constructors: the index and value tensors given are kept as they are (a dtype or
        # device conversion runs nested, costed on its own)
        "sparse_coo_tensor _sparse_coo_tensor_unsafe _sparse_coo_tensor_with_dims_and_tensors "
        "sparse_compressed_tensor _sparse_compressed_tensor_unsafe sparse_csr_tensor sparse_csc_tensor "
        "sparse_bsr_tensor sparse_bsc_tensor _sparse_csr_tensor_unsafe _sparse_csc_tensor_unsafe "
        "_sparse_bsr_tensor_unsafe _sparse_bsc_tensor_unsafe"
    ).split()
) | frozenset(("detach", "detach_"))  # the autograd kernels of detach and detach_ record these names

# Data-movement and initialization ops that other ops run as setup (a bias copied into
# the output, an output zero-filled, a scalar read to the host). Nested inside a costed op
# they are auxiliary work of their own: they do not make their parent a dispatcher.
SUPPORT_OPS: frozenset[str] = frozenset(
    "aten::" + n
    for n in "copy_ fill_ zero_ normal_ uniform_ bernoulli_ random_ exponential_ arange _local_scalar_dense".split()
)


def formula(*names: str, aux_children: bool | Sequence[str] = False, uses_kernels: bool = False,
            uses_children: bool = False, uses_parent: bool = False,
            uses_backward: bool = False, uses_next: bool = False,
            dispatches_to: Sequence[str] = (), sparse_inputs: bool = False) -> Callable[[Formula], Formula]:
    """Register `fn` as the cost formula of each aten op in `names` (duplicates refused).

    `aux_children`: True when any op nested inside is auxiliary work of the op's own (it
    stays costed); or the names of the nested ops that are (`("aten::sum",)`: a backward that
    sums a bias gradient with a nested op stays costed, one that runs an implementation
    op nested inside is a dispatcher). `uses_kernels`: the formula reads `OpCall.kernels`
    (the launched kernels' names); `uses_children`: it reads `OpCall.children`; `uses_parent`:
    it reads `OpCall.parent`; `uses_backward`: it reads `OpCall.output_dims`; `uses_next`: it reads
    `OpCall.following`. `dispatches_to`: nested ops that, where the call runs one, do the whole
    work instead of the call, which is then a dispatcher even with `aux_children` (`_index_put_impl_`
    running a boolean mask and a scalar value as one `masked_fill_`). `sparse_inputs`: the formula
    costs a sparse input as such (from what its nested calls record); any other formula is not applied
    to a call with one (`non_strided`).
    """
    named = frozenset() if isinstance(aux_children, bool) else frozenset(aux_children)

    def deco(fn: Formula) -> Formula:
        for name in names:
            _check_new(name)
            _FORMULAS[name] = Entry(fn, aux_children is True, uses_kernels, named, uses_children, uses_parent,
                                    uses_backward, uses_next, frozenset(dispatches_to), sparse_inputs)
        return fn

    return deco


def arg_formula(key: str, value: str) -> Callable[[Formula], Formula]:
    """Register `fn` as the cost formula of every call whose recorded arg `key` equals `value`
    (`arg_formula("kernel_backend", "triton")`: Inductor's Triton launches, whatever their
    names). A call whose name has a formula keeps that one. Each (key, value) once."""

    def deco(fn: Formula) -> Formula:
        if (key, value) in _ARG_FORMULAS:
            raise ValueError(f"a formula for calls with {key} == {value!r} is already registered")
        _ARG_FORMULAS[(key, value)] = Entry(fn, False)
        return fn

    return deco


def register_wrapper(*names: str) -> None:
    """Declare ops that always dispatch to another op that does (and is costed for) the work."""
    for name in names:
        _check_new(name)
        _WRAPPERS.add(name)


# Ops without a namespace that carry a cost of their own: the collective a c10d op records
UNNAMESPACED = frozenset({"record_param_comms"})


def _check_new(name: str) -> None:
    if "::" not in name.strip(":") and name not in UNNAMESPACED:
        raise ValueError(f"op names are registered with their namespace, e.g. 'aten::mm' (got {name!r})")
    if name in _FORMULAS or name in _WRAPPERS or name in VIEW_OPS:
        raise ValueError(f"{name} is already registered in the cost registry")


def has_formula(name: str) -> bool:
    return name in _FORMULAS


def selects_formula(args: Mapping) -> bool:
    """Whether a call's recorded args choose a formula registered with `arg_formula`."""
    return any(args.get(k) == v for k, v in _ARG_FORMULAS)


def uses_kernels(name: str) -> bool:
    entry = _FORMULAS.get(name)
    return bool(entry and entry.uses_kernels)


def uses_children(name: str) -> bool:
    entry = _FORMULAS.get(name)
    return bool(entry and entry.uses_children)


def uses_next(name: str) -> bool:
    entry = _FORMULAS.get(name)
    return bool(entry and entry.uses_next)


def uses_parent(name: str) -> bool:
    entry = _FORMULAS.get(name)
    return bool(entry and entry.uses_parent)


def uses_backward(name: str) -> bool:
    entry = _FORMULAS.get(name)
    return bool(entry and entry.uses_backward)


# The autograd engine's own scopes: a node of the generated backward formulas (`AddmmBackward0`; a
# custom Python function's node has no number and may run unrecorded work), the engine's C++ nodes
# (`torch::autograd::AccumulateGrad`, `CopySlices`) and its call of a node
# (`autograd::engine::evaluate_function: ...`). Their work is the aten ops nested inside; their self
# time is the engine's bookkeeping.
_ENGINE_NODE = re.compile(r"[A-Za-z0-9_]+Backward[0-9]+")
_ENGINE_SCOPES = ("autograd::engine::evaluate_function: ", "torch::autograd::")


def is_wrapper(name: str) -> bool:
    return name in _WRAPPERS or name.startswith(_ENGINE_SCOPES) or _ENGINE_NODE.fullmatch(name) is not None


def is_view(name: str) -> bool:
    return name in VIEW_OPS


def aux_children(name: str) -> bool:
    entry = _FORMULAS.get(name)
    return bool(entry and entry.aux_children)


def aux_ops(name: str) -> frozenset[str]:
    """The names of the nested ops that are auxiliary work of `name` (empty: none, or all when
    `aux_children(name)`)."""
    entry = _FORMULAS.get(name)
    return entry.aux_ops if entry else frozenset()


def dispatches_to(name: str) -> frozenset[str]:
    """The nested ops that, where `name` runs one, do its whole work (`name` is then a dispatcher)."""
    entry = _FORMULAS.get(name)
    return entry.dispatches_to if entry else frozenset()


def is_aux_of(parent: str, child: str) -> bool:
    """Whether an op `child` nested in `parent` is auxiliary work of `parent`'s own."""
    entry = _FORMULAS.get(parent)
    if entry is None or child in entry.dispatches_to:
        return False
    return entry.aux_children or child in entry.aux_ops


def formula_family(name: str) -> str | None:
    """The family of the op's registered formula: the name of the module that registers it
    (`elementwise`, `reductions`, `indexing`, ...), or None where the op has no formula."""
    entry = _FORMULAS.get(name)
    return entry.formula.__module__.rsplit(".", 1)[-1] if entry is not None else None


def registered_ops() -> list[str]:
    return sorted(_FORMULAS)


def wrappers() -> list[str]:
    return sorted(_WRAPPERS)


def registered_args() -> list[tuple[str, str]]:
    return sorted(_ARG_FORMULAS)


def _entry(call: OpCall) -> Entry | None:
    entry = _FORMULAS.get(call.name)
    if entry is None and _ARG_FORMULAS:
        for (k, v), e in _ARG_FORMULAS.items():
            if call.arg(k) == v:
                return e
    return entry


def records_strides(args: Mapping) -> bool:
    """Whether a call's recorded args hold a non-empty strides list for a tensor of non-empty dims."""
    dims, types, strides = args.get("Input Dims"), args.get("Input type"), args.get("Input Strides")
    if not (isinstance(dims, list) and isinstance(types, list) and isinstance(strides, list)):
        return False
    return any(isinstance(d, list) and d and all(isinstance(v, int) for v in d) and isinstance(st, list) and st
               and isinstance(t, str) and dtypes.is_tensor_type(t)
               for d, t, st in zip(dims, types, strides, strict=False))


def non_strided(call: OpCall) -> bool:
    """Whether a tensor argument of the call is of a non-strided layout (sparse COO or compressed): the
    profiler records such a tensor with its dense sizes and an empty strides list, in a trace that
    records every strided tensor's strides (`OpCall.strides_recorded`). Its stored elements (nnz) are
    not recorded, so a dense formula would count the dense sizes."""
    if not call.strides_recorded or not call.strides:
        return False  # a trace without strides tells no layout
    for i, kind in enumerate(call.types):
        if not dtypes.is_tensor_type(kind) or i >= len(call.dims) or i >= len(call.strides):
            continue
        dims, strides = call.dims[i], call.strides[i]
        if isinstance(dims, tuple) and dims and all(isinstance(d, int) for d in dims) and strides == ():
            return True
    return False


def cost_of(call: OpCall) -> Cost | None:
    """The call's cost, or None when no formula applies, the shapes cannot tell, or a sparse input
    would be costed at its dense sizes (`non_strided`)."""
    entry = _entry(call)
    if entry is None:
        return None
    if not entry.sparse_inputs and non_strided(call):
        return None
    try:
        return entry.formula(call)
    except (LookupError, TypeError, ValueError, ArithmeticError, AttributeError):
        # A recorded call whose arguments do not have the shape the formula expects
        # (another overload, a foreign trace): unknown, never a guess. LookupError covers
        # an unknown dtype name (KeyError), ArithmeticError an infinite arange bound.
        return None

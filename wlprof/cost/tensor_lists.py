"""Shapes of the tensor lists a trace left unrecorded, recovered from the backward's gradients.

torch.profiler records a long TensorList argument as `[]`: a real model's optimizer step
(`_fused_adamw_`, every `_foreach_*` of a foreach optimizer, AMP's unscale) then has no shapes,
and its bytes are unknown. The same trace holds the shapes another way: every parameter's
gradient passes through a `torch::autograd::AccumulateGrad` op whose `Input Dims` is the
gradient's shape and whose `Input type` is its dtype, and the optimizer works on exactly the
parameters that received a gradient.

A recovered list is checked against what the call launched. A multi-tensor-apply kernel runs one
block per chunk of 65,536 elements of one tensor (ATen's `kChunkSize`), so the blocks of all its
launches sum to `sum(ceil(numel / 65536))` over the list. The gradients accumulated since the
previous optimizer-like call (one backward, or several identical ones under gradient
accumulation), of the dtype the kernels name, are taken as the list only when that sum equals
the launched blocks; a list of 0-d step counters (one block per tensor) is taken only when the
block count equals the parameter count and the gradients' sum does not (never in an SGD step,
which keeps no counters). Calls of the same op on other parameter groups whose lists were recorded
take their tensors out of the candidates first. Anything else (several unrecorded parameter groups,
sharded parameters, a list of activations, no backward in the trace) stays unrecorded. Recovered
calls are marked `op_input_dims_source = gradients`.

wlprof's own workloads record their list calls instead (`recording_lists`, a dispatch mode run
over one untimed step; `fill_declared`, `op_input_dims_source = workload`). `launches` and `depth`
give the kernels a multi-tensor-apply call launches, which the predictor charges a floor each.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from wlprof.columns import coded_names
from wlprof.cost import dtypes
from wlprof.cost.kernel_types import multi_tensor_dtype
from wlprof.cost.optimizers import LIST_DTYPE
from wlprof.cost.registry import OpCall

CHUNK = 65536  # elements one multi-tensor-apply block processes
GRADIENT_OP = "torch::autograd::AccumulateGrad"
LIST_PREFIXES = ("aten::_foreach_", "aten::_fused_", "aten::_amp_foreach_")
MTA_KERNEL = "multi_tensor_apply_kernel"
# the step regions of torch.optim's optimizers that keep no step counters (`Optimizer.step#SGD.step`)
NO_COUNTERS = ("Optimizer.step#SGD.step",)
TRACE, GRADIENTS, WORKLOAD = "trace", "gradients", "workload"

# fused optimizers: which positions hold parameter-shaped lists, which hold the 0-d step
# counters, and which parameter-shaped list exists only under a flag (position, flag position)
_FUSED_ROLES: dict[str, tuple[tuple[int, ...], tuple[int, ...], tuple[tuple[int, int], ...]]] = {
    "adam": ((0, 1, 2, 3), (5,), ((4, 11),)),  # max_exp_avg_sqs only with amsgrad
    "sgd": ((0, 1), (), ((2, 4),)),  # momentum buffers only with momentum != 0
    "adagrad": ((0, 1, 2), (3,), ()),
}


@dataclass(frozen=True)
class ListCall:
    """One call of a list op as the dispatcher saw it: its tensor lists' shapes by argument position."""

    name: str  # 'aten::_foreach_add_'
    lists: tuple[tuple[int, tuple[tuple[int, ...], ...]], ...]
    dtype: str | None = None  # the first list's dtype ('float32'), which the profiler does not record


def list_call(func, args, kwargs) -> ListCall | None:
    """The ListCall of an aten call seen by a TorchDispatchMode, or None for an op that is no list op
    or has no tensor list. Positions follow the schema, as the profiler's `Input Dims` do."""
    import torch

    schema = func._schema
    name = schema.name if "::" in schema.name else f"aten::{schema.name}"
    if not name.startswith(LIST_PREFIXES):
        return None
    lists, dtype = [], None
    for i, arg in enumerate(schema.arguments):
        v = args[i] if i < len(args) else (kwargs or {}).get(arg.name)
        if isinstance(v, (list, tuple)) and v and all(isinstance(t, torch.Tensor) for t in v):
            lists.append((i, tuple(tuple(t.shape) for t in v)))
            dtype = dtype or str(v[0].dtype).removeprefix("torch.")
    return ListCall(name, tuple(lists), dtype) if lists else None


def recording_lists():
    """A TorchDispatchMode that appends the ListCall of every list op it sees to its `calls`."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class ListRecorder(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.calls: list[ListCall] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            c = list_call(func, args, kwargs)
            if c is not None:
                self.calls.append(c)
            return func(*args, **(kwargs or {}))

    return ListRecorder()


def fill_declared(ops: pd.DataFrame, args_table: list[dict], declared: Sequence[ListCall],
                  rows: pd.DataFrame | None = None) -> tuple[list[dict], pd.DataFrame, np.ndarray | None]:
    """The args table and ops with the `[]` lists of every step's list ops filled from `declared`, the
    list calls of one step as a workload recorded them, and a per-op flag of the filled.

    A step's list ops must be the declared calls by name and order; where the trace has the call's
    multi-tensor-apply kernels, their blocks must match the filled shapes, else the call stays as recorded.
    """
    if not declared or not len(ops):
        return args_table, ops, None
    names = ops.name.to_numpy(dtype=object)
    is_list = _is_list_op(names, coded_names(ops))
    if not is_list.any():
        return args_table, ops, None
    launched = _launched_blocks(rows, np.flatnonzero(is_list)) if rows is not None and len(rows) else {}
    want = [c.name for c in declared]
    # the outermost list ops: one under a dispatch mode is recorded again nested in itself
    parent = ops.parent.to_numpy() if "parent" in ops else np.full(len(ops), -1)
    outer = np.full(len(ops), -1)  # each op's nearest list-op ancestor (parents precede their children)
    for i in np.flatnonzero(parent >= 0).tolist():
        p = parent[i]
        outer[i] = p if is_list[p] else outer[p]
    nested = is_list & (outer >= 0)
    pos = np.flatnonzero(is_list & ~nested)
    pos = pos[np.lexsort((ops.ts_ns.to_numpy()[pos], ops.step.to_numpy()[pos]))]
    steps = ops.step.to_numpy()[pos]
    args_id = ops.args_id.to_numpy()
    table, new_ids, flag = list(args_table), args_id.copy(), np.zeros(len(ops), bool)
    memo: dict[tuple[int, int], tuple[int, bool] | None] = {}
    for s in np.unique(steps):
        seq = pos[steps == s]
        if [names[p] for p in seq] != want:
            continue
        for j, p in enumerate(seq.tolist()):
            key = (int(args_id[p]), j)
            if key not in memo:
                memo[key] = _fill_from(table, int(args_id[p]), declared[j])
            if memo[key] is None:
                continue
            aid, filled = memo[key]
            blocks = launched.get(p)
            first = next((d for d in table[aid]["Input Dims"] if d and isinstance(d[0], list)), None)
            if filled and blocks is not None and first is not None and _blocks([tuple(x) for x in first]) != blocks:
                continue
            new_ids[p], flag[p] = aid, filled
    for c in np.flatnonzero(nested).tolist():
        p = outer[c]
        if new_ids[p] != args_id[p] and names[c] == names[p] and args_id[c] == args_id[p]:
            new_ids[c], flag[c] = new_ids[p], flag[p]
    if (new_ids == args_id).all():
        return args_table, ops, None
    out = ops.copy()
    out["args_id"] = new_ids
    return table, out, flag


def _fill_from(table: list[dict], aid: int, call: ListCall) -> tuple[int, bool] | None:
    """The args id of the call's args with its `[]` lists filled and its lists' dtype added, and whether
    any list was filled; None where there is nothing to add."""
    args = table[aid]
    empty = set(_empty_lists(args)) & set(dict(call.lists))
    typed = call.dtype is not None and LIST_DTYPE not in args
    if not empty and not typed:
        return None
    dims = list(args["Input Dims"])
    given = dict(call.lists)
    for i in empty:
        dims[i] = [list(x) for x in given[i]]
    table.append({**args, "Input Dims": dims, **({LIST_DTYPE: call.dtype} if call.dtype else {})})
    return len(table) - 1, bool(empty)


def _is_list_op(names: np.ndarray, coded: tuple | None = None) -> np.ndarray:
    """Which of the op `names` are list ops, tested once per distinct name (per code, where the ops keep
    the parser's codes: `columns.coded_names`)."""
    from wlprof.columns import per_distinct

    def test(n) -> bool:
        return isinstance(n, str) and n.startswith(LIST_PREFIXES)

    if coded is None:
        return per_distinct(names, test)
    codes, by_code, held = coded
    answer = np.zeros(len(by_code), bool)
    answer[held] = [test(by_code[c]) for c in held.tolist()]
    return answer[codes]


def _launched_blocks(rows: pd.DataFrame, positions) -> dict[int, int]:
    """Blocks of the multi-tensor-apply kernels each op at `positions` launched."""
    kern = rows[(rows.kind.to_numpy() == "kernel") & rows.has_op.to_numpy()]
    kern = kern[kern.name.str.contains(MTA_KERNEL, regex=False) & kern.op_pos.isin(positions)]
    if kern.empty:
        return {}
    grid = (kern.grid_x.to_numpy(np.int64) * np.maximum(kern.grid_y.to_numpy(np.int64), 1)
            * np.maximum(kern.grid_z.to_numpy(np.int64), 1))
    return {int(k): int(v) for k, v in pd.Series(grid).groupby(kern.op_pos.to_numpy()).sum().items()}


def _role_key(name: str) -> str | None:
    for key in ("adagrad", "adam", "sgd"):
        if name.startswith(f"aten::_fused_{key}"):
            return key
    return None


def _blocks(shapes: Sequence[tuple[int, ...]]) -> int:
    return sum(-(-math.prod(s) // CHUNK) for s in shapes)


def _empty_lists(args: dict) -> list[int]:
    """Positions of the TensorList arguments recorded as `[]`."""
    types, dims = args.get("Input type"), args.get("Input Dims")
    if not isinstance(types, list) or not isinstance(dims, list) or len(types) != len(dims):
        return []
    return [i for i, (t, d) in enumerate(zip(types, dims, strict=False)) if t == "TensorList" and d == []]


def _gradients(ops: pd.DataFrame, args_table: list[dict]) -> tuple[np.ndarray, list, list]:
    """Start times, shapes and canonical dtypes of the recorded gradient accumulations."""
    sel = np.flatnonzero(ops.name.to_numpy(dtype=object) == GRADIENT_OP)
    ts = ops.ts_ns.to_numpy()[sel]
    order = np.argsort(ts, kind="stable")
    starts, shapes, kinds = [], [], []
    for i in sel[order].tolist():
        args = args_table[int(ops.args_id.iat[i])]
        dims, types = args.get("Input Dims"), args.get("Input type")
        if not isinstance(dims, list) or not dims or not isinstance(dims[0], list):
            continue
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in dims[0]):
            continue
        starts.append(int(ops.ts_ns.iat[i]))
        shapes.append(tuple(dims[0]))
        kinds.append(dtypes.canonical(types[0]) if isinstance(types, list) and types else None)
    return np.array(starts, dtype=np.int64), shapes, kinds


def _units(shapes: list[tuple], kinds: list) -> list[list[tuple]]:
    """The readings of a gradient sequence as one backward repeated k times (gradient
    accumulation), k = 1 first: each a repeating unit of the sequence."""
    n = len(shapes)
    return [shapes[:n // k] for k in range(1, n + 1)
            if n % k == 0 and shapes[:n // k] * k == shapes and kinds[:n // k] * k == kinds]


def recover(ops: pd.DataFrame, args_table: list[dict], rows: pd.DataFrame | None
            ) -> tuple[list[dict], pd.DataFrame, np.ndarray | None]:
    """The args table and ops with recovered tensor-list shapes, and a per-op flag of the recovered.

    Returns the inputs unchanged (and None) when nothing is recovered.
    """
    if rows is None or not len(rows) or not len(ops):
        return args_table, ops, None
    names = ops.name.to_numpy(dtype=object)
    if not (names == GRADIENT_OP).any():  # no backward in the trace (inference): nothing to recover from
        return args_table, ops, None
    is_list = _is_list_op(names, coded_names(ops))
    if not is_list.any():
        return args_table, ops, None
    args_id = ops.args_id.to_numpy()
    targets = [p for p in np.flatnonzero(is_list).tolist() if _empty_lists(args_table[int(args_id[p])])]
    if not targets:
        return args_table, ops, None

    launched = _launched_blocks(rows, targets)
    if not launched:
        return args_table, ops, None
    kern = rows[(rows.kind.to_numpy() == "kernel") & rows.has_op.to_numpy() & rows.op_pos.isin(launched).to_numpy()]
    kernel_names = kern.groupby("op_pos").name.agg(lambda s: tuple(dict.fromkeys(s))).to_dict()

    g_ts, g_shapes, g_kinds = _gradients(ops, args_table)
    if not len(g_ts):
        return args_table, ops, None
    # a pass: the gradients accumulated with no list op starting between them
    list_ts = np.sort(ops.ts_ns.to_numpy()[is_list])
    between = np.searchsorted(list_ts, g_ts, side="left")  # list ops started before each gradient
    pass_id = np.concatenate([[0], np.cumsum(between[1:] != between[:-1])]) if len(g_ts) else np.zeros(0, int)

    table = list(args_table)
    new_ids = args_id.copy()
    flag = np.zeros(len(ops), bool)
    memo: dict[tuple, int | None] = {}
    op_ts = ops.ts_ns.to_numpy()
    regions = ops.region.to_numpy(dtype=object) if "region" in ops else np.full(len(ops), None, dtype=object)
    lists = np.flatnonzero(is_list)
    last_of = dict(zip(lists.tolist(), (np.searchsorted(g_ts, op_ts[lists], side="left") - 1).tolist(), strict=False))
    by_pass: dict[tuple, list[int]] = {}  # the list ops of one name after the same gradient
    for q, g in last_of.items():
        by_pass.setdefault((names[q], g), []).append(q)
    for p in targets:
        blocks = launched.get(p)
        if not blocks:
            continue
        last = last_of[p]  # the latest gradient before the call
        if last < 0:
            continue
        in_pass = np.flatnonzero(pass_id == pass_id[last])
        in_pass = in_pass[in_pass <= last]
        dt = multi_tensor_dtype(kernel_names.get(p, ()))
        counters = not (isinstance(regions[p], str) and regions[p].startswith(NO_COUNTERS))
        # calls of the same op on other parameter groups whose lists were recorded: their tensors are not this one's
        # (each distinct list once: an optimizer calls some ops twice on one group)
        recorded = dict.fromkeys(tuple(_first_list(args_table[int(args_id[q])])) for q in by_pass[(names[p], last)]
                                 if q != p)
        claimed = [x for lst in recorded for x in lst]
        key = (int(args_id[p]), names[p], int(in_pass[0]), int(in_pass[-1]), blocks, dt, counters, tuple(claimed))
        if key not in memo:
            memo[key] = _fill(table, names[p], int(args_id[p]), [g_shapes[i] for i in in_pass],
                              [g_kinds[i] for i in in_pass], blocks, dt, counters, claimed)
        if memo[key] is not None:
            new_ids[p] = memo[key]
            flag[p] = True
    if not flag.any():
        return args_table, ops, None
    out = ops.copy()
    out["args_id"] = new_ids
    return table, out, flag


def _first_list(args: dict) -> list[tuple]:
    """The shapes of a call's first TensorList as recorded ([] where it was not)."""
    types, dims = args.get("Input type"), args.get("Input Dims")
    if not isinstance(types, list) or not isinstance(dims, list):
        return []
    for t, d in zip(types, dims, strict=False):
        if t == "TensorList":
            return [tuple(x) for x in d if isinstance(x, list)] if isinstance(d, list) else []
    return []


def _minus(unit: list[tuple], claimed: list[tuple]) -> list[tuple]:
    """`unit` without one occurrence of each shape in `claimed` (the shapes it does not hold stay claimed by
    nothing)."""
    left = list(unit)
    for c in claimed:
        if c in left:
            left.remove(c)
    return left


def _fill(table: list[dict], name: str, aid: int, shapes: list[tuple], kinds: list, blocks: int,
          dt: str | None, may_count: bool = True, claimed: Sequence[tuple] = ()) -> int | None:
    """Append the call's args with its empty lists filled; its new args id, or None. `may_count`: whether
    the call may work on step counters (not in an optimizer that keeps none); `claimed`: the tensors of
    calls of the same op on other parameter groups (0-d: their step counters)."""
    def of(kind):
        keep = [i for i, k in enumerate(kinds) if k == kind]
        return [shapes[i] for i in keep], [kinds[i] for i in keep]

    held = [c for c in claimed if c]
    zero_d = len(claimed) - len(held)
    params = [u for u in (_minus(u, held) for u in _units(*(of(dt) if dt is not None else (shapes, kinds))))
              if u and _blocks(u) == blocks]
    # 0-d step counters, one block each: torch.optim keeps them in the default float dtype, one list
    # per parameter dtype (and group)
    counters = [[()] * blocks for kind in dict.fromkeys(kinds) for u in _units(*of(kind))
                if len(u) - zero_d == blocks] if may_count and dt in (None, "float32", "float64") else []
    args = table[aid]
    empty = _empty_lists(args)
    dims = list(args["Input Dims"])
    role = _role_key(name)
    if role is not None:
        if len(params) != 1:
            return None
        param_dims = [list(x) for x in params[0]]
        shaped, steps, optional = _FUSED_ROLES[role]
        call = OpCall.from_args(name, args)
        for i in empty:
            if i in shaped:
                dims[i] = param_dims
            elif i in steps:
                dims[i] = [[] for _ in params[0]]
            else:
                flag = dict(optional).get(i)
                v = call.scalar(flag) if flag is not None else None
                if flag is not None and v is not None and v is not False and v != 0:
                    dims[i] = param_dims
    elif len(params) + len(counters) == 1:  # one reading fits, and only one
        # the fast path requires every list to match the first one's shapes
        fill = [list(x) for x in params[0]] if params else [[] for _ in counters[0]]
        for i in empty:
            dims[i] = fill
    else:
        return None
    if dims == args["Input Dims"]:
        return None
    table.append({**args, "Input Dims": dims})
    return len(table) - 1


# tensors one multi-tensor-apply launch takes, by depth (the lists it reads and writes, 1..5), and its blocks
MAX_TENSORS = (110, 64, 48, 36, 30)
MAX_BLOCKS = 320


def launches(numels: Sequence[int], depth: int) -> int:
    """Kernels a multi-tensor-apply call launches over tensors of `numels` elements, `depth` lists
    deep: a launch ends when it holds MAX_BLOCKS chunks, when its MAX_TENSORS-th tensor's last chunk
    is in, or at the last chunk of the last tensor (a tensor split across launches counts in both)."""
    max_t = MAX_TENSORS[min(max(depth, 1), len(MAX_TENSORS)) - 1]
    sizes = [n for n in numels if n > 0]
    out = tensors = blocks = 0
    for i, n in enumerate(sizes):
        tensors += 1
        left = -(-n // CHUNK)
        while left:
            take = min(left, MAX_BLOCKS - blocks)
            blocks += take
            left -= take
            if blocks == MAX_BLOCKS or (not left and (tensors == max_t or i == len(sizes) - 1)):
                out += 1
                blocks = 0
                tensors = 0 if not left else 1
    return out


_REDUCING = ("norm", "max", "powsum")  # foreach ops with one result per tensor, not a list


def depth(name: str, lists: Sequence[Sequence]) -> int:
    """The lists a multi-tensor-apply kernel of `name` walks, from its recorded list arguments: those of
    the first list's shapes (a fused optimizer's parameters, gradients and moments; not its step
    counters), and the result list of an out-of-place foreach op."""
    if not lists:
        return 1
    n = sum(1 for lst in lists if list(lst) == list(lists[0]))
    base = name.split("::", 1)[-1]
    if base.startswith("_foreach_") and not base.endswith("_") and base[len("_foreach_"):] not in _REDUCING:
        n += 1
    return min(n, len(MAX_TENSORS))

"""Which op of a nest carries the cost: views, wrappers and dispatchers never do.

A registered op with a costed op nested inside dispatches to it (aten::relu over
aten::clamp_min, aten::_grouped_mm running one aten::mm per group on the CPU), unless
its formula declares nested ops its own auxiliary work (aten::addmm copying its bias).
An op with an op of its own name nested inside is an overload dispatching to another
(aten::sum -> aten::sum.dim_IntList): only the inner one does the work. An op whose
recorded args choose a formula (an Inductor Triton launch: `kernel_backend` triton) has
one too, whatever its name.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from wlprof.columns import coded_names
from wlprof.cost.registry import (
    SUPPORT_OPS,
    aux_children,
    aux_ops,
    dispatches_to,
    has_formula,
    is_view,
    is_wrapper,
    selects_formula,
)


def flag_ops(ops: pd.DataFrame, args_table: list[dict] | None = None) -> pd.DataFrame:
    """`ops` (name, parent) with is_view, is_wrapper, has_formula and dispatcher columns.

    With `args_table` (and an `args_id` column), ops whose recorded args choose a formula
    (`registry.arg_formula`) count as having one.
    """
    names = ops.name.to_numpy(dtype=object)
    parent = ops.parent.to_numpy()
    n = len(ops)
    # the registry's answers per distinct name, then spread to the rows (a large trace has
    # hundreds of thousands of ops and a few hundred names)
    coded = coded_names(ops) if n else None
    if coded is not None:
        codes, uniq, held = coded
    else:
        codes, uniq = pd.factorize(names) if n else (np.zeros(0, np.int64), np.array([], dtype=object))
        held = np.arange(len(uniq))

    def per_name(pred) -> np.ndarray:
        if not n:
            return np.zeros(0, bool)
        answer = np.zeros(len(uniq), bool)
        answer[held] = [bool(pred(uniq[c])) for c in held.tolist()]
        return answer[codes]

    view, wrapper, formula = per_name(is_view), per_name(is_wrapper), per_name(has_formula)
    if args_table is not None and n and "args_id" in ops:
        aid = ops.args_id.to_numpy()
        acodes, auniq = pd.factorize(aid)
        chosen = np.array([0 <= a < len(args_table) and selects_formula(args_table[a]) for a in auniq], dtype=bool)
        formula = formula | chosen[acodes]
    support, aux = per_name(lambda x: x in SUPPORT_OPS), per_name(aux_children)
    # costed descendants: walk up from every costed op, all of them a level at a time (stop where marked)
    has_costed_desc = np.zeros(n, bool)
    up = parent[formula & ~support]
    while len(up := up[up >= 0]):
        up = up[~has_costed_desc[up]]
        has_costed_desc[up] = True
        up = parent[up]
    # ops whose formula names its auxiliary nested ops: costed unless a costed descendant of
    # another name is nested inside (outside the auxiliary ops' own subtrees)
    named = np.flatnonzero(formula & has_costed_desc & per_name(lambda x: bool(aux_ops(x))))
    if len(named):
        kids = _Children(parent)
        costed = formula & ~support
        for i in named.tolist():
            own = aux_ops(names[i])
            stack, found = kids(i), False
            while stack and not found:
                c = stack.pop()
                if names[c] in own:
                    continue
                found = bool(costed[c])
                stack.extend(kids(c))
            has_costed_desc[i] = found
    child = np.flatnonzero(parent >= 0)
    # ops that run a nested op doing their whole work (`dispatches_to`; the nested op costed, or a wrapper of
    # one: repeat_interleave's int-repeat form copies an expanded view through a clone): dispatchers whatever
    # their aux_children
    handed = np.zeros(n, bool)
    targets = per_name(lambda x: bool(dispatches_to(x)))
    if targets.any() and len(child):
        c = child[targets[parent[child]] & (formula[child] | wrapper[child])]
        c = c[[names[i] in dispatches_to(names[parent[i]]) for i in c.tolist()]] if len(c) else c
        handed[parent[c]] = True
    same_name_parent = np.zeros(n, bool)
    same_name_parent[parent[child][codes[child] == codes[parent[child]]]] = True  # names compared by code
    out = ops.copy(deep=False)  # the columns are added, none is changed
    out["is_view"] = view
    out["is_wrapper"] = wrapper
    out["has_formula"] = formula
    out["dispatcher"] = (formula & has_costed_desc & ~aux) | same_name_parent | handed
    return out


class _Children:
    """The ops nested directly in an op, looked up in the parent array sorted once."""

    def __init__(self, parent: np.ndarray):
        self.order = np.argsort(parent, kind="stable")
        self.sorted = parent[self.order]

    def __call__(self, p: int) -> list[int]:
        lo, hi = np.searchsorted(self.sorted, [p, p + 1])
        return self.order[lo:hi].tolist()


def working(ops: pd.DataFrame) -> np.ndarray:
    """The ops that do work of their own (a CPU trace's rows): not views, wrappers or dispatchers."""
    return (~ops.is_view & ~ops.is_wrapper & ~ops.dispatcher).to_numpy()


def next_siblings(ops: pd.DataFrame) -> np.ndarray:
    """Each op's next sibling on its thread (the next op of the same parent by start; siblings do not
    overlap), -1 for the last."""
    parent = ops.parent.to_numpy()
    order = np.lexsort((ops.ts_ns.to_numpy(), parent, ops.tid.to_numpy(), ops.pid.to_numpy()))
    key = np.stack([ops.pid.to_numpy()[order], ops.tid.to_numpy()[order], parent[order]])
    same = np.all(key[:, 1:] == key[:, :-1], axis=0) if len(order) > 1 else np.zeros(0, bool)
    nxt = np.full(len(ops), -1, np.int64)
    nxt[order[:-1][same]] = order[1:][same]
    return nxt


def ops_after(ops: pd.DataFrame, positions, count: int) -> dict[int, list[int]]:
    """For each op of `positions`, the next `count` ops of its thread that start once it has ended, at
    any depth, in time order; the ops nested in a view (with `flag_ops`' columns) are not among them:
    they read the tensor it was given (a transpose's as_strided, an empty_like's empty_strided)."""
    out: dict[int, list[int]] = {}
    if not len(positions):
        return out
    ts = ops.ts_ns.to_numpy()
    end = ts + ops.dur_ns.to_numpy()
    thread = pd.factorize(pd.MultiIndex.from_arrays([ops.pid.to_numpy(), ops.tid.to_numpy()]))[0]
    order = np.lexsort((ts, thread))
    if "is_view" in ops:
        order = order[~_inside(ops.parent.to_numpy(), ops.is_view.to_numpy())[order]]
    key_thread, key_ts = thread[order], ts[order]
    for p in positions:
        lo = np.searchsorted(key_thread, thread[p], side="left")
        hi = np.searchsorted(key_thread, thread[p], side="right")
        i = lo + np.searchsorted(key_ts[lo:hi], end[p], side="left")
        out[int(p)] = order[i:min(i + count, hi)].tolist()
    return out


def _inside(parent: np.ndarray, flag: np.ndarray) -> np.ndarray:
    """Whether each op is nested, at any depth, in an op of `flag`."""
    inside = np.zeros(len(parent), bool)
    up = parent.copy()
    while (live := up >= 0).any():
        inside[live] |= flag[up[live]]
        up[live] = parent[up[live]]
    return inside


def ancestors(names, parent, i: int, limit: int = 16) -> tuple[str, ...]:
    """Names of the ops enclosing op i, innermost first."""
    out = []
    p = parent[i]
    while p >= 0 and len(out) < limit:
        out.append(names[p])
        p = parent[p]
    return tuple(out)

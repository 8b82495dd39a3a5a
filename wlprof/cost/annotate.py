"""Put costs and roofline numbers on a joined trace: the kernels and ops tables.

Costs are counted once, on the op that launched the kernels (GPU) or did the work
(CPU), and split over that op's device activities by duration (`cost_share`), so the
sum over kernels equals the sum over ops equals the run total. A cost the workload
states (`Stated`: a sparse aggregation, a grouped GEMM's empty groups, where shapes cannot
tell) replaces the formulas of the ops it names in its region, split per step over their
rows in proportion to those formulas' values (by duration where there are none).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence

import numpy as np
import pandas as pd

from wlprof.ceilings import Ceilings
from wlprof.columns import coded_names, filled
from wlprof.columns import object_column as _obj
from wlprof.cost.attribution import ancestors, ops_after
from wlprof.cost.convolution import consumer_outputs, forward_outputs
from wlprof.cost.copies import copy_kind, transfer_label
from wlprof.cost.kernel_types import element_type
from wlprof.cost.registry import (
    FORMULA,
    MATRIX,
    Cost,
    OpCall,
    cost_of,
    records_strides,
    uses_backward,
    uses_children,
    uses_kernels,
    uses_next,
    uses_parent,
)
from wlprof.cost.roofline import add_roofline, tf32_kernels
from wlprof.cost.tensor_lists import GRADIENTS, TRACE, fill_declared
from wlprof.cost.tensor_lists import recover as recover_lists

WORKLOAD, UNKNOWN = "workload", "unknown"  # FORMULA and INDUCTOR come with the Cost


def _json(v) -> str | None:
    return None if v is None else json.dumps(v, separators=(",", ":"))


def _kernel_names(rows: pd.DataFrame, wanted: np.ndarray) -> dict[int, tuple[str, ...]]:
    """The distinct names of the kernels each op in `wanted` launched, in launch order."""
    op_pos = rows.op_pos.to_numpy()
    sel = np.flatnonzero(rows.has_op.to_numpy() & (rows.kind.to_numpy() == "kernel") & np.isin(op_pos, wanted))
    if not len(sel):
        return {}
    sel = sel[np.lexsort((rows.ts_ns.to_numpy()[sel], op_pos[sel]))]
    names = rows.name.to_numpy(dtype=object)[sel]
    pos, start = np.unique(op_pos[sel], return_index=True)
    bounds = list(start[1:]) + [len(sel)]
    return {int(p): tuple(dict.fromkeys(names[a:b])) for p, a, b in zip(pos, start, bounds, strict=True)}


ANCESTORS = 16  # enclosing ops whose names a call carries (`attribution.ancestors`' limit)


def _op_costs(ops: pd.DataFrame, args_table: list[dict], op_positions: np.ndarray,
              rows: pd.DataFrame | None = None) -> tuple[np.ndarray, list]:
    """The cost of each op of `op_positions`: (which, costs), `costs[which[j]]` the cost of op
    `op_positions[j]` (None: a dispatcher's, or where no formula applies).

    Ops alike in all a formula reads (the name, the recorded args, the enclosing ops' names, and where
    the formula reads them the kernels, nested ops, caller and following ops) share one call of it:
    the ops that read none of the latter are grouped by array operations, the others one by one."""
    pos = np.asarray(op_positions, dtype=np.int64)
    names = ops.name.to_numpy(dtype=object)
    dispatcher = ops.dispatcher.to_numpy(dtype=bool)
    parent = ops.parent.to_numpy().astype(np.int64, copy=False)
    aid = ops.args_id.to_numpy().astype(np.int64, copy=False)
    par = parent[pos]
    # the enclosing ops, innermost first (-1 past the outermost), and the names of the ops read as codes
    chain = np.full((len(pos), ANCESTORS), -1, np.int64)
    up = par.copy()
    for k in range(ANCESTORS):
        inside = up >= 0
        if not inside.any():
            break
        chain[inside, k] = up[inside]
        up = np.where(inside, parent[np.maximum(up, 0)], -1)
    coded = coded_names(ops)
    if coded is not None:  # the parser's codes: uniq[code] is the name
        codes, uniq, _ = coded
    else:  # the ops read (the calls and their ancestors), coded by a dict of their names
        marked = np.zeros(len(ops), bool)
        marked[pos] = True
        marked[chain[chain >= 0]] = True
        read = np.flatnonzero(marked)
        read_names = names[read].tolist()
        code_of = {n: i for i, n in enumerate(dict.fromkeys(read_names))}
        uniq = list(code_of)
        codes = np.full(len(ops), -1, np.int64)
        codes[read] = np.fromiter(map(code_of.__getitem__, read_names), np.int64, count=len(read))
    pcode = codes[pos]
    chain = np.where(chain >= 0, codes[np.maximum(chain, 0)], -1) if len(ops) else chain
    live = ~dispatcher[pos]
    seen = np.unique(pcode)  # the tests below, once per distinct name and per distinct recorded args

    def per_name(pred) -> np.ndarray:
        answer = np.zeros(len(uniq), bool)
        answer[seen] = [bool(pred(uniq[c])) for c in seen.tolist()]
        return answer[pcode]

    untyped_of: dict[int, bool] = {}

    def untyped_args(a: int) -> bool:
        u = untyped_of.get(a)
        if u is None:
            u = untyped_of[a] = _untyped(args_table[a])
        return u

    # the launched kernels' names, only for the formulas that read them (a TensorList's dtype)
    # and for the calls whose trace recorded shapes without dtypes
    distinct_args, args_at = np.unique(aid[pos], return_inverse=True)
    untyped = live & np.array([untyped_args(a) for a in distinct_args.tolist()], bool)[args_at.reshape(-1)]
    calls_parent = live & (par >= 0) & per_name(uses_parent)
    if calls_parent.any():
        untyped[calls_parent] |= np.array([untyped_args(a) for a in aid[par[calls_parent]].tolist()], bool)
    needs = untyped | (live & per_name(uses_kernels))
    kernels = _kernel_names(rows, pos[needs]) if rows is not None and needs.any() else {}
    # the ops nested directly inside, only for the formulas that read them (a data-dependent size)
    wants = live & per_name(uses_children)
    children = _children(ops, pos[wants]) if wants.any() else {}
    args_id = aid
    # a forward's output dims from its backward's grad_output, only for the formulas that read them
    # and only where such a call recorded the two input dims they are looked up by (`_output_of`)
    outputs = {}
    backward = live & per_name(uses_backward)
    if backward.any() and any(_two_dims(args_table[a]) for a in np.unique(args_id[pos[backward]]).tolist()):
        conv = [n for n in pd.unique(names) if n.endswith("convolution_backward")]
        sel = np.flatnonzero(ops.name.isin(conv).to_numpy()) if conv else []
        # each distinct (name, recorded args) once: the result is the same for repeats
        pairs = dict.fromkeys((names[i], args_id[i]) for i in sel.tolist()) if len(sel) else {}
        outputs = forward_outputs((n, args_table[a]) for n, a in pairs)
        # an inference trace has no backward: the forwards recorded without their stride and
        # padding take their output dims from the op run next (where no backward gives them)
        unrecorded = [p for p in pos[backward].tolist() if "Concrete Inputs" not in args_table[args_id[p]]]
        if unrecorded:
            outputs = {**consumer_outputs(ops, args_table, unrecorded), **outputs}
    # the ops run next at the call's level, only for the formulas that read them and launched no kernel
    wanted = [p for p in pos[live & per_name(uses_next)].tolist() if not kernels.get(p)]
    following = ops_after(ops, wanted, _FOLLOWING) if wanted else {}
    strided = any(records_strides(a) for a in args_table if isinstance(a, dict))
    # the calls that read nothing but their name, args and enclosing ops' names: grouped by those
    own = live & ~calls_parent
    for extra in (kernels, children, following):
        if extra:
            own &= ~np.isin(pos, [p for p, v in extra.items() if v])
    keys, group = _distinct_rows(np.column_stack([pcode, aid[pos], chain])[own])
    costs: list = [None]
    which = np.zeros(len(pos), np.int64)
    memo: dict[tuple, int] = {}
    for key in keys.tolist():
        name, a = uniq[key[0]], key[1]
        anc = tuple(uniq[c] for c in itertools.takewhile(lambda c: c >= 0, key[2:]))
        args = args_table[a]
        memo[(name, a, anc, (), (), None, ())] = len(costs)
        costs.append(cost_of(OpCall.from_args(name, args, anc, (), [], None, _output_of(outputs, name, args), [],
                                              strided)))
    which[own] = np.arange(1, len(keys) + 1)[group.reshape(-1)]
    enclosing: dict[int, tuple] = {}  # an op's ancestors' names depend on its parent alone: once per parent
    for j in np.flatnonzero(live & ~own).tolist():
        p = int(pos[j])
        anc = enclosing.get(int(par[j]))
        if anc is None:
            anc = enclosing[int(par[j])] = ancestors(names, parent, p)
        kn = kernels.get(p, ())
        ch = children.get(p, ())
        caller = int(par[j]) if calls_parent[j] else -1
        fo = following.get(p, ())
        key = (names[p], args_id[p], anc, kn, tuple((names[c], args_id[c]) for c in ch) if ch else (),
               args_id[caller] if caller >= 0 else None, tuple((names[c], args_id[c]) for c in fo) if fo else ())
        if key not in memo:  # distinct recorded inputs share an args id
            nested = [OpCall.from_args(names[c], args_table[args_id[c]]) for c in ch]
            args = args_table[args_id[p]]
            if kn and _untyped(args):
                args = _typed_by_kernels(args, kn)
            called = None
            if caller >= 0:
                pargs = args_table[args_id[caller]]
                called = OpCall.from_args(names[caller], _typed_by_kernels(pargs, kn) if kn and _untyped(pargs)
                                          else pargs)
            after = [OpCall.from_args(names[c], args_table[args_id[c]]) for c in fo]
            memo[key] = len(costs)
            costs.append(cost_of(OpCall.from_args(names[p], args, anc, kn, nested, called,
                                                  _output_of(outputs, names[p], args), after, strided)))
        which[j] = memo[key]
    return which, costs


def _distinct_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(keys, group): the distinct rows of an integer matrix and each row's position among them, found
    by a hash of each row (`np.unique(rows, axis=0)` sorts the rows as records, many times slower);
    rows that share a hash are checked equal, and where two are not the rows are compared whole."""
    h = np.zeros(len(rows), np.uint64)
    for col in rows.T:
        h = h * np.uint64(0x9E3779B97F4A7C15) + col.astype(np.int64).view(np.uint64)
    _, first, group = np.unique(h, return_index=True, return_inverse=True)
    group = group.reshape(-1)
    if not (rows == rows[first[group]]).all():  # a hash shared by distinct rows
        keys, group = np.unique(rows, axis=0, return_inverse=True)
        return keys, group.reshape(-1)
    return rows[first], group


_FOLLOWING = 8  # ops read after a call for its result's consumer (at any depth: inside the next module)


def _two_dims(args: dict) -> list | None:
    """A call's recorded input dims where its first two inputs are lists (shapes), else None."""
    dims = args.get("Input Dims")
    if not isinstance(dims, list) or len(dims) < 2 or not all(isinstance(d, list) for d in dims[:2]):
        return None
    return dims


def _output_of(outputs: dict, name: str, args: dict) -> tuple:
    """The output dims `outputs` (forward_outputs) holds for a call's first two inputs, or ()."""
    dims = _two_dims(args) if outputs and uses_backward(name) else None
    if dims is None:
        return ()
    try:
        return outputs.get((tuple(dims[0]), tuple(dims[1])), ())
    except TypeError:  # a nested list in a foreign trace: not a shape
        return ()


def _untyped(args: dict) -> bool:
    """Shapes recorded without their dtypes: PyTorch 1.8's first Kineto traces write `Input type: []`."""
    dims = args.get("Input Dims")
    return isinstance(dims, list) and any(dims) and not args.get("Input type")


def _typed_by_kernels(args: dict, kernels: Sequence[str]) -> dict:
    """`args` with every shaped input typed by the one element type its kernels name (`AddFunctor<float>`).

    An input recorded as `[]` (a scalar, a None or a 0-d tensor) stays untyped; kernels that name no
    type or several (an index kernel's `<float, long>`) leave the args as they are.
    """
    t = element_type(kernels)
    if t is None:
        return args
    types = [t if isinstance(d, list) and d and all(isinstance(x, int) for x in d) else "" for d in args["Input Dims"]]
    return {**args, "Input type": types}


def _children(ops: pd.DataFrame, wanted: np.ndarray) -> dict[int, list[int]]:
    """The positions of the ops nested directly in each op of `wanted`, in time order."""
    parent = ops.parent.to_numpy()
    sel = np.flatnonzero(np.isin(parent, wanted))
    if not len(sel):
        return {}
    sel = sel[np.lexsort((ops.ts_ns.to_numpy()[sel], parent[sel]))]
    out: dict[int, list[int]] = {}
    for c in sel.tolist():
        out.setdefault(int(parent[c]), []).append(c)
    return out


def _split(weights: np.ndarray, steps: np.ndarray, fallback: np.ndarray | None) -> np.ndarray:
    """Each row's share of its step's total of `weights`. A step where a row's weight is missing or
    the weights sum to 0 takes `fallback` instead (None: the weights are durations, and rows of no
    time share evenly)."""
    w = pd.Series(weights)
    total = w.groupby(steps).transform("sum").to_numpy()
    usable = w.notna().groupby(steps).transform("all").to_numpy() & (total > 0)
    if fallback is None:
        count = w.groupby(steps).transform("size").to_numpy()
        return np.where(usable, weights / np.where(usable, total, 1), 1.0 / count)
    return np.where(usable, weights / np.where(usable, total, 1), fallback)


def _memcpy_bytes(name: str, transfer_bytes: int) -> float:
    # A device-to-device copy reads and writes the bytes on the device; host<->device
    # copies touch device memory once.
    return 2.0 * transfer_bytes if copy_kind(name) == "DtoD" else float(transfer_bytes)


def _memcpy_written(name: str, transfer_bytes: int) -> float:
    # Device memory written: a memset and a copy into the device write what they move; a copy
    # to the host only reads device memory.
    return 0.0 if copy_kind(name) == "DtoH" else float(transfer_bytes)


def annotate(rows: pd.DataFrame, ops: pd.DataFrame, args_table: list[dict], ceilings: Ceilings | None,
             stated: Sequence = (), tf32: bool = False, lists: Sequence = ()) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The kernels and ops tables (contract columns, without run identity or parameters).

    `rows`: the device activities (or a CPU trace's working ops) from the join; `ops`: every
    op, flagged by `attribution.flag_ops`; `stated`: the workload's `Stated` costs; `lists`: the
    `ListCall`s of one step as the workload recorded them (the shapes of tensor lists the trace
    records as `[]`), else such lists are recovered from the backward's gradients.
    """
    args_table, ops, declared = fill_declared(ops, args_table, lists, rows)
    args_table, ops, recovered = recover_lists(ops, args_table, rows)
    has_op = rows.has_op.to_numpy()
    op_pos = rows.op_pos.to_numpy()
    dur = rows.dur_ns.to_numpy().astype(float)
    n = len(rows)

    launching = np.unique(op_pos[has_op])
    which, costs = _op_costs(ops, args_table, launching, rows)

    # An op's cost is split over its kernels by duration. Memsets and memcpys an op runs
    # beside its kernels (a split-K GEMM zeroing its workspace) get none of it: they are
    # the implementation's overhead, not compulsory work. An op that runs only copies
    # (copy_ as a device-to-device memcpy) puts its cost on them.
    kinds = rows.kind.to_numpy()
    is_kernel = (kinds == "kernel") | (kinds == "cpu_op")
    # per op, by bincount over its rows (durations are whole nanoseconds: their sums are exact in any
    # order), read back at each row (rows without an op read op 0's, and never use them)
    n_ops = len(ops)
    at_op = np.where(has_op, op_pos, 0)

    def per_op(mask: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
        counts = np.bincount(op_pos[mask], weights=None if weights is None else weights[mask], minlength=n_ops)
        return counts[at_op] if n_ops else np.zeros(n)

    eligible = has_op & (is_kernel | ~(per_op(has_op & is_kernel) > 0))
    tot, cnt = per_op(eligible, dur).astype(float), per_op(eligible).astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(eligible, np.where(tot > 0, dur / tot, 1.0 / cnt), np.where(has_op, 0.0, 1.0))
    n_rows_per_op = per_op(has_op).astype(float)

    op_flops, op_bytes, op_written = np.full(n_ops, np.nan), np.full(n_ops, np.nan), np.full(n_ops, np.nan)
    op_costed = np.zeros(n_ops, bool)
    op_unit, op_dtype = np.full(n_ops, None, dtype=object), np.full(n_ops, None, dtype=object)
    op_source = filled(n_ops, UNKNOWN)
    given = np.array([c is not None for c in costs], bool)[which]
    if given.any():  # each distinct cost's values, spread to its ops
        at, which = launching[given], which[given]

        def per_cost(field: str, dtype, missing):
            values = (missing if c is None or getattr(c, field) is None else getattr(c, field) for c in costs)
            return np.fromiter(values, dtype=dtype, count=len(costs))[which]

        op_costed[at] = True
        op_source[at] = per_cost("source", object, None)
        op_flops[at], op_bytes[at] = per_cost("flops", float, np.nan), per_cost("bytes", float, np.nan)
        op_written[at] = per_cost("written", float, np.nan)
        op_unit[at], op_dtype[at] = per_cost("unit", object, None), per_cost("dtype", object, None)
    safe_pos = np.where(has_op, op_pos, 0)
    known = has_op & op_costed[safe_pos] if n_ops else np.zeros(n, bool)
    flops = np.where(known, op_flops[safe_pos] * share, np.nan) if n_ops else np.full(n, np.nan)
    nbytes = np.where(known, op_bytes[safe_pos] * share, np.nan) if n_ops else np.full(n, np.nan)
    written = np.where(known, op_written[safe_pos] * share, np.nan) if n_ops else np.full(n, np.nan)
    source = filled(n, UNKNOWN)
    source[known] = op_source[safe_pos[known]]
    unit = np.where(known, op_unit[safe_pos], None) if n_ops else np.full(n, None, dtype=object)
    cdtype = np.where(known, op_dtype[safe_pos], None) if n_ops else np.full(n, None, dtype=object)
    # memcpy/memset whose op has no formula: the trace records the bytes moved (a copy without a
    # `bytes` arg, -1, stays unknown). So does a copy across the host link that its op ran alone (a
    # `copy_` to or from host memory): the op's formula counts both its tensors as device memory, but one
    # side is the host's, and the device reads or writes the bytes once
    names = rows.name.to_numpy(dtype=object)
    tb = rows.transfer_bytes.to_numpy()
    copies = (kinds == "memcpy") | (kinds == "memset")
    crossing = np.zeros(n, bool)
    if (kinds == "memcpy").any():
        only_copies = eligible & ~is_kernel & (kinds == "memcpy")
        crossing[only_copies] = [copy_kind(str(x)) in ("HtoD", "DtoH") for x in names[only_copies]]
    moved = np.flatnonzero(copies & ((source == UNKNOWN) | crossing) & (tb >= 0))
    if len(moved):
        copy_names = names[moved]
        counted = {n: (_memcpy_bytes(n, 1), _memcpy_written(n, 1)) for n in set(copy_names.tolist())}
        moved_bytes = tb[moved].astype(float)
        flops[moved], source[moved], unit[moved] = 0.0, FORMULA, "vector"
        nbytes[moved] = moved_bytes * np.array([counted[n][0] for n in copy_names], dtype=float)
        written[moved] = moved_bytes * np.array([counted[n][1] for n in copy_names], dtype=float)

    op_names = ops.name.to_numpy(dtype=object)
    # workload-stated costs override the formulas of the ops they name, split per (region, step) over
    # those ops' rows in proportion to what the formulas give each (the shapes tell the relative
    # sizes), or by duration where a row has no formula value
    if stated:
        region = rows.region.to_numpy(dtype=object)
        steps = rows.step.to_numpy()
        row_op = np.array([op_names[p] if h else None for p, h in zip(op_pos, has_op, strict=True)], dtype=object)
        for st in stated:
            c = st.cost
            mask = region == st.region
            if st.ops is not None:
                mask &= np.isin(row_op, list(st.ops))
            if not mask.any():
                continue
            by_time = _split(dur[mask], steps[mask], None)
            shares = {f: _split(v[mask], steps[mask], by_time) for f, v in
                      (("flops", flops), ("bytes", nbytes), ("written", written))}
            flops[mask] = c.flops * shares["flops"] if c.flops is not None else np.nan
            nbytes[mask] = c.bytes * shares["bytes"] if c.bytes is not None else np.nan
            written[mask] = c.written * shares["written"] if c.written is not None else np.nan
            source[mask] = WORKLOAD
            unit[mask] = c.unit
            cdtype[mask] = c.dtype
            share[mask] = shares["flops"]

    # each op's recorded inputs as JSON, once per distinct recorded input (None for the ops that
    # launched nothing), then per row
    op_inputs = [np.full(n_ops, None, dtype=object) for _ in range(4)]
    if len(launching):
        distinct, at = np.unique(ops.args_id.to_numpy()[launching], return_inverse=True)
        recorded = [args_table[a] for a in distinct.tolist()]
        for key, col in zip(("Input Dims", "Input type", "Input Strides", "Concrete Inputs"), op_inputs, strict=True):
            col[launching] = np.fromiter((_json(a.get(key)) for a in recorded), dtype=object,
                                         count=len(recorded))[at.reshape(-1)]
    row_op_pos = op_pos[has_op]

    def per_row(per_op_values: np.ndarray) -> np.ndarray:
        out = np.full(n, None, dtype=object)
        out[has_op] = per_op_values[row_op_pos]
        return out

    cols = {  # one frame of every column: a frame grown column by column copies its index each time
        "step": rows.step.to_numpy().astype(np.int32),
        "kind": _obj(kinds),
        "name": _obj(names),
        "stream": rows.stream.to_numpy(),
        "device_index": rows.device_index.to_numpy().astype(np.int32),
        "ts_us": rows.ts_ns.to_numpy() / 1000.0,
        "dur_us": dur / 1000.0,
    }
    for c in ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "registers_per_thread"):
        cols[c] = rows[c].to_numpy().astype(np.int32)
    for c in ("shared_memory_bytes", "blocks_per_sm", "warps_per_sm", "correlation", "has_op"):
        cols[c] = rows[c].to_numpy()
    cols["launch_api"] = _obj(rows["launch_api"].to_numpy(dtype=object))
    cols["join_method"] = _obj(rows["join_method"].to_numpy(dtype=object))
    cols["external_id"] = rows.ext_id.to_numpy()
    cols["op_name"] = _obj(per_row(op_names))
    cols["op_input_dims"] = _obj(per_row(op_inputs[0]))
    cols["op_input_types"] = _obj(per_row(op_inputs[1]))
    cols["op_input_strides"] = _obj(per_row(op_inputs[2]))
    cols["op_concrete_inputs"] = _obj(per_row(op_inputs[3]))
    dims_source = filled(n_ops, TRACE)
    if declared is not None:
        dims_source[declared] = WORKLOAD
    if recovered is not None:
        dims_source[recovered] = GRADIENTS
    cols["op_input_dims_source"] = _obj(per_row(dims_source))
    cols["region"] = _obj(rows.region.to_numpy(dtype=object))
    cols["op_kernel_count"] = np.where(has_op, np.nan_to_num(n_rows_per_op, nan=1), 1).astype(np.int32)
    cols["cost_share"] = share
    cols["flops"] = flops
    cols["bytes"] = nbytes
    cols["bytes_written"] = written
    cols["flops_source"] = _obj(source)
    cols["cost_unit"] = _obj(unit)
    cols["cost_dtype"] = _obj(cdtype)
    cols["_op_pos"] = np.where(has_op, op_pos, -1)
    cols["_event_idx"] = rows.idx.to_numpy()
    k = pd.DataFrame(cols)
    # TF32: the run's setting, or a float32 matrix kernel whose name says so (a trace recorded elsewhere)
    tf = np.full(n, bool(tf32))
    fp32_matrix = np.flatnonzero((unit == MATRIX) & (cdtype == "float32"))
    if len(fp32_matrix) and not tf32:
        tf[fp32_matrix] = tf32_kernels(rows.name.to_numpy(dtype=object)[fp32_matrix])
    add_roofline(k, ceilings, tf)

    o = _ops_table(k, ops)
    with_op = k._op_pos.to_numpy() >= 0
    op_tf = pd.Series(tf[with_op]).groupby(k._op_pos.to_numpy()[with_op], sort=True).any().to_numpy(dtype=bool)
    add_roofline(o, ceilings, op_tf if len(op_tf) == len(o) else tf32)
    return k, o


_FIRST = ["step", "external_id", "op_name", "op_input_dims", "op_input_types", "op_input_strides",
          "op_concrete_inputs", "op_input_dims_source", "region", "flops_source", "cost_unit", "cost_dtype"]
_SUMMED = ["dur_us", "flops", "bytes", "bytes_written"]


def _ops_table(k: pd.DataFrame, ops: pd.DataFrame) -> pd.DataFrame:
    launched = k._op_pos.to_numpy() >= 0
    if not launched.any():
        return pd.DataFrame(columns=["step", "external_id", "op_name", "op_input_dims", "op_input_types",
                                     "op_input_strides", "op_concrete_inputs", "op_input_dims_source", "region", "ts_us", "cpu_dur_us",
                                     "kernel_count", "transfer", "dur_us", "flops", "bytes", "bytes_written", "flops_source",
                                     "cost_unit", "cost_dtype"])
    # the columns read, not the frame: a kernels row is wide
    with_op = k.loc[launched, [c for c in ("_op_pos", *_FIRST, *_SUMMED, "kind", "name") if c in k]]
    g = with_op.groupby("_op_pos", sort=True)
    pos, group = np.unique(with_op._op_pos.to_numpy(), return_inverse=True)  # the ops; each row's among them
    group = group.reshape(-1)
    first = {c: _first_valid(with_op[c].to_numpy(), group, len(pos)) for c in _FIRST}  # arrays, not a frame

    def any_row(mask: np.ndarray) -> np.ndarray:
        return np.bincount(group, weights=mask, minlength=len(pos)) > 0

    # an op is only as known as its least known kernel: a nonzero whose memcpy's bytes are in the
    # trace but whose kernels have no formula is unknown as a whole
    unknown = any_row(with_op.flops_source.to_numpy(dtype=object) == UNKNOWN)
    sums = {}
    for col in ("flops", "bytes", "bytes_written"):
        total = g[col].sum(min_count=1).to_numpy(copy=True)
        total[any_row(with_op[col].isna().to_numpy()) | unknown] = np.nan
        sums[col] = total
    source = first["flops_source"].copy()
    source[unknown] = UNKNOWN
    return pd.DataFrame({
        "step": first["step"],
        "external_id": first["external_id"],
        "op_name": _obj(first["op_name"]),
        "op_input_dims": _obj(first["op_input_dims"]),
        "op_input_types": _obj(first["op_input_types"]),
        "op_input_strides": _obj(first["op_input_strides"]),
        "op_concrete_inputs": _obj(first["op_concrete_inputs"]),
        "op_input_dims_source": _obj(first["op_input_dims_source"]),
        "region": _obj(first["region"]),
        "ts_us": ops.ts_ns.to_numpy()[pos] / 1000.0,
        "cpu_dur_us": ops.dur_ns.to_numpy()[pos] / 1000.0,
        "kernel_count": g.size().to_numpy().astype(np.int32),
        "transfer": _obj(_transfers(with_op, pos)),
        "dur_us": g.dur_us.sum().to_numpy(),
        **sums,
        "flops_source": _obj(source),
        "cost_unit": _obj(first["cost_unit"]),
        "cost_dtype": _obj(first["cost_dtype"]),
    })


def _first_valid(values: np.ndarray, group: np.ndarray, n: int) -> np.ndarray:
    """Each of `n` groups' first value in row order that is not null, as pandas' groupby first gives it
    (None for an object column's group of nulls, NaN for a float column's); every group has a row."""
    valid = ~pd.isna(values) if values.dtype == object or values.dtype.kind in "fc" else np.ones(len(values), bool)
    rows = np.flatnonzero(valid)
    held, first = np.unique(group[rows], return_index=True)
    out = np.full(n, None, dtype=object) if values.dtype == object else np.full(n, np.nan, dtype=values.dtype) \
        if values.dtype.kind in "fc" else np.empty(n, dtype=values.dtype)
    out[held] = values[rows[first]]
    return out


def _transfers(rows: pd.DataFrame, positions) -> np.ndarray:
    """Per launching op (`positions`, the sorted `_op_pos` of `rows`): the kinds of copy among its rows
    (`copies.transfer_label`), comma-separated in sorted order, None where it ran no copy."""
    out = np.full(len(positions), None, dtype=object)
    if "kind" not in rows or "name" not in rows:
        return out
    copy = np.flatnonzero(rows.kind.to_numpy(dtype=object) == "memcpy")  # the two columns read, not the frame
    if not len(copy):
        return out
    names = rows.name.to_numpy(dtype=object)[copy].tolist()
    label_of = {n: transfer_label(str(n)) for n in dict.fromkeys(names)}  # per distinct name: a trace's copies share a few
    labels = sorted({x for x in label_of.values() if x})
    if not labels:
        return out
    code = {x: i for i, x in enumerate(labels)}
    label = np.fromiter((code.get(label_of[n], -1) for n in names), np.int64, count=len(names))
    labelled = label >= 0
    # each (op, kind of copy) once, by op, then by the kinds' sorted order
    pairs = np.unique(rows._op_pos.to_numpy()[copy][labelled].astype(np.int64) * len(labels) + label[labelled])
    op, kind = pairs // len(labels), pairs % len(labels)
    positions = np.asarray(positions)
    at = np.minimum(np.searchsorted(positions, op), len(positions) - 1)
    found = positions[at] == op
    op, kind, at = op[found], kind[found], at[found]
    starts = np.flatnonzero(np.r_[True, op[1:] != op[:-1]]) if len(op) else op
    count = np.diff(np.r_[starts, len(op)])
    names_of = np.empty(len(labels), dtype=object)
    names_of[:] = labels
    one = starts[count == 1]  # most ops run one kind of copy: its label as it is
    out[at[one]] = names_of[kind[one]]
    for a, k in zip(starts[count > 1].tolist(), count[count > 1].tolist(), strict=True):
        out[at[a]] = ",".join(labels[c] for c in kind[a:a + k].tolist())
    return out


def written_from_shapes(df: pd.DataFrame) -> np.ndarray:
    """The bytes each stored row writes, recomputed from its recorded op inputs (NaN where unknown).

    For tables written before formulas stated their written bytes: a row costed by a formula
    gets the formula's `written` times its `cost_share` where the formula, run again on the
    recorded inputs, gives the row's bytes (so the row was costed by that same formula); a
    memset writes all its bytes, a device-to-device memcpy half (it reads the other half), a copy
    to the device all it moves, a copy to the host nothing on the device. Workload-stated and unknown rows stay NaN.
    """
    from wlprof.cost.registry import cost_of

    n = len(df)
    out = np.full(n, np.nan)
    if n == 0 or "op_name" not in df:
        return out
    nbytes = df["bytes"].to_numpy(dtype=float)
    share = df["cost_share"].to_numpy(dtype=float) if "cost_share" in df else np.ones(n)
    source = df["flops_source"].to_numpy(dtype=object) if "flops_source" in df else np.full(n, FORMULA, object)
    kinds = df["kind"].to_numpy(dtype=object) if "kind" in df else np.full(n, "kernel", object)
    names = df["name"].to_numpy(dtype=object) if "name" in df else np.full(n, "", object)
    cols = ("op_input_dims", "op_input_types", "op_input_strides", "op_concrete_inputs")
    arg_keys = ("Input Dims", "Input type", "Input Strides", "Concrete Inputs")
    vals = [df[c].to_numpy(dtype=object) if c in df else np.full(n, None, object) for c in cols]
    op = df["op_name"].to_numpy(dtype=object)
    memo: dict[tuple, Cost | None] = {}
    for i in np.flatnonzero((source == FORMULA) & ~np.isnan(nbytes)):
        if op[i] is None:
            continue
        key = (op[i], *(v[i] for v in vals))
        if key not in memo:
            args = {}
            for k, v in zip(arg_keys, key[1:], strict=True):
                if isinstance(v, str):
                    try:
                        args[k] = json.loads(v)
                    except ValueError:
                        pass
            memo[key] = cost_of(OpCall.from_args(op[i], args))
        c = memo[key]
        if c is None or c.written is None or c.bytes is None:
            continue
        expected = c.bytes * share[i]
        if abs(expected - nbytes[i]) <= 1e-6 * max(abs(nbytes[i]), 1.0):
            out[i] = c.written * share[i]
    copies = (kinds != "kernel") & (kinds != "cpu_op") & np.isnan(out) & (source == FORMULA) & ~np.isnan(nbytes)
    for i in np.flatnonzero(copies):
        name = str(names[i])
        kind = copy_kind(name) if kinds[i] == "memcpy" else None
        out[i] = nbytes[i] / 2 if kind == "DtoD" else (0.0 if kind == "DtoH" else nbytes[i])
    return out

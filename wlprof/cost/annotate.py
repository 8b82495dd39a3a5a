"""Put costs and roofline numbers on a joined trace: the kernels and ops tables.

Costs are counted once, on the op that launched the kernels (GPU) or did the work
(CPU), and split over that op's device activities by duration (`cost_share`), so the
sum over kernels equals the sum over ops equals the run total. A cost the workload
states (`Stated`: a sparse aggregation, a grouped GEMM's empty groups, where shapes cannot
tell) replaces the formulas of the ops it names in its region, split per step over their
rows in proportion to those formulas' values (by duration where there are none).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
import pandas as pd

from wlprof.ceilings import Ceilings
from wlprof.columns import filled
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


def _op_costs(ops: pd.DataFrame, args_table: list[dict], op_positions: np.ndarray,
              rows: pd.DataFrame | None = None) -> dict:
    # Python lists: the loops index them once per op (numpy scalars cost several times more per access)
    names, args_id = ops.name.to_numpy(dtype=object).tolist(), ops.args_id.to_numpy().tolist()
    dispatcher, parent = ops.dispatcher.to_numpy().tolist(), ops.parent.to_numpy().tolist()
    positions = op_positions.tolist()
    # the tests below, once per distinct name and per distinct recorded args (not once per op)
    distinct = set(names[p] for p in positions)
    by_parent = {n: uses_parent(n) for n in distinct}
    by_kernels = {n: uses_kernels(n) for n in distinct}
    by_children = {n: uses_children(n) for n in distinct}
    by_backward = {n: uses_backward(n) for n in distinct}
    by_next = {n: uses_next(n) for n in distinct}
    untyped_of: dict[int, bool] = {}

    def untyped_args(a: int) -> bool:
        u = untyped_of.get(a)
        if u is None:
            u = untyped_of[a] = _untyped(args_table[a])
        return u

    # the launched kernels' names, only for the formulas that read them (a TensorList's dtype)
    # and for the calls whose trace recorded shapes without dtypes
    untyped = np.array([not dispatcher[p] and untyped_args(args_id[p]) for p in positions], dtype=bool)
    calls_parent = np.array([not dispatcher[p] and parent[p] >= 0 and by_parent[names[p]] for p in positions],
                            dtype=bool)
    untyped |= calls_parent & np.array([calls_parent[j] and untyped_args(args_id[parent[p]])
                                        for j, p in enumerate(positions)], dtype=bool)
    needs = untyped | np.array([not dispatcher[p] and by_kernels[names[p]] for p in positions], dtype=bool)
    kernels = _kernel_names(rows, op_positions[needs]) if rows is not None and needs.any() else {}
    # the ops nested directly inside, only for the formulas that read them (a data-dependent size)
    wants = np.array([not dispatcher[p] and by_children[names[p]] for p in positions], dtype=bool)
    children = _children(ops, op_positions[wants]) if wants.any() else {}
    # a forward's output dims from its backward's grad_output, only for the formulas that read them
    outputs = {}
    if any(by_backward[names[p]] and not dispatcher[p] for p in positions):
        backward = [n for n in pd.unique(ops.name.to_numpy(dtype=object)) if n.endswith("convolution_backward")]
        sel = np.flatnonzero(ops.name.isin(backward).to_numpy()) if backward else []
        # each distinct (name, recorded args) once: the result is the same for repeats
        pairs = dict.fromkeys((names[i], args_id[i]) for i in sel.tolist()) if len(sel) else {}
        outputs = forward_outputs((n, args_table[a]) for n, a in pairs)
        # an inference trace has no backward: the forwards recorded without their stride and
        # padding take their output dims from the op run next (where no backward gives them)
        unrecorded = [p for p in positions if by_backward[names[p]] and not dispatcher[p]
                      and "Concrete Inputs" not in args_table[args_id[p]]]
        if unrecorded:
            outputs = {**consumer_outputs(ops, args_table, unrecorded), **outputs}
    # the ops run next at the call's level, only for the formulas that read them and launched no kernel
    wanted = [p for p in positions if by_next[names[p]] and not dispatcher[p] and not kernels.get(p)]
    following = ops_after(ops, wanted, _FOLLOWING) if wanted else {}
    memo: dict[tuple, Cost | None] = {}
    out: dict[int, Cost | None] = {}
    with_parent = set(op_positions[calls_parent].tolist())
    strided = any(records_strides(a) for a in args_table if isinstance(a, dict))
    enclosing: dict[int, tuple] = {}  # an op's ancestors' names depend on its parent alone: once per parent
    for pos in positions:
        if dispatcher[pos]:
            out[pos] = None
            continue
        anc = enclosing.get(parent[pos])
        if anc is None:
            anc = enclosing[parent[pos]] = ancestors(names, parent, pos)
        kn = kernels.get(pos, ())
        ch = children.get(pos, ())
        par = parent[pos] if pos in with_parent else -1
        fo = following.get(pos, ())
        key = (names[pos], args_id[pos], anc, kn, tuple((names[c], args_id[c]) for c in ch) if ch else (),
               args_id[par] if par >= 0 else None, tuple((names[c], args_id[c]) for c in fo) if fo else ())
        if key not in memo:  # distinct recorded inputs share an args id
            nested = [OpCall.from_args(names[c], args_table[args_id[c]]) for c in ch]
            args = args_table[args_id[pos]]
            if kn and _untyped(args):
                args = _typed_by_kernels(args, kn)
            caller = None
            if par >= 0:
                pargs = args_table[args_id[par]]
                caller = OpCall.from_args(names[par], _typed_by_kernels(pargs, kn) if kn and _untyped(pargs) else pargs)
            after = [OpCall.from_args(names[c], args_table[args_id[c]]) for c in fo]
            memo[key] = cost_of(OpCall.from_args(names[pos], args, anc, kn, nested, caller,
                                                 _output_of(outputs, names[pos], args), after, strided))
        out[pos] = memo[key]
    return out


_FOLLOWING = 8  # ops read after a call for its result's consumer (at any depth: inside the next module)


def _output_of(outputs: dict, name: str, args: dict) -> tuple:
    """The output dims `outputs` (forward_outputs) holds for a call's first two inputs, or ()."""
    dims = args.get("Input Dims") if outputs and uses_backward(name) else None
    if not isinstance(dims, list) or len(dims) < 2 or not all(isinstance(d, list) for d in dims[:2]):
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
    costs = _op_costs(ops, args_table, launching, rows)

    # An op's cost is split over its kernels by duration. Memsets and memcpys an op runs
    # beside its kernels (a split-K GEMM zeroing its workspace) get none of it: they are
    # the implementation's overhead, not compulsory work. An op that runs only copies
    # (copy_ as a device-to-device memcpy) puts its cost on them.
    kinds = rows.kind.to_numpy()
    is_kernel = (kinds == "kernel") | (kinds == "cpu_op")
    op_has_kernel = pd.Series(is_kernel[has_op]).groupby(op_pos[has_op]).any()
    eligible = has_op & (is_kernel | ~op_has_kernel.reindex(op_pos).fillna(False).to_numpy(dtype=bool))
    op_dur = pd.Series(dur[eligible]).groupby(op_pos[eligible]).sum()
    op_cnt = pd.Series(np.ones(eligible.sum())).groupby(op_pos[eligible]).sum()
    tot = op_dur.reindex(op_pos).to_numpy()
    cnt = op_cnt.reindex(op_pos).to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(eligible, np.where(tot > 0, dur / tot, 1.0 / cnt), np.where(has_op, 0.0, 1.0))
    n_rows_per_op = pd.Series(np.ones(has_op.sum())).groupby(op_pos[has_op]).sum().reindex(op_pos).to_numpy()

    n_ops = len(ops)
    op_flops, op_bytes, op_written = np.full(n_ops, np.nan), np.full(n_ops, np.nan), np.full(n_ops, np.nan)
    op_costed = np.zeros(n_ops, bool)
    op_unit, op_dtype = np.full(n_ops, None, dtype=object), np.full(n_ops, None, dtype=object)
    op_source = filled(n_ops, UNKNOWN)
    for pos, c in costs.items():
        if c is not None:
            op_costed[pos] = True
            op_source[pos] = c.source
            op_flops[pos] = np.nan if c.flops is None else c.flops
            op_bytes[pos] = np.nan if c.bytes is None else c.bytes
            op_written[pos] = np.nan if c.written is None else c.written
            op_unit[pos], op_dtype[pos] = c.unit, c.dtype
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

    args_ids = ops.args_id.to_numpy()
    table = args_table
    by_args: dict[int, tuple] = {}  # JSON of each distinct recorded input, once
    for a in np.unique(args_ids[launching]) if len(launching) else []:
        args = table[a]
        by_args[a] = (_json(args.get("Input Dims")), _json(args.get("Input type")),
                      _json(args.get("Input Strides")), _json(args.get("Concrete Inputs")))
    # each op's recorded inputs as JSON (None for the ops that launched nothing), then per row
    op_inputs = [np.full(n_ops, None, dtype=object) for _ in range(4)]
    if len(launching):
        per_op = [by_args[a] for a in args_ids[launching].tolist()]
        for j, col in enumerate(op_inputs):
            col[launching] = [v[j] for v in per_op]
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


def _ops_table(k: pd.DataFrame, ops: pd.DataFrame) -> pd.DataFrame:
    with_op = k[k._op_pos >= 0]
    if with_op.empty:
        return pd.DataFrame(columns=["step", "external_id", "op_name", "op_input_dims", "op_input_types",
                                     "op_input_strides", "op_concrete_inputs", "op_input_dims_source", "region", "ts_us", "cpu_dur_us",
                                     "kernel_count", "transfer", "dur_us", "flops", "bytes", "bytes_written", "flops_source",
                                     "cost_unit", "cost_dtype"])
    g = with_op.groupby("_op_pos", sort=True)
    first = g[["step", "external_id", "op_name", "op_input_dims", "op_input_types", "op_input_strides",
               "op_concrete_inputs", "op_input_dims_source", "region", "flops_source", "cost_unit", "cost_dtype"]].first()
    pos = first.index.to_numpy()
    o = pd.DataFrame({
        "step": first.step.to_numpy(),
        "external_id": first.external_id.to_numpy(),
        "op_name": _obj(first.op_name.to_numpy(dtype=object)),
        "op_input_dims": _obj(first.op_input_dims.to_numpy(dtype=object)),
        "op_input_types": _obj(first.op_input_types.to_numpy(dtype=object)),
        "op_input_strides": _obj(first.op_input_strides.to_numpy(dtype=object)),
        "op_concrete_inputs": _obj(first.op_concrete_inputs.to_numpy(dtype=object)),
        "op_input_dims_source": _obj(first.op_input_dims_source.to_numpy(dtype=object)),
        "region": _obj(first.region.to_numpy(dtype=object)),
        "ts_us": ops.ts_ns.to_numpy()[pos] / 1000.0,
        "cpu_dur_us": ops.dur_ns.to_numpy()[pos] / 1000.0,
        "kernel_count": g.size().to_numpy().astype(np.int32),
        "transfer": _obj(_transfers(with_op, first.index)),
        "dur_us": g.dur_us.sum().to_numpy(),
        "flops": g.flops.sum(min_count=1).to_numpy(),
        "bytes": g["bytes"].sum(min_count=1).to_numpy(),
        "bytes_written": g["bytes_written"].sum(min_count=1).to_numpy(),
        "flops_source": _obj(first.flops_source.to_numpy(dtype=object)),
        "cost_unit": _obj(first.cost_unit.to_numpy(dtype=object)),
        "cost_dtype": _obj(first.cost_dtype.to_numpy(dtype=object)),
    })
    # an op is only as known as its least known kernel: a nonzero whose memcpy's bytes are in the
    # trace but whose kernels have no formula is unknown as a whole
    by = with_op._op_pos
    unknown = (with_op.flops_source == UNKNOWN).groupby(by, sort=True).any().to_numpy()
    for col in ("flops", "bytes", "bytes_written"):
        o.loc[with_op[col].isna().groupby(by, sort=True).any().to_numpy() | unknown, col] = np.nan
    o.loc[unknown, "flops_source"] = UNKNOWN
    return o.reset_index(drop=True)


def _transfers(rows: pd.DataFrame, positions) -> np.ndarray:
    """Per launching op (`positions`, the sorted `_op_pos` of `rows`): the kinds of copy among its rows
    (`copies.transfer_label`), comma-separated in sorted order, None where it ran no copy."""
    out = np.full(len(positions), None, dtype=object)
    if "kind" not in rows or "name" not in rows:
        return out
    copy = np.flatnonzero(rows.kind.to_numpy(dtype=object) == "memcpy")  # the two columns read, not the frame
    if not len(copy):
        return out
    labels: dict[int, set] = {}
    label_of: dict = {}  # per distinct name: a trace's copies share a few
    for pos, name in zip(rows._op_pos.to_numpy()[copy].tolist(), rows.name.to_numpy(dtype=object)[copy].tolist(),
                         strict=True):
        label = label_of.get(name, False)
        if label is False:
            label = label_of[name] = transfer_label(str(name))
        if label:
            labels.setdefault(pos, set()).add(label)
    at = {p: i for i, p in enumerate(np.asarray(positions).tolist())}
    for pos, kinds in labels.items():
        if pos in at:
            out[at[pos]] = ",".join(sorted(kinds))
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

"""Join a parsed trace: kernel -> launch (correlation) -> launching op (External id).

Also places every op, launch and kernel in its `record_function` region and its
step, by time containment on the launching thread (one sweep per thread).

Rows of the kernels table:
- GPU trace: one row per device activity (kernel, memcpy, memset). Its op is the
  op whose `External id` the launch carries: the innermost op that launched it.
  Kernels with no launching op (CUDA-graph replays, launches outside any op) are
  kept with `has_op = False`.
- CPU trace (no device activity): one row per op that does work of its own, with
  its exclusive (self) time as duration: every op except views and metadata ops,
  wrappers (aten::linear), and dispatchers (a costed op with a costed op nested
  inside, e.g. the outer aten::sum of a sum -> sum.dim_IntList pair).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from wlprof import cost
from wlprof.trace.parse import NO_ID, RawTrace

STEP_RE = re.compile(r"^(?:wlprof/step|ProfilerStep)#(\d+)$")


@dataclass
class Joined:
    trace: RawTrace
    ops: pd.DataFrame  # every cpu_op, with parent, region, step, flags
    rows: pd.DataFrame  # kernel rows: device activity (GPU) or working ops (CPU)
    device_trace: bool


def _sweep(trace: RawTrace):
    """Nest ops, annotations and launches per thread, by time containment.

    Returns (op_parent, op_region, op_step, launch_region, launch_step, launch_parent):
    parents are positions in `trace.ops` (-1: none), regions the innermost
    non-step annotation's name, steps the number of the enclosing step annotation.
    """
    ops, ann, lau_all = trace.ops, trace.annotations, trace.launches
    # A launch whose External id names an op is placed by that op (done in `join`); only the
    # others (CUDA-graph replays, launches outside any op) need placing by time.
    unresolved = np.flatnonzero(~lau_all.ext_id.isin(ops.ext_id[ops.ext_id != NO_ID]).to_numpy())
    lau = lau_all.iloc[unresolved]
    n_ops, n_ann, n_lau = len(ops), len(ann), len(lau)
    kind = np.concatenate([np.zeros(n_ann, np.int8), np.ones(n_ops, np.int8), np.full(n_lau, 2, np.int8)])
    pos = np.concatenate([np.arange(n_ann), np.arange(n_ops), np.arange(n_lau)])
    ts = np.concatenate([ann.ts_ns.to_numpy(), ops.ts_ns.to_numpy(), lau.ts_ns.to_numpy()]).astype(np.int64)
    dur = np.concatenate([ann.dur_ns.to_numpy(), ops.dur_ns.to_numpy(), lau.dur_ns.to_numpy()]).astype(np.int64)
    pids = np.concatenate([ann.pid.to_numpy(), ops.pid.to_numpy(), lau.pid.to_numpy()]).astype(np.int64)
    tids = np.concatenate([ann.tid.to_numpy(), ops.tid.to_numpy(), lau.tid.to_numpy()]).astype(np.int64)
    if len(pids):
        thread_code = np.unique(np.stack([pids, tids], axis=1), axis=0, return_inverse=True)[1].reshape(-1)
    else:
        thread_code = np.zeros(0, np.int64)
    # outer before inner: by thread, start, longer first, annotation before op before launch
    order = np.lexsort((kind, -dur, ts, thread_code))

    op_parent = np.full(n_ops, -1, np.int64)
    op_region: list = [None] * n_ops
    op_step = np.full(n_ops, -1, np.int64)
    ann_names = ann.name.tolist()
    ann_step = [int(m.group(1)) if (m := STEP_RE.match(n)) else -1 for n in ann_names]
    n_all = len(lau_all)
    lau_parent = np.full(n_all, -1, np.int64)
    lau_region: list = [None] * n_all
    lau_step = np.full(n_all, -1, np.int64)

    stack: list[tuple[int, int, object, int]] = []  # (end_ns, innermost op, region, step) for children
    current_thread = -1
    for j in order:
        t = thread_code[j]
        if t != current_thread:
            stack.clear()
            current_thread = t
        start = ts[j]
        while stack and start >= stack[-1][0]:
            stack.pop()
        parent_op, region, step = (stack[-1][1], stack[-1][2], stack[-1][3]) if stack else (-1, None, -1)
        k, p = kind[j], pos[j]
        end = start + dur[j]
        if k == 1:
            op_parent[p] = parent_op
            op_region[p] = region
            op_step[p] = step
            stack.append((end, p, region, step))
        elif k == 0:
            s = ann_step[p]
            if s >= 0:
                stack.append((end, parent_op, region, s))
            else:
                stack.append((end, parent_op, ann_names[p], step))
        else:
            q = unresolved[p]
            lau_parent[q] = parent_op
            lau_region[q] = region
            lau_step[q] = step
    # launches placed by their op
    ext_to_op = pd.Series(np.arange(n_ops), index=ops.ext_id.to_numpy())
    ext_to_op = ext_to_op[~ext_to_op.index.duplicated() & (ext_to_op.index != NO_ID)]
    resolved = np.setdiff1d(np.arange(n_all), unresolved, assume_unique=True)
    if len(resolved):
        op_of = ext_to_op.reindex(lau_all.ext_id.to_numpy()[resolved]).to_numpy().astype(np.int64)
        lau_parent[resolved] = op_of
        lau_step[resolved] = op_step[op_of]
        for q, o in zip(resolved.tolist(), op_of.tolist(), strict=True):
            lau_region[q] = op_region[o]
    return op_parent, op_region, op_step, lau_region, lau_step, lau_parent


def _flag_ops(ops: pd.DataFrame, parent: np.ndarray) -> pd.DataFrame:
    names = ops.name.to_numpy(dtype=object)
    n = len(ops)
    # the registry's answers per distinct name, then spread to the rows (a large trace has
    # hundreds of thousands of ops and a few hundred names)
    codes, uniq = pd.factorize(names) if n else (np.zeros(0, np.int64), np.array([], dtype=object))

    def per_name(pred) -> np.ndarray:
        return np.array([bool(pred(x)) for x in uniq], dtype=bool)[codes] if n else np.zeros(0, bool)

    is_view = per_name(cost.is_view)
    is_wrapper = per_name(cost.is_wrapper)
    has_formula = per_name(cost.has_formula)
    is_support = per_name(lambda x: x in cost.SUPPORT_OPS)
    aux = per_name(cost.aux_children)

    # costed descendants: walk up from every costed op (stop where already marked)
    costed = has_formula & ~is_support
    has_costed_desc = np.zeros(n, bool)
    for i in np.flatnonzero(costed):
        p = parent[i]
        while p >= 0 and not has_costed_desc[p]:
            has_costed_desc[p] = True
            p = parent[p]
    same_name_parent = np.zeros(n, bool)
    child = np.flatnonzero(parent >= 0)
    same = names[child] == names[parent[child]]
    same_name_parent[parent[child][same]] = True
    has_children = np.zeros(n, bool)
    has_children[parent[child]] = True

    # An op with an op of its own name nested inside is an overload dispatching to
    # another (aten::sum -> aten::sum.dim_IntList): only the inner one does the work.
    dispatcher = (has_formula & has_costed_desc & ~aux) | same_name_parent
    dur = ops.dur_ns.to_numpy()
    child_dur = np.bincount(parent[child], weights=dur[child], minlength=n) if n else np.zeros(0)
    out = ops.copy()
    out["parent"] = parent
    out["is_view"] = is_view
    out["is_wrapper"] = is_wrapper
    out["has_formula"] = has_formula
    out["dispatcher"] = dispatcher
    out["has_children"] = has_children
    out["self_ns"] = np.maximum(dur - child_dur, 0).astype(np.int64)
    return out


def ancestors(names: np.ndarray, parent: np.ndarray, i: int, limit: int = 16) -> tuple[str, ...]:
    """Names of the ops enclosing op i, innermost first (arrays from `Joined.ops`)."""
    out = []
    p = parent[i]
    while p >= 0 and len(out) < limit:
        out.append(names[p])
        p = parent[p]
    return tuple(out)


def join(trace: RawTrace) -> Joined:
    op_parent, op_region, op_step, lau_region, lau_step, lau_parent = _sweep(trace)
    ops = _flag_ops(trace.ops, op_parent)
    ops["region"] = op_region
    ops["step"] = op_step

    if trace.has_device_activity:
        rows = _device_rows(trace, ops, lau_region, lau_step, lau_parent)
        device_trace = True
    else:
        rows = _cpu_rows(ops)
        device_trace = False
    return Joined(trace=trace, ops=ops, rows=rows, device_trace=device_trace)


def _device_rows(trace: RawTrace, ops: pd.DataFrame, lau_region, lau_step, lau_parent) -> pd.DataFrame:
    dev = trace.device
    lau = trace.launches
    # correlation -> launch position (first one wins; a correlation id names one API call)
    corr_to_launch = pd.Series(np.arange(len(lau)), index=lau.correlation.to_numpy())
    corr_to_launch = corr_to_launch[~corr_to_launch.index.duplicated()]
    corr_to_launch = corr_to_launch[corr_to_launch.index != NO_ID]
    launch_pos = corr_to_launch.reindex(dev.correlation.to_numpy()).fillna(-1).to_numpy().astype(np.int64)

    ext_to_op = pd.Series(np.arange(len(ops)), index=ops.ext_id.to_numpy())
    ext_to_op = ext_to_op[~ext_to_op.index.duplicated()]
    ext_to_op = ext_to_op[ext_to_op.index != NO_ID]

    has_launch = launch_pos >= 0
    lau_ext = lau.ext_id.to_numpy()
    op_ext = np.where(has_launch, lau_ext[np.maximum(launch_pos, 0)] if len(lau) else NO_ID, NO_ID)
    # a kernel carries the External id too; use it where the launch lacks one
    op_ext = np.where(op_ext == NO_ID, dev.ext_id.to_numpy(), op_ext)
    op_pos = ext_to_op.reindex(op_ext).fillna(-1).to_numpy().astype(np.int64)

    lau_region_arr = np.array(lau_region, dtype=object) if len(lau) else np.array([], dtype=object)
    region = np.where(has_launch, lau_region_arr[np.maximum(launch_pos, 0)] if len(lau) else None, None)
    step = np.where(has_launch, lau_step[np.maximum(launch_pos, 0)] if len(lau) else -1, -1)
    has_op = op_pos >= 0
    op_region = ops.region.to_numpy(dtype=object)
    op_step = ops.step.to_numpy()
    # no launch found (a trace without runtime events): place by the op
    region = np.where(~has_launch & has_op, op_region[np.maximum(op_pos, 0)] if len(ops) else None, region)
    step = np.where(~has_launch & has_op, op_step[np.maximum(op_pos, 0)] if len(ops) else -1, step)

    rows = dev.copy()
    rows["launch_api"] = np.where(has_launch, lau.name.to_numpy(dtype=object)[np.maximum(launch_pos, 0)]
                                  if len(lau) else None, None)
    rows["op_pos"] = op_pos
    rows["has_op"] = has_op
    rows["region"] = region
    rows["step"] = step.astype(np.int64)
    rows["ext_id"] = np.where(has_op, op_ext, NO_ID)
    return rows.reset_index(drop=True)


def _cpu_rows(ops: pd.DataFrame) -> pd.DataFrame:
    keep = ~ops.is_view & ~ops.is_wrapper & ~ops.dispatcher
    sel = ops[keep]
    rows = pd.DataFrame({
        "idx": sel.idx.to_numpy(),
        "kind": "cpu_op",
        "name": sel.name.to_numpy(),
        "pid": sel.pid.to_numpy(),
        "tid": sel.tid.to_numpy(),
        "ts_ns": sel.ts_ns.to_numpy(),
        "dur_ns": sel.self_ns.to_numpy(),
        "correlation": NO_ID,
        "ext_id": sel.ext_id.to_numpy(),
        "stream": NO_ID,
        "device_index": NO_ID,
    })
    for c in ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "registers_per_thread",
              "shared_memory_bytes", "transfer_bytes"):
        rows[c] = 0
    rows["blocks_per_sm"] = np.nan
    rows["warps_per_sm"] = np.nan
    rows["launch_api"] = None
    rows["op_pos"] = sel.index.to_numpy()
    rows["has_op"] = True
    rows["region"] = sel.region.to_numpy()
    rows["step"] = sel.step.to_numpy()
    return rows.reset_index(drop=True)

"""Join a parsed trace: kernel -> launch (correlation) -> launching op (External id).

Also nests every op in its parent op, its `record_function` region and its step, by
time containment on its thread. GPU traces get one row per device activity, its op the
innermost op that launched it (`has_op = False` where none did: CUDA-graph replays);
CPU traces get one row per op that does work of its own (`op_rows`), chosen by the
caller (the cost registry knows which ops are views, wrappers or dispatchers).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from wlprof.columns import filled, object_column
from wlprof.trace.parse import NO_ID, RawTrace

STEP_RE = re.compile(r"^(?:wlprof/step|ProfilerStep)#(\d+)$")
NO_STEP_MARKERS = "no ProfilerStep#N markers: the whole trace is taken as one step"


@dataclass
class Joined:
    trace: RawTrace
    ops: pd.DataFrame  # every cpu_op, with parent, region, step, self_ns, has_children
    device_rows: pd.DataFrame | None  # one row per device activity; None for a CPU trace


# How a device row found its op (the `join_method` column).
BY_EXTERNAL_ID = "external_id"  # its launch's External id names the op
BY_KERNEL_ID = "kernel_external_id"  # no launch in the trace; the kernel's own External id names the op
BY_TIME = "time"  # its launch lies inside the op, on the same thread (the innermost such op)
GRAPH = "graph"  # replayed from a CUDA/HIP graph: no op launched it
NONE = "none"  # no launch, or a launch outside every op
GRAPH_LAUNCHES = ("cudaGraphLaunch", "hipGraphLaunch")


def external_ids_name_ops(trace: RawTrace) -> bool:
    """Whether the launches' External ids are op ids. Some 2022-2023 traces give a runtime event an
    External id equal to its own correlation: it names no op, and where it equals an op's id by
    chance, a link through it would be wrong.

    Where no launch gives an External id (a trace without runtime events: trimmed, or its CUPTI
    callbacks lost), the device rows' own External ids are judged the same way.
    """
    for table in (trace.launches, trace.device):
        ext = table.ext_id.to_numpy()
        given = ext != NO_ID
        if given.any():
            same = (ext == table.correlation.to_numpy()) & given
            return bool(same.sum() <= 0.5 * given.sum())
    return False


def _steps_by_time(step: np.ndarray, events: pd.DataFrame, ann: pd.DataFrame, ann_step: np.ndarray) -> None:
    """In place: the events (ops, launches) left without a step (-1) because their thread holds no step
    annotation (the autograd engine's backward thread, a side stream's thread) are given the step of
    their process whose span holds their start."""
    todo = np.flatnonzero(step < 0)
    marked = np.flatnonzero(ann_step >= 0)
    if not len(todo) or not len(marked):
        return
    s_pid = ann.pid.to_numpy()[marked].astype(np.int64)
    s_start = ann.ts_ns.to_numpy()[marked].astype(np.int64)
    s_end = s_start + ann.dur_ns.to_numpy()[marked].astype(np.int64)
    s_num = ann_step[marked]
    e_pid = events.pid.to_numpy()[todo].astype(np.int64)
    e_ts = events.ts_ns.to_numpy()[todo].astype(np.int64)
    for pid in np.unique(s_pid):
        mine = s_pid == pid
        order = np.argsort(s_start[mine], kind="stable")
        st, en, num = s_start[mine][order], s_end[mine][order], s_num[mine][order]
        sel = np.flatnonzero(e_pid == pid)
        if not len(sel):
            continue
        k = np.searchsorted(st, e_ts[sel], side="right") - 1
        ok = (k >= 0) & (e_ts[sel] < en[np.maximum(k, 0)])
        step[todo[sel[ok]]] = num[k[ok]]


class _FirstRow:
    """The position of the first row of a column holding each id (NO_ID aside), looked up for many ids at
    once in a sorted copy of the column (a pandas Series indexed by the ids hashes every row to drop the
    repeats, then every id looked up again)."""

    def __init__(self, ids: np.ndarray):
        keys, first = np.unique(ids, return_index=True)
        keep = keys != NO_ID
        self.keys, self.first = keys[keep], first[keep]

    def __call__(self, ids: np.ndarray) -> np.ndarray:
        """The row of each of `ids`, -1 where none holds it."""
        ids = np.asarray(ids)
        if not len(self.keys):
            return np.full(len(ids), -1, np.int64)
        at = np.minimum(np.searchsorted(self.keys, ids), len(self.keys) - 1)
        return np.where(self.keys[at] == ids, self.first[at], -1).astype(np.int64)


def _sweep(trace: RawTrace, trust_ext: bool, op_of_ext: _FirstRow | None = None):
    """Nest ops, annotations and launches per thread, by time containment.

    Returns (op_parent, op_region, op_step, launch_region, launch_step, launch_parent):
    parents are positions in `trace.ops` (-1: none), regions the innermost
    non-step annotation's name, steps the number of the enclosing step annotation.
    `op_of_ext`: the ops' External ids (`_FirstRow`), where the caller has them.
    """
    ops, ann, lau_all = trace.ops, trace.annotations, trace.launches
    op_of_ext = op_of_ext or _FirstRow(ops.ext_id.to_numpy())
    # A launch whose External id names an op is placed by that op (done below); only the others
    # (CUDA-graph replays, launches outside any op, untrusted ids) need placing by time.
    if trust_ext:
        unresolved = np.flatnonzero(op_of_ext(lau_all.ext_id.to_numpy()) < 0)
    else:
        unresolved = np.arange(len(lau_all))
    lau = lau_all.iloc[unresolved]
    n_ops, n_ann, n_lau = len(ops), len(ann), len(lau)
    kind = np.concatenate([np.zeros(n_ann, np.int8), np.ones(n_ops, np.int8), np.full(n_lau, 2, np.int8)])
    pos = np.concatenate([np.arange(n_ann), np.arange(n_ops), np.arange(n_lau)])
    ts = np.concatenate([ann.ts_ns.to_numpy(), ops.ts_ns.to_numpy(), lau.ts_ns.to_numpy()]).astype(np.int64, copy=False)
    dur = np.concatenate([ann.dur_ns.to_numpy(), ops.dur_ns.to_numpy(), lau.dur_ns.to_numpy()]).astype(np.int64, copy=False)
    pids = np.concatenate([ann.pid.to_numpy(), ops.pid.to_numpy(), lau.pid.to_numpy()]).astype(np.int64, copy=False)
    tids = np.concatenate([ann.tid.to_numpy(), ops.tid.to_numpy(), lau.tid.to_numpy()]).astype(np.int64, copy=False)
    if len(pids):
        # (pid, tid) pairs coded by their codes of each (a 2-column unique sorts far more slowly), in order
        # of first appearance (hashed, not sorted): a thread's code only keeps its rows together
        p_code = pd.factorize(pids)[0]
        t_code = pd.factorize(tids)[0]
        thread_code = p_code * (int(t_code.max()) + 1) + t_code
    else:
        thread_code = np.zeros(0, np.int64)
    # outer before inner: by thread, start, longer first, annotation before op before launch
    order = np.lexsort((kind, -dur, ts, thread_code))

    ann_names = ann.name.tolist()
    ann_step = np.array([int(m.group(1)) if (m := STEP_RE.match(n)) else -1 for n in ann_names], np.int64)
    # gloo's work annotations (`gloo:recv`, `gloo:all_to_all`) are spans of asynchronous work, not regions:
    # on the calling thread a P2P one opens when its op returns and outlasts the ops and regions after it
    ann_skip = np.array([n.startswith("gloo:") for n in ann_names], bool)
    k_s, p_s, t_s = kind[order], pos[order], thread_code[order]
    start = ts[order]
    end = start + dur[order]
    # what encloses what: ops and annotations (not gloo's) hold their children; launches hold none
    is_op = k_s == 1
    is_ann = k_s == 0
    ann_at = np.where(is_ann, p_s, 0)
    holds = is_op | (is_ann & ~ann_skip[ann_at] if n_ann else is_op)
    is_step = is_ann & (ann_step[ann_at] >= 0) if n_ann else np.zeros(len(k_s), bool)
    top = _enclosing(t_s, start, end, holds)
    op_near = _nearest(top, is_op)
    region_of = _nearest(top, is_ann & holds & ~is_step)
    step_of = _nearest(top, is_step)
    parent_op = np.where(op_near >= 0, p_s[np.maximum(op_near, 0)], -1)
    region_ann = np.where(region_of >= 0, ann_at[np.maximum(region_of, 0)], -1)
    step = np.where(step_of >= 0, ann_step[ann_at[np.maximum(step_of, 0)]] if n_ann else -1, -1)
    names = np.array(ann_names + [None], dtype=object)  # position -1: no region
    region = names[region_ann]

    o = np.flatnonzero(is_op)
    op_parent = np.full(n_ops, -1, np.int64)
    op_step = np.full(n_ops, -1, np.int64)
    op_region_arr = np.full(n_ops, None, dtype=object)
    op_parent[p_s[o]] = parent_op[o]
    op_step[p_s[o]] = step[o]
    op_region_arr[p_s[o]] = region[o]
    _steps_by_time(op_step, ops, ann, ann_step)
    n_all = len(lau_all)
    lau_parent = np.full(n_all, -1, np.int64)
    lau_region = np.full(n_all, None, dtype=object)
    lau_step = np.full(n_all, -1, np.int64)
    la = np.flatnonzero(k_s == 2)
    q = unresolved[p_s[la]]
    lau_parent[q] = parent_op[la]
    lau_step[q] = step[la]
    lau_region[q] = region[la]
    _steps_by_time(lau_step, lau_all, ann, ann_step)
    # launches placed by their op
    resolved = np.setdiff1d(np.arange(n_all), unresolved, assume_unique=True)
    if len(resolved):
        op_of = op_of_ext(lau_all.ext_id.to_numpy()[resolved])
        lau_parent[resolved] = op_of
        lau_step[resolved] = op_step[op_of]
        lau_region[resolved] = op_region_arr[op_of]
    return op_parent, op_region_arr, op_step, lau_region, lau_step, lau_parent


def _enclosing(thread: np.ndarray, start: np.ndarray, end: np.ndarray, holds: np.ndarray) -> np.ndarray:
    """For each interval (sorted by thread, then start, outer first), the position of the innermost
    interval before it on its thread that holds children and is still open at its start (end > start),
    or -1: the top of the stack a sweep would keep, found for all intervals at once.

    Intervals between that one and the interval are closed by then or hold nothing, and so are those
    between any interval and its own answer; each round replaces a candidate that fails by that
    candidate's candidate, so the distance skipped doubles and a few dozen rounds suffice.
    """
    n = len(start)
    idx = np.arange(n)
    first = np.flatnonzero(np.r_[True, thread[1:] != thread[:-1]]) if n else idx
    lo = first[np.searchsorted(first, idx, side="right") - 1] if n else idx
    cand = idx - 1
    top = np.full(n, -1, np.int64)
    active = idx
    while active.size:
        c = cand[active]
        inside = c >= lo[active]
        safe = np.where(inside, c, 0)
        found = inside & holds[safe] & (end[safe] > start[active])
        top[active[found]] = c[found]
        keep = inside & ~found
        active, c = active[keep], c[keep]
        cand[active] = cand[c]
    return top


def _nearest(top: np.ndarray, target: np.ndarray) -> np.ndarray:
    """For each interval, the nearest interval marked `target` among those enclosing it (its `top`,
    that one's `top`, and so on), or -1; by pointer doubling."""
    safe = np.maximum(top, 0)
    ans = np.where(top < 0, -1, np.where(target[safe], top, -2))
    ptr = top.copy()
    todo = np.flatnonzero(ans == -2)
    while todo.size:
        p = ptr[todo]
        got = ans[p]
        done = got != -2
        ans[todo[done]] = got[done]
        todo, p = todo[~done], p[~done]
        ptr[todo] = ptr[p]
    return ans


def _nest(ops: pd.DataFrame, parent: np.ndarray) -> pd.DataFrame:
    """The ops with their parent, whether they have children, and their exclusive time."""
    n = len(ops)
    child = np.flatnonzero(parent >= 0)
    has_children = np.zeros(n, bool)
    has_children[parent[child]] = True
    dur = ops.dur_ns.to_numpy()
    child_dur = np.bincount(parent[child], weights=dur[child], minlength=n) if n else np.zeros(0)
    out = ops.copy(deep=False)  # the columns are added, none is changed
    out["parent"] = parent
    out["has_children"] = has_children
    out["self_ns"] = np.maximum(dur - child_dur, 0).astype(np.int64)
    return out


STEPS_AT_THEIR_ENDS = ("the ProfilerStep#N markers span none of the ops (torch 2.5 with with_stack=True "
                       "writes each one where its step ends): each step is taken as the time from the end of the "
                       "marker before it to the end of its own")


def _end_anchored_steps(trace: RawTrace) -> bool:
    """In place: where a process's step markers hold none of its ops' starts while the spans from one
    marker's end to the next's hold over half (markers written at their steps' ends, each a few µs long),
    each marker is stretched back to the end of the marker before it (the first to its process's first op).
    Returns whether any was."""
    ann, ops = trace.annotations, trace.ops
    if not len(ann) or not len(ops):
        return False
    is_step = np.array([STEP_RE.match(str(n)) is not None for n in ann.name.to_numpy(dtype=object)], bool)
    if not is_step.any():
        return False
    a_pid, a_ts = ann.pid.to_numpy().astype(np.int64), ann.ts_ns.to_numpy().astype(np.int64)
    a_end = a_ts + ann.dur_ns.to_numpy().astype(np.int64)
    o_pid = ops.pid.to_numpy().astype(np.int64, copy=False)
    o_ts = ops.ts_ns.to_numpy().astype(np.int64, copy=False)
    starts, ends, changed = a_ts.copy(), a_end.copy(), False
    pids = np.unique(a_pid[is_step])
    one = len(pids) == 1 and bool((o_pid == pids[0]).all())  # one process (a CPU trace): no selection
    for pid in pids:
        sel = np.flatnonzero(is_step & (a_pid == pid))
        sel = sel[np.argsort(a_ts[sel], kind="stable")]
        st, en = a_ts[sel], a_end[sel]
        if (st[1:] < en[:-1]).any():  # overlapping markers: not one sequence of steps
            continue
        t = o_ts if one else o_ts[o_pid == pid]
        if not len(t) or any(((t >= s) & (t < e)).any() for s, e in zip(st, en, strict=True)):
            continue  # no op, or a marker holds one (the usual case: one pass over the ops)
        new_st = np.concatenate([[min(int(t.min()), int(st[0]))], en[:-1]])
        if 2 * int(((t >= new_st[0]) & (t < en[-1])).sum()) <= len(t):
            continue
        starts[sel], ends[sel], changed = new_st, en, True
    if changed:
        ann = ann.copy()
        ann["ts_ns"] = starts.astype(ann.ts_ns.dtype)
        ann["dur_ns"] = (ends - starts).astype(ann.dur_ns.dtype)
        trace.annotations = ann
        if STEPS_AT_THEIR_ENDS not in trace.warnings:
            trace.warnings.append(STEPS_AT_THEIR_ENDS)
    return changed


def join(trace: RawTrace) -> Joined:
    """The trace's ops nested and its device activity joined to them.

    A trace that marks no profiler step (no `ProfilerStep#N` or `wlprof/step#N`) is taken
    as one step, step 0, and says so in its warnings. Step markers written at their steps'
    ends are stretched over their steps (`_end_anchored_steps`).
    """
    _end_anchored_steps(trace)
    trust = external_ids_name_ops(trace)
    op_of_ext = _FirstRow(trace.ops.ext_id.to_numpy())
    op_parent, op_region, op_step, lau_region, lau_step, lau_parent = _sweep(trace, trust, op_of_ext)
    one_step = not any(STEP_RE.match(n) for n in trace.annotations.name.unique())
    if one_step:
        op_step, lau_step = np.zeros_like(op_step), np.zeros_like(lau_step)
        if (len(trace.ops) or len(trace.device)) and NO_STEP_MARKERS not in trace.warnings:
            trace.warnings.append(NO_STEP_MARKERS)
    ops = _nest(trace.ops, op_parent)
    ops["region"] = object_column(op_region, ops.index)
    ops["step"] = op_step
    # a trace that ran GPU work but lost its device events has no rows, not its ops' host times
    device = trace.has_device_activity or trace.gpu_work_without_device is not None
    rows = _device_rows(trace, ops, lau_region, lau_step, lau_parent, trust, op_of_ext) if device else None
    if one_step and rows is not None:  # a device row without launch or op is in the one step too
        rows["step"] = np.zeros(len(rows), np.int64)
    return Joined(trace=trace, ops=ops, device_rows=rows)


def _device_rows(trace: RawTrace, ops: pd.DataFrame, lau_region, lau_step, lau_parent, trust_ext: bool,
                 op_of_ext: _FirstRow | None = None) -> pd.DataFrame:
    dev = trace.device
    lau = trace.launches
    # correlation -> launch position (first one wins; a correlation id names one API call)
    launch_pos = _FirstRow(lau.correlation.to_numpy())(dev.correlation.to_numpy())
    op_of_ext = op_of_ext or _FirstRow(ops.ext_id.to_numpy())

    has_launch = launch_pos >= 0
    safe = np.maximum(launch_pos, 0)
    api = np.where(has_launch, lau.name.to_numpy(dtype=object)[safe] if len(lau) else None, None)
    graph = np.isin(api, GRAPH_LAUNCHES)
    method = filled(len(dev), NONE)
    op_pos = np.full(len(dev), -1, np.int64)
    if trust_ext:
        lau_ext = lau.ext_id.to_numpy()
        from_launch = np.where(has_launch, lau_ext[safe] if len(lau) else NO_ID, NO_ID)
        by_launch = op_of_ext(from_launch)
        # a graph launch's External id names the op around the replay (a compiled region, a step):
        # it ran none of the replayed kernels, which were captured from ops before the trace
        by_launch = np.where(graph, -1, by_launch)
        # a kernel carries the External id too; used where the trace holds no launch for it
        by_kernel = op_of_ext(dev.ext_id.to_numpy())
        op_pos = np.where(by_launch >= 0, by_launch, np.where(~has_launch, by_kernel, -1))
        method[by_launch >= 0] = BY_EXTERNAL_ID
        method[(by_launch < 0) & ~has_launch & (by_kernel >= 0)] = BY_KERNEL_ID
    # launches whose id names no op: the innermost op around the launch on its thread
    timed = (op_pos < 0) & has_launch & ~graph
    if timed.any() and len(lau):
        parent = lau_parent[safe]
        op_pos = np.where(timed & (parent >= 0), parent, op_pos)
        method[timed & (parent >= 0)] = BY_TIME
    method[graph & (op_pos < 0)] = GRAPH
    op_ids = ops.ext_id.to_numpy()
    op_ext = np.where(op_pos >= 0, op_ids[np.maximum(op_pos, 0)] if len(ops) else NO_ID, NO_ID)

    region = np.where(has_launch, lau_region[np.maximum(launch_pos, 0)] if len(lau) else None, None)
    step = np.where(has_launch, lau_step[np.maximum(launch_pos, 0)] if len(lau) else -1, -1)
    has_op = op_pos >= 0
    op_region = ops.region.to_numpy(dtype=object)
    op_step = ops.step.to_numpy()
    # no launch found (a trace without runtime events): place by the op
    region = np.where(~has_launch & has_op, op_region[np.maximum(op_pos, 0)] if len(ops) else None, region)
    step = np.where(~has_launch & has_op, op_step[np.maximum(op_pos, 0)] if len(ops) else -1, step)

    rows = dev.copy(deep=False)  # columns are added or replaced, never changed in place
    rows["launch_api"] = object_column(api, rows.index)
    rows["join_method"] = object_column(method, rows.index)
    rows["op_pos"] = op_pos
    rows["has_op"] = has_op
    rows["region"] = object_column(region, rows.index)
    rows["step"] = step.astype(np.int64)
    rows["ext_id"] = np.where(has_op, op_ext, NO_ID)
    return rows.reset_index(drop=True)


def op_rows(ops: pd.DataFrame, keep: np.ndarray) -> pd.DataFrame:
    """Rows of a CPU trace: one per op in `keep`, its duration its exclusive (self) time."""
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
    rows["join_method"] = "op"  # the row is the op itself
    rows["op_pos"] = sel.index.to_numpy()
    rows["has_op"] = True
    rows["region"] = sel.region.to_numpy()
    rows["step"] = sel.step.to_numpy()
    return rows.reset_index(drop=True)

"""A CPU trace's communication as rows: gloo's work on its worker threads, joined to its c10d op.

On the CPU, torch.profiler records a collective twice: the c10d op that enqueued it
(`c10d::alltoall_base_`, on the calling thread, tens of µs) and gloo's own work
(`gloo:all_to_all`, a `user_annotation` on a gloo worker thread, with the tensor's dims
and dtype) whose interval is when the data moved. There is no id between them; gloo runs
a process group's work in the order it was enqueued, so the k-th gloo work of a kind is
the k-th c10d op of that kind (`join_method = comm_order`). A c10d op may run as gloo work of
another kind (`GLOO_RUNS_AS`: gloo's `_reduce_scatter_base_` all-reduces its whole input, recorded
as `gloo:all_reduce`): such a work goes to the earliest op not yet matched of the kinds it may be. The rows get the op's region
and step; their time is the gloo work's.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from wlprof.collectives import ALL_REDUCE, REDUCE_SCATTER, normalize
from wlprof.trace.parse import NO_ID, RawTrace

KIND = "comm"
JOIN = "comm_order"
# The kinds of gloo work a c10d op of a kind may run as, where other than its own
GLOO_RUNS_AS = {REDUCE_SCATTER: (REDUCE_SCATTER, ALL_REDUCE)}


def gloo_rows(trace: RawTrace, ops: pd.DataFrame) -> pd.DataFrame | None:
    """One row per gloo work annotation, in the layout of `join.op_rows` (None when there is none)."""
    ann = trace.annotations
    if not len(ann):
        return None
    is_gloo = ann.name.str.startswith("gloo:").to_numpy(dtype=bool)
    if not is_gloo.any():
        return None
    work = ann[is_gloo].sort_values(["ts_ns", "idx"], kind="stable")
    names = ops.name.to_numpy(dtype=object)
    c10d = np.flatnonzero(np.array([isinstance(n, str) and n.startswith("c10d::") for n in names], dtype=bool))
    c10d = c10d[np.argsort(ops.ts_ns.to_numpy()[c10d], kind="stable")] if len(c10d) else c10d
    queues: dict[str, list[int]] = {}
    for p in c10d:
        key = normalize(names[p])
        if key is not None:
            queues.setdefault(key, []).append(int(p))
    # the op kinds whose ops a gloo work of a kind may belong to
    owners: dict[str, list[str]] = {}
    for kind in queues:
        for runs_as in GLOO_RUNS_AS.get(kind, (kind,)):
            owners.setdefault(runs_as, []).append(kind)
    ts = ops.ts_ns.to_numpy()
    taken: dict[str, int] = {}
    op_pos = np.full(len(work), -1, np.int64)
    for j, name in enumerate(work.name.tolist()):
        key = normalize(name)
        heads = [(ts[queues[kind][taken.get(kind, 0)]], kind) for kind in owners.get(key, ())
                 if taken.get(kind, 0) < len(queues[kind])]
        if heads:
            kind = min(heads)[1]
            op_pos[j] = queues[kind][taken.get(kind, 0)]
            taken[kind] = taken.get(kind, 0) + 1
    has_op = op_pos >= 0
    safe = np.maximum(op_pos, 0)
    region = ops.region.to_numpy(dtype=object)
    step = ops.step.to_numpy()
    ext = ops.ext_id.to_numpy()
    rows = pd.DataFrame({
        "idx": work.idx.to_numpy(),
        "kind": KIND,
        "name": work.name.to_numpy(dtype=object),
        "pid": work.pid.to_numpy(),
        "tid": work.tid.to_numpy(),
        "ts_ns": work.ts_ns.to_numpy(),
        "dur_ns": work.dur_ns.to_numpy(),
        "correlation": NO_ID,
        "ext_id": np.where(has_op, ext[safe], NO_ID) if len(ops) else NO_ID,
        "stream": NO_ID,
        "device_index": NO_ID,
    })
    for c in ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "registers_per_thread",
              "shared_memory_bytes", "transfer_bytes"):
        rows[c] = 0
    rows["blocks_per_sm"] = np.nan
    rows["warps_per_sm"] = np.nan
    rows["launch_api"] = None
    rows["join_method"] = JOIN
    rows["op_pos"] = op_pos
    rows["has_op"] = has_op
    rows["region"] = np.where(has_op, region[safe], None) if len(ops) else None
    rows["step"] = np.where(has_op, step[safe], -1) if len(ops) else -1
    rows["args_id"] = work.args_id.to_numpy() if "args_id" in work else -1
    return rows.reset_index(drop=True)


def with_comm_rows(rows: pd.DataFrame, trace: RawTrace, ops: pd.DataFrame) -> pd.DataFrame:
    """A CPU trace's op rows with its gloo work rows after them (unchanged when there is none)."""
    extra = gloo_rows(trace, ops)
    if extra is None:
        return rows
    if "args_id" not in rows:
        rows = rows.assign(args_id=-1)
    return pd.concat([rows, extra], ignore_index=True)

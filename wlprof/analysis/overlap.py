"""Communication against computation: interval unions and their intersection, per rank and per stream.

A trace's rows are split in two: communication (collective and P2P kernels or gloo work,
memcpy, memset: `comm_class` set) and compute (every other row). Each set's intervals are
merged into a union; the overlapped time is the length of the intersection of the two
unions, exposed communication is the rest of the communication union. The definitions, and
where they differ from HTA's `get_comm_comp_overlap`: `docs/overlap.md`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

COLLECTIVE_CLASSES = ("collective", "p2p")
COPY_CLASSES = ("memcpy", "memset")


def union(starts, ends) -> tuple[np.ndarray, np.ndarray]:
    """The union of intervals [start, end) as sorted, disjoint intervals (touching ones merged)."""
    s = np.asarray(starts, dtype=float)
    e = np.asarray(ends, dtype=float)
    keep = e > s
    s, e = s[keep], e[keep]
    if len(s) == 0:
        return s, e
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    reach = np.maximum.accumulate(e)
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    new[1:] = s[1:] > reach[:-1]
    first = np.flatnonzero(new)
    return s[first], np.maximum.reduceat(e, first)


def length(intervals: tuple[np.ndarray, np.ndarray]) -> float:
    s, e = intervals
    return float((e - s).sum()) if len(s) else 0.0


def intersection_length(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> float:
    """|A ∩ B| for two unions (each disjoint): a sweep over their ends, counting where both are open."""
    if not len(a[0]) or not len(b[0]):
        return 0.0
    times = np.concatenate([a[0], a[1], b[0], b[1]])
    delta = np.concatenate([np.ones(len(a[0])), -np.ones(len(a[1])), np.full(len(b[0]), 2.0),
                            np.full(len(b[1]), -2.0)])
    order = np.argsort(times, kind="stable")
    times, state = times[order], np.cumsum(delta[order])
    return float(np.diff(times)[state[:-1] == 3].sum())


def _classes(rows: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    cls = rows.comm_class.to_numpy(dtype=object) if "comm_class" in rows else np.full(len(rows), None, dtype=object)
    coll = np.isin(cls, COLLECTIVE_CLASSES)
    copy = np.isin(cls, COPY_CLASSES)
    return coll, copy


def _row(ts: np.ndarray, te: np.ndarray, coll: np.ndarray, copy: np.ndarray, compute_all, comm_all, scope: str,
         stream: int, steps: int, own: tuple | None = None) -> dict:
    """The overlap row of rows starting at `ts` and ending at `te`, of which `coll` are collective or P2P
    and `copy` memcpy or memset; `own`: their (compute, communication) unions where already made."""
    comm = coll | copy
    compute, m = own if own is not None else (union(ts[~comm], te[~comm]), union(ts[comm], te[comm]))
    c, p = union(ts[coll], te[coll]), union(ts[copy], te[copy])
    comm_us, coll_us, copy_us = length(m), length(c), length(p)
    overlap = intersection_length(m, compute_all)
    coll_overlap = intersection_length(c, compute_all)
    copy_overlap = intersection_length(p, compute_all)
    busy = length(union(ts, te))
    span = float(te.max() - ts.min()) if len(ts) else 0.0

    def share(x, total):
        return x / total if total > 0 else float("nan")

    return {
        "scope": scope, "stream": int(stream), "steps": steps, "rows": len(ts),
        "compute_us": length(compute), "comm_us": comm_us, "collective_us": coll_us, "copy_us": copy_us,
        "overlap_us": overlap, "exposed_comm_us": comm_us - overlap, "overlap_share": share(overlap, comm_us),
        "collective_overlap_us": coll_overlap, "collective_overlap_share": share(coll_overlap, coll_us),
        "copy_overlap_us": copy_overlap, "copy_overlap_share": share(copy_overlap, copy_us),
        "compute_overlapped_us": intersection_length(compute, comm_all),
        "busy_us": busy, "span_us": span, "idle_us": max(span - busy, 0.0),
    }


def overlap_table(kernels: pd.DataFrame, streams: bool = True) -> pd.DataFrame:
    """One trace's (one rank's) overlap rows: the rank, then each CUDA stream (when `streams`)."""
    ts = kernels.ts_us.to_numpy(dtype=float)
    te = ts + kernels.dur_us.to_numpy(dtype=float)
    coll, copy = _classes(kernels)
    comm = coll | copy
    compute_all, comm_all = union(ts[~comm], te[~comm]), union(ts[comm], te[comm])
    steps = int(kernels.step[kernels.step >= 0].nunique()) if "step" in kernels and len(kernels) else 0
    out = [_row(ts, te, coll, copy, compute_all, comm_all, "rank", -1, steps, own=(compute_all, comm_all))]
    if streams and "stream" in kernels:
        stream = kernels.stream.to_numpy()
        # each stream's rows in table order, the streams in order, as a groupby gives them
        at = np.flatnonzero(stream >= 0)
        at = at[np.argsort(stream[at], kind="stable")]
        starts = np.flatnonzero(np.r_[True, stream[at][1:] != stream[at][:-1]]).tolist() if len(at) else []
        for a, b in zip(starts, [*starts[1:], len(at)][:len(starts)], strict=True):
            g = at[a:b]
            out.append(_row(ts[g], te[g], coll[g], copy[g], compute_all, comm_all, "stream", int(stream[g[0]]),
                            steps))
    return pd.DataFrame(out)


def overlap_for_run(kernels: pd.DataFrame, streams: bool = True) -> pd.DataFrame:
    """The overlap rows of every point and rank of a run's kernels table (runs stored without them)."""
    keys = [c for c in ("run_id", "point", "variant", "rank") if c in kernels]
    parts = []
    for key, g in kernels.groupby(keys, sort=True, dropna=False):
        t = overlap_table(g, streams)
        for name, value in zip(keys, key if isinstance(key, tuple) else (key,), strict=True):
            t[name] = value
        parts.append(t)
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()

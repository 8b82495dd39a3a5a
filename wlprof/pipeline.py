"""One pipeline for every trace: a torch.profiler trace file -> the kernels, ops and steps tables.

`wlprof run` (a profiled sweep point) and `wlprof ingest` (a trace a user brings) both
go read -> join -> attribute -> cost -> summarize -> identity columns through `process`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from wlprof.errors import TraceFormatError
from wlprof.trace.join import Joined
from wlprof.trace.parse import RawTrace


@dataclass
class PointTables:
    kernels: pd.DataFrame
    ops: pd.DataFrame
    steps: pd.DataFrame  # one row
    joined: Joined  # the trace and its join, for an enriched Chrome trace
    overlap: pd.DataFrame | None = None  # communication against computation, per rank and stream


def set_columns(df: pd.DataFrame, values: Mapping[str, Any]) -> None:
    """Broadcast per-point values (identity, parameters, facts) onto every row of `df`, in place."""
    from wlprof.columns import filled

    for name, value in values.items():
        if isinstance(value, list):
            df[name] = pd.Series([value] * len(df), index=df.index, dtype=object)
        elif isinstance(value, str):  # one string object on every row, not pandas' Arrow copy of it per row
            df[name] = pd.Series(filled(len(df), value), index=df.index, dtype=object)
        else:
            df[name] = value


def read(path: str | Path, keep_events: bool = True, parsed: tuple | None = None) -> RawTrace:
    """The trace's event tables; `keep_events=False` streams a large trace and keeps no event dicts
    (no enriched copy can then be written from memory). `parsed`: its events already read
    (`wlprof.trace.parse.parse_events`)."""
    from wlprof.memory import release
    from wlprof.trace.parse import read_trace

    trace = read_trace(path, keep_events=keep_events, parsed=parsed)
    release()
    if len(trace.ops) + len(trace.device) + len(trace.launches) == 0:
        raise TraceFormatError(str(path), _why_empty(trace, path))
    if len(trace.ops) + len(trace.device) == 0 and not trace.gpu_work_without_device:
        raise TraceFormatError(str(path), _why_idle(trace))
    return trace


def _why_idle(trace: RawTrace) -> str:
    """Why a trace whose only events are runtime calls that put no work on the device has nothing to read."""
    names = trace.launches["name"].astype(str).value_counts()
    calls = ", ".join(f"{name} x{count:,}" for name, count in names.head(3).items())
    more = f" and {len(names) - 3:,} other calls" if len(names) > 3 else ""
    return (f"is a torch.profiler trace that recorded no op, kernel or launch: its {len(trace.launches):,} runtime "
            f"calls ({calls}{more}) put no work on the device, so nothing ran while it was recording")


KINETO_KEYS = ("schemaVersion", "deviceProperties", "traceName", "baseTimeNanoseconds")


def _why_empty(trace: RawTrace, path: str | Path | None = None) -> str:
    """Why a trace with no op, device or runtime event has nothing to read."""
    if path is not None and trace.event_count == 2 and _is_memory_timeline(path):
        return ("is torch.profiler's memory timeline (export_memory_timeline's JSON: timestamps and the bytes "
                "of each memory category at each), not a Chrome trace: export the trace with "
                "export_chrome_trace or tensorboard_trace_handler")
    if trace.event_count == 0:
        return "has no events (its event list is empty)"
    if trace.untimed_example is not None:  # e.g. Ascend's torch_npu writes "ts" as a string
        return (f"has torch.profiler events, but none with a number for its ts and dur ({trace.untimed_example}): "
                "Kineto writes microseconds as JSON numbers; these events were not read")
    if trace.foreign_events == 0 and any(k in trace.meta for k in KINETO_KEYS):
        return (f"is a torch.profiler trace that recorded no op, kernel or runtime event ({trace.event_count} "
                "events, all of the profiler's own bookkeeping): nothing ran while it was recording")
    return "has no torch.profiler events (cpu_op, kernel, cuda_runtime): not a torch.profiler trace"


def _is_memory_timeline(path: str | Path) -> bool:
    """`[times, sizes]`: a list of numbers and a list of as many lists of numbers."""
    from wlprof import jsonio

    try:
        doc = jsonio.loads(jsonio.read_bytes(path))
    except Exception:  # noqa: BLE001  (any unreadable file is simply not one)
        return False
    if not (isinstance(doc, list) and len(doc) == 2 and all(isinstance(x, list) for x in doc)):
        return False
    times, sizes = doc
    return (len(times) == len(sizes) > 0 and all(isinstance(t, (int, float)) for t in times[:100])
            and all(isinstance(v, list) and all(isinstance(b, (int, float)) for b in v) for v in sizes[:100]))


def process(path: str | Path, **kwargs) -> PointTables:
    """`tables` of the trace at `path` (read with its events kept)."""
    return tables(read(path), **kwargs)


@dataclass
class Costed:
    kernels: pd.DataFrame
    ops: pd.DataFrame
    joined: Joined
    rows: pd.DataFrame  # the joined rows the kernels table was made of


def costed(trace: RawTrace, ceilings=None, stated: Sequence = (), tf32: bool = False,
           lists: Sequence = ()) -> Costed:
    """Join, attribute and cost a trace: its kernels and ops tables (without identity columns)."""
    from wlprof.cost.annotate import annotate
    from wlprof.cost.attribution import flag_ops, working
    from wlprof.cost.comm import annotate_comm, zero_comm_flops
    from wlprof.memory import release
    from wlprof.trace.comm import with_comm_rows
    from wlprof.trace.join import join, op_rows

    joined = join(trace)
    joined.ops = flag_ops(joined.ops, trace.args_table)
    if joined.device_rows is not None:
        rows = joined.device_rows
    else:  # a CPU trace: the ops that do work, and gloo's communication work
        rows = with_comm_rows(op_rows(joined.ops, working(joined.ops)), trace, joined.ops)
    kernels, ops = annotate(rows, joined.ops, trace.args_table, ceilings, stated, tf32, lists)
    if len(rows) == 0 and trace.gpu_work_without_device:
        ops = _host_ops(trace, joined, ceilings, stated, tf32)
    annotate_comm(kernels, rows, joined.ops, trace.args_table, trace.meta)
    zero_comm_flops(kernels)
    release(heap=False)  # the summary and overlap tables that follow reuse the join's freed heap pages
    return Costed(kernels, ops, joined, rows)


# the ops-table columns that need device time, which a trace without device events does not have
_DEVICE_TIME_COLS = ("dur_us", "intensity_flop_per_byte", "achieved_tflops", "achieved_gbps", "ceiling_tflops",
                     "ceiling_gbps", "ridge_flop_per_byte", "roofline_us", "roofline_fraction", "working_set_bytes")


def _host_ops(trace: RawTrace, joined: Joined, ceilings, stated: Sequence, tf32: bool) -> pd.DataFrame:
    """The ops table of a trace that ran GPU work but lost its device events: its working ops with
    their host times (`cpu_dur_us`) and costs, and no device time (no rates, no roofline)."""
    from wlprof.cost.annotate import annotate
    from wlprof.cost.attribution import working
    from wlprof.trace.comm import with_comm_rows
    from wlprof.trace.join import op_rows

    host = with_comm_rows(op_rows(joined.ops, working(joined.ops)), trace, joined.ops)
    _, ops = annotate(host, joined.ops, trace.args_table, ceilings, stated, tf32)
    ops = ops.copy()
    for col in _DEVICE_TIME_COLS:
        if col in ops:
            ops[col] = float("nan")
    if "kernel_count" in ops:
        ops["kernel_count"] = 0
    for col in ("bound", "roof", "compute_roof", "memory_roof"):
        if col in ops:
            ops[col] = None
    return ops


def tables(trace: RawTrace, *, ceilings, identity: Mapping[str, Any], stated: Sequence = (), timings=None,
           profiled_steps: int | None = None, useful_flops: float | None = None,
           executed_regions: tuple[str, ...] | None = None, tf32: bool = False,
           lists: Sequence = ()) -> PointTables:
    """The kernels, ops and steps tables of one trace; `identity` becomes columns of every row of all three."""
    from wlprof.analysis.overlap import overlap_table
    from wlprof.steps import summarize

    c = costed(trace, ceilings, stated, tf32, lists)
    kernels, op_table, joined = c.kernels, c.ops, c.joined
    if profiled_steps is None:
        profiled_steps = int(kernels.step[kernels.step >= 0].nunique())
    row = summarize(kernels, timings, profiled_steps, useful_flops, executed_regions)
    overlap = overlap_table(kernels)
    for df in (kernels, op_table, overlap):
        set_columns(df, identity)
    row.update(identity)
    return PointTables(kernels, op_table, pd.DataFrame([row]), joined, overlap)


def chrome(tables: PointTables, extra_meta: dict) -> bytes:
    """The point's enriched Chrome trace (needs the events: `process(..., keep_events=True)`)."""
    from wlprof.trace.enrich import enriched_trace

    trace = tables.joined.trace
    return enriched_trace(trace.meta, trace.events, tables.kernels, extra_meta)

"""The trace contract: every column of every table wlprof writes, declared once.

Each column has a name (units in the name), an Arrow type, a unit and a meaning; a
workload's columns are declared by the workload. Every file carries every column
(nulls where a workload has none), because Arrow takes a folder's schema from its
first file. `SCHEMA_VERSION` is in every file: newer majors are refused, older
versions load and are migrated (`MIGRATIONS`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import pyarrow as pa

from wlprof.schema_version import SCHEMA_VERSION  # noqa: F401  (the contract's version, importable alone)

METADATA_KEY = b"wlprof.schema_version"


@dataclass(frozen=True)
class Column:
    """One column. `data`: part of the data a data-dependent op ran on (the graph drawn, the expert
    counts); `distribution`: part of what the data was drawn from; `feature`: a number the
    performance models may use. `nullable`: an integer column that is null on some rows (read back as
    pandas' nullable Int64/Int32, as the workload columns and trace facts are)."""

    name: str
    type: pa.DataType
    unit: str
    meaning: str
    data: bool = False
    distribution: bool = False
    feature: bool = False
    nullable: bool = False


def _c(name, type_, unit, meaning, **roles):
    return Column(name, type_, unit, meaning, **roles)


S, I32, I64, F64, B = pa.string(), pa.int32(), pa.int64(), pa.float64(), pa.bool_()
LIST_I64, LIST_F64 = pa.list_(I64), pa.list_(F64)

IDENTITY = [
    _c("run_id", S, "", "the run: <workload>-<UTC date>-<time>-<4 hex>"),
    _c("workload", S, "", "the workload that generated the run, or 'ingest'"),
    _c("variant", S, "", "sweep point label, unique in its run (e.g. 'balanced 2048x2048x2560')"),
    _c("point", I32, "", "sweep point index in its run"),
    _c("device_type", S, "", "'cuda' or 'cpu'"),
    _c("device_name", S, "", "e.g. 'NVIDIA H200'"),
    _c("dtype", S, "", "the workload's compute dtype; an ingested trace's: the one its matrix-unit kernels ran "
       "longest in, else the one of most kernel time"),
]

# Columns of every run whatever generated it.
TRACE_FACTS = [
    _c("rank", I64, "", "distributed rank of the trace (its distributedInfo.rank, else file order; 0 in a single process)"),
    _c("source_file", S, "", "ingest: the trace file the rows came from"),
]

# An op call as the profiler recorded it: the same columns in the kernels and ops tables.
OP_CALL = [
    _c("op_name", S, "", "launching op (innermost aten op)"),
    _c("op_input_dims", S, "", "launching op's input shapes, JSON"),
    _c("op_input_types", S, "", "launching op's input dtypes, JSON"),
    _c("op_input_strides", S, "", "launching op's input strides, JSON"),
    _c("op_concrete_inputs", S, "", "launching op's scalar arguments, JSON"),
    _c("op_input_dims_source", S, "", "where op_input_dims comes from: trace (as recorded); for tensor lists the "
       "profiler recorded as []: workload (the workload's own record of its list calls) or gradients (the "
       "backward's AccumulateGrad shapes); both checked against the blocks the call launched "
       "(docs/trace-formats.md)"),
    _c("region", S, "", "innermost record_function region (e.g. moe/dispatch)"),
]

KERNEL_OWN = [
    _c("step", I32, "", "profiled step the kernel belongs to (-1: outside any step)"),
    _c("kind", S, "", "kernel, memcpy, memset (GPU), cpu_op (a CPU op's own work) or comm (CPU: a gloo "
       "collective's work on its worker thread)"),
    _c("name", S, "", "kernel name (GPU) or op name (CPU)"),
    _c("stream", I64, "", "CUDA stream (-1 on the CPU)"),
    _c("device_index", I32, "", "CUDA device index (-1 on the CPU)"),
    _c("ts_us", F64, "us", "start, on the trace's clock (as in the Chrome trace)"),
    _c("dur_us", F64, "us", "duration (GPU: kernel time; CPU: the op's exclusive time)"),
    _c("grid_x", I32, "", "launch grid"), _c("grid_y", I32, "", "launch grid"), _c("grid_z", I32, "", "launch grid"),
    _c("block_x", I32, "", "block size"), _c("block_y", I32, "", "block size"), _c("block_z", I32, "", "block size"),
    _c("registers_per_thread", I32, "", "registers per thread"),
    _c("shared_memory_bytes", I64, "bytes", "shared memory per block"),
    _c("blocks_per_sm", F64, "", "blocks per SM (computed by the profiler from the grid)"),
    _c("warps_per_sm", F64, "", "warps per SM (computed by the profiler from the grid)"),
    _c("correlation", I64, "", "CUPTI correlation id linking the kernel to its launch"),
    _c("external_id", I64, "", "External id of the launching op (-1: none)"),
    _c("launch_api", S, "", "runtime/driver call that launched it (cudaLaunchKernel, cuLaunchKernelEx, cudaGraphLaunch)"),
    _c("has_op", B, "", "False for kernels with no launching op (CUDA-graph replays)"),
    _c("join_method", S, "", "how the row found its op: external_id (its launch names the op), kernel_external_id, "
       "time (its launch lies inside the op on the same thread), graph (a CUDA-graph replay), none; op (CPU: the row "
       "is the op); comm_order (CPU: a gloo collective's work, the k-th of its kind matched to the k-th c10d op)"),
    *OP_CALL,
    _c("op_kernel_count", I32, "", "device activities the launching op ran"),
    _c("cost_share", F64, "fraction", "this kernel's share of its op's cost, by duration"),
]

COST = [
    _c("flops", F64, "FLOP", "floating-point operations (multiply = add = 1)"),
    _c("bytes", F64, "bytes", "compulsory traffic: inputs read once, outputs written once"),
    _c("bytes_written", F64, "bytes", "the part of bytes that is written (null where the formula does not say)"),
    _c("flops_source", S, "", "formula (from shapes), inductor (Inductor's kernel_num_gb / kernel_flop "
                                "of a Triton launch), workload (stated by the workload), comm (communication that does no "
                                "arithmetic: 0 FLOPs), unknown"),
    _c("cost_unit", S, "", "matrix or vector: which compute ceiling applies"),
    _c("cost_dtype", S, "", "dtype of the arithmetic, for the ceiling lookup"),
    _c("intensity_flop_per_byte", F64, "FLOP/byte", "flops / bytes (a step's: of its kernels whose FLOPs and bytes are both known)"),
    _c("achieved_tflops", F64, "TFLOP/s", "flops / dur"),
    _c("achieved_gbps", F64, "GB/s", "bytes / dur"),
    _c("ceiling_tflops", F64, "TFLOP/s", "compute ceiling used (measured; the compute_roof's)"),
    _c("ceiling_gbps", F64, "GB/s", "memory ceiling used (measured bandwidth of the memory_roof)"),
    _c("ridge_flop_per_byte", F64, "FLOP/byte", "ceiling_tflops / ceiling_gbps"),
    _c("bound", S, "", "memory or compute: which roof is lower at this intensity"),
    _c("roofline_us", F64, "us", "max(flops / ceiling_tflops, bytes / ceiling_gbps): the roofline's floor"),
    _c("roofline_fraction", F64, "fraction", "roofline_us / dur_us: 1 is on the roof; above 1 only with a "
       "roof_note saying why"),
    _c("roof", S, "", "the roof that sets roofline_us: compute:<dtype> (compute:vector), or a memory roof "
       "(hbm_read, hbm_copy, hbm_write, l2 on a GPU; dram_read, dram_copy, dram_write, l1, l2, l3 on a CPU)"),
    _c("compute_roof", S, "", "the compute roof the row is placed under: compute:<dtype> or compute:vector"),
    _c("memory_roof", S, "", "the memory roof the row is placed under: by its traffic (bytes_written / bytes "
       "<= 0.1: read, >= 0.9: write, else copy; null bytes_written: copy) or the cache level its working set fits"),
    _c("roof_note", S, "", "why the placement is what it is, comma-separated: datasheet (placed against the GPU's "
       "datasheet peaks, not measured ceilings), l1/l2/l3_resident, "
       "written_unknown, roof_unmeasured, compute_unmeasured (a matrix op of a dtype with no measured matrix rate: "
       "not placed), and for a fraction above 1 within_spread, mixed_traffic, "
       "indexed_reuse, cache_fit, data_dependent, ceiling_stale, above_datasheet or above_measured_roof "
       "(docs/ceilings.md)"),
    _c("working_set_bytes", F64, "bytes", "own bytes plus the bytes moved between this call and the same "
       "call one step away: what a cache must hold for its data to stay (null: the call does not repeat)"),
]

OP_OWN = [
    _c("step", I32, "", "profiled step"),
    _c("external_id", I64, "", "External id"),
    *OP_CALL,
    _c("ts_us", F64, "us", "start on the host (trace clock)"),
    _c("cpu_dur_us", F64, "us", "host time inside the op (inclusive)"),
    _c("kernel_count", I32, "", "device activities it ran (1 per CPU op)"),
    _c("transfer", S, "", "the kinds of copy its device activities were (HtoD, DtoH, DtoD, PtoP; 'pageable' where "
       "the host side was pageable memory; comma-separated; null: it ran no copy): a copy across the host link is "
       "bounded by that link, not by device memory"),
    _c("dur_us", F64, "us", "summed kernel time (CPU: exclusive time)"),
]

STEP_OWN = [
    _c("status", S, "", "ok or failed"),
    _c("error", S, "", "why the point failed"),
    _c("note", S, "", "what the workload wants a reader to know about this point"),
    _c("latency_us", F64, "us", "one call as a caller sees it (median): launch and host overhead included"),
    _c("latency_p10_us", F64, "us", "10th percentile of latency samples"),
    _c("latency_p90_us", F64, "us", "90th percentile of latency samples"),
    _c("latency_samples_us", LIST_F64, "us", "every single-call sample"),
    _c("back_to_back_us", F64, "us", "device time per step with steps queued back to back (median of batches)"),
    _c("back_to_back_samples_us", LIST_F64, "us", "per-step time of each timed batch"),
    _c("calls_per_batch", I32, "", "steps queued per back-to-back batch (null: not timed, as an ingested trace or "
       "a failed point)", nullable=True),
    _c("graph_us", F64, "us", "per step by CUDA-graph replay (null when the step cannot be captured)"),
    _c("graph_error", S, "", "why graph capture was not possible"),
    _c("kernel_us", F64, "us", "profiled kernel time per step (median over profiled steps)"),
    _c("kernel_busy_us", F64, "us", "profiled device busy time per step (union of kernel intervals)"),
    _c("kernels_per_step", F64, "", "device activities per step"),
    _c("profiled_steps", I32, "", "steps profiled (null: a failed point)", nullable=True),
    _c("useful_flops", F64, "FLOP", "FLOPs the workload needed per step (MoE: the routed tokens' expert FLOPs)"),
    _c("executed_flops", F64, "FLOP", "FLOPs the kernels of the workload's compute regions ran per step (MoE: "
       "moe/expert, padding included); all kernels where the workload names no region"),
    _c("unknown_time_share", F64, "fraction", "share of kernel time whose FLOPs are unknown"),
    _c("bytes_unknown_time_share", F64, "fraction", "share of kernel time whose bytes are unknown"),
    _c("host_overhead_us", F64, "us", "latency_us - kernel_us: time the caller waits beyond the kernels"),
    _c("achieved_tflops_latency", F64, "TFLOP/s", "flops / latency_us: the rate a caller sees"),
    _c("achieved_tflops_useful", F64, "TFLOP/s", "useful_flops / kernel_us"),
    _c("achieved_tflops_executed", F64, "TFLOP/s", "executed_flops / kernel_us"),
    _c("sm_clock_mhz_start", F64, "MHz", "GPU SM clock before the timings (NVML; null where unreadable)"),
    _c("sm_clock_mhz_end", F64, "MHz", "GPU SM clock after the profiled steps"),
    _c("timing_spread", F64, "fraction", "the largest spread of the point's repeated timing samples: (p90 - p10) "
       "/ median over 10 or more samples (the single-call latencies), (max - min) / median over fewer (the "
       "back-to-back and graph batches, the profiled steps' kernel times)"),
    _c("timing_spread_of", S, "", "which samples spread most: latency, back_to_back, graph or kernel"),
    _c("noisy", B, "", "timing_spread above 0.25 (wlprof.steps.NOISY_SPREAD): the medians are not stable"),
]

# A communication row's message and rates, by the nccl-tests conventions (docs/overlap.md). Null on
# every other row; memcpy and memset rows carry only comm_class.
COMM = [
    _c("comm_class", S, "", "communication the row is: collective, p2p, memcpy, memset; null: compute"),
    _c("collective", S, "", "all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, reduce, send, recv, "
       "gather, scatter, barrier (normalized from the trace's Collective name or c10d op)"),
    _c("process_group", S, "", "the collective's process group name (as the trace records it)"),
    _c("group_size", I64, "ranks", "ranks in the collective's group", nullable=True),
    _c("comm_dtype", S, "", "dtype of the message elements"),
    _c("comm_bytes", F64, "bytes", "nccl-tests size S per rank: all_reduce, broadcast, reduce, send: the input "
       "buffer; recv: the output buffer; all_gather: the output (n x input); reduce_scatter: the input "
       "(n x output); all_to_all: the send buffer (every peer's chunk, its own included)"),
    _c("algbw_gbps", F64, "GB/s", "comm_bytes / dur_us (nccl-tests algbw)"),
    _c("busbw_factor", F64, "", "busbw / algbw: 2(n-1)/n all_reduce; (n-1)/n all_gather, reduce_scatter, all_to_all, "
       "gather, scatter; 1 broadcast, reduce, send, recv"),
    _c("busbw_gbps", F64, "GB/s", "algbw_gbps x busbw_factor (nccl-tests busbw)"),
]

# The overlap table: per rank (and per stream) of each point, communication against computation.
OVERLAP_OWN = [
    _c("scope", S, "", "rank (every row of the rank's trace) or stream (one CUDA stream's rows)"),
    _c("stream", I64, "", "the stream of a stream row (-1 on rank rows)"),
    _c("steps", I32, "", "profiled steps the trace covers (divide a time by it for a per-step figure)"),
    _c("rows", I64, "", "device rows (CPU: op and comm rows) in the scope"),
    _c("compute_us", F64, "us", "union of the scope's compute intervals (every row that is not communication)"),
    _c("comm_us", F64, "us", "union of the scope's communication intervals (collective and P2P kernels, memcpy, "
       "memset)"),
    _c("collective_us", F64, "us", "union of the scope's collective and P2P intervals"),
    _c("copy_us", F64, "us", "union of the scope's memcpy and memset intervals"),
    _c("overlap_us", F64, "us", "|scope's communication ∩ the rank's compute|: communication hidden under compute"),
    _c("exposed_comm_us", F64, "us", "comm_us - overlap_us: communication with no compute beside it"),
    _c("overlap_share", F64, "fraction", "overlap_us / comm_us"),
    _c("collective_overlap_us", F64, "us", "|scope's collectives ∩ the rank's compute| (HTA's numerator)"),
    _c("collective_overlap_share", F64, "fraction", "collective_overlap_us / collective_us (HTA's "
       "comp_comm_overlap_pctg / 100, up to its rounding)"),
    _c("copy_overlap_us", F64, "us", "|scope's memcpy and memset ∩ the rank's compute|"),
    _c("copy_overlap_share", F64, "fraction", "copy_overlap_us / copy_us"),
    _c("compute_overlapped_us", F64, "us", "|scope's compute ∩ the rank's communication|"),
    _c("busy_us", F64, "us", "union of every interval of the scope"),
    _c("span_us", F64, "us", "last end - first start of the scope's rows"),
    _c("idle_us", F64, "us", "span_us - busy_us"),
]

# The collectives table: every collective or P2P row of every rank, matched across the ranks of a capture.
COLLECTIVE_OWN = [
    _c("step", I32, "", "profiled step of the row"),
    _c("stream", I64, "", "CUDA stream (-1 on the CPU)"),
    _c("name", S, "", "kernel name (GPU) or gloo work name (CPU)"),
    *[c for c in COMM if c.name != "comm_class"],
    _c("comm_class", S, "", "collective or p2p"),
    _c("seq", I64, "", "order of this collective among its group's collectives on this rank (0-based)"),
    _c("ts_us", F64, "us", "start, on the rank's own trace clock"),
    _c("dur_us", F64, "us", "duration"),
    _c("clock_offset_us", F64, "us", "this rank's clock minus the reference rank's (0: one host's clock; else the "
       "median difference of matched collectives' ends)"),
    _c("clock_method", S, "", "same host, collective ends, or single rank"),
    _c("start_us", F64, "us", "start on the reference rank's clock (ts_us - clock_offset_us)"),
    _c("ranks_matched", I32, "", "ranks whose k-th collective of this group matched this one"),
    _c("arrival_skew_us", F64, "us", "start_us - the earliest matched rank's start: how late this rank arrived"),
    _c("skew_wait_us", F64, "us", "the latest matched rank's start - start_us: time this rank's collective waited "
       "for the last rank to arrive (0 on the straggler)"),
    _c("straggler_rank", I64, "", "the rank that arrived last at this collective (null: matched on no other rank)",
       nullable=True),
]

# Columns whose type changed, by the major version that changed them: (converter from the old type).
MIGRATIONS = {
    "expert_counts": (pa.string(), "json list"),  # <= 1.3: a JSON string; 2.0: list<int64>
}


@functools.lru_cache(maxsize=1)
def workload_columns() -> tuple[Column, ...]:
    """Every registered workload's parameter and fact columns, in registration order, once each.

    A name two workloads share (d_model in mlp and moe) must mean the same type.
    """
    from wlprof import workloads

    seen: dict[str, Column] = {}
    for wl in workloads.all_workloads():
        for col in wl.columns:
            prev = seen.get(col.name)
            if prev is not None and prev.type != col.type:
                raise ValueError(f"workloads {wl.name} and another declare column {col.name} with types "
                                 f"{col.type} and {prev.type}")
            seen.setdefault(col.name, col)
    core = {c.name for c in IDENTITY + TRACE_FACTS + KERNEL_OWN + OP_OWN + COST + STEP_OWN + COMM + OVERLAP_OWN
            + COLLECTIVE_OWN}
    clash = sorted(set(seen) & core)
    if clash:
        raise ValueError(f"workload columns must not reuse the core columns' names: {clash}")
    return tuple(seen.values())


def param_names() -> frozenset[str]:
    """Names a workload point or fact may carry: the workload columns and the trace facts."""
    return frozenset(c.name for c in workload_columns() + tuple(TRACE_FACTS))


def _tables() -> dict[str, list[Column]]:
    params = list(workload_columns()) + TRACE_FACTS
    step_cost = [c for c in COST if c.name not in ("cost_unit", "cost_dtype", "bytes_written", "roof", "compute_roof",
                                                   "memory_roof", "working_set_bytes")]
    step_cost = [_c("roof_note", S, "", "every roof_note of the step's kernels (comma-separated, once each)")
                 if c.name == "roof_note" else c for c in step_cost]
    return {
        "kernels": IDENTITY + params + KERNEL_OWN + COST + COMM,
        "ops": IDENTITY + params + OP_OWN + COST,
        "steps": IDENTITY + params + step_cost + [_c("dur_us", F64, "us", "kernel_us, for the cost columns' rates")]
        + STEP_OWN,
        "overlap": IDENTITY + params + OVERLAP_OWN,
        "collectives": IDENTITY + params + COLLECTIVE_OWN,
    }


TABLE_NAMES = ("kernels", "ops", "steps", "overlap", "collectives")


def columns_with(role: str) -> list[str]:
    """Names of the workload columns with a role: 'data', 'distribution' or 'feature'."""
    return [c.name for c in workload_columns() if getattr(c, role)]


def columns(table: str) -> list[Column]:
    if table not in TABLE_NAMES:
        raise ValueError(f"table must be one of {sorted(TABLE_NAMES)} (got {table!r})")
    return _tables()[table]


def nullable_int_columns() -> frozenset[str]:
    """The integer parameter columns (the workloads' and the trace facts'), read back as pandas' nullable
    integers: a folder mixes workloads, so most of these are null on some rows, and numpy's int64 has
    no null (pandas would make them float64: batch 8.0); and the core integer columns declared `nullable`."""
    core = [c for t in _tables().values() for c in t if c.nullable]
    return frozenset(c.name for c in workload_columns() + tuple(TRACE_FACTS) + tuple(core)
                     if pa.types.is_integer(c.type))


def _empty_column(c: Column, nullable: frozenset[str]):
    """An empty array of the pandas type a column of the declared type is read back as."""
    import numpy as np
    import pandas as pd

    if pa.types.is_integer(c.type) and c.name in nullable:
        return pd.array([], dtype="Int32" if c.type == I32 else "Int64")
    if pa.types.is_boolean(c.type):
        return pd.array([], dtype="boolean")
    if pa.types.is_integer(c.type) or pa.types.is_floating(c.type):
        return np.empty(0, dtype=c.type.to_pandas_dtype())
    return np.empty(0, dtype=object)


@functools.cache
def _pandas_metadata(table: str) -> bytes:
    """The `pandas` schema metadata Arrow writes for a DataFrame of this table's pandas types.

    Every reader that goes through pyarrow's to_pandas (`pandas.read_parquet` of a file or a folder,
    `wlprof.load`) then gives the integer parameters pandas' nullable Int64/Int32 dtypes, and every
    boolean column pandas' nullable `boolean` (null where unknown: a point with no timings is neither
    noisy nor not), never object.

    Arrow describes each column by its name and pandas type alone, so it is asked once per distinct
    type (a frame of one empty column of each) and each column's entry is that of its type under its
    own name: the bytes Arrow gives for the whole table's frame, without converting a hundred columns.
    """
    import json

    import pandas as pd

    nullable = nullable_int_columns()
    arrays = {c.name: _empty_column(c, nullable) for c in columns(table)}
    kind = {name: str(a.dtype) for name, a in arrays.items()}
    one_each = {k: arrays[name] for name, k in reversed(kind.items())}  # one empty column per pandas type
    meta = json.loads(pa.Schema.from_pandas(pd.DataFrame(one_each), preserve_index=False).metadata[b"pandas"])
    entry = {c["name"]: c for c in meta["columns"]}
    meta["columns"] = [{**entry[kind[name]], "name": name, "field_name": name} for name in arrays]
    return json.dumps(meta).encode()


def arrow_schema(table: str) -> pa.Schema:
    cols = columns(table)
    return pa.schema([pa.field(c.name, c.type) for c in cols],
                     metadata={METADATA_KEY: SCHEMA_VERSION.encode(), b"wlprof.table": table.encode(),
                               b"pandas": _pandas_metadata(table)})


def conform(df, table: str) -> pa.Table:
    """The DataFrame as an Arrow table of the declared schema: every column, declared types, order.

    Undeclared columns are an error (the contract is the schema, nothing beside it).
    """
    return next(conformed(df, table, max(len(df), 1)))


def conformed(df, table: str, rows: int):
    """`conform` of the DataFrame `rows` rows at a time (the last slice up to 1.5 times that): an Arrow
    table per slice (one, empty, for an empty frame). Each column is taken from the frame once, and each
    slice is a view of it."""
    import numpy as np
    import pandas as pd

    schema = arrow_schema(table)
    # columns starting with "_" are a caller's private bookkeeping, never written
    declared = set(schema.names)
    extra = [c for c in df.columns if c not in declared and not str(c).startswith("_")]
    if extra:
        raise ValueError(f"columns not declared in wlprof.schema ({table}): {extra}")
    present = set(df.columns)
    sources = []  # per field: None (absent: nulls), or how it is sliced and the values it is sliced from
    for f in schema:
        if f.name not in present:
            sources.append(None)
            continue
        col = df[f.name]
        if pa.types.is_list(f.type):
            sources.append(("list", col.to_numpy(dtype=object)))
        elif col.dtype == object:  # from_pandas: None and NaN are nulls; object columns are read in place
            sources.append(("values", col.to_numpy(dtype=object)))
        elif isinstance(col.dtype, np.dtype):
            sources.append(("values", col.to_numpy()))
        else:  # an extension array (nullable integers, booleans, strings): sliced as itself
            sources.append(("values", col.array))
    nulls: dict = {}  # the columns the frame lacks: one array of nulls per type and length, shared
    # a last slice shorter than half of `rows` joins the one before it: a row group of a few rows costs
    # the writer as much per column as a full one
    bounds = [*range(0, max(len(df), 1), rows), len(df)]
    if len(bounds) > 2 and bounds[-1] - bounds[-2] < rows // 2:
        del bounds[-2]
    for start, stop in zip(bounds[:-1], bounds[1:], strict=True):
        arrays = []
        for f, src in zip(schema, sources, strict=True):
            if src is None:
                key = (f.type, max(stop - start, 0))
                if key not in nulls:
                    nulls[key] = pa.nulls(key[1], type=f.type)
                arrays.append(nulls[key])
            elif src[0] == "list":
                values = [None if v is None or (isinstance(v, float) and pd.isna(v)) else list(v)
                          for v in src[1][start:stop]]
                arrays.append(pa.array(values, type=f.type))
            else:
                arrays.append(pa.array(src[1][start:stop], type=f.type, from_pandas=True))
        yield pa.Table.from_arrays(arrays, schema=schema)


def check_version(found: str, where: str) -> None:
    """Refuse files of a newer major schema version; older minors load."""
    from wlprof.errors import SchemaVersionError

    try:
        found_major = int(str(found).split(".")[0])
    except ValueError:
        raise SchemaVersionError(f"{where}: unreadable schema version {found!r}") from None
    ours = int(SCHEMA_VERSION.split(".")[0])
    if found_major > ours:
        raise SchemaVersionError(
            f"{where} was written with schema {found}, newer than this wlprof's {SCHEMA_VERSION}: "
            "upgrade wlprof to read it"
        )

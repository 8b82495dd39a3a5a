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

SCHEMA_VERSION = "2.3"  # 2.1: bytes_written, bytes_unknown_time_share; 2.2: join_method; 2.3: timing_spread, noisy
METADATA_KEY = b"wlprof.schema_version"


@dataclass(frozen=True)
class Column:
    """One column. `data`: part of the data a data-dependent op ran on (the graph drawn, the expert
    counts); `distribution`: part of what the data was drawn from; `feature`: a number the
    performance models may use."""

    name: str
    type: pa.DataType
    unit: str
    meaning: str
    data: bool = False
    distribution: bool = False
    feature: bool = False


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
    _c("dtype", S, "", "the workload's compute dtype"),
]

# Columns of every run whatever generated it.
TRACE_FACTS = [
    _c("rank", I64, "", "distributed rank of the trace (its distributedInfo.rank, else file order)"),
    _c("source_file", S, "", "ingest: the trace file the rows came from"),
]

# An op call as the profiler recorded it: the same columns in the kernels and ops tables.
OP_CALL = [
    _c("op_name", S, "", "launching op (innermost aten op)"),
    _c("op_input_dims", S, "", "launching op's input shapes, JSON"),
    _c("op_input_types", S, "", "launching op's input dtypes, JSON"),
    _c("op_input_strides", S, "", "launching op's input strides, JSON"),
    _c("op_concrete_inputs", S, "", "launching op's scalar arguments, JSON"),
    _c("region", S, "", "innermost record_function region (e.g. moe/dispatch)"),
]

KERNEL_OWN = [
    _c("step", I32, "", "profiled step the kernel belongs to (-1: outside any step)"),
    _c("kind", S, "", "kernel, memcpy, memset (GPU) or cpu_op (a CPU op's own work)"),
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
       "is the op)"),
    *OP_CALL,
    _c("op_kernel_count", I32, "", "device activities the launching op ran"),
    _c("cost_share", F64, "fraction", "this kernel's share of its op's cost, by duration"),
]

COST = [
    _c("flops", F64, "FLOP", "floating-point operations (multiply = add = 1)"),
    _c("bytes", F64, "bytes", "compulsory traffic: inputs read once, outputs written once"),
    _c("bytes_written", F64, "bytes", "the part of bytes that is written (null where the formula does not say)"),
    _c("flops_source", S, "", "formula (from shapes), workload (stated by the workload), unknown"),
    _c("cost_unit", S, "", "matrix or vector: which compute ceiling applies"),
    _c("cost_dtype", S, "", "dtype of the arithmetic, for the ceiling lookup"),
    _c("intensity_flop_per_byte", F64, "FLOP/byte", "flops / bytes"),
    _c("achieved_tflops", F64, "TFLOP/s", "flops / dur"),
    _c("achieved_gbps", F64, "GB/s", "bytes / dur"),
    _c("ceiling_tflops", F64, "TFLOP/s", "compute ceiling used (measured)"),
    _c("ceiling_gbps", F64, "GB/s", "memory ceiling used (measured copy bandwidth)"),
    _c("ridge_flop_per_byte", F64, "FLOP/byte", "ceiling_tflops / ceiling_gbps"),
    _c("bound", S, "", "memory or compute: which roof is lower at this intensity"),
    _c("roofline_us", F64, "us", "max(flops / ceiling, bytes / bandwidth): the roofline's floor"),
    _c("roofline_fraction", F64, "fraction", "roofline_us / dur_us: 1 is on the roof"),
]

OP_OWN = [
    _c("step", I32, "", "profiled step"),
    _c("external_id", I64, "", "External id"),
    *OP_CALL,
    _c("ts_us", F64, "us", "start on the host (trace clock)"),
    _c("cpu_dur_us", F64, "us", "host time inside the op (inclusive)"),
    _c("kernel_count", I32, "", "device activities it ran (1 per CPU op)"),
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
    _c("calls_per_batch", I32, "", "steps queued per back-to-back batch"),
    _c("graph_us", F64, "us", "per step by CUDA-graph replay (null when the step cannot be captured)"),
    _c("graph_error", S, "", "why graph capture was not possible"),
    _c("kernel_us", F64, "us", "profiled kernel time per step (median over profiled steps)"),
    _c("kernel_busy_us", F64, "us", "profiled device busy time per step (union of kernel intervals)"),
    _c("kernels_per_step", F64, "", "device activities per step"),
    _c("profiled_steps", I32, "", "steps profiled"),
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
    core = {c.name for c in IDENTITY + TRACE_FACTS + KERNEL_OWN + OP_OWN + COST + STEP_OWN}
    clash = sorted(set(seen) & core)
    if clash:
        raise ValueError(f"workload columns must not reuse the core columns' names: {clash}")
    return tuple(seen.values())


def param_names() -> frozenset[str]:
    """Names a workload point or fact may carry: the workload columns and the trace facts."""
    return frozenset(c.name for c in workload_columns() + tuple(TRACE_FACTS))


def _tables() -> dict[str, list[Column]]:
    params = list(workload_columns()) + TRACE_FACTS
    step_cost = [c for c in COST if c.name not in ("cost_unit", "cost_dtype", "bytes_written")]
    return {
        "kernels": IDENTITY + params + KERNEL_OWN + COST,
        "ops": IDENTITY + params + OP_OWN + COST,
        "steps": IDENTITY + params + step_cost + [_c("dur_us", F64, "us", "kernel_us, for the cost columns' rates")]
        + STEP_OWN,
    }


TABLE_NAMES = ("kernels", "ops", "steps")


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
    no null (pandas would make them float64: batch 8.0)."""
    return frozenset(c.name for c in workload_columns() + tuple(TRACE_FACTS) if pa.types.is_integer(c.type))


@functools.cache
def _pandas_metadata(table: str) -> bytes:
    """The `pandas` schema metadata Arrow writes for a DataFrame of this table's pandas types.

    Every reader that goes through pyarrow's to_pandas (`pandas.read_parquet` of a file or a folder,
    `wlprof.load`) then gives the integer parameters pandas' nullable Int64/Int32 dtypes.
    """
    import pandas as pd

    nullable = nullable_int_columns()
    frame = {}
    for c in columns(table):
        if pa.types.is_integer(c.type):
            dtype = ("Int32" if c.type == I32 else "Int64") if c.name in nullable else c.type.to_pandas_dtype()
        elif pa.types.is_floating(c.type) or pa.types.is_boolean(c.type):
            dtype = c.type.to_pandas_dtype()
        else:
            dtype = object
        frame[c.name] = pd.Series([], dtype=dtype)
    return pa.Schema.from_pandas(pd.DataFrame(frame), preserve_index=False).metadata[b"pandas"]


def arrow_schema(table: str) -> pa.Schema:
    cols = columns(table)
    return pa.schema([pa.field(c.name, c.type) for c in cols],
                     metadata={METADATA_KEY: SCHEMA_VERSION.encode(), b"wlprof.table": table.encode(),
                               b"pandas": _pandas_metadata(table)})


def conform(df, table: str) -> pa.Table:
    """The DataFrame as an Arrow table of the declared schema: every column, declared types, order.

    Undeclared columns are an error (the contract is the schema, nothing beside it).
    """
    import pandas as pd

    schema = arrow_schema(table)
    # columns starting with "_" are a caller's private bookkeeping, never written
    extra = [c for c in df.columns if c not in schema.names and not str(c).startswith("_")]
    if extra:
        raise ValueError(f"columns not declared in wlprof.schema ({table}): {extra}")
    arrays = []
    for f in schema:
        if f.name in df.columns:
            col = df[f.name]
            if pa.types.is_list(f.type):
                values = [None if v is None or (isinstance(v, float) and pd.isna(v)) else list(v) for v in col]
                arrays.append(pa.array(values, type=f.type))
            else:
                # from_pandas: None and NaN are nulls; object columns are read in place
                arrays.append(pa.array(col.to_numpy(dtype=object) if col.dtype == object else col,
                                       type=f.type, from_pandas=True))
        else:
            arrays.append(pa.nulls(len(df), type=f.type))
    return pa.Table.from_arrays(arrays, schema=schema)


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

"""The trace contract: every column of every table wlprof writes, declared once.

Each column has a name (units in the name: `dur_us`, `flops`, `bytes`), an Arrow
type, a unit and a meaning. `SCHEMA_VERSION` is written into every Parquet file's
metadata and every run manifest. A reader refuses files of a newer major version
and loads older minor versions (missing columns come back as nulls).

One `pandas.read_parquet("traces")` gives every run's kernels with the workload's
parameters as typed columns: every kernels file carries *all* parameter columns
declared below (nulls where a workload has no such parameter), because Arrow
takes a folder's schema from its first file and would drop columns the first
file lacks.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

SCHEMA_VERSION = "1.3"  # 1.1: op strides, SM clocks, executed FLOPs, MoE/GNN columns; 1.2: ingest columns;
# 1.3: the data seed of MoE and GNN points
METADATA_KEY = b"wlprof.schema_version"


@dataclass(frozen=True)
class Column:
    name: str
    type: pa.DataType
    unit: str
    meaning: str


def _c(name, type_, unit, meaning):
    return Column(name, type_, unit, meaning)


S, I32, I64, F64, B = pa.string(), pa.int32(), pa.int64(), pa.float64(), pa.bool_()

IDENTITY = [
    _c("run_id", S, "", "the run: <workload>-<UTC date>-<time>-<4 hex>"),
    _c("workload", S, "", "workload generator: gemm, mlp, elementwise, moe, gnn, or 'ingest'"),
    _c("variant", S, "", "sweep point label, unique in its run (e.g. 'balanced 2048x2048x2560')"),
    _c("point", I32, "", "sweep point index in its run"),
    _c("device_type", S, "", "'cuda' or 'cpu'"),
    _c("device_name", S, "", "e.g. 'NVIDIA H200'"),
    _c("dtype", S, "", "the workload's compute dtype"),
]

# Workload parameters and facts: the union over every workload, so one read_parquet
# over a folder of mixed runs keeps them all. A workload may only use declared names.
PARAMS = [
    _c("m", I64, "rows", "GEMM: rows of A and C"),
    _c("k", I64, "", "GEMM: inner dimension"),
    _c("n", I64, "", "GEMM: columns of B and C; matvec/matmul micro-kernels: matrix side"),
    _c("shape_class", S, "", "GEMM: balanced, medium-skinny, tall-skinny, or custom"),
    _c("batch", I64, "rows", "MLP: batch size (tokens)"),
    _c("d_model", I64, "", "MLP/MoE: model width"),
    _c("d_ff", I64, "", "MLP/MoE: hidden width of the feed-forward layer"),
    _c("activation", S, "", "MLP/MoE: activation (gelu, silu, swiglu)"),
    _c("op", S, "", "micro-kernel: copy, relu, gelu, silu, mul, add, dot, matvec, matmul"),
    _c("numel", I64, "elements", "micro-kernel: elements of the main operand"),
    _c("tokens", I64, "", "MoE: tokens per step"),
    _c("experts", I64, "", "MoE: number of experts"),
    _c("top_k", I64, "", "MoE: experts per token"),
    _c("routing", S, "", "MoE: routing spec (concentrated, balanced, dispersed, zipf:s, explicit:AxM, router)"),
    _c("routing_skew", F64, "", "MoE: the zipf exponent s where the routing has one"),
    _c("dispatch", S, "", "MoE: dispatch implementation (loop, padded, grouped)"),
    _c("capacity_factor", F64, "", "MoE: capacity factor of the padded dispatch (0 = dropless)"),
    _c("active_experts", I64, "", "MoE: experts that received at least one token"),
    _c("max_expert_share", F64, "fraction", "MoE: share of assignments the hottest expert got"),
    _c("imbalance", F64, "", "MoE: max expert load / mean expert load"),
    _c("dropped_tokens", I64, "", "MoE: token-expert assignments dropped by capacity"),
    _c("grouped_path", S, "", "MoE: which grouped-GEMM path ran (torch._grouped_mm, fallback)"),
    _c("expert_counts", S, "", "MoE: token-expert assignments per expert, a JSON list in expert order"),
    _c("capacity", I64, "rows", "MoE: rows per expert buffer of the padded dispatch (dropless: the largest load)"),
    _c("graph", S, "", "GNN: graph generator (uniform, rmat, zipf:s, karate)"),
    _c("scale", I64, "", "GNN: log2 of the node count"),
    _c("nodes", I64, "", "GNN: nodes"),
    _c("edges", I64, "", "GNN: edges"),
    _c("features", I64, "", "GNN: feature width"),
    _c("backend", S, "", "GNN: aggregation backend"),
    _c("reduction", S, "", "GNN: sum, mean or max"),
    _c("max_in_degree", I64, "", "GNN: largest in-degree"),
    _c("mean_in_degree", F64, "", "GNN: mean in-degree"),
    _c("isolated_share", F64, "fraction", "GNN: share of nodes with no edges"),
    _c("edge_factor", I64, "", "GNN: edges drawn per node before duplicates and self-loops are removed"),
    _c("feature_transform", B, "", "GNN: whether the step runs a Linear feature transform (always for PyG layers)"),
    _c("seed", I64, "", "MoE/GNN: seed of the generated data (routing draw, graph draw, inputs)"),
    _c("rank", I64, "", "ingest: distributed rank of the trace file (its distributedInfo.rank, else file order)"),
    _c("source_file", S, "", "ingest: the trace file the rows came from"),
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
    _c("op_name", S, "", "launching op (innermost aten op)"),
    _c("op_input_dims", S, "", "launching op's input shapes, JSON"),
    _c("op_input_types", S, "", "launching op's input dtypes, JSON"),
    _c("op_input_strides", S, "", "launching op's input strides, JSON"),
    _c("op_concrete_inputs", S, "", "launching op's scalar arguments, JSON"),
    _c("region", S, "", "innermost record_function region (e.g. moe/dispatch)"),
    _c("op_kernel_count", I32, "", "device activities the launching op ran"),
    _c("cost_share", F64, "fraction", "this kernel's share of its op's (or region's) cost, by duration"),
]

COST = [
    _c("flops", F64, "FLOP", "floating-point operations (multiply = add = 1)"),
    _c("bytes", F64, "bytes", "compulsory traffic: inputs read once, outputs written once"),
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
    _c("op_name", S, "", "op name"),
    _c("op_input_dims", S, "", "input shapes, JSON"),
    _c("op_input_types", S, "", "input dtypes, JSON"),
    _c("op_input_strides", S, "", "input strides, JSON"),
    _c("op_concrete_inputs", S, "", "scalar arguments, JSON"),
    _c("region", S, "", "innermost record_function region"),
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
    _c("latency_samples_us", pa.list_(F64), "us", "every single-call sample"),
    _c("back_to_back_us", F64, "us", "device time per step with steps queued back to back (median of batches)"),
    _c("back_to_back_samples_us", pa.list_(F64), "us", "per-step time of each timed batch"),
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
    _c("host_overhead_us", F64, "us", "latency_us - kernel_us: time the caller waits beyond the kernels"),
    _c("achieved_tflops_latency", F64, "TFLOP/s", "flops / latency_us: the rate a caller sees"),
    _c("achieved_tflops_useful", F64, "TFLOP/s", "useful_flops / kernel_us"),
    _c("achieved_tflops_executed", F64, "TFLOP/s", "executed_flops / kernel_us"),
    _c("sm_clock_mhz_start", F64, "MHz", "GPU SM clock before the timings (NVML; null where unreadable)"),
    _c("sm_clock_mhz_end", F64, "MHz", "GPU SM clock after the profiled steps"),
]

TABLES: dict[str, list[Column]] = {
    "kernels": IDENTITY + PARAMS + KERNEL_OWN + COST,
    "ops": IDENTITY + PARAMS + OP_OWN + COST,
    "steps": IDENTITY + PARAMS + [c for c in COST if c.name not in ("cost_unit", "cost_dtype")]
    + [_c("dur_us", F64, "us", "kernel_us, for the cost columns' rates")] + STEP_OWN,
}
PARAM_NAMES = frozenset(c.name for c in PARAMS)


def columns(table: str) -> list[Column]:
    try:
        return TABLES[table]
    except KeyError:
        raise ValueError(f"table must be one of {sorted(TABLES)} (got {table!r})") from None


def arrow_schema(table: str) -> pa.Schema:
    cols = columns(table)
    return pa.schema([pa.field(c.name, c.type) for c in cols],
                     metadata={METADATA_KEY: SCHEMA_VERSION.encode(), b"wlprof.table": table.encode()})


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

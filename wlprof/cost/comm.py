"""Communication costed by the nccl-tests conventions: bytes per rank, algbw and busbw per row.

Every collective or P2P row (an NCCL/RCCL kernel, or gloo's work on the CPU) gets the
collective, its group and size S per rank from the message the trace records
(`Collective name`, `In msg nelems`, `Out msg nelems`, `Group size`, `dtype` on the
kernel or on its `record_param_comms` op; a gloo work's tensor), algbw = S / time and
busbw = algbw x factor (`wlprof.collectives`). memcpy and memset rows are classed, not
costed here (their bytes are the trace's). The conventions: `docs/overlap.md`.

FLOPs: a reducing collective (all_reduce, reduce_scatter, reduce) does (n-1)/n x S_elems
adds per rank, counted on its `record_param_comms` op; the others do none. Bytes: the
compulsory local traffic (the input read once, the output written once).
"""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pandas as pd

from wlprof import collectives as C
from wlprof.columns import per_distinct as _per_distinct
from wlprof.cost import dtypes
from wlprof.cost.registry import VECTOR, Cost, OpCall, formula

COLUMNS = ("comm_class", "collective", "process_group", "group_size", "comm_dtype", "comm_bytes", "algbw_gbps",
           "busbw_factor", "busbw_gbps")


def _number(v) -> float | None:
    if v is None or isinstance(v, bool):
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def element_size(dtype: str | None) -> int | None:
    """Bytes per element of a message dtype: a c10 ScalarType name ('BFloat16') or a recorded C++ type."""
    if not dtype:
        return None
    return C.SCALAR_TYPE_SIZES.get(dtype) or dtypes.element_size(dtype)


def canonical_dtype(dtype: str | None) -> str | None:
    if not dtype:
        return None
    known = dtypes.canonical(dtype)
    if known:
        return known
    return {"Float": "float32", "Double": "float64", "Half": "float16", "BFloat16": "bfloat16", "Long": "int64",
            "Int": "int32", "Short": "int16", "Char": "int8", "Byte": "uint8", "Bool": "bool"}.get(dtype, dtype)


def _numel(dims) -> float | None:
    if isinstance(dims, list) and dims and isinstance(dims[0], list):  # a TensorList: its first tensor
        dims = dims[0]
    if not isinstance(dims, list) or not all(isinstance(d, int) for d in dims):
        return None
    return float(math.prod(dims)) if dims else None


# Where a c10d op records its tensors: the positions of its outputs and of its inputs among its
# recorded inputs (`c10d::_allgather_base_(Tensor output, Tensor input, ...)`; `allreduce_` reduces
# its tensors in place); None where the op has none. Names without the namespace and trailing '_'.
C10D_TENSORS = {
    "allreduce": (0, 0), "allreduce_coalesced": (0, 0), "broadcast": (0, 0), "reduce": (0, 0),
    "allgather": (0, 1), "_allgather_base": (0, 1), "allgather_coalesced": (0, 1),
    "allgather_into_tensor_coalesced": (0, 1), "reduce_scatter": (0, 1), "_reduce_scatter_base": (0, 1),
    "reduce_scatter_tensor_coalesced": (0, 1), "alltoall": (0, 1), "alltoall_base": (0, 1), "gather": (0, 1),
    "scatter": (0, 1), "send": (None, 0), "recv": (0, None), "recv_any_source": (0, None),
}
# Functional collectives take their input first (`all_gather_into_tensor(Tensor input, int group_size,
# str group_name)`) and return a new output; the position of the group size where they record one.
FUNCTIONAL_PREFIXES = ("_c10d_functional::", "c10d_functional::", "_c10d_functional_autograd::")
FUNCTIONAL_GROUP_SIZE = {"all_gather_into_tensor": 1, "all_gather_into_tensor_out": 1,
                         "all_gather_into_tensor_coalesced": 1, "reduce_scatter_tensor": 2,
                         "reduce_scatter_tensor_coalesced": 2, "all_reduce": None, "all_reduce_": None,
                         "all_reduce_coalesced": None, "all_reduce_coalesced_": None, "broadcast": None,
                         "broadcast_": None, "all_to_all_single": None}
C10D_OPS = tuple(f"c10d::{n}_" for n in C10D_TENSORS if n != "send") + ("c10d::send",)
FUNCTIONAL_OPS = tuple(p + n for p in FUNCTIONAL_PREFIXES for n in FUNCTIONAL_GROUP_SIZE)


def _count(dims) -> float | None:
    """Elements of a recorded tensor (a list of sizes) or of every tensor of a tensor list (nested
    lists); None where a size is missing or a list is empty (an unrecorded TensorList is `[]`)."""
    if not isinstance(dims, (list, tuple)) or not dims:
        return None
    if all(isinstance(d, int) and not isinstance(d, bool) for d in dims):
        return float(math.prod(dims))
    parts = [_count(d) for d in dims]
    return None if any(p is None for p in parts) else float(sum(parts))


def host_message(name: str | None, dims, types, concrete=()) -> dict | None:
    """A c10d or functional collective op's message from its recorded inputs: the collective, the
    element counts of its input and output, their dtype and, where recorded, the group size; None
    for any other op. A tensor list records no dtype (`TensorList`): dtype None."""
    if not name:
        return None
    dims, types, concrete = list(dims or ()), list(types or ()), list(concrete or ())

    def at(seq, i):
        return seq[i] if i is not None and 0 <= i < len(seq) else None

    def dtype_at(i):
        t = at(types, i)
        return t if isinstance(t, str) and dtypes.is_tensor_type(t) else None

    if name.startswith("c10d::"):
        base = name[len("c10d::"):].rstrip("_")
        if base not in C10D_TENSORS:
            return None
        out_at, in_at = C10D_TENSORS[base]
        in_n, out_n = _count(at(dims, in_at)), _count(at(dims, out_at))
        return {"collective": C.normalize(name), "in_nelems": in_n, "out_nelems": out_n,
                "dtype": dtype_at(in_at) or dtype_at(out_at), "group_size": None}
    prefix = next((p for p in FUNCTIONAL_PREFIXES if name.startswith(p)), None)
    if prefix is None or name[len(prefix):] not in FUNCTIONAL_GROUP_SIZE:
        return None
    base = name[len(prefix):]
    coll = C.normalize(base)
    group = _number(at(concrete, FUNCTIONAL_GROUP_SIZE[base]))
    in_n = _count(at(dims, 0))
    out_n = None
    if in_n is not None and coll in (C.ALL_REDUCE, C.BROADCAST):
        out_n = in_n
    elif in_n is not None and group and coll == C.ALL_GATHER:
        out_n = in_n * group
    elif in_n is not None and group and coll == C.REDUCE_SCATTER:
        out_n = in_n / group
    return {"collective": coll, "in_nelems": in_n, "out_nelems": out_n, "dtype": dtype_at(0),
            "group_size": group}


# NCCL's reducing kernels name their element type (`ncclDevKernel_ReduceScatter_Sum_f32_RING_LL`,
# `ncclKernel_AllReduce_RING_LL_Sum_half`); those that only move data run on bytes (`_int8_t`).
_KERNEL_DTYPES = {"f16": "Half", "half": "Half", "bf16": "BFloat16", "bfloat16": "BFloat16", "f32": "Float",
                  "float": "Float", "f64": "Double", "double": "Double", "i8": "Char", "int8": "Char",
                  "u8": "Byte", "uint8": "Byte", "i32": "Int", "int32": "Int", "u32": "UInt32",
                  "uint32": "UInt32", "i64": "Long", "int64": "Long", "u64": "UInt64", "uint64": "UInt64",
                  "f8e4m3": "Float8_e4m3fn", "f8e5m2": "Float8_e5m2"}


def kernel_dtype(kernel: str | None) -> str | None:
    """The element type a reducing NCCL/RCCL kernel names (a c10 ScalarType name), else None."""
    if not kernel or not C.is_comm_kernel(kernel) or C.normalize(kernel) not in C.REDUCING:
        return None
    for token in re.split(r"[_(\s]", kernel.split("(")[0].lower()):
        token = token.removesuffix("_t")
        if token in _KERNEL_DTYPES:
            return _KERNEL_DTYPES[token]
    return None


def message(args: dict, ancestors=(), op_name: str | None = None, kernel: str | None = None,
            hosts=()) -> dict:
    """The collective of one row from what the trace recorded about it (missing values are None).

    `hosts`: (name, args) of the row's op and its enclosing ops, innermost first. Without counts
    recorded for the message (`In msg nelems`: no record_param_comms), they come from the
    innermost c10d or functional collective op's tensors, the dtype from the first of those ops
    that records one, else from a reducing NCCL kernel's name.
    """
    coll = C.normalize(args.get("Collective name"))
    for name in (op_name, *ancestors):
        if coll is None and name and C.is_comm_op(name):
            coll = C.normalize(name)
    if coll is None and kernel:
        coll = C.normalize(kernel)
    in_n, out_n = _number(args.get("In msg nelems")), _number(args.get("Out msg nelems"))
    dtype = args.get("dtype")
    group = _number(args.get("Group size"))
    recorded = in_n is not None or out_n is not None
    if not recorded:
        found = [h for name, a in hosts if isinstance(a, dict)
                 and (h := host_message(name, a.get("Input Dims"), a.get("Input type"), a.get("Concrete Inputs")))]
        counted = next((h for h in found if h["in_nelems"] is not None or h["out_nelems"] is not None), None)
        if counted is not None:
            in_n, out_n = counted["in_nelems"], counted["out_nelems"]
            coll = coll or counted["collective"]
            group = group or counted["group_size"]
            dtype = dtype or next((h["dtype"] for h in found if h["dtype"]), None)
            if dtype is None and C.normalize(kernel) == coll:
                dtype = kernel_dtype(kernel)
    types = args.get("Input type") or []
    first_type = types[0] if types and isinstance(types[0], str) and dtypes.is_tensor_type(types[0]) else None
    if in_n is None and out_n is None and "Input Dims" in args:  # gloo's work: the input tensor it moves
        dims = args.get("Input Dims") or []
        in_n = _numel(dims[0]) if dims else None
    if not recorded:  # a message's counts without its dtype: the tensor's type is not read for it
        dtype = dtype or first_type
    return {"collective": coll, "in_nelems": in_n, "out_nelems": out_n, "dtype": dtype,
            "group_size": group, "process_group": args.get("Process Group Name")}


def group_from_counts(msg: dict) -> int | None:
    """The group size an all_gather's or reduce_scatter's two buffers imply (output / input)."""
    i, o = msg["in_nelems"], msg["out_nelems"]
    if not i or not o:
        return None
    ratio = o / i if msg["collective"] == C.ALL_GATHER else i / o if msg["collective"] == C.REDUCE_SCATTER else None
    return int(ratio) if ratio is not None and ratio >= 1 and ratio == int(ratio) else None


def size_bytes(msg: dict, n: int | None) -> float | None:
    """nccl-tests' size S in bytes (`collectives.size_elements` x the element size)."""
    elems = C.size_elements(msg["collective"], msg["in_nelems"], msg["out_nelems"], n)
    size = element_size(msg["dtype"])
    return elems * size if elems is not None and size else None


@formula("record_param_comms", uses_parent=True)
def record_param_comms(call: OpCall) -> Cost | None:
    """A collective's FLOPs and compulsory bytes from its recorded message.

    FLOPs (n-1)/n x S_elems for all_reduce, reduce_scatter and reduce, 0 otherwise; bytes: the
    input read and the output written once (all_reduce of S: S + S; all_gather: S/n + S).
    E.g. an all_reduce of 1,024 floats over 4 ranks: 768 FLOPs, 8,192 bytes, 4,096 of them written.
    Where no message is recorded (PyTorch 2.1 and earlier write no `In msg nelems`), the counts
    and dtype are those of the c10d op it is nested in (`c10d::alltoall_base_(out, in)`).
    """
    args = dict(call.extra)
    hosts = []
    if call.parent is not None:
        p = call.parent
        hosts.append((p.name, {"Input Dims": p.dims, "Input type": p.types, "Concrete Inputs": p.concrete}))
    msg = message(args, call.ancestors, hosts=hosts)
    coll = msg["collective"]
    size = element_size(msg["dtype"])
    n = int(msg["group_size"]) if msg["group_size"] else None
    if coll is None or size is None or (msg["in_nelems"] is None and msg["out_nelems"] is None):
        return None
    if coll in C.REDUCING and not n:
        return None
    in_b = (msg["in_nelems"] or 0.0) * size
    out_b = (msg["out_nelems"] or 0.0) * size
    s_elems = C.size_elements(coll, msg["in_nelems"], msg["out_nelems"], n) or 0.0
    return Cost(C.reduction_flops(coll, s_elems, n), in_b + out_b, VECTOR, canonical_dtype(msg["dtype"]), out_b)


@formula(*C10D_OPS, *FUNCTIONAL_OPS, uses_kernels=True, uses_children=True)
def c10d_collective(call: OpCall) -> Cost | None:
    """A c10d or functional collective op that launched an NCCL/RCCL kernel itself (no
    record_param_comms inside it records the message): the bytes of its tensors, read and
    written once, as `record_param_comms` counts them; FLOPs 0 for a collective that only moves
    data, (n-1)/n x S for a reduction whose group size n the op records (else unknown).

    E.g. `c10d::_allgather_base_(out [1048576], in [16384])` of int8: 1,064,960 bytes, 1,048,576
    of them written, 0 FLOPs. A call on the CPU (gloo: no kernel) is costed by gloo's work rows.
    """
    comm = [k for k in call.kernels if C.is_comm_kernel(k)]
    if not comm or any(c.name == "record_param_comms" for c in call.children):
        return None
    msg = host_message(call.name, call.dims, call.types, call.concrete)
    if msg is None or msg["in_nelems"] is None or msg["out_nelems"] is None:
        return None
    dtype = msg["dtype"] or next((d for k in comm if (d := kernel_dtype(k))), None)
    size = element_size(dtype)
    if size is None:
        return None
    coll = msg["collective"]
    n = int(msg["group_size"]) if msg["group_size"] else group_from_counts(msg)
    in_b, out_b = msg["in_nelems"] * size, msg["out_nelems"] * size
    if coll in C.REDUCING:
        flops = C.reduction_flops(coll, C.size_elements(coll, msg["in_nelems"], msg["out_nelems"], n), n) if n \
            else None
    else:
        flops = 0.0
    return Cost(flops, in_b + out_b, VECTOR, canonical_dtype(dtype), out_b)


def _group_from_meta(meta: dict, pg: str | None) -> tuple[int | None, str | None]:
    """A process group's size (and name) from the trace's distributedInfo, where the row names none."""
    info = meta.get("distributedInfo") if isinstance(meta, dict) else None
    if not isinstance(info, dict):
        return None, pg
    configs = [c for c in info.get("pg_config") or [] if isinstance(c, dict)]
    if pg is not None:
        for c in configs:
            if str(c.get("pg_name")) == str(pg) and isinstance(c.get("pg_size"), int):
                return c["pg_size"], pg
    if pg is None and len(configs) == 1 and isinstance(configs[0].get("pg_size"), int):
        return configs[0]["pg_size"], str(configs[0].get("pg_name"))
    ws = info.get("world_size")
    return (ws if isinstance(ws, int) else None), pg


def annotate_comm(k: pd.DataFrame, rows: pd.DataFrame, ops: pd.DataFrame, args_table: list[dict],
                  meta: dict) -> None:
    """The communication columns on the kernels table `k` (row i is rows' row i), in place."""
    n = len(k)
    out = {c: np.full(n, None, dtype=object) for c in ("comm_class", "collective", "process_group", "comm_dtype")}
    num = {c: np.full(n, np.nan) for c in ("group_size", "comm_bytes", "algbw_gbps", "busbw_factor", "busbw_gbps")}
    kinds = k.kind.to_numpy(dtype=object)
    names = k.name.to_numpy(dtype=object)
    op_names = k.op_name.to_numpy(dtype=object)
    dur = k.dur_us.to_numpy(dtype=float)
    out["comm_class"][(kinds == "memcpy") | (kinds == "memset")] = kinds[(kinds == "memcpy") | (kinds == "memset")]
    own = rows.args_id.to_numpy() if "args_id" in rows else np.full(n, -1)
    op_pos = rows.op_pos.to_numpy()
    op_args_id = ops.args_id.to_numpy() if len(ops) else np.zeros(0, np.int64)
    op_name_arr = ops.name.to_numpy(dtype=object) if len(ops) else np.zeros(0, dtype=object)
    parent = ops.parent.to_numpy() if len(ops) else np.zeros(0, np.int64)
    # per distinct kernel name: a trace launches the same few kernels many times
    comm_kernel = (kinds == "kernel") & _per_distinct(names, C.is_comm_kernel)
    work = comm_kernel | (kinds == "comm")
    host = (kinds == "cpu_op") & _per_distinct(op_names, lambda o: isinstance(o, str) and C.is_comm_op(o)) \
        if n else np.zeros(0, bool)
    for i in np.flatnonzero(host):  # the host op that enqueued a collective: classed, not costed
        coll = C.normalize(op_names[i])
        out["collective"][i] = coll
        out["comm_class"][i] = C.comm_class(coll)
    for i in np.flatnonzero(work):
        args: dict = dict(args_table[own[i]]) if own[i] >= 0 else {}
        ancestors: list[str] = []
        hosts: list[tuple[str, dict]] = []
        p = int(op_pos[i])
        if p >= 0:
            op_args = args_table[op_args_id[p]]
            for key, v in op_args.items():
                args.setdefault(key, v)
            hosts.append((op_name_arr[p], op_args))
            q = parent[p]
            while q >= 0 and len(ancestors) < 8:
                ancestors.append(op_name_arr[q])
                hosts.append((op_name_arr[q], args_table[op_args_id[q]]))
                q = parent[q]
        msg = message(args, ancestors, op_name_arr[p] if p >= 0 else None, names[i], hosts)
        group = int(msg["group_size"]) if msg["group_size"] else group_from_counts(msg)
        pg = msg["process_group"]
        if group is None or pg is None:
            g2, pg2 = _group_from_meta(meta, pg)
            group = group or g2
            pg = pg if pg is not None else pg2
        coll = msg["collective"]
        out["collective"][i] = coll
        out["comm_class"][i] = C.comm_class(coll)
        out["process_group"][i] = None if pg is None else str(pg)
        out["comm_dtype"][i] = canonical_dtype(msg["dtype"])
        num["group_size"][i] = group if group else np.nan
        size = size_bytes(msg, group)
        if size is not None:
            num["comm_bytes"][i] = size
            if dur[i] > 0:
                num["algbw_gbps"][i] = size / dur[i] / 1e3
        factor = C.busbw_factor(coll, group)
        if factor is not None:
            num["busbw_factor"][i] = factor
            num["busbw_gbps"][i] = num["algbw_gbps"][i] * factor
    for c, v in out.items():
        k[c] = pd.Series(v, index=k.index, dtype=object)
    for c, v in num.items():
        k[c] = v


def zero_comm_flops(k: pd.DataFrame) -> None:
    """Collective and P2P rows whose FLOPs no formula gave but whose collective does no arithmetic
    (all_gather, all_to_all, broadcast, send/recv: anything but a reduction) get 0 FLOPs, source
    `comm`, in place: their cost is their bytes, not an unknown."""
    if not len(k) or "comm_class" not in k:
        return
    colls = k["collective"].to_numpy(dtype=object)
    known = _per_distinct(colls, lambda c: isinstance(c, str) and c not in C.REDUCING)
    rows = (k["comm_class"].isin(["collective", "p2p"]).to_numpy() & known & k["flops"].isna().to_numpy()
            & (k["flops_source"] == "unknown").to_numpy())
    if rows.any():
        k.loc[rows, "flops"] = 0.0
        k.loc[rows, "flops_source"] = COMM_SOURCE


COMM_SOURCE = "comm"


def split_sizes(text) -> list[int] | None:
    """A recorded split-size list ('[400, 600]') as ints, None when empty or unreadable."""
    try:
        v = json.loads(text) if isinstance(text, str) else text
    except ValueError:
        return None
    return [int(x) for x in v] if isinstance(v, list) and v and all(isinstance(x, (int, float)) for x in v) else None

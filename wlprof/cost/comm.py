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

import numpy as np
import pandas as pd

from wlprof import collectives as C
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


def message(args: dict, ancestors=(), op_name: str | None = None, kernel: str | None = None) -> dict:
    """The collective of one row from what the trace recorded about it (missing values are None)."""
    coll = C.normalize(args.get("Collective name"))
    for name in (op_name, *ancestors):
        if coll is None and name and C.is_comm_op(name):
            coll = C.normalize(name)
    if coll is None and kernel:
        coll = C.normalize(kernel)
    in_n, out_n = _number(args.get("In msg nelems")), _number(args.get("Out msg nelems"))
    dtype = args.get("dtype")
    if in_n is None and out_n is None and "Input Dims" in args:  # gloo's work: the input tensor it moves
        dims = args.get("Input Dims") or []
        in_n = _numel(dims[0]) if dims else None
        types = args.get("Input type") or []
        dtype = dtype or (types[0] if types and isinstance(types[0], str) and dtypes.is_tensor_type(types[0])
                          else None)
    return {"collective": coll, "in_nelems": in_n, "out_nelems": out_n, "dtype": dtype,
            "group_size": _number(args.get("Group size")), "process_group": args.get("Process Group Name")}


def size_bytes(msg: dict, n: int | None) -> float | None:
    """nccl-tests' size S in bytes (`collectives.size_elements` x the element size)."""
    elems = C.size_elements(msg["collective"], msg["in_nelems"], msg["out_nelems"], n)
    size = element_size(msg["dtype"])
    return elems * size if elems is not None and size else None


@formula("record_param_comms")
def record_param_comms(call: OpCall) -> Cost | None:
    """A collective's FLOPs and compulsory bytes from its recorded message.

    FLOPs (n-1)/n x S_elems for all_reduce, reduce_scatter and reduce, 0 otherwise; bytes: the
    input read and the output written once (all_reduce of S: S + S; all_gather: S/n + S).
    E.g. an all_reduce of 1,024 floats over 4 ranks: 768 FLOPs, 8,192 bytes, 4,096 of them written.
    """
    args = dict(call.extra)
    msg = message(args, call.ancestors)
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
    if n:  # per distinct kernel name: a trace launches the same few kernels many times
        codes, uniq = pd.factorize(pd.Series(names, dtype=object), use_na_sentinel=False)
        comm_kernel = (kinds == "kernel") & np.array([C.is_comm_kernel(nm) for nm in uniq], dtype=bool)[codes]
    else:
        comm_kernel = np.zeros(0, bool)
    work = comm_kernel | (kinds == "comm")
    host = (kinds == "cpu_op") & np.array([isinstance(o, str) and C.is_comm_op(o) for o in op_names], dtype=bool) \
        if n else np.zeros(0, bool)
    for i in np.flatnonzero(host):  # the host op that enqueued a collective: classed, not costed
        coll = C.normalize(op_names[i])
        out["collective"][i] = coll
        out["comm_class"][i] = C.comm_class(coll)
    for i in np.flatnonzero(work):
        args: dict = dict(args_table[own[i]]) if own[i] >= 0 else {}
        ancestors: list[str] = []
        p = int(op_pos[i])
        if p >= 0:
            op_args = args_table[op_args_id[p]]
            for key, v in op_args.items():
                args.setdefault(key, v)
            q = parent[p]
            while q >= 0 and len(ancestors) < 8:
                ancestors.append(op_name_arr[q])
                q = parent[q]
        msg = message(args, ancestors, op_name_arr[p] if p >= 0 else None, names[i])
        group = int(msg["group_size"]) if msg["group_size"] else None
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
    known = np.array([isinstance(c, str) and c not in C.REDUCING for c in colls], dtype=bool)
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

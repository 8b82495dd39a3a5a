"""Roofline placement: intensity, achieved rates and the roof a kernel is placed against.

Each row is placed under two roofs: a compute roof (`compute:<dtype>` for matrix ops,
`compute:vector` otherwise) and a memory roof chosen by what the kernel does and where its
data can be: read-dominated, copy-like or write-dominated (`bytes_written` against `bytes`)
against the main memory's read, copy or write bandwidth, and a kernel whose working set fits
a cache level (its compulsory bytes plus everything moved between it and the same call one
step away) against that level's bandwidth. The lower roof is the one that binds (`roof`,
`bound`); `roof_note` says why a placement is what it is, and why a fraction above 1 is.
Rules: `docs/ceilings.md`.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd

from wlprof.ceilings import ABOVE_ROOF_NOTES, NOTES, Ceilings
from wlprof.columns import object_column as _obj
from wlprof.cost.copies import copy_kind

READ_SHARE_MAX = 0.1  # written <= 10% of the bytes: read-dominated
WRITE_SHARE_MIN = 0.9  # written >= 90%: write-dominated

# Ops whose counted reads follow an index (one row read per index element): with repeated indices the
# same rows are read again, from the cache, so the counted bytes are an upper bound on the traffic.
INDEXED_OPS = frozenset("aten::" + n for n in (
    "gather index_select embedding index scatter scatter_ scatter_add scatter_add_ scatter_reduce "
    "scatter_reduce_ index_add index_add_ index_copy index_copy_ embedding_dense_backward "
    "index_put_ _index_put_impl_").split())
PLACEMENT_COLUMNS = ("ceiling_tflops", "ceiling_gbps", "ridge_flop_per_byte", "roofline_us", "roofline_fraction",
                     "bound", "roof", "compute_roof", "memory_roof", "roof_note", "working_set_bytes")


def compute_key(unit: str | None, dtype: str | None, tf32: bool = False) -> str | None:
    """The compute ceiling's key: the dtype ('tf32' for fp32 with TF32 on) of a matrix op, 'vector' otherwise."""
    if not unit:
        return None
    if unit == "matrix":
        if not dtype:
            return None
        return "tf32" if (dtype == "float32" and tf32) else dtype
    return "vector"


# a float32 matrix kernel that runs on the tensor cores in TF32: cuBLAS/cuDNN name the math (`..._tf32f32_...`), CUTLASS
# its TF32 instruction (`tensorop_s1688`); `3xtf32` (float32 accuracy from three TF32 products) is not TF32's rate.
# AMD's counterpart, xf32, is named by hipBLASLt's Tensile kernels after their problem type: float32 operands (`S`)
# with the xf32 math op (`MX`), `Cijk_Alik_Bljk_S_MX_B_...` (hipBLASLt's tensilelite ProblemType naming; docs/ceilings.md)
_TF32_KERNEL = re.compile(r"(?<!3x)tf32|tensorop_s1688|Cijk_A[a-z]+_B[a-z]+_S_MX_", re.IGNORECASE)


def tf32_kernels(names: np.ndarray) -> np.ndarray:
    """Whether each kernel name says it ran float32 operands in TF32 (looked up once per distinct name)."""
    names = np.asarray(names, dtype=object)
    if not len(names):
        return np.zeros(0, dtype=bool)
    codes, uniq = pd.factorize(names)
    said = np.array([isinstance(x, str) and _TF32_KERNEL.search(x) is not None for x in uniq], dtype=bool)
    return np.where(codes >= 0, said[np.maximum(codes, 0)], False)


def traffic(nbytes: np.ndarray, written: np.ndarray) -> np.ndarray:
    """'read', 'copy' or 'write' by the written share of the bytes; None where bytes_written is unknown."""
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(nbytes > 0, written / nbytes, np.nan)
    cls = np.where(share <= READ_SHARE_MAX, "read", np.where(share >= WRITE_SHARE_MIN, "write", "copy")).astype(object)
    cls[np.isnan(share)] = None
    return cls


def _key_ids(df: pd.DataFrame, cols: list[str]) -> np.ndarray:
    """One int64 id per distinct combination of the columns' values (None and NaN one value)."""
    n = len(df)
    combined = np.zeros(n, dtype=np.int64)
    for c in cols:
        codes, uniques = pd.factorize(df[c].to_numpy(dtype=object), use_na_sentinel=False)
        combined = pd.factorize(combined * (len(uniques) + 1) + codes)[0].astype(np.int64)
    return combined


def working_set_bytes(df: pd.DataFrame, fallback_gbps: float | None = None) -> np.ndarray:
    """Per row, the bytes its data must survive in a cache to be read from it again: its own
    compulsory bytes plus every byte moved on its device between the same call one step earlier
    and it (the next step's call for the first profiled step). NaN where the call does not repeat
    in another step (a single profiled step, rows outside any step).

    'The same call' is the same kernel of the same op with the same recorded inputs, the same
    occurrence of it in its step. Rows whose bytes are unknown count as `dur_us` x `fallback_gbps`
    (all a kernel could move in its time), or nothing when there is no fallback.
    """
    n = len(df)
    out = np.full(n, np.nan)
    if n == 0 or "step" not in df or "ts_us" not in df:
        return out
    b = df["bytes"].to_numpy(dtype=float).copy()
    unknown = np.isnan(b)
    if unknown.any():
        dur = df["dur_us"].to_numpy(dtype=float) if "dur_us" in df else np.zeros(n)
        fill = dur * fallback_gbps * 1e3 if fallback_gbps and math.isfinite(fallback_gbps) else np.zeros(n)
        b[unknown] = np.nan_to_num(fill[unknown])
    group = _key_ids(df, [c for c in ("run_id", "point", "rank", "device_index") if c in df])
    key = _key_ids(df, [c for c in ("name", "op_name", "op_input_dims", "op_input_types", "op_input_strides")
                        if c in df])
    step = df["step"].to_numpy()
    ts = df["ts_us"].to_numpy(dtype=float)
    order = np.lexsort((ts, group))  # by group, then time
    cum = np.empty(n)
    bs = b[order]
    cs = np.cumsum(bs)
    g_sorted = group[order]
    # cumulative bytes restart per group
    starts = np.r_[0, np.flatnonzero(np.diff(g_sorted)) + 1]
    offset = np.repeat(np.r_[0.0, cs[starts[1:] - 1]] if len(starts) > 1 else np.array([0.0]),
                       np.diff(np.r_[starts, n]))
    cum[order] = cs - offset  # bytes moved in the group up to and including this row
    before = cum - b  # ... up to this row, excluding it
    rows = np.flatnonzero(step >= 0)
    g, k, st = group[rows], key[rows], step[rows]
    # the occurrence of each call in its step: its rank by time among the same (group, step, key)
    o = np.lexsort((ts[rows], k, st, g))
    first = np.r_[True, (g[o][1:] != g[o][:-1]) | (st[o][1:] != st[o][:-1]) | (k[o][1:] != k[o][:-1])]
    pos = np.arange(len(o))
    occ = np.empty(len(o), dtype=np.int64)
    occ[o] = pos - np.maximum.accumulate(np.where(first, pos, 0))
    # the same call in successive steps, side by side
    o2 = np.lexsort((st, occ, k, g))
    gs, ks, os_ = g[o2], k[o2], occ[o2]
    same = (gs[1:] == gs[:-1]) & (ks[1:] == ks[:-1]) & (os_[1:] == os_[:-1])
    idx = rows[o2]
    prev = np.full(len(idx), -1)
    nxt = np.full(len(idx), -1)
    prev[1:][same] = idx[:-1][same]
    nxt[:-1][same] = idx[1:][same]
    ws = np.full(len(idx), np.nan)
    has_prev = prev >= 0
    ws[has_prev] = before[idx[has_prev]] - cum[prev[has_prev]] + b[idx[has_prev]]
    only_next = ~has_prev & (nxt >= 0)
    ws[only_next] = before[nxt[only_next]] - cum[idx[only_next]] + b[idx[only_next]]
    out[idx] = np.maximum(ws, b[idx])  # overlapping calls (two streams) never count less than their own bytes
    return out


def _notes(masks: dict[str, np.ndarray], n: int) -> np.ndarray:
    """roof_note strings from one boolean mask per note: notes joined by ',' in NOTES order."""
    names = [k for k in NOTES if k in masks and masks[k].any()]
    if not names:
        return np.full(n, None, dtype=object)
    code = np.zeros(n, dtype=np.int64)
    for i, k in enumerate(names):
        code |= masks[k].astype(np.int64) << i
    table = {c: (",".join(k for i, k in enumerate(names) if c >> i & 1) or None) for c in np.unique(code)}
    return np.array([table[c] for c in code], dtype=object)


def add_roofline(df: pd.DataFrame, ceilings: Ceilings | None, tf32: bool | np.ndarray = False) -> None:
    """Intensity, achieved rates and roofline placement, in place.

    Needs flops, bytes, dur_us, cost_unit, cost_dtype; uses bytes_written (the memory roof by
    traffic) and step, ts_us and the op-call columns (the working set) where present. `tf32`:
    whether fp32 matrix products ran with TF32 (one value, or one per row).
    """
    flops = df["flops"].to_numpy(dtype=float)
    nbytes = df["bytes"].to_numpy(dtype=float)
    dur = df["dur_us"].to_numpy(dtype=float)
    n = len(df)
    with np.errstate(divide="ignore", invalid="ignore"):
        df["intensity_flop_per_byte"] = np.where(nbytes > 0, flops / nbytes, np.nan)
        achieved_gbps = np.where(dur > 0, nbytes / dur / 1e3, np.nan)
        df["achieved_tflops"] = np.where(dur > 0, flops / dur / 1e6, np.nan)
        df["achieved_gbps"] = achieved_gbps
    if ceilings is None:
        for c in ("ceiling_tflops", "ceiling_gbps", "ridge_flop_per_byte", "roofline_us", "roofline_fraction",
                  "working_set_bytes"):
            df[c] = np.nan
        for c in ("bound", "roof", "compute_roof", "memory_roof", "roof_note"):
            df[c] = _obj(np.full(n, None, dtype=object), df.index)
        return
    mem = ceilings.memory

    # compute roof, looked up once per distinct (unit, dtype)
    units = df["cost_unit"].to_numpy(dtype=object)
    dts = df["cost_dtype"].to_numpy(dtype=object)
    tf = np.broadcast_to(np.asarray(tf32, dtype=bool), (n,))
    combo = _key_ids(pd.DataFrame({"u": units, "d": dts, "t": tf}), ["u", "d", "t"])
    uniq, firsts = np.unique(combo, return_index=True)
    peaks, roofs = np.full(len(firsts), np.nan), np.full(len(firsts), None, dtype=object)
    for j, i in enumerate(firsts):
        unit = units[i] if isinstance(units[i], str) else None
        dtype = dts[i] if isinstance(dts[i], str) else None
        key = compute_key(unit, dtype, bool(tf[i]))
        if key:
            peaks[j], roofs[j] = ceilings.compute_tflops(unit, dtype, bool(tf[i])), f"compute:{key}"
    slot = np.searchsorted(uniq, combo)
    peak, compute_roof = peaks[slot], roofs[slot]

    # memory roof: by traffic
    written = df["bytes_written"].to_numpy(dtype=float) if "bytes_written" in df else np.full(n, np.nan)
    cls = traffic(nbytes, written)
    written_unknown = pd.isna(cls) & (nbytes > 0)
    cls = np.where(pd.isna(cls), "copy", cls).astype(object)
    copy_roof = f"{mem}_copy"
    bw_of = {r: ceilings.bandwidth(r) for r in (f"{mem}_read", f"{mem}_write", copy_roof)}
    memory_roof = np.empty(n, dtype=object)
    for c in ("read", "copy", "write"):
        memory_roof[cls == c] = f"{mem}_{c}"
    missing = np.zeros(n, dtype=bool)
    for r, v in bw_of.items():
        if v is None:
            missing |= memory_roof == r
    roof_unmeasured = missing & (memory_roof != copy_roof)
    memory_roof[missing] = copy_roof
    copy_bw = bw_of[copy_roof] if bw_of[copy_roof] is not None else float(ceilings.copy_gbps)
    bw = np.full(n, copy_bw, dtype=float)
    for r, v in bw_of.items():
        if v is not None:
            bw[memory_roof == r] = v

    # ... and by working set: the smallest cache level it fits, where that level is faster
    ws = working_set_bytes(df, copy_bw)
    resident: dict[str, np.ndarray] = {}
    placed = np.zeros(n, bool)
    for level, cap, level_bw in ceilings.cache_levels():
        fits = ~placed & (ws <= cap)  # NaN compares False
        placed |= fits
        faster = fits & (level_bw >= bw)  # a cache roof never lowers a kernel's roof
        resident[f"{level}_resident"] = faster
        memory_roof[faster] = level
        bw[faster] = level_bw

    # a copy between the host and the device: the link is its roof, crossed once by each byte it moves
    # (its device-side bytes: written by a copy to the device, read by one to the host); `bw` becomes the
    # link's rate in the row's own byte count, so the row's time at the roof is the link's
    link = _link_copies(df, nbytes, written)
    for r, (on, crossing) in link.items():
        v = ceilings.bandwidth(r)
        if v is None or not on.any():
            continue
        memory_roof[on] = r
        with np.errstate(divide="ignore", invalid="ignore"):
            bw[on] = np.where(crossing[on] > 0, v * nbytes[on] / crossing[on], v)

    with np.errstate(divide="ignore", invalid="ignore"):
        t_compute = flops / (peak * 1e6)
        t_memory = nbytes / (bw * 1e3)
        roof_us = np.fmax(t_compute, t_memory)
        roof_us = np.where(np.isnan(t_compute) | np.isnan(t_memory), np.nan, roof_us)
        frac = np.where(dur > 0, roof_us / dur, np.nan)
        df["ceiling_tflops"] = peak
        df["ceiling_gbps"] = np.where(np.isnan(peak), np.nan, bw)
        df["ridge_flop_per_byte"] = peak * 1e3 / bw
        df["roofline_us"] = roof_us
        df["roofline_fraction"] = frac
    placed_ok = ~np.isnan(roof_us)
    is_compute = placed_ok & (t_compute >= t_memory)
    df["bound"] = _obj(np.where(~placed_ok, None, np.where(is_compute, "compute", "memory")), df.index)
    roof = np.where(is_compute, compute_roof, memory_roof).astype(object)
    roof[~placed_ok] = None
    df["roof"] = _obj(roof, df.index)
    df["compute_roof"] = _obj(compute_roof, df.index)
    df["memory_roof"] = _obj(np.where(nbytes >= 0, memory_roof, None), df.index)
    df["working_set_bytes"] = ws

    # why a fraction is above 1
    above = placed_ok & (frac > 1)
    datasheet = np.bool_(ceilings.source == "datasheet")  # a peak, not a measurement: no spread, never stale
    upper = np.full(n, np.nan)
    for r in pd.unique(roof[above]):
        meas = ceilings.measurements.get(_measurement_key(r))
        ratio = meas.upper_ratio if meas is not None else None
        upper[roof == r] = ratio if ratio is not None else (1.0 if datasheet else np.nan)
    no_spread = above & np.isnan(upper)
    within = above & ~no_spread & (frac <= upper)
    beyond = above & ~no_spread & ~within
    # a copy-like (or unknown) kernel above the copy roof may be within the read or write roofs:
    # its mix of reads and writes is not the copy's 1:1
    best_main = max((v for v in bw_of.values() if v is not None), default=np.nan)
    best_ratio = max((m.upper_ratio for k, m in ceilings.measurements.items()
                      if k in bw_of and m.upper_ratio is not None), default=1.0)
    on_copy = (roof == copy_roof)
    under_best = achieved_gbps <= best_main * best_ratio
    mixed = beyond & on_copy & under_best & ~written_unknown & (cls == "copy")
    explained_unknown = beyond & on_copy & under_best & written_unknown
    op_names = df["op_name"].to_numpy(dtype=object) if "op_name" in df else np.full(n, None, dtype=object)
    sources = df["flops_source"].to_numpy(dtype=object) if "flops_source" in df else np.full(n, None, dtype=object)
    indexed_op = pd.Series(op_names, dtype=object).isin(INDEXED_OPS).to_numpy() | (sources == "workload")
    indexed = beyond & ~is_compute & indexed_op & ~mixed & ~explained_unknown
    on_main = np.zeros(n, dtype=bool)
    for r in (f"{mem}_read", f"{mem}_copy", f"{mem}_write"):
        on_main |= roof == r
    fit = beyond & on_main & _cache_could_serve(nbytes, bw, dur, ceilings) & ~mixed & ~explained_unknown & ~indexed
    data = beyond & is_compute & _within_zero_data_rate(frac, roof, peak, ceilings)
    compute_unmeasured = pd.notna(compute_roof) & np.isnan(peak)  # e.g. compute:float64 on a GPU
    unexplained = beyond & ~mixed & ~explained_unknown & ~indexed & ~fit & ~data
    masks = {**resident, "written_unknown": written_unknown, "roof_unmeasured": roof_unmeasured,
             "compute_unmeasured": compute_unmeasured,
             "within_spread": within, "mixed_traffic": mixed, "indexed_reuse": indexed, "cache_fit": fit,
             "data_dependent": data,
             "ceiling_stale": unexplained & ~datasheet, "above_datasheet": unexplained & datasheet,
             "above_measured_roof": no_spread, "datasheet": placed_ok & datasheet}
    df["roof_note"] = _obj(_notes(masks, n), df.index)


def _link_copies(df: pd.DataFrame, nbytes: np.ndarray, written: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per link roof, (the memcpy rows between the host and the device that cross it, the bytes each moves
    across): a copy to the device crosses with what it writes, one to the host with what it reads."""
    n = len(df)
    if "kind" not in df or "name" not in df or not n:
        return {}
    copy = np.flatnonzero(df["kind"].to_numpy(dtype=object) == "memcpy")
    if not len(copy):
        return {}
    kinds = np.array([copy_kind(str(v)) for v in df["name"].to_numpy(dtype=object)[copy]], dtype=object)
    known = ~np.isnan(written)
    out = {}
    for roof, tag, crossing in (("host_to_device", "HtoD", written), ("device_to_host", "DtoH", nbytes - written)):
        on = np.zeros(n, dtype=bool)
        on[copy[kinds == tag]] = True
        out[roof] = (on & known, crossing)
    return out


def _cache_could_serve(nbytes: np.ndarray, main_bw: np.ndarray, dur: np.ndarray, ceilings: Ceilings) -> np.ndarray:
    """Whether a kernel took at least as long as it would if a cache level held as much of its
    bytes as fits there (the rest from main memory), for some level: a main-memory kernel above
    its roof that this explains may have found its inputs left in the cache."""
    ok = np.zeros(len(nbytes), dtype=bool)
    with np.errstate(divide="ignore", invalid="ignore"):
        for _, cap, level_bw in ceilings.cache_levels():
            cached = np.minimum(nbytes, cap)
            t_best = cached / (level_bw * 1e3) + (nbytes - cached) / (main_bw * 1e3)
            ok |= (level_bw > main_bw) & (dur >= t_best)
    return ok


def _within_zero_data_rate(frac: np.ndarray, roof: np.ndarray, peak: np.ndarray, ceilings: Ceilings) -> np.ndarray:
    """Whether a compute-bound kernel's rate is within its dtype's zero-data GEMM rate (and that
    measurement's spread): data-dependent power explains it."""
    ok = np.zeros(len(frac), dtype=bool)
    for r in pd.unique(roof[pd.notna(roof)]):
        if not str(r).startswith("compute:"):
            continue
        meas = ceilings.measurements.get(f"matrix_zeros:{str(r).split(':', 1)[1]}")
        if meas is None:
            continue
        on = roof == r
        ok[on] = frac[on] * peak[on] <= meas.value * (meas.upper_ratio or 1.0)
    return ok


def _measurement_key(roof: str | None) -> str | None:
    """The `Ceilings.measurements` key of a roof name ('compute:bfloat16' -> 'matrix:bfloat16')."""
    if roof is None:
        return None
    if roof.startswith("compute:"):
        k = roof.split(":", 1)[1]
        return "vector" if k == "vector" else f"matrix:{k}"
    return roof


def replace_roofline(df: pd.DataFrame, ceilings: Ceilings, tf32: bool | np.ndarray | None = None,
                     written_from_shapes: bool = True) -> pd.DataFrame:
    """A stored kernels or ops table placed again against other ceilings (a copy; the input is kept).

    Rows of several runs and points may be mixed: working sets are computed per run, point, rank
    and device. `tf32` None: a row ran with TF32 where it was placed under compute:tf32 (tables of
    schema >= 2.4; older ones: no TF32, unless said). With `written_from_shapes`, a null
    `bytes_written` (tables written before formulas stated it, schema < 2.4) is recomputed from
    the recorded op inputs where the same formula gives the row's bytes
    (`cost.annotate.written_from_shapes`).
    """
    if tf32 is None:
        tf32 = (df["compute_roof"] == "compute:tf32").fillna(False).to_numpy(dtype=bool) if "compute_roof" in df \
            else False
    out = df.copy()
    if written_from_shapes and len(out):
        from wlprof.cost.annotate import written_from_shapes as restate

        w = out["bytes_written"].to_numpy(dtype=float) if "bytes_written" in out else np.full(len(out), np.nan)
        out["bytes_written"] = np.where(np.isnan(w), restate(out), w)
    add_roofline(out, ceilings, tf32)
    return out


def above_roof_unexplained(df: pd.DataFrame) -> pd.DataFrame:
    """Rows whose roofline fraction is above 1 with no note that explains it (should be none)."""
    if "roofline_fraction" not in df or df.empty:
        return df.iloc[0:0]
    note = df.get("roof_note", pd.Series([None] * len(df), index=df.index)).fillna("")
    explained = note.map(lambda s: any(k in s.split(",") for k in ABOVE_ROOF_NOTES))
    return df[(df.roofline_fraction > 1) & ~explained]

"""The Level-3 predictor: per op class, a physical base time corrected by the nearest profiled calls.

`fit(profile_ops)` turns the op calls of a profile (the grid `wlprof profile` measured)
into tables of residuals; `Predictor.predict(ops)` answers any op call, profiled or not,
with the source that answered it:

- `same call`: the call was profiled (same group, same coordinates): its measured time;
- `near`: profiled calls of its group lie within `NEAR` (log2 units) in every coordinate it
  has: interpolated between them;
- `far`: its group was profiled but not near it: the nearest correction carried to it;
- `other context`: its group was profiled only in other workloads or dispatches (an
  ingested trace's calls, a workload the grid does not run), or those lie nearer to it than
  its own context's calls (by more than `CONTEXT_MARGIN`) and its own lie not `near` it or it is a
  GEMM its FLOPs decide (`_compute_bound`: there what the L2 holds around it matters little): all
  of those together, plus, for a
  GEMM whose own context the profile holds, how that context's calls differ from the others'
  (`fit_shifts`: an MoE loop's expert GEMMs run slower than the same shapes in the GEMM grid);
- `other dtype`: its op was profiled in other floating dtypes only (`transfer_dtype`): the nearest
  one's calls of the same op, layouts and context answer (or of its other layouts and scalars, the
  relaxed group, where only those were profiled there), at the same shapes for a GEMM and at
  the same bytes for a memory-bound op, their correction applied to this call's own base time
  (its dtype's measured matrix peak, its element size);
- `op`: only other layouts or scalars of its op (the relaxed group) were profiled (for a GEMM, compute or
  memory-class call, within `RELAXED_NEAR` of it, or where its class or kind holds no calls);
- `class`: nothing of its op: the class's correction at the call's base time (a memory-class op's
  kind's, `memory_kind`, where the profile holds ops of that kind), plus the least time of a kernel for each
  kernel it ran past its first (`launch_extra`); a backward op (`is_backward`) by its class's forward ops,
  its work times what the profile's backward ops of its kind take beyond those (`fit_backward`);
- `base`: nothing of its class: the physical base time alone.

Base times (`base_us`), per class, with the profile's measured peaks and bandwidth:

- gemm: floor + max(waves x tile time, compulsory bytes / bandwidth), waves = ceil(tiles x splits /
  SMs), the best of tiles 64x128, 128x64, 128x128, 128x256, 256x128 (cuBLAS picks one per shape), a
  tile's time 2 * tm * tn * K / splits / (peak / SMs), K split (at least 512 per split) when there are
  fewer tiles than SMs;
- grouped (`_grouped_mm`): the same over every group's tiles (each active group pads half
  a tile), against the active experts' weights;
- spmm (CSR): floor + (nnz * (index + value + row) + output) / bandwidth; fitted like an index op, its
  rows term the nonzeros times their passes (`spmm_passes`);
- index, norm and memory: floor + the formula's compulsory bytes / bandwidth (a norm, forward or backward,
  is a class of its own: its per-channel or per-row reductions make it slower per byte than a stream); a
  memory-class call past `L2_RESIDENT` of the L2 is corrected by its side's neighbours (`with_residency`);
- scan (a cumsum or cumprod along a dimension that is not the innermost): floor + bytes / bandwidth, fitted
  like an index op, its rows term the scanned extent (one thread per column walks it step by step);
- link (a copy across the host link, the ops table's `transfer`): floor + its bytes / the link's measured
  bandwidth that way (pinned host memory's; pageable memory is a group of its own, staged slower);
- an index or spmm group profiled at `MIN_FIT` sizes or more, not every call at its launch floor
  (`FLOOR_FLAT`, `FLOOR_BOUND`): fitted to its calls (`fit_bases`): a floor,
  bytes (more per byte for an index op past 32-bit offsets, where the fit finds it), rows, and a hub's
  chain (its steps from the L2 and from memory at costs of their own, where the fit finds them); bytes
  and rows add, or overlap (the slower of the two) where that fits clearly better;
- other (no bytes): the floor.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from wlprof.predict.calls import ALIGN_BITS, NCOORDS, TF32_TAG, describe
from wlprof.predict.neighbours import DECIMALS, Table, exact_distance

SOURCES = ("same call", "near", "far", "other context", "other dtype", "op", "class", "base")
NEAR = 1.0  # log2 units: within 2x of a profiled call in every coordinate
CONTEXT_MARGIN = 0.25  # log2 units: how much closer other contexts' calls must be to answer instead
# ... for a call its FLOPs do not bound: where its operands lie (the L2 or memory) sets its time, and its
# context decides that (an MoE loop reads each expert's weights once, cold; a repeated GEMM finds them warm)
MEMORY_CONTEXT_MARGIN = 1.0
# log2 units (over the coordinates, Euclidean): how near its op's other layouts and scalars must lie to answer a
# call before its kind's calls do (a tiny float32 copy had been answered by the MoE router's one [256, 8] cast)
RELAXED_NEAR = 4.0
NEAR_FIRST = ("memory", "gemm", "compute")  # the classes whose far relaxed calls answer after the class's
FLOOR_US = 2.0  # a launch's floor before the profile says otherwise
SPLIT_K_MIN = 512  # the least K a split-K GEMM gives one split
TILES = ((64.0, 128.0), (128.0, 64.0), (128.0, 128.0), (128.0, 256.0), (256.0, 128.0))  # (rows, cols)
NOISY_WEIGHT = 0.25  # a profiled call whose samples spread more than NOISY_SPREAD counts this much
NOISY_SPREAD = 0.15  # (p90 - p10) / median over its samples


@dataclass
class Constants:
    """The device numbers the base times use: from the profile's measured ceilings."""

    sms: int = 132
    matrix: dict[str, float] = field(default_factory=lambda: {"bfloat16": 790e6, "float16": 760e6,
                                                              "float32": 50e6})  # FLOP/us
    vector: float = 50e6  # FLOP/us
    bandwidth: float = 4.2e6  # bytes/us
    floor: float = FLOOR_US
    tile: int = 128  # a GEMM tile's side (a CPU has no tiles to pad: 1)
    l2: float = 0.0  # the last-level cache's bytes (0: unknown)
    read: float = 0.0  # the memory's read bandwidth, bytes/us (0: unknown)
    write: float = 0.0  # ... and its write bandwidth
    host_to_device: float = 0.0  # the host link's bandwidth to the device from pinned memory, bytes/us (0: unknown)
    device_to_host: float = 0.0  # ... and back
    kernel: float = 0.0  # the least time one kernel takes, us, as the profile measured it (0: unknown)

    @property
    def kernel_us(self) -> float:
        """The least time one kernel takes: the measured one, else the launch floor."""
        return self.kernel if self.kernel > 0 else self.floor

    def to_dict(self) -> dict:
        return {"sms": self.sms, "matrix": dict(self.matrix), "vector": self.vector, "bandwidth": self.bandwidth,
                "floor": self.floor, "tile": self.tile, "l2": self.l2, "read": self.read, "write": self.write,
                "host_to_device": self.host_to_device, "device_to_host": self.device_to_host, "kernel": self.kernel}

    @classmethod
    def from_dict(cls, d: dict) -> Constants:
        return cls(int(d["sms"]), {k: float(v) for k, v in d["matrix"].items()}, float(d["vector"]),
                   float(d["bandwidth"]), float(d["floor"]), int(d.get("tile", 128)), float(d.get("l2", 0.0)),
                   float(d.get("read", 0.0)), float(d.get("write", 0.0)), float(d.get("host_to_device", 0.0)),
                   float(d.get("device_to_host", 0.0)), float(d.get("kernel", 0.0)))

    @classmethod
    def from_ceilings(cls, ceilings: dict, sms: int | None = None) -> Constants:
        c = cls()
        if ceilings:
            c.matrix = {k: float(v) * 1e6 for k, v in (ceilings.get("matrix_tflops") or {}).items() if v}
            c.vector = float(ceilings.get("vector_tflops") or 50.0) * 1e6
            c.bandwidth = float(ceilings.get("copy_gbps") or 4200.0) * 1e3
            c.l2 = float((ceilings.get("cache_bytes") or {}).get("l2") or 0.0)
            c.read = float((ceilings.get("bandwidth_gbps") or {}).get("hbm_read") or 0.0) * 1e3
            c.write = float((ceilings.get("bandwidth_gbps") or {}).get("hbm_write") or 0.0) * 1e3
            c.host_to_device = float((ceilings.get("bandwidth_gbps") or {}).get("host_to_device") or 0.0) * 1e3
            c.device_to_host = float((ceilings.get("bandwidth_gbps") or {}).get("device_to_host") or 0.0) * 1e3
            if ceilings.get("device_type") == "cpu":
                c.sms, c.tile, c.floor = 1, 1, 1.0
        if sms:
            c.sms = int(sms)
        return c


def _launch_floor(d: pd.DataFrame, k: Constants) -> np.ndarray:
    """Each described call's launch floor: the constant floor times its multi-tensor-apply launches (one
    where its launches are not known)."""
    return k.floor * (np.nan_to_num(d.launches.to_numpy(dtype=float), nan=1.0) if "launches" in d
                      else np.ones(len(d)))


def _matrix_peak(d: pd.DataFrame, k: Constants) -> np.ndarray:
    """Each described call's matrix-unit peak: its dtype's (else float32's, else the vector peak), TF32's for
    float32 operands that ran on the tensor cores."""
    peak = np.array([k.matrix.get(t, k.matrix.get("float32", k.vector)) for t in d.dtype.to_numpy()], dtype=float)
    if "tf32" in d and "tf32" in k.matrix:
        peak = np.where(d.tf32.to_numpy(dtype=bool), k.matrix["tf32"], peak)
    return peak


def base_us(d: pd.DataFrame, k: Constants, split: np.ndarray | None = None,
            waves: np.ndarray | None = None) -> np.ndarray:
    """The physical base time of each described call (`calls.describe`), in us; per call, `split`:
    whether a GEMM's K may be split, `waves`: whether its tiles and waves are whole (quantized) or
    fractional (a smooth base, for kernels that hide the quantization); default: both, for all."""
    cls = d.cls.to_numpy()
    s = d.itemsize.to_numpy(dtype=float)
    nbytes = d["bytes"].to_numpy(dtype=float)
    # a tensor-list call's kernels (multi-tensor-apply launches) each pay the floor
    floor = _launch_floor(d, k)
    out = floor + np.nan_to_num(nbytes, nan=0.0) / k.bandwidth
    peak = _matrix_peak(d, k)
    # an op of the compute, norm or memory class: its FLOPs at the peak of the unit it runs on (the matrix unit for a
    # convolution, attention), where they take longer than its bytes
    mem = np.isin(d.cls.to_numpy(), ("compute", "norm", "memory"))
    if mem.any():
        fl = d.flops.to_numpy(dtype=float)[mem]
        unit = d.matrix_unit.to_numpy(dtype=bool)[mem] if "matrix_unit" in d else np.zeros(mem.sum(), bool)
        t_c = np.nan_to_num(fl, nan=0.0) / np.where(unit, peak[mem], k.vector)
        out[mem] = np.maximum(out[mem], (floor[mem] if np.ndim(floor) else floor) + t_c)
    link = cls == "link"
    if link.any():  # its bytes across the host link at the link's measured bandwidth (else device memory's)
        way = d.link.to_numpy(dtype=object)[link] if "link" in d else np.full(link.sum(), "HtoD", dtype=object)
        bw = np.where(way == "DtoH", k.device_to_host, k.host_to_device)
        bw = np.where(bw > 0, bw, k.bandwidth)
        out[link] = (floor[link] if np.ndim(floor) else floor) + np.nan_to_num(nbytes[link], nan=0.0) / bw
    m, n, kk, b = (d[c].to_numpy(dtype=float) for c in ("M", "N", "K", "B"))
    g = cls == "gemm"
    tile = float(k.tile)
    if g.any():
        # cuBLAS picks a tile per shape: the best of a few (waves quantize each), K split when a
        # shape has fewer tiles than SMs (at least SPLIT_K_MIN of K per split)
        t_c = np.full(g.sum(), np.inf)
        whole = np.ones(g.sum(), dtype=bool) if waves is None else np.asarray(waves, dtype=bool)[g]
        for tm, tn in (TILES if tile > 1 else ((1.0, 1.0),)):
            tiles = np.where(whole, np.ceil(m[g] / tm) * np.ceil(n[g] / tn),
                             np.maximum(m[g] / tm, 1) * np.maximum(n[g] / tn, 1))
            tiles = np.maximum(tiles * b[g], 1)
            splits = np.clip(np.floor(k.sms / tiles), 1, np.maximum(np.floor(kk[g] / SPLIT_K_MIN), 1))
            if split is not None:
                splits = np.where(np.asarray(split, dtype=bool)[g], splits, 1.0)
            n_waves = np.where(whole, np.ceil(tiles * splits / k.sms), np.maximum(tiles * splits / k.sms, 1.0))
            t_c = np.minimum(t_c, n_waves * 2 * tm * tn * (kk[g] / splits) / (peak[g] / k.sms))
        t_m = (m[g] * kk[g] + kk[g] * n[g] + m[g] * n[g]) * b[g] * s[g] / k.bandwidth
        out[g] = k.floor + np.maximum(t_c, t_m)
    gr = cls == "grouped"
    if gr.any():
        active = d.active.to_numpy(dtype=float)[gr] if "active" in d else b[gr]
        active = np.where(np.isfinite(active), active, b[gr])
        t_c = np.full(gr.sum(), np.inf)
        for tm, tn in (TILES if tile > 1 else ((1.0, 1.0),)):
            # each group's rows in whole tiles where its rows are known, else half a tile of padding per group
            col = f"padded{int(tm)}"
            padded = d[col].to_numpy(dtype=float)[gr] if col in d and tile > 1 else np.full(gr.sum(), np.nan)
            rows = np.where(np.isfinite(padded), padded / tm, m[gr] / tm + 0.5 * active * (tile > 1))
            tiles = rows * np.ceil(n[gr] / tn)
            t_c = np.minimum(t_c, np.ceil(tiles / k.sms) * 2 * tm * tn * kk[gr] / (peak[gr] / k.sms))
        t_m = (active * kk[gr] * n[gr] + m[gr] * (kk[gr] + n[gr])) * s[gr] / k.bandwidth
        out[gr] = k.floor + np.maximum(t_c, t_m)
    sp = cls == "spmm"
    if sp.any():
        nnz, w, r = (d[c].to_numpy(dtype=float)[sp] for c in ("L", "W", "R"))
        out[sp] = k.floor + (nnz * (4 + s[sp]) + nnz * w * s[sp] + 2 * r * w * s[sp]) / k.bandwidth
    return out


FITTED = ("index", "spmm", "norm", "scan")  # classes whose base is fitted per op group
MIN_FIT = 6  # distinct profiled sizes a group needs for its own base
FLOOR_BOUND = 0.1  # a group's largest byte time (at the measured bandwidth) under this share of its time ...
FLOOR_FLAT = 1.5  # ... and its times within this factor of each other: its calls took the floor, no base


WARP_VECTOR_BYTES = 512  # what one warp loads in one vector access: 32 lanes of 16 bytes


def spmm_passes(d: pd.DataFrame) -> np.ndarray:
    """A CSR SpMM's passes over each nonzero: its dense row's bytes in warp-wide vector loads
    (`WARP_VECTOR_BYTES`), each a dependent gather whatever part of the vector the row fills."""
    width = np.nan_to_num(d.W.to_numpy(dtype=float), nan=1.0) if "W" in d else np.ones(len(d))
    size = np.nan_to_num(d.itemsize.to_numpy(dtype=float), nan=4.0) if "itemsize" in d else np.full(len(d), 4.0)
    return np.maximum(np.ceil(width * size / WARP_VECTOR_BYTES), 1.0)


INDEX_32BIT = 2**31 - 1  # the most elements a CUDA kernel indexes with 32-bit offsets


NORM_WAVE = 0.5  # what a further wave of a norm's units over the SMs costs, in steps of the first wave's


def norm_steps(d: pd.DataFrame, sms: int) -> np.ndarray:
    """A norm's serial steps: one block's steps over its unit (`calls.block_steps`), as slow with a few units
    as with one per SM (most SMs idle), and each further wave of units over the SMs at `NORM_WAVE` of that
    (a block of 512 threads leaves room on its SM for more, whose latency-bound steps overlap its own)."""
    steps = np.nan_to_num(d.L.to_numpy(dtype=float), nan=0.0) if "L" in d else np.zeros(len(d))
    units = np.nan_to_num(d.R.to_numpy(dtype=float), nan=1.0) if "R" in d else np.ones(len(d))
    return steps * (1.0 + NORM_WAVE * np.maximum(units / max(sms, 1) - 1.0, 0.0))


def _terms(d: pd.DataFrame, l2: float = 0.0, sms: int = 0) -> np.ndarray:
    """The base's terms per call: 1 (the launch floor), bytes, indexed rows, a hub's elements, its
    chain, an index op's bytes again where its indexed elements (rows x width) pass 32-bit offsets (a
    kernel that does not split such an op indexes with 64-bit arithmetic, slower per element), and the
    share of the chain whose steps miss the cache: a chain walks its hub's rows one after another, each
    step as slow as the memory its row comes from, and of a call's bytes about half the L2 (the near
    of its two partitions) holds (`l2` its bytes; 0: every step in the chain term). A norm's rows are
    its serial steps over `sms` SMs (`norm_steps`)."""
    nbytes = np.nan_to_num(d["bytes"].to_numpy(dtype=float), nan=0.0)
    rows = np.nan_to_num(d.L.to_numpy(dtype=float), nan=0.0) if "L" in d else np.zeros(len(d))
    hub = np.nan_to_num(d.hub.to_numpy(dtype=float), nan=0.0) if "hub" in d else np.zeros(len(d))
    chain = np.nan_to_num(d.chain.to_numpy(dtype=float), nan=0.0) if "chain" in d else np.zeros(len(d))
    width = np.nan_to_num(d.W.to_numpy(dtype=float), nan=0.0) if "W" in d else np.zeros(len(d))
    rows = np.where(d.cls.to_numpy() == "spmm", rows * spmm_passes(d), rows)
    rows = np.where(d.cls.to_numpy() == "norm", norm_steps(d, sms), rows)  # a norm's rows: its serial steps
    index = d.cls.to_numpy() == "index"  # a SpMM's index arithmetic follows its index dtype, not its elements
    wide = np.where(index & (rows * width > INDEX_32BIT), nbytes, 0.0)
    hit = np.minimum(1.0, 0.5 * l2 / np.maximum(nbytes, 1.0)) if l2 > 0 else np.ones(len(d))
    return np.column_stack([np.ones(len(d)), nbytes, rows, hub, chain * hit, wide, chain * (1 - hit)])


def _splits(d: pd.DataFrame, k: Constants) -> np.ndarray:
    """The splits of K the base would allow each described GEMM: SMs over its output tiles (at the
    base's tile size), at most K / SPLIT_K_MIN, at least 1 (NaN shapes: 1)."""
    m, n, b, kk = (np.nan_to_num(d[c].to_numpy(dtype=float), nan=1.0) for c in ("M", "N", "B", "K"))
    t = float(k.tile) if k.tile > 1 else 1.0
    tiles = np.maximum(np.ceil(m / t) * np.ceil(n / t) * np.maximum(b, 1.0), 1.0)
    return np.clip(np.floor(k.sms / tiles), 1, np.maximum(np.floor(kk / SPLIT_K_MIN), 1))


def fitted_base(d: pd.DataFrame, k: Constants, bases: dict[str, list[float]]) -> np.ndarray:
    """`base_us`, with a group's fitted base where the profile fitted one (for a GEMM group: whether
    its K splits, `[1.0]` or `[0.0]`)."""
    free = _base_keys(d, _free(d.group.to_numpy(dtype=object)))
    is_gemm = d.cls.to_numpy() == "gemm"
    choice = [bases.get(f) or bases.get(f.replace("|odd", "", 1), [1.0, 1.0]) if c else [1.0, 1.0]
              for f, c in zip(free, is_gemm, strict=True)]
    split = np.array([c[0] > 0.5 for c in choice], dtype=bool)
    whole = np.array([(c[1] if len(c) > 1 else 1.0) > 0.5 for c in choice], dtype=bool)
    most = np.array([c[2] if len(c) > 2 else np.inf for c in choice], dtype=float)
    if is_gemm.any():  # a call that allows more splits of K than any its group's choice was learned on: K split
        split |= is_gemm & (_splits(d, k) > most)
    out = base_us(d, k, split, whole)
    if not bases:
        return out
    free = np.where(d.cls.to_numpy() == "gemm", "", free)
    rows = np.flatnonzero([f in bases for f in free])
    if len(rows):
        terms = _terms(d.iloc[rows], k.l2, k.sms)
        n = terms.shape[1]
        for f in pd.unique(free[rows]):
            at = rows[free[rows] == f]
            b = list(bases[f])
            coef = np.array((b + [0.0] * n)[:n])  # a fit of an older model has fewer terms
            if len(b) < n:  # ... and one chain, cached or not
                coef[MISSED] = coef[4]
            p = b[n] if len(b) > n else 1.0
            out[at] = _combine(terms[free[rows] == f], coef, p)
    return out


def fit_bases(d: pd.DataFrame, dur: np.ndarray, free: np.ndarray,
              constants: Constants | None = None) -> dict[str, list[float]]:
    """Per group without context of the index and sparse classes: non-negative coefficients of `_terms`
    (a + b*bytes + c*rows + d*hub + e*cached chain + f*bytes past 32-bit offsets + g*missed chain),
    least squares in relative error over its distinct profiled calls, then `[p]`: 1 where the terms
    add, `OVERLAP_P` where bytes and rows overlap."""
    out = {}
    cls = d.cls.to_numpy()
    k = constants or Constants()
    terms = _terms(d, k.l2, k.sms)
    # GEMM groups: split-K in the base or not, whole or fractional waves, whichever leaves the
    # smoothest correction (cuBLAS splits skinny GEMMs of some layouts and not others, and its choice
    # of tiles hides the wave quantization of some groups)
    for f in pd.unique(free[cls == "gemm"]):
        rows = np.flatnonzero(free == f)
        if len(rows) < MIN_FIT:
            continue
        sub = d.iloc[rows]
        x = sub[[f"c{j}" for j in range(NCOORDS)]].to_numpy(dtype=float)
        err = {}
        for split in (True, False):
            for whole in (True, False):
                r = np.log(dur[rows] / base_us(sub, k, np.full(len(rows), split), np.full(len(rows), whole)))
                err[split, whole] = Table(x, r, np.ones(len(rows))).loo_error()
        split, whole = min(err, key=err.get)
        # the most splits of K any call the choice was learned on allows: past them (a skinnier or deeper call
        # than any profiled) cuBLAS splits K
        out[str(f)] = [float(split), float(whole), float(_splits(sub, k).max())]
    for f in pd.unique(free[np.isin(cls, FITTED)]):
        rows = np.flatnonzero(free == f)
        if len(rows) < MIN_FIT:
            continue
        t, y = terms[rows], dur[rows]
        # a group whose every call took its launch floor (their times all within FLOOR_FLAT of each other, and
        # its largest call's bytes at the measured bandwidth a small share of its time) cannot tell what a byte
        # costs: a fitted slope would be noise, carried to calls a thousand times larger. The physical base
        # answers for it.
        if y.max() < FLOOR_FLAT * y.min() and (t[:, 1] / k.bandwidth / y).max() < FLOOR_BOUND:
            continue
        # the 64-bit term only where it predicts the group's left-out calls better: some kernels split an op
        # past 32-bit offsets into launches that keep 32-bit arithmetic, and there the term only fits noise
        if t[:, WIDE].any() and _loo_error(t, y) >= _loo_error(np.delete(t, WIDE, axis=1), y):
            t = t.copy()
            t[:, WIDE] = 0.0
        # the chain's missed steps a term of their own where the group's time follows its chain and the split
        # predicts the left-out calls better; else one cost per step, cached or not
        joined = t.copy()
        joined[:, 4] += joined[:, MISSED]
        joined[:, MISSED] = 0.0
        one = not (t[:, MISSED].any() and _nnls_relative(joined, y)[4] > 0
                   and _loo_error(t, y) < _loo_error(np.delete(joined, MISSED, axis=1), y))
        if one:
            t = joined
        coef = _nnls_relative(t, y)
        # a call's rows and bytes add (p = 1) or overlap (the slower sets the time: a gather of rows whose
        # latency hides their bytes up to some width), the overlap only where it leaves a clearly smoother correction
        x = d.iloc[rows][[f"c{j}" for j in range(NCOORDS)]].to_numpy(dtype=float)
        best, err = coef.tolist() + [1.0], Table(x, np.log(y / np.maximum(t @ coef, 0.05)), np.ones(len(y))).loo_error()
        if sum(bool(t[:, list(c)].any()) for c in RESOURCES) > 1:
            over = _fit_overlap(t, y, coef, OVERLAP_P)
            e = Table(x, np.log(y / _combine(t, over, OVERLAP_P)), np.ones(len(y))).loo_error()
            if e < OVERLAP_GAIN * err:
                best = over.tolist() + [OVERLAP_P]
        if one:  # the joined chain's cost for its missed steps too
            best[MISSED] = best[4]
        out[str(f)] = best
    return out


WIDE, MISSED = 5, 6  # the columns of `_terms` that hold the bytes past 32-bit offsets, the chain's missed steps
RESOURCES = ((1, 5), (2,))  # the terms of one resource: bytes (and the 64-bit bytes), rows; a hub's chain adds
OVERLAP_P = 4.0  # the p-norm over the resources of a group whose resources overlap (1: they add)
OVERLAP_GAIN = 0.9  # the overlapping form must cut the additive one's leave-one-out error by a tenth


def _combine(t: np.ndarray, coef: np.ndarray, p: float) -> np.ndarray:
    """The base of the terms `t` [n, 7]: the floor, the p-norm of the resources' times and the hub's chain."""
    parts = np.column_stack([(t[:, list(c)] * coef[list(c)]).sum(axis=1) for c in RESOURCES])
    hub = t[:, 3] * coef[3] + t[:, 4] * coef[4] + t[:, MISSED] * coef[MISSED]
    return np.maximum(coef[0] + (parts ** p).sum(axis=1) ** (1.0 / p) + hub, 0.05)


def _fit_overlap(t: np.ndarray, y: np.ndarray, start: np.ndarray, p: float) -> np.ndarray:
    """Non-negative coefficients of `_combine` with p-norm `p`, least squares in log error, from `start`."""
    from scipy.optimize import least_squares

    cols = np.flatnonzero(t.any(axis=0))
    scale = 1.0 / np.maximum((t[:, cols] / y[:, None]).max(axis=0), 1e-30)  # a term alone as slow as the slowest call
    z0 = np.log(np.maximum(start[cols] / scale, 1e-4))

    def res(z):
        c = np.zeros(t.shape[1])
        c[cols] = np.exp(z) * scale
        return np.log(_combine(t, c, p) / y)

    z = least_squares(res, z0, max_nfev=400).x
    out = np.zeros(t.shape[1])
    out[cols] = np.exp(z) * scale
    out[cols[np.exp(z) < 1e-6]] = 0.0  # a term the fit drove to nothing
    return out


def _nnls_relative(t: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Non-negative coefficients of the terms `t` [n, k] that fit the times `y` in relative error."""
    from scipy.optimize import nnls

    a = t / y[:, None]
    scale = np.maximum(np.abs(a).max(axis=0), 1e-30)
    coef, _ = nnls(a / scale, np.ones(len(y)), maxiter=200)
    return coef / scale


def _loo_error(t: np.ndarray, y: np.ndarray) -> float:
    """Mean |log error| of each call's time from the terms fitted on the others (leave one out)."""
    err = [abs(np.log(max(float(t[i] @ _nnls_relative(np.delete(t, i, axis=0), np.delete(y, i))), 0.05) / y[i]))
           for i in range(len(y))]
    return float(np.mean(err))


def _base_keys(d: pd.DataFrame, free: np.ndarray) -> np.ndarray:
    """The key of each described call's fitted base: its group without context; a norm's op, dtype and input
    layout (float32 weights beside bfloat16 activations run the same kernels, a channels-last input others)."""
    if "relaxed" not in d or not len(d):
        return free
    norm = np.flatnonzero(d.cls.to_numpy() == "norm")
    out = np.asarray(free, dtype=object).copy()
    relaxed = d.relaxed.to_numpy(dtype=object)
    for i in norm:
        parts = str(free[i]).split("|")  # norm|op|dtypes|layouts|scalars: the first tensor's layout
        out[i] = f"{relaxed[i]}|{parts[3][:1] if len(parts) > 3 else ''}"
    return out


def _has_fitted_base(d: pd.DataFrame, keys: np.ndarray, bases: dict) -> np.ndarray:
    """Whether each described call's base (of base key `keys`, `_base_keys`) is a fitted one: a GEMM's never is
    (its fit is a choice of splits)."""
    return pd.Series(keys).isin(list(bases)).to_numpy() & (d.cls.to_numpy(dtype=object) != "gemm")


def _free(groups: np.ndarray) -> np.ndarray:
    """The groups without their context (`calls.describe` ends a group with '|@context')."""
    return np.array([g.rsplit("|@", 1)[0] for g in groups], dtype=object)


def _query(keys: np.ndarray, tables: dict, x: np.ndarray, rows: np.ndarray,
           exact: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(residual, distance to the nearest profiled point) of the calls `rows` (a mask) in the table of
    their key (`exact`: see `Table.query`); NaN and inf where the key has no table."""
    r = np.full(len(keys), np.nan)
    dist = np.full(len(keys), np.inf)
    for key in pd.unique(keys[rows]):
        t = tables.get(key)
        if t is None:
            continue
        at = np.flatnonzero(rows & (keys == key))
        q, inverse = np.unique(x[at], axis=0, return_inverse=True)  # distinct queries once: a step repeats
        pr, dq = t.query(q, exact=exact)
        r[at] = pr[inverse.ravel()]
        dist[at] = dq[inverse.ravel()]
    return r, dist


# the formula modules of the cost registry whose memory-class ops stream their tensors once (maps,
# activations, optimizer updates), reduce them (per row or whole), or move data (copies, gathers,
# resampling, pooling windows)
_KIND_OF_MODULE = {"elementwise": "stream", "elementwise_extra": "stream", "activations": "stream",
                   "optimizers": "stream", "serving": "stream", "reductions": "reduce", "losses": "reduce",
                   "norms": "reduce", "indexing": "move", "indexing_data": "move", "copies": "move",
                   "resampling": "move", "pooling": "move"}
_MOVES = frozenset(("aten::copy_", "aten::clone", "aten::contiguous", "aten::_to_copy"))


@functools.lru_cache(maxsize=4096)
def memory_kind(name: str) -> str:
    """What a memory-class op does to its bytes, by its cost formula's family: `stream` (one pass, a map),
    `reduce`, `move` (copies, gathers, windows), or '' where the registry has no formula for it."""
    if name in _MOVES:
        return "move"
    if name.startswith("triton_poi_"):  # an Inductor pointwise kernel (its fused reductions, `per` and `red`,
        return "stream"                  # run faster per byte than the eager reductions the profile holds)
    from wlprof.cost.registry import formula_family

    return _KIND_OF_MODULE.get(formula_family(name) or "", "")


def _class_key(cls: np.ndarray, group: np.ndarray) -> np.ndarray:
    """Each call's class, and a memory-class call's kind beside it (`memory|stream`): the class
    level answers from the calls of the same kind where the profile holds them."""
    out = np.asarray(cls, dtype=object).copy()
    mem = np.flatnonzero(out == "memory")
    if len(mem):
        codes, groups = pd.factorize(np.asarray(group, dtype=object)[mem])
        kinds = [memory_kind(str(g).split("|", 2)[1]) if "|" in str(g) else "" for g in groups]
        keys = np.array(["memory|" + k if k else "memory" for k in kinds], dtype=object)
        out[mem] = keys[codes]
    return out


_BACKWARD = re.compile(r"_backward(_data)?$|_backward_")


@functools.lru_cache(maxsize=4096)
def is_backward(name: str) -> bool:
    """An autograd backward op, by ATen's naming (`convolution_backward`, `_softmax_backward_data`,
    `_thnn_fused_lstm_cell_backward_impl`); not an Inductor kernel named after the ops it fused."""
    return not name.startswith("triton_") and bool(_BACKWARD.search(name.split("::")[-1]))


def _op_of(group: str) -> str:
    """The op name of a group key (`class|op|...`)."""
    parts = str(group).split("|", 2)
    return parts[1] if len(parts) > 1 else ""


KERNEL_QUANTILE = 0.05  # of the profile's one-kernel calls' times (the sample below it): the least time a kernel takes
FORWARD = "|forward"  # the suffix of a class's (or kind's) table of its forward ops alone
# the kinds whose backward ops run as their forward ops do: a pointwise backward (gelu_backward,
# threshold_backward) is one pass of maps over its tensors, as its forward is
UNSHIFTED = ("memory|stream",)


def launch_extra(d: pd.DataFrame, k: Constants) -> np.ndarray:
    """The least time of each kernel a described call ran beyond those its base counts (its multi-tensor-apply
    launches, else one): the trace's count of its device activities (`kernels`) less those, times
    `Constants.kernel_us`; 0 where no count is known (a `--spec` step)."""
    if "kernels" not in d or not len(d):
        return np.zeros(len(d))
    ran = np.nan_to_num(d.kernels.to_numpy(dtype=float), nan=0.0)
    counted = np.nan_to_num(d.launches.to_numpy(dtype=float), nan=1.0) if "launches" in d else np.ones(len(d))
    return k.kernel_us * np.maximum(ran - np.maximum(counted, 1.0), 0.0)


def fit_backward(calls: pd.DataFrame, classes: dict[str, Table], constants: Constants) -> dict:
    """How much slower than a class's forward ops its backward ops run, for the class level to answer a
    backward op the profile holds nothing of. `calls`: the profile's distinct backward calls of the kinds that
    shift (not `UNSHIFTED`), with their base, the residual of their work over it (`rc`: their time less the
    least time of each kernel past their first), weight, class and kind;
    `classes`: the class tables, a class's (or kind's) forward ops' under `FORWARD`. Each backward op votes
    once (a batch norm's 96 profiled calls count as one op): the weighted mean of its calls' residuals less
    its kind's (else its class's) forward table at their base times, as `_class_query` answers there
    (`constants`: the floor, the bandwidth). Returns {"shift": {kind: the median of
    its ops' votes; for the memory ops of no known kind, where at least `MIN_VOTERS` ops voted}, "all": for the kinds that hold none, the median of every vote and one of no shift (a
    profile whose backward ops are of two kinds, one of them faster backward, must not shift the others by
    the mean of the two)}; {} where the profile holds no such op."""
    votes: dict[str, list[float]] = {}
    for _, g in calls.groupby(calls.group.map(_op_of), sort=False):
        kind, cls = str(g.kind.iloc[0]), str(g.cls.iloc[0])
        table = classes.get(kind + FORWARD) or classes.get(cls + FORWARD)
        if table is None:
            continue
        q, _ = _class_query(np.full(len(g), "t", dtype=object), {"t": table}, g.base.to_numpy(),
                            _launch_floor(g, constants), SCALAR_BYTES / constants.bandwidth, np.ones(len(g), dtype=bool))
        votes.setdefault(kind, []).append(float(np.average(g.rc.to_numpy() - q, weights=g.w.to_numpy())))
    if not votes:
        return {}
    every = [v for vs in votes.values() for v in vs] + [0.0]
    return {"shift": {k: round(float(np.median(v)), 5) for k, v in votes.items() if len(v) >= MIN_VOTERS or k != "memory"},
            "all": round(float(np.median(every)), 5)}


PHYSICAL = "physical|"  # the key prefix of a `Predictor.physical` table beside the relaxed ones
SCALAR_BYTES = 8  # a call that moves at most this many bytes (one scalar) is its launch alone
# backward ops the memory class's ops of no known kind (`memory_kind`) need for a shift of their own: they have
# nothing in common but their class, so one op's vote is that op's (an embedding bag's backward alone, 16x
# its forward class, would shift every other such op as much); a kind's ops do the same to their bytes, and one
# of them speaks for the others
MIN_VOTERS = 2


def _class_query(keys: np.ndarray, tables: dict, base: np.ndarray, floor: np.ndarray, slack: float,
                 rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`_query` of the class tables at the calls' base times, interpolated (a point at one base time holds other
    ops); a call that is its launch alone (its base within `SCALAR_BYTES` of its launches' `floor`: a scalar read
    back, a scalar written) is answered by its table's point at the floor itself, where it holds one: the
    profiled calls of no work to speak of, pooled."""
    r, dist = _query(keys, tables, _class_coords(base), rows, exact=False)
    bound = rows & (base <= floor + slack)
    tol = exact_distance(1)
    for key in pd.unique(keys[bound]):
        t = tables.get(key)
        if t is None:
            continue
        for f in np.unique(floor[bound & (keys == key)]):
            at = bound & (keys == key) & (floor == f)
            c = float(_class_coords(np.array([f]))[0, 0])
            pooled = t.pooled(c - tol, c + tol)
            if np.isfinite(pooled):
                r[at] = pooled
    return r, dist


CLASS_BIN = 1.0  # log2 units of base time: a class's table holds one point per op group in each such bin


def _class_table(calls: pd.DataFrame) -> Table:
    """A class's (or kind's) table of its distinct calls' residuals `rc` over their base times: one point per op group
    and bin of `CLASS_BIN` (the median of its calls there, at the weight of its surest call), so that an op profiled at
    many sizes or in many contexts counts as one op where it lies, and a call's nearest points are several ops',
    not one op's dense sweep."""
    x = _class_coords(calls.base.to_numpy())[:, 0]
    h = pd.DataFrame({"group": calls.group.to_numpy(dtype=object), "bin": np.round(x / CLASS_BIN), "x": x,
                      "r": calls.rc.to_numpy(dtype=float), "w": calls.w.to_numpy(dtype=float)})
    a = h.groupby(["group", "bin"], sort=False).agg(x=("x", "median"), r=("r", "median"), w=("w", "max"))
    return _table(a.x.to_numpy()[:, None], a.r.to_numpy(), a.w.to_numpy())


def _class_coords(base: np.ndarray) -> np.ndarray:
    return np.log2(np.maximum(base, 1e-3))[:, None]


@dataclass
class Predictor:
    """A fitted profile: residual tables per group, per relaxed group and per class."""

    constants: Constants
    groups: dict[str, Table]
    free: dict[str, Table]  # the groups without their context
    relaxed: dict[str, Table]
    classes: dict[str, Table]
    meta: dict = field(default_factory=dict)
    # per group without context (index, spmm ops): the fitted base's coefficients (`fit_bases`)
    bases: dict[str, list[float]] = field(default_factory=dict)
    # per group (with context): how its residual differs from its op's calls in other contexts (`fit_shifts`)
    shifts: dict[str, Table] = field(default_factory=dict)
    # how much slower backward ops run than their class's forward ops (`fit_backward`), and the classes and kinds
    # whose profiled calls are all backward ("only")
    backward: dict = field(default_factory=dict)
    # per relaxed group whose calls had fitted bases (`bases`): the same points' residuals over the physical base
    # (`base_us`), for the op's calls near them whose own group has no fitted base (an ingested scatter, whose
    # graph the trace does not know): their base is the physical one, and so must be the correction they take
    physical: dict[str, Table] = field(default_factory=dict)

    def predict(self, ops: pd.DataFrame, described: pd.DataFrame | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(predicted kernel time in us, index into SOURCES) of every op call (row) of `ops`.

        A call's own context (workload and dispatch) answers first, unless the same op's calls of
        other contexts lie closer to it by more than `CONTEXT_MARGIN`; a call whose op the profile
        holds only in another floating dtype is answered from that dtype (`transfer_dtype`). Sets
        `answered_dtype` on `described` (where given): the profiled dtype that answered each call, and
        `backward_shift`: whether the class level answered it as a backward op (its class's forward ops and the
        profile's backward shift)."""
        d = describe(ops) if described is None else described
        pred, src, shifted = self._predict(d)
        answered = d.dtype.to_numpy(dtype=object).copy()
        # only where the call's dtype holds nothing of its op: an op profiled in its dtype (other layouts or
        # scalars, `op`) answers from its own dtype
        todo = np.isin(src, [SOURCES.index(s) for s in ("class", "base")]) & np.isin(answered, FLOAT_DTYPES)
        own = d.dtype.to_numpy(dtype=object)
        profiled = self._profiled_dtypes()
        tf = d.tf32.to_numpy(dtype=bool) if "tf32" in d else np.zeros(len(d), dtype=bool)
        for t, on_tf32 in dict.fromkeys(zip(own[todo].tolist(), tf[todo].tolist(), strict=True)):
            at = np.flatnonzero(todo & (own == t) & (tf == on_tf32))
            nearest = _nearest_dtypes(str(t), profiled)
            if on_tf32:  # the tensor cores' dtypes first, then float32 (where TF32 calls were profiled)
                nearest = [x for x in nearest if _size(x) == 2] + [x for x in nearest if _size(x) != 2]
            for dst in nearest:
                moved = transfer_dtype(d.iloc[at], dst)
                p2, s2, _ = self._predict(moved)
                hit = s2 <= SOURCES.index("op")  # its op in that dtype, at least: nearer than the class
                pred[at[hit]], src[at[hit]] = p2[hit], SOURCES.index("other dtype")
                shifted[at[hit]] = False
                answered[at[hit]] = dst
                at = at[~hit]
                if not len(at):
                    break
        if described is not None:
            described["answered_dtype"] = answered
            described["backward_shift"] = shifted
        return pred, src

    def _profiled_dtypes(self) -> list[str]:
        """The floating dtypes the profile's groups hold, the most profiled first."""
        count: dict[str, int] = {}
        for g in self.free:
            for t in _dtype_field(g)[1]:
                if t in FLOAT_DTYPES:
                    count[t] = count.get(t, 0) + 1
        return sorted(count, key=lambda t: (-count[t], FLOAT_DTYPES.index(t)))

    def transfer_notes(self, d: pd.DataFrame) -> list[str]:
        """One line per (dtype, profiled dtype) pair that `predict` transferred in `d` (described and
        predicted): which dtype answered, and the ceilings that rescale its times."""
        if "answered_dtype" not in d:
            return []
        own, got = d.dtype.to_numpy(dtype=object), d.answered_dtype.to_numpy(dtype=object)
        moved = own != got
        if "tf32" in d:  # float32 calls that ran in TF32 are their own line, rebased on TF32's peak
            own = np.where(d.tf32.to_numpy(dtype=bool), "tf32", own)
        out = []
        for t, a in sorted({(str(x), str(y)) for x, y in zip(own[moved], got[moved], strict=True)}):
            n = int(((own == t) & (got == a) & moved).sum())
            mt, ma = self.constants.matrix.get(t), self.constants.matrix.get(a)
            peaks = (f"{t}'s matrix peak in the profile's ceilings ({_tflops(mt)} TFLOP/s against {a}'s {_tflops(ma)})"
                     if mt and ma else f"the float32 matrix peak (the ceilings hold none for {t if not mt else a})")
            their = "their ops" if n != 1 else "its op"
            if t == "tf32":
                out.append(f"{n} float32 call{'s' if n != 1 else ''} ran in TF32 (placed under compute:tf32), which "
                           f"the profile holds none of; answered by {a}'s tensor-core calls of the same op and "
                           f"layouts, their times rebased on {peaks} and on 4 against {_size(a)} bytes per element.")
                continue
            out.append(f"{n} {t} call{'s' if n != 1 else ''}: the profile holds {their} in {a} only; answered "
                       f"by {a}'s calls of the same op and layouts (GEMMs at the same shapes, memory-bound ops "
                       f"at the same bytes), their times rebased on {peaks} and on {_size(t)} against "
                       f"{_size(a)} bytes per element.")
        return out

    def backward_notes(self, d: pd.DataFrame, ops: pd.Series | None = None) -> list[str]:
        """One line for the calls of `d` (described and predicted) that the class level answered as backward
        ops: which ops, and how much slower than their class's forward ops the profile's backward ops of their
        kind run. `ops`: the calls' op names (default: from their groups)."""
        if "backward_shift" not in d or not d.backward_shift.to_numpy(dtype=bool).any():
            return []
        at = d.backward_shift.to_numpy(dtype=bool)
        names = (ops.to_numpy(dtype=object) if ops is not None else d.group.map(_op_of).to_numpy(dtype=object))[at]
        kinds = _class_key(d.cls.to_numpy(), d.group.to_numpy())[at]
        cls = d.cls.to_numpy(dtype=object)[at]
        delta = self._backward_shift(kinds, cls)
        per = self.backward.get("shift", {})
        # a kind no profiled backward op is of takes every kind's shift: say so
        kinds = np.array([k if k in per or c in per else f"{k} (all kinds')" for k, c in zip(kinds, cls, strict=True)],
                         dtype=object)
        shown = sorted({(str(k), float(x)) for k, x in zip(kinds, delta, strict=True)})
        ops_text = ", ".join(pd.Series(names).value_counts().index[:3]) + (", ..." if len(set(names)) > 3 else "")
        n = int(at.sum())
        return [f"{n} call{'s' if n != 1 else ''} of backward ops the profile holds nothing of ({ops_text}): "
                "answered by the forward ops of their class, the work times what the profile's backward ops of "
                "that kind take beyond those (" + ", ".join(f"{k} x{math.exp(x):.2f}" for k, x in shown) + "), "
                "plus the least time of each kernel they ran past their first"]

    def _predict(self, d: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`predict` of described calls, each in its own dtype, and which the class level answered with the
        backward shift."""
        base = fitted_base(d, self.constants, self.bases)
        coords = with_residency(d, self.constants)[[f"c{j}" for j in range(NCOORDS)]].to_numpy(dtype=float)
        groups = d.group.to_numpy(dtype=object)
        free = _free(groups)
        r_g, dist_g = _query(groups, self.groups, coords, np.ones(len(d), dtype=bool))
        r_f, dist_f = _query(free, self.free, coords, np.ones(len(d), dtype=bool))
        # an odd-width GEMM no odd widths of its op and layout answer: odd widths of other layouts (the relaxed
        # group's), else its aligned group's calls
        relaxed = d.relaxed.to_numpy(dtype=object)
        odd = ~np.isfinite(dist_g) & ~np.isfinite(dist_f) & np.array(
            ["|odd" in g and r not in self.relaxed for g, r in zip(groups, relaxed, strict=True)], dtype=bool)
        if odd.any():
            aligned = np.array([g.replace("|odd", "", 1) for g in groups], dtype=object)
            for keys, tables, rr, dd in ((aligned, self.groups, r_g, dist_g), (_free(aligned), self.free, r_f, dist_f)):
                ra, da = _query(keys, tables, coords, odd)
                rr[odd], dd[odd] = ra[odd], da[odd]
        # its own context's calls answer where they lie near it, unless it is a GEMM whose time its FLOPs
        # decide (there the context, what the L2 holds around it, matters little and the nearest calls of
        # any context answer best); else where no other context's calls lie nearer by CONTEXT_MARGIN
        near_own = (dist_g <= NEAR * math.sqrt(NCOORDS)) & ~_compute_bound(d, base, self.constants)
        margin = np.where(_flop_bound(d, self.constants), CONTEXT_MARGIN, MEMORY_CONTEXT_MARGIN)
        own = np.isfinite(dist_g) & (near_own | ~(dist_f + margin < dist_g))
        other = ~own & np.isfinite(dist_f)
        if self.shifts and other.any():  # what the call's own context adds to the other contexts' time
            r_s, _ = _query(groups, self.shifts, coords, other)
            r_f = np.where(other & np.isfinite(r_s), r_f + np.nan_to_num(r_s), r_f)
        r = np.where(own, r_g, np.where(other, r_f, np.nan))
        src = np.full(len(d), len(SOURCES) - 1)
        same = dist_g[own] <= exact_distance(coords.shape[1])
        src[own] = np.where(same, 0, np.where(dist_g[own] <= NEAR * math.sqrt(NCOORDS), 1, 2))
        src[other] = 3
        todo = ~(own | other)
        # its op's other layouts and scalars answer where they lie within RELAXED_NEAR of it; a GEMM, compute or
        # memory-class call they lie farther from is answered by its class's calls first (a memory call's
        # kind's), at its own base time, and by them only where its class holds none
        near_first = np.isin(d.cls.to_numpy(dtype=object), NEAR_FIRST)
        kinds = _class_key(d.cls.to_numpy(), d.group.to_numpy())
        # the class level: its class's correction at its base, plus the least time of each kernel it ran past its
        # first; a backward op (of a kind that shifts) by its class's forward ops and what the profile's backward
        # ops take beyond those
        extra = launch_extra(d, self.constants)
        floor = _launch_floor(d, self.constants)
        back = self._backward_rows(groups, kinds) & todo
        kind_keys, kind_shift = self._class_keys(kinds, back)
        cls_keys, cls_shift = self._class_keys(d.cls.to_numpy(dtype=object), back)
        shifted = np.zeros(len(d), dtype=bool)
        # a call whose base is physical (its group has no fitted base: an ingested scatter, whose graph the trace
        # does not know) takes its op's correction over the physical base where its op's profiled calls, whose
        # bases were fitted, lie within RELAXED_NEAR of it; farther, their correction over their fitted bases
        # (about none: those bases fit them), not a contention learned at other sizes
        op_keys, op_tables = relaxed, self.relaxed
        if self.physical and todo.any():
            phys = todo & ~_has_fitted_base(d, _base_keys(d, free), self.bases) & pd.Series(relaxed).isin(
                list(self.physical)).to_numpy()
            if phys.any():
                op_keys = np.where(phys, PHYSICAL + relaxed.astype(str), relaxed).astype(object)
                op_tables = {**self.relaxed, **{PHYSICAL + k: t for k, t in self.physical.items()}}
        for level, keys, tables, x, lim, only, sh in (
                ("relaxed", op_keys, op_tables, coords, RELAXED_NEAR, None, None),
                ("class", kind_keys, self.classes, None, np.inf, near_first, kind_shift),
                ("relaxed", relaxed, self.relaxed, coords, np.inf, None, None),
                ("class", cls_keys, self.classes, None, np.inf, None, cls_shift)):
            ask = todo if only is None else todo & only
            rr, dd = (_query(keys, tables, x, ask) if level != "class" else
                      _class_query(keys, tables, base, floor, SCALAR_BYTES / self.constants.bandwidth, ask))
            hit = ask & np.isfinite(dd) & (dd <= lim)
            r[hit] = rr[hit]
            src[hit] = SOURCES.index({"relaxed": "op", "class": "class"}[level])
            if sh is not None:
                shifted[hit] = sh[hit]
            todo &= ~hit
        r = np.where(np.isnan(r), 0.0, r)
        if shifted.any():  # the backward shift scales the work, not the launches past its first kernel
            r[shifted] += self._backward_shift(kinds[shifted], d.cls.to_numpy(dtype=object)[shifted])
        at_class = np.isin(src, (SOURCES.index("class"), SOURCES.index("base")))
        pred = base * np.exp(r) + np.where(at_class, extra, 0.0)
        return np.maximum(pred, self._stream_floor(d)), src, shifted

    def _backward_rows(self, groups: np.ndarray, kinds: np.ndarray) -> np.ndarray:
        """The calls of backward ops whose kind shifts, where the profile learned a backward shift."""
        if not self.backward or not len(groups):
            return np.zeros(len(groups), dtype=bool)
        ops = pd.Series(groups).map(_op_of)
        codes, names = pd.factorize(ops)
        back = np.array([is_backward(str(n)) for n in names], dtype=bool)[codes] if len(names) else np.zeros(0, bool)
        return back & ~np.isin(kinds, UNSHIFTED)

    def _class_keys(self, keys: np.ndarray, back: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(the class table each call asks, whether its answer takes the backward shift): a backward call
        (`back`) asks its key's forward table where the key holds forward and backward ops, and takes the shift;
        where it holds backward ops only, it asks the key's table as it is, without the shift; else (its key holds
        forward ops only) the key's table, with the shift."""
        keys = np.asarray(keys, dtype=object).copy()
        shift = back.copy()
        if not back.any():
            return keys, shift
        only = set(self.backward.get("only", ()))
        for k in pd.unique(keys[back]):
            at = back & (keys == k)
            if f"{k}{FORWARD}" in self.classes:
                keys[at] = f"{k}{FORWARD}"
            elif k in only:
                shift[at] = False
        return keys, shift

    def _backward_shift(self, kinds: np.ndarray, cls: np.ndarray) -> np.ndarray:
        """The backward shift of each call's kind (else its class's, else every backward op's median)."""
        per = self.backward.get("shift", {})
        every = float(self.backward.get("all", 0.0))
        return np.array([per.get(str(k), per.get(str(c), every)) for k, c in zip(kinds, cls, strict=True)], dtype=float)

    def _stream_floor(self, d: pd.DataFrame) -> np.ndarray:
        """The least time of a GEMM whose operands the L2 cannot hold (more than `STREAM_L2` times its
        bytes: read over and over, they miss it): its compulsory bytes at the memory's measured read
        bandwidth; of a copy past the L2, its bytes at the fastest measured memory bandwidth (0 elsewhere,
        or where the profile's ceilings hold no read bandwidth or L2 size). Neighbours whose operands
        stayed in the L2 must not carry a faster time to it."""
        k = self.constants
        out = np.zeros(len(d))
        if not (k.read > 0 and k.l2 > 0) or not len(d):
            return out
        nbytes = d.bytes.to_numpy(dtype=float).copy()
        gr = d.cls.to_numpy(dtype=object) == "grouped"
        if gr.any() and "active" in d:
            # a grouped GEMM reads the weights of its active groups only: an empty expert's stay in memory
            m, kk, n, b, s, active = (d[c].to_numpy(dtype=float)[gr] for c in ("M", "K", "N", "B", "itemsize", "active"))
            active = np.where(np.isfinite(active), active, b)
            nbytes[gr] = (active * kk * n + m * (kk + n)) * s
        big = np.isin(d.cls.to_numpy(dtype=object), ("gemm", "grouped")) & (np.nan_to_num(nbytes) > STREAM_L2 * k.l2)
        out[big] = nbytes[big] / k.read
        # a copy whose bytes the L2 cannot hold moves them at memory's rate at best (the fastest of its measured
        # read, write and copy bandwidths): the L2-resident copies of its group must not carry their rate to it
        moves = np.zeros(len(d), dtype=bool)
        if "group" in d:  # by each distinct group's op, once
            codes, groups = pd.factorize(d.group.to_numpy(dtype=object))
            moves = np.array([_op_of(g) in _MOVES for g in groups], dtype=bool)[codes]
        mem = moves & (d.cls.to_numpy(dtype=object) == "memory") & (np.nan_to_num(nbytes) > STREAM_L2 * k.l2)
        out[mem] = nbytes[mem] / max(k.read, k.write, k.bandwidth)
        return out

    def sources(self, src: np.ndarray) -> dict[str, float]:
        return {s: float((src == i).mean()) if len(src) else float("nan") for i, s in enumerate(SOURCES)}

    # -------------------------------------------------------------- persistence

    def to_dict(self) -> dict:
        def tables(ts):  # coordinates are log2 sizes, residuals logs: 5 decimals hold them
            return {k: {"x": np.round(t.x, DECIMALS).tolist(), "r": np.round(t.r, 5).tolist(),
                        "w": np.round(t.w, 3).tolist()} for k, t in ts.items()}

        return {"constants": self.constants.to_dict(), "groups": tables(self.groups), "free": tables(self.free),
                "relaxed": tables(self.relaxed), "classes": tables(self.classes), "meta": self.meta,
                "bases": self.bases, "shifts": tables(self.shifts), "backward": self.backward,
                "physical": tables(self.physical)}

    @classmethod
    def from_dict(cls, d: dict) -> Predictor:
        def tables(ts):
            return {k: Table(np.array(v["x"], dtype=float), np.array(v["r"]), np.array(v["w"])) for k, v in ts.items()}

        return cls(Constants.from_dict(d["constants"]), tables(d["groups"]), tables(d["free"]),
                   tables(d["relaxed"]), tables(d["classes"]), d.get("meta", {}), d.get("bases", {}),
                   tables(d.get("shifts", {})), d.get("backward", {}), tables(d.get("physical", {})))


STREAM_L2 = 1.0  # a GEMM moving more than this many times the L2's bytes streams them from memory
# a memory-bound op repeated over the same tensors finds them in the L2 while they take up to about this
# share of it (its two halves, each near to half the SMs, hold less at full speed than the whole)
L2_RESIDENT = 0.7
RESIDENCY_JUMP = 4.0  # log2 units: how far apart the two sides of the L2's edge lie for the neighbours


def _compute_bound(d: pd.DataFrame, base: np.ndarray, k: Constants) -> np.ndarray:
    """GEMM calls whose base time is at least twice their compulsory bytes' time at the memory's bandwidth."""
    gemm = np.isin(d.cls.to_numpy(dtype=object), ("gemm", "grouped"))
    t_m = np.nan_to_num(d["bytes"].to_numpy(dtype=float), nan=0.0) / k.bandwidth
    return gemm & (base - k.floor >= 2.0 * t_m)


def _flop_bound(d: pd.DataFrame, k: Constants) -> np.ndarray:
    """GEMM calls whose FLOPs at the dtype's matrix peak take at least as long as their compulsory bytes at the
    memory's bandwidth (their intensity at or past the ridge), whatever tiles and waves a kernel would run."""
    gemm = np.isin(d.cls.to_numpy(dtype=object), ("gemm", "grouped"))
    if not gemm.any():
        return gemm
    peak = _matrix_peak(d, k)
    t_c = np.nan_to_num(d.flops.to_numpy(dtype=float), nan=0.0) / np.where(peak > 0, peak, np.inf)
    t_m = np.nan_to_num(d["bytes"].to_numpy(dtype=float), nan=0.0) / k.bandwidth
    return gemm & (t_c >= t_m)


def with_residency(d: pd.DataFrame, k: Constants) -> pd.DataFrame:
    """`d` with each memory-class call's size coordinate moved by `RESIDENCY_JUMP` where its bytes pass
    `L2_RESIDENT` of the L2: its time per byte falls from the L2's rate to memory's within a factor of two
    of size, so a call on one side of that edge is interpolated from its own side's profiled calls. So is a
    scan's (its extent): each of its dependent steps waits on memory, not the L2, past that edge."""
    if not (k.l2 > 0) or not len(d):
        return d
    past = np.isin(d.cls.to_numpy(dtype=object), ("memory", "scan")) & (
        np.nan_to_num(d["bytes"].to_numpy(dtype=float)) > L2_RESIDENT * k.l2)
    if not past.any():
        return d
    d = d.copy()
    d["c0"] = d.c0.to_numpy(dtype=float) + np.where(past, RESIDENCY_JUMP, 0.0)
    return d

FLOAT_DTYPES = ("bfloat16", "float16", "float32", "float64")  # the dtypes one can answer for another


def _tflops(flop_per_us: float) -> str:
    """A peak in TFLOP/s as a note shows it: whole above 10 (a GPU's), two significant digits below (a CPU's)."""
    v = flop_per_us / 1e6
    return f"{v:,.0f}" if v >= 10 else f"{v:.2g}"


def _size(dtype: str) -> int:
    return {"bfloat16": 2, "float16": 2, "float32": 4, "float64": 8}.get(dtype, 4)


def _nearest_dtypes(dtype: str, profiled: list[str]) -> list[str]:
    """The profiled dtypes to answer `dtype` from: those of its element size first (a 16-bit float for
    another: the same bytes, the same matrix unit), then by how far their sizes lie from it."""
    return sorted((t for t in profiled if t != dtype), key=lambda t: abs(math.log2(_size(t) / _size(dtype))))


def _dtype_field(key: str) -> tuple[int, list[str]]:
    """(position, dtypes) of the field of a group key that lists its dtypes; (-1, []) where none does."""
    from wlprof.cost.dtypes import FLOATING

    for i, part in enumerate(key.split("|")):
        names = part.split(",")
        if part and all(n in FLOATING or n in INDEX_DTYPES for n in names) and any(n in FLOATING for n in names):
            return i, names
    return -1, []


INDEX_DTYPES = frozenset(("int64", "int32", "int16", "int8", "uint8", "bool"))


def _swap_dtype(key: str, src: str, dst: str) -> str:
    """A group key with the dtype `src` in its dtype field replaced by `dst`."""
    i, names = _dtype_field(key)
    if i < 0 or src not in names:
        return key
    parts = key.split("|")
    parts[i] = ",".join(sorted({dst if n == src else n for n in names}))
    return "|".join(parts)


def transfer_dtype(d: pd.DataFrame, dst: str) -> pd.DataFrame:
    """Described calls (`calls.describe`) re-keyed to the groups of the profiled dtype `dst`, for
    `predict` to answer them from: their groups name `dst`, and the coordinates that count elements
    count them at `dst`'s element size where the bytes, not the elements, decide the time (a memory
    op's sizes, an index or sparse op's row width). Their own dtype, element size, bytes and FLOPs
    stay: the base time of each call is its own (its dtype's matrix peak, its bytes)."""
    out = d.copy()
    own = out.dtype.to_numpy(dtype=object)
    # a TF32 call is answered by the tensor-core calls of `dst` as they are (its tag names its own dtype's only)
    untag = [g.removesuffix(TF32_TAG) for g in out.group.to_numpy(dtype=object)]
    out["group"] = [_swap_dtype(g, t, dst) for g, t in zip(untag, own, strict=True)]
    untag = [g.removesuffix(TF32_TAG) for g in out.relaxed.to_numpy(dtype=object)]
    out["relaxed"] = [_swap_dtype(g, t, dst) for g, t in zip(untag, own, strict=True)]
    shift = np.log2(np.array([_size(t) for t in own], dtype=float) / _size(dst))
    cls = out.cls.to_numpy()
    mem = np.isin(cls, ("norm", "memory"))
    topk = np.array(["|aten::topk|" in g for g in out.group.to_numpy(dtype=object)], dtype=bool)
    lists = np.array(["|list" in g for g in out.group.to_numpy(dtype=object)], dtype=bool)
    for j in (0, 1, 2):
        c = out[f"c{j}"].to_numpy(dtype=float).copy()
        m = mem & ~lists if j == 2 else mem  # a tensor list's third coordinate counts tensors, not elements
        c[m] = np.where(c[m] > 0, c[m] + shift[m], c[m])
        if j == 1:
            wide = np.isin(cls, ("index", "spmm"))
            c[wide] = c[wide] + shift[wide]
        out[f"c{j}"] = c
    c3 = out["c3"].to_numpy(dtype=float).copy()  # a size's alignment moves with its bytes (not topk's k)
    al = mem & ~topk
    c3[al] = np.clip(c3[al] + 2.0 * shift[al] / ALIGN_BITS, 0.0, 2.0)
    out["c3"] = c3
    return out


SHIFT_CLASSES = ("gemm",)  # classes whose context shifts are fitted (a GEMM's operands hot or cold in the cache)
SHIFT_MIN = 6  # distinct profiled calls a context needs (in it and near another's) for a shift of its own


def _table(x: np.ndarray, r: np.ndarray, w: np.ndarray) -> Table:
    """A residual table of points x [n, d]: the points at the same coordinates one (their weighted mean)."""
    frame = pd.DataFrame(x).assign(r=r * w, w=w)
    agg = frame.groupby(list(range(x.shape[1])), sort=False).sum()
    xs = np.array(agg.index.to_list(), dtype=float).reshape(len(agg), x.shape[1])
    return Table(xs, (agg.r / agg.w).to_numpy(), agg.w.to_numpy())


def fit_shifts(free: np.ndarray, group: np.ndarray, x: np.ndarray, r: np.ndarray,
               w: np.ndarray) -> dict[str, Table]:
    """Per GEMM group (an op in one context) whose op was profiled in other contexts too: how its calls'
    residuals differ from the other contexts' at the same coordinates (a call inside an MoE loop,
    its expert's weights not yet in the cache, against the same GEMM run back to back in a grid),
    added where `other context` answers one of its calls. Each context's differences d (its calls'
    residuals less the other contexts' interpolated to them, where those lie within `NEAR`) give
    nothing, their weighted median, or a table of d over the coordinates, whichever predicts the
    left-out calls' d best (mean |error|); nothing where the context has fewer than `SHIFT_MIN`."""
    out = {}
    for f in pd.unique(free):
        if str(f).split("|", 1)[0] not in SHIFT_CLASSES:
            continue
        at = np.flatnonzero(free == f)
        ctx = group[at]
        if len(pd.unique(ctx)) < 2:
            continue
        for g in pd.unique(ctx):
            mine, rest = at[ctx == g], at[ctx != g]
            if len(mine) < SHIFT_MIN:
                continue
            own = _table(x[mine], r[mine], w[mine])
            pr, dist = _table(x[rest], r[rest], w[rest]).query(own.x)
            near = dist <= NEAR * math.sqrt(NCOORDS)
            if near.sum() < SHIFT_MIN:
                continue
            d, xw, ww = own.r[near] - pr[near], own.x[near], own.w[near]
            err = {"none": float(np.mean(np.abs(d)))}
            loo = [abs(d[i] - _wmedian(np.delete(d, i), np.delete(ww, i))) for i in range(len(d))]
            err["median"] = float(np.mean(loo))
            t = Table(xw, d, ww)
            err["table"] = t.loo_error() if len(t.dims) else np.inf
            best = min(err, key=err.get)
            if best == "median":
                out[str(g)] = Table(xw, np.full(len(d), _wmedian(d, ww)), ww)
            elif best == "table":
                out[str(g)] = t
    return out


def _wmedian(v: np.ndarray, w: np.ndarray) -> float:
    """The weighted median of v."""
    o = np.argsort(v)
    c = np.cumsum(w[o])
    return float(v[o][np.searchsorted(c, 0.5 * c[-1])])


def distinct_calls(ops: pd.DataFrame, d: pd.DataFrame, point_cols=("run_id", "point")) -> pd.DataFrame:
    """The profiled calls reduced to one row per distinct call in each sweep point: the median of
    its samples, their spread ((p90 - p10) / median) and their count."""
    coords = [f"c{j}" for j in range(NCOORDS)]
    frame = d[["cls", "group", "relaxed", *coords]].copy()
    frame["dur"] = ops.dur_us.to_numpy(dtype=float)
    for c in point_cols:
        frame[c] = ops[c].to_numpy() if c in ops else ""
    keys = ["group", *coords, *point_cols]
    frame["pos"] = np.arange(len(frame))
    g = frame.groupby(keys, sort=False, dropna=False)
    agg = g.agg(relaxed=("relaxed", "first"), cls=("cls", "first"), dur=("dur", "median"), n=("dur", "size"),
                first=("pos", "first"))
    q = g.dur.quantile([0.1, 0.9]).unstack().reindex(agg.index)  # unstack sorts the keys: back to agg's order
    agg["p10"], agg["p90"] = q[0.1].to_numpy(), q[0.9].to_numpy()
    agg = agg.reset_index()
    agg["spread"] = (agg.p90 - agg.p10) / agg.dur
    return agg


def fit(ops: pd.DataFrame, constants: Constants | None = None, meta: dict | None = None) -> Predictor:
    """Fit a predictor on profiled op calls (an ops table: `wlprof.load(profile, table='ops')`).

    Calls with no kernel time are left out; a call's samples in one sweep point are one
    point of its table (their median), down-weighted when they spread (`NOISY_SPREAD`).
    """
    ops = ops[pd.to_numeric(ops.dur_us, errors="coerce") > 0]
    if ops.empty:
        raise ValueError("the profile has no op call with a kernel time")
    if constants is None:
        constants = Constants()
    ops = ops.reset_index(drop=True)
    if not constants.kernel > 0 and "kernel_count" in ops:  # the least time one kernel takes, as measured here
        one = pd.to_numeric(ops.kernel_count, errors="coerce").to_numpy() == 1
        if one.any():  # a measured time (no interpolation), in float32 as a profile ships its times (`compact`)
            times = ops.dur_us.to_numpy(dtype=np.float32)[one]
            kernel = float(np.quantile(times, KERNEL_QUANTILE, method="lower"))
            constants = dataclasses.replace(constants, kernel=round(kernel, 4))
    d = describe(ops)
    sized = ~d.lists_unrecorded.to_numpy(dtype=bool)  # a tensor list recorded as [] has no size to learn
    if not sized.all():
        ops, d = ops[sized].reset_index(drop=True), d[sized].reset_index(drop=True)
        if ops.empty:
            raise ValueError("the profile has no op call with a kernel time and recorded shapes")
    d = with_residency(d, constants)
    calls = distinct_calls(ops, d)
    first = calls["first"].to_numpy(dtype=int)
    firsts = d.iloc[first].reset_index(drop=True)
    base_keys = _base_keys(firsts, _free(calls.group.to_numpy(dtype=object)))
    bases = fit_bases(firsts, calls.dur.to_numpy(dtype=float), base_keys, constants)
    calls["base"] = fitted_base(firsts, constants, bases)
    calls["r"] = np.log(calls.dur.to_numpy() / calls.base.to_numpy())
    calls["w"] = np.where(calls.spread > NOISY_SPREAD, NOISY_WEIGHT, 1.0) * np.sqrt(calls.n.clip(upper=16))
    coords = [f"c{j}" for j in range(NCOORDS)]

    def tables(key: str, x_of, rows: pd.DataFrame = calls, res: str = "r") -> dict[str, Table]:
        out = {}
        for k, g in rows.groupby(key, sort=False):
            out[str(k)] = _table(x_of(g), g[res].to_numpy(), g.w.to_numpy())
        return out

    calls["free"] = _free(calls.group.to_numpy(dtype=object))
    groups = tables("group", lambda g: g[coords].to_numpy(dtype=float))
    free = tables("free", lambda g: g[coords].to_numpy(dtype=float))
    shifts = fit_shifts(calls.free.to_numpy(dtype=object), calls.group.to_numpy(dtype=object),
                        calls[coords].to_numpy(dtype=float), calls.r.to_numpy(dtype=float), calls.w.to_numpy(dtype=float))
    relaxed = tables("relaxed", lambda g: g[coords].to_numpy(dtype=float))
    held = calls.relaxed[_has_fitted_base(firsts, base_keys, bases)].unique()
    physical = {}
    if len(held):
        calls["r_phys"] = np.log(calls.dur.to_numpy() / fitted_base(firsts, constants, {}))
        physical = tables("relaxed", lambda g: g[coords].to_numpy(dtype=float), calls[calls.relaxed.isin(held)],
                          res="r_phys")
    # the class level answers ops the profile holds nothing of: their base time plus the least time of each kernel
    # they ran past their first (an embedding's backward sorts its indices in some 29 kernels); its tables hold
    # what the profile's calls took beyond their own such kernels
    extra = launch_extra(firsts, constants)
    dur = calls.dur.to_numpy()
    work = np.where(extra > 0, np.maximum(dur - extra, constants.kernel_us), dur)
    calls["rc"] = np.log(work / calls.base.to_numpy())

    def class_tables(key: str, rows: pd.DataFrame = calls) -> dict[str, Table]:
        return {str(k): _class_table(g) for k, g in rows.groupby(key, sort=False)}

    classes = class_tables("cls")
    calls["kind"] = _class_key(calls.cls.to_numpy(), calls.group.to_numpy())
    classes.update(class_tables("kind", calls[calls.kind != calls.cls]))
    # backward ops: each class and kind that holds them beside forward ops also has a table of its forward
    # ops alone, and the backward ops' shift over those (`fit_backward`)
    back = np.array([is_backward(_op_of(g)) for g in calls.group.to_numpy(dtype=object)], dtype=bool)
    calls["backward"] = back
    mixed, only = set(), set()
    for col in ("cls", "kind"):
        held = calls.groupby(col, sort=False).backward.agg(["any", "all"])
        mixed |= set(held.index[held["any"] & ~held["all"]].astype(str))
        only |= set(held.index[held["all"]].astype(str))
    ahead = calls[~back]
    for col, part in (("cls", ahead), ("kind", ahead[ahead.kind != ahead.cls])):
        rows = part[part[col].astype(str).isin(mixed)]
        classes.update({f"{k}{FORWARD}": t for k, t in class_tables(col, rows).items()})
    backward = fit_backward(calls[back & ~np.isin(calls.kind.to_numpy(dtype=object), UNSHIFTED)], classes, constants)
    if backward:
        backward["only"] = sorted(only)
    m = dict(meta or {})
    m.update(calls=int(len(ops)), distinct=int(len(calls)), noisy=int((calls.spread > NOISY_SPREAD).sum()),
             op_names=sorted({str(g).split("|")[1] for g in groups if "|" in str(g)}))
    m.update(shifts=len(shifts))
    return Predictor(constants, groups, free, relaxed, classes, m, bases, shifts, backward, physical)

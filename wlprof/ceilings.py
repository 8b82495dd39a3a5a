"""The device's ceilings, measured on the device (`wlprof calibrate`) and cached per device.

Measured on warm, repeated runs; each ceiling keeps its method, sizes, repeats, median and
spread (`Measurement`). Compute: the matrix rate per dtype (GEMM on random data) and the
vector rate. Memory: main-memory read, write and copy bandwidth on working sets far past
the last cache (`hbm_*` on a GPU, `dram_*` on a CPU), and the bandwidth of each cache level
that matters (`l2` on a GPU; `l1`, `l2`, `l3` on a CPU) with its capacity (`cache_bytes`).
Datasheet numbers are kept beside them, labelled, and used only where asked for (`datasheet_ceilings`,
`--ceilings datasheet`), never in place of measured ones. Every run
records which ceilings it used. Rules and method: `docs/ceilings.md`.
"""

from __future__ import annotations

import datetime as _dt
import math
import os
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from wlprof.errors import StoreError

FORMAT_VERSION = 2  # 1: a single copy_gbps; 2: read/write/copy, cache levels, spreads

# The roof_note vocabulary of the roofline placement (`cost.roofline`), in the order notes are listed.
NOTES = (
    "datasheet",  # placed against the GPU's datasheet peaks (`--ceilings datasheet`), not measured ceilings
    "l1_resident", "l2_resident", "l3_resident",  # placed against that cache level
    "written_unknown",  # bytes_written null: placed against the copy roof
    "roof_unmeasured",  # the roof its traffic calls for was not measured: the copy roof stands in
    "compute_unmeasured",  # a matrix op of a dtype whose matrix rate was not measured: no compute roof, not placed
    "within_spread",  # above 1, within the measured spread of its ceiling
    "mixed_traffic",  # copy-like, above the copy roof but not above the read/write roofs
    "indexed_reuse",  # an indexed read (gather, scatter, a stated aggregation) above its roof: repeated
    #                   indices re-read rows from the cache, so its counted bytes are an upper bound
    "cache_fit",  # above the main-memory roof, no faster than if the largest cache level held as much of its
    #               bytes as it can: its inputs may have been left there by the kernels just before it
    #               (no repeat shows it; the trace cannot tell)
    "data_dependent",  # above the matrix roof (measured on randn data), within the rate of the same GEMM on
    #                    zeros: padded, masked or sparse inputs draw less power and hold higher clocks
    "ceiling_stale",  # above its roof beyond the measured spread, or the run's ceilings are stale
    "above_datasheet",  # above 1 against a datasheet peak, with none of the reasons above: the counted work
    #                     exceeds what the GPU moved or computed (a cache served it, a formula over-counts)
    "above_measured_roof",  # above 1 against a ceiling that kept no spread to judge by
)
# the notes that explain a roofline fraction above 1
ABOVE_ROOF_NOTES = ("within_spread", "mixed_traffic", "written_unknown", "indexed_reuse", "cache_fit",
                    "data_dependent", "ceiling_stale", "above_datasheet", "above_measured_roof")

def datasheet_for(device_name: str, props: dict | None = None) -> dict[str, Any] | None:
    """The vendor's datasheet peaks of the GPU named so (`datasheets.sheet_for`), as a dict, or None."""
    from wlprof.datasheets import sheet_for

    sheet = sheet_for(device_name, props)
    return sheet.as_dict() if sheet is not None else None


def datasheet_ceilings(device_name: str, props: dict | None = None) -> Ceilings | None:
    """Ceilings built from the GPU's datasheet (`source = 'datasheet'`), or None where it has no sheet.

    Matrix roofs per dtype the sheet lists, the vector roof at its fp32 vector rate, the main memory's
    read, write and copy roofs all at its bandwidth; no cache roofs, no spread (nothing was measured).
    """
    from wlprof.datasheets import sheet_for

    sheet = sheet_for(device_name, props)
    if sheet is None:
        return None
    bw = float(sheet.gbps)
    return Ceilings(
        device_type="cuda", device_name=device_name, matrix_tflops=dict(sheet.tflops),
        vector_tflops=float(sheet.vector_tflops), copy_gbps=bw, source="datasheet", measured_at="", torch_version="",
        method={"datasheet": sheet.key, "document": sheet.source, "sparsity_halved": sheet.halved,
                "rule": "dense peaks from the vendor's document; every main-memory roof at its bandwidth; "
                        "no cache roofs; nothing measured"},
        datasheet=sheet.as_dict(), bandwidth_gbps={f"hbm_{k}": bw for k in ("read", "write", "copy")})


def main_memory(device_type: str) -> str:
    """The name of a device's main memory in roof names: 'hbm' (GPU) or 'dram' (CPU)."""
    return "hbm" if device_type == "cuda" else "dram"


def _quantile(xs: list[float], q: float) -> float:
    """Linear-interpolated quantile of a non-empty list."""
    s = sorted(xs)
    if len(s) == 1:
        return s[0]
    pos = q * (len(s) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


@dataclass
class Measurement:
    """One measured ceiling: the median rate over timed repeats and its spread.

    `value` is the median of the per-repeat rates; `p10`/`p90`, `min`/`max` their spread (None
    where none was recorded: a migrated format-1 ceiling). `sizes` says what was run (GEMM n,
    buffer bytes, passes, bytes counted per call); `alternatives` the other methods or sizes
    measured for the same ceiling (this one is the best of them).
    """

    value: float
    unit: str  # 'GB/s' or 'TFLOP/s'
    method: str
    sizes: dict[str, Any] = field(default_factory=dict)
    repeats: int = 0
    warmup: int = 0
    p10: float | None = None
    p90: float | None = None
    min: float | None = None
    max: float | None = None
    samples: list[float] = field(default_factory=list)
    alternatives: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def of_rates(cls, rates: list[float], unit: str, method: str, sizes: dict[str, Any], warmup: int,
                 statistic: str = "median") -> Measurement:
        value = _quantile(rates, 0.9) if statistic == "p90" else statistics.median(rates)
        return cls(value=value, unit=unit, method=method, sizes=dict(sizes), repeats=len(rates),
                   warmup=warmup, p10=_quantile(rates, 0.1), p90=_quantile(rates, 0.9), min=min(rates),
                   max=max(rates), samples=list(rates))

    @property
    def upper_ratio(self) -> float | None:
        """p90 / median: how far above its median a rate still lies within the measured spread."""
        if self.p90 is None or not self.value:
            return None
        return self.p90 / self.value

    @property
    def lower_ratio(self) -> float | None:
        """p10 / median."""
        if self.p10 is None or not self.value:
            return None
        return self.p10 / self.value

    def summary(self) -> dict[str, Any]:
        """This measurement without its samples and alternatives (for an alternatives list)."""
        return {"value": self.value, "method": self.method, "sizes": self.sizes, "repeats": self.repeats,
                "p10": self.p10, "p90": self.p90}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Measurement:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


@dataclass
class Ceilings:
    """The measured ceilings of one device.

    Positional fields are those of format 1 (kept so old code and tests construct it as
    before); `copy_gbps` stays the main memory's copy bandwidth (read + write counted).
    `bandwidth_gbps` holds every memory roof by name (`hbm_read`, `hbm_write`, `hbm_copy`,
    `l2` on a GPU; `dram_*`, `l1`, `l2`, `l3` on a CPU); `cache_bytes` the capacity of each
    cache level a kernel's working set is compared with; `measurements` the method and spread
    of every ceiling (keys: `matrix:<dtype>`, `vector`, and the roof names).
    """

    device_type: str
    device_name: str
    matrix_tflops: dict[str, float]  # 'bfloat16', 'float16', 'float32' (TF32 off), 'tf32'
    vector_tflops: float
    copy_gbps: float  # main memory: bytes read + bytes written per second, device to device
    source: str  # 'measured'
    measured_at: str
    torch_version: str
    method: dict[str, Any] = field(default_factory=dict)
    datasheet: dict[str, Any] | None = None
    bandwidth_gbps: dict[str, float] = field(default_factory=dict)
    cache_bytes: dict[str, int] = field(default_factory=dict)
    measurements: dict[str, Measurement] = field(default_factory=dict)
    format_version: int = FORMAT_VERSION
    migrated_from: int | None = None  # the format a cache or manifest was read from, when older

    def __post_init__(self):
        copy_key = f"{self.memory}_copy"
        if not self.bandwidth_gbps and self.copy_gbps is not None:
            self.bandwidth_gbps = {copy_key: float(self.copy_gbps)}
        self.measurements = {k: (m if isinstance(m, Measurement) else Measurement.from_dict(m))
                             for k, m in (self.measurements or {}).items()}

    @property
    def memory(self) -> str:
        return main_memory(self.device_type)

    def compute_tflops(self, unit: str, dtype: str | None, tf32: bool = False) -> float:
        if unit == "matrix" and dtype:
            key = "tf32" if (dtype == "float32" and tf32) else dtype
            if key in self.matrix_tflops:
                return self.matrix_tflops[key]
        if unit == "matrix":
            return math.nan
        return self.vector_tflops

    def bandwidth(self, roof: str) -> float | None:
        """GB/s of a memory roof by name, or None where it was not measured."""
        v = self.bandwidth_gbps.get(roof)
        return float(v) if v is not None and v > 0 else None

    def memory_roofs(self) -> dict[str, float]:
        """Every measured memory roof: main memory first (read, copy, write), then the caches by size."""
        mem = [f"{self.memory}_{k}" for k in ("read", "copy", "write")]
        caches = sorted(self.cache_bytes, key=lambda lv: self.cache_bytes[lv])
        return {r: self.bandwidth_gbps[r] for r in mem + [c for c in caches if c not in mem]
                if self.bandwidth(r) is not None}

    def cache_levels(self) -> list[tuple[str, int, float]]:
        """(level, capacity bytes, GB/s) of the cache levels with both a capacity and a bandwidth, smallest first."""
        out = [(lv, int(cap), self.bandwidth_gbps[lv]) for lv, cap in self.cache_bytes.items()
               if cap and self.bandwidth(lv) is not None]
        return sorted(out, key=lambda t: t[1])

    def ridge_flop_per_byte(self, unit: str, dtype: str | None, tf32: bool = False, roof: str | None = None) -> float:
        """Ridge point of a compute roof against a memory roof (default: the main memory's copy roof)."""
        bw = self.bandwidth(roof) if roof else None
        if bw is None:
            bw = self.copy_gbps
        return self.compute_tflops(unit, dtype, tf32) * 1e12 / (bw * 1e9)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Ceilings:
        """Ceilings from a cache file or a run manifest, migrating format 1 (a single `copy_gbps`)."""
        if not isinstance(d, dict):
            raise TypeError("ceilings must be a JSON object")
        kw = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        version = int(d.get("format_version", 1))
        if version > FORMAT_VERSION:
            raise ValueError(f"ceilings format {version} is newer than this wlprof's {FORMAT_VERSION}")
        if version < FORMAT_VERSION:
            kw.update(_migrate_v1(d))
        for name in ("device_type", "device_name", "matrix_tflops", "vector_tflops", "copy_gbps"):
            if name not in kw:
                raise KeyError(name)
        return cls(**kw)

    def same_values(self, other: Ceilings) -> bool:
        """Whether two ceilings hold the same numbers (what a run was placed against)."""
        return (self.device_name == other.device_name and self.matrix_tflops == other.matrix_tflops
                and self.vector_tflops == other.vector_tflops and self.bandwidth_gbps == other.bandwidth_gbps
                and self.measured_at == other.measured_at)


def _migrate_v1(d: dict[str, Any]) -> dict[str, Any]:
    """Format 1 -> 2: the copy bandwidth becomes the main memory's copy roof, with the method and
    sizes format 1 recorded and no spread (it kept none); no read, write or cache roofs."""
    m = d.get("method") or {}
    mem = main_memory(d.get("device_type", "cpu"))
    reps, warm = m.get("reps", 0), m.get("warmup", 0)
    meas: dict[str, Measurement] = {}
    if d.get("copy_gbps"):
        meas[f"{mem}_copy"] = Measurement(
            value=float(d["copy_gbps"]), unit="GB/s", method="copy_ (read + write counted), median of single calls "
            "(format 1: no spread recorded)", sizes={"buffer_bytes": m.get("copy_bytes_each_way")},
            repeats=2 * reps if reps else 0, warmup=warm)
    for key, v in (d.get("matrix_tflops") or {}).items():
        meas[f"matrix:{key}"] = Measurement(
            value=float(v), unit="TFLOP/s", method="torch.mm of two n x n random matrices (format 1: no spread "
            "recorded)", sizes={"n": m.get(f"matrix_{key}_n")}, repeats=reps, warmup=warm)
    return {"bandwidth_gbps": {f"{mem}_copy": float(d["copy_gbps"])} if d.get("copy_gbps") else {},
            "cache_bytes": {}, "measurements": meas, "format_version": FORMAT_VERSION,
            "migrated_from": int(d.get("format_version", 1))}


def stale_against(run: Ceilings, current: Ceilings) -> list[str]:
    """Why `run`'s ceilings (a run's manifest) are stale against `current` (this machine's cache for
    the same device): empty when they are not.

    Stale: `current` was measured later, and a ceiling the run used is lower than the current one
    by more than the current measurement's spread (its p10, or 3% where it kept none), or the run
    lacks roofs the current calibration has (an older format: no read, write or cache roofs).
    """
    if run.device_name != current.device_name or not current.measured_at or not run.measured_at:
        return []
    if current.measured_at <= run.measured_at:
        return []
    why = _below(run, current, "now")
    missing = sorted(set(current.bandwidth_gbps) - set(run.bandwidth_gbps))
    if missing:
        why.append(f"lacks {', '.join(missing)} (measured now)")
    return why


def lower_than(new: Ceilings, previous: Ceilings) -> list[str]:
    """The ceilings `new` measured lower than `previous` (the cache it replaces, same device) by more
    than `previous`'s spread (its p10, or 3% where it kept none): a busy machine measures low."""
    if new.device_name != previous.device_name:
        return []
    return _below(new, previous, "before")


def _below(low: Ceilings, ref: Ceilings, when: str) -> list[str]:
    """The rates of `low` below those of `ref` by more than `ref`'s spread (its p10, or 3% where it kept
    none), each as 'name low < ref unit WHEN'."""
    from wlprof.store.selection import _rate

    return [f"{name} {_rate(a, 1)} < {_rate(b, 1)} {unit} {when}" for name, _, _, a, b, unit in _below_items(low, ref)]


def _below_items(low: Ceilings, ref: Ceilings) -> list[tuple[str, str, str, float, float, str]]:
    """(label, table, key, low's rate, ref's rate, unit) of each rate of `low` below `ref`'s by more than
    `ref`'s spread; table is 'matrix' or 'bandwidth'."""
    out = []
    for table, rates, prefix, unit in (("matrix", ref.matrix_tflops, "matrix:", "TFLOP/s"),
                                       ("bandwidth", ref.bandwidth_gbps, "", "GB/s")):
        mine = low.matrix_tflops if table == "matrix" else low.bandwidth_gbps
        for k, b in rates.items():
            if k not in mine:
                continue
            meas = ref.measurements.get(prefix + k)
            ratio = meas.lower_ratio if meas is not None and meas.lower_ratio is not None else 0.97
            if mine[k] < b * min(ratio, 0.99):
                out.append((f"matrix {k}" if table == "matrix" else k, table, k, mine[k], b, unit))
    return out


def rose_above(new: Ceilings, previous: Ceilings) -> list[str]:
    """The ceilings `new` measured higher than `previous` by more than `new`'s own spread, and those
    `previous` lacks, each as 'name new > old unit' or 'name (new)'."""
    from wlprof.store.selection import _rate

    if new.device_name != previous.device_name:
        return []
    out = [f"{name} {_rate(b, 1)} > {_rate(a, 1)} {unit}" for name, _, _, a, b, unit in _below_items(previous, new)]
    out += [f"matrix {k} (new)" for k in new.matrix_tflops if k not in previous.matrix_tflops]
    out += [f"{k} (new)" for k in new.bandwidth_gbps if k not in previous.bandwidth_gbps]
    return out


def keep_higher(new: Ceilings, previous: Ceilings) -> tuple[Ceilings, list[str]]:
    """`new` with each ceiling it measured lower than `previous` (beyond the spread) taken from `previous`,
    its measurement included, and the labels of those kept: a ceiling that rose replaces the cached one,
    one that fell (a busy machine) does not."""
    import copy

    items = _below_items(new, previous) if new.device_name == previous.device_name else []
    if not items:
        return new, []
    merged = copy.deepcopy(new)
    for _label, table, key, _, old, _ in items:
        if table == "matrix":
            merged.matrix_tflops[key] = old
            m = previous.measurements.get(f"matrix:{key}")
            if m is not None:
                merged.measurements[f"matrix:{key}"] = m
        else:
            merged.bandwidth_gbps[key] = old
            if key in previous.measurements:
                merged.measurements[key] = previous.measurements[key]
            if key == f"{merged.memory}_copy":
                merged.copy_gbps = old
    merged.method = {**(merged.method or {}),
                     "kept_from_cache": {label: previous.measured_at for label, *_ in items}}
    return merged, [label for label, *_ in items]


# --- the cache -------------------------------------------------------------------------------


def cache_dir() -> Path:
    root = os.environ.get("WLPROF_CACHE_DIR")
    return Path(root) if root else Path.home() / ".cache" / "wlprof"


def check_cache_writable() -> None:
    """An InputError naming WLPROF_CACHE_DIR (or the default cache folder) when ceilings cannot be cached
    there: said before they are measured."""
    from wlprof.errors import InputError
    from wlprof.store.runs import check_writable

    arg = "WLPROF_CACHE_DIR" if os.environ.get("WLPROF_CACHE_DIR") else "the ceilings cache folder"
    try:
        check_writable(cache_dir(), arg, "the ceilings cache")
    except InputError as exc:
        raise InputError(arg, exc.rule, exc.value, hint="set WLPROF_CACHE_DIR to a folder wlprof can write") \
            from None


def cache_path(device_type: str, device_name: str) -> Path:
    from wlprof.store.atomic import slug

    return cache_dir() / f"ceilings-{device_type}-{slug(device_name, 128)}.json"


def load_cached(device_type: str, device_name: str) -> Ceilings | None:
    """The cached ceilings of the device named so, or None (none cached, or a damaged cache).

    A format-1 cache (a single copy bandwidth) loads, migrated (`Ceilings.from_dict`)."""
    from wlprof import jsonio

    path = cache_path(device_type, device_name)
    if not path.exists():
        return None
    try:
        return Ceilings.from_dict(jsonio.loads(path.read_bytes()))
    except (ValueError, TypeError, KeyError, AttributeError, OSError):
        return None  # a damaged cache is re-measured, not trusted


def load_file(path: str | Path, choices: tuple[str, ...] = ("run", "current", "datasheet")) -> Ceilings:
    """Ceilings from a JSON file (a cache, or one written by `wlprof calibrate` elsewhere); `choices`: the
    words the option takes besides a file, named in its error."""
    from wlprof import jsonio
    from wlprof.errors import InputError, did_you_mean

    try:
        d = jsonio.loads(Path(path).read_bytes())
        if isinstance(d, dict) and "ceilings" in d and "device_type" not in d:
            d = d["ceilings"]  # a run manifest
        return Ceilings.from_dict(d)
    except OSError as exc:  # 'curent' is a typo of a choice more often than a missing file
        words = f"{', '.join(choices)} or " if choices else ""
        raise InputError("--ceilings", f"must be {words}a readable ceilings JSON file ({exc.strerror})",
                         str(path), hint=did_you_mean(str(path), list(choices)) if choices else None) from None
    except KeyError as exc:
        raise InputError("--ceilings", f"must be a ceilings JSON file written by wlprof (it has no {exc} field)",
                         str(path)) from None
    except (ValueError, TypeError, AttributeError) as exc:
        raise InputError("--ceilings", f"must be a ceilings JSON file written by wlprof ({exc})", str(path)) from None


def save(ceilings: Ceilings) -> Path:
    from wlprof import jsonio
    from wlprof.store.atomic import atomic_write_bytes

    path = cache_path(ceilings.device_type, ceilings.device_name)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, jsonio.dumps(ceilings.to_dict(), indent=True))
    except OSError as exc:
        raise StoreError(f"cannot write the ceilings cache {path}: {exc}") from None
    return path


# --- cache sizes -----------------------------------------------------------------------------

SYSFS_CACHE = Path("/sys/devices/system/cpu/cpu0/cache")
_SYSCONF = {1: "SC_LEVEL1_DCACHE_SIZE", 2: "SC_LEVEL2_CACHE_SIZE", 3: "SC_LEVEL3_CACHE_SIZE",
            4: "SC_LEVEL4_CACHE_SIZE"}


def _parse_size(text: str) -> int | None:
    t = text.strip().upper()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(t[-1:] if t else "", 1)
    digits = t[:-1] if t[-1:] in ("K", "M", "G") else t
    try:
        return int(digits) * mult
    except ValueError:
        return None


def _cpu_count(cpu_list: str) -> int:
    """Number of CPUs in a sysfs CPU list ('0-3,8,10-11' -> 7)."""
    n = 0
    for part in cpu_list.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        try:
            n += (int(hi) - int(lo) + 1) if hi else 1
        except ValueError:
            return 1
    return max(n, 1)


def cpu_caches(threads: int, root: Path = SYSFS_CACHE, cpus: int | None = None) -> dict[str, dict[str, Any]]:
    """The CPU's data cache levels: {'l1': {'bytes': per instance, 'shared_by': CPUs, 'instances': used,
    'aggregate': bytes the `threads` threads can hold, 'source': where read}, ...}.

    Read from sysfs (`index*/level`, `type`, `size`, `shared_cpu_list`), else `os.sysconf`; the
    aggregate assumes one thread per CPU, spread over the instances: a level of 2 MiB per core
    holds 4 MiB for two threads.
    """
    out: dict[str, dict[str, Any]] = {}
    cpus = cpus or os.cpu_count() or 1
    threads = max(1, threads)
    try:
        entries = sorted(p for p in root.glob("index*") if p.is_dir())
    except OSError:
        entries = []
    for p in entries:
        try:
            kind = (p / "type").read_text().strip()
            level = int((p / "level").read_text().strip())
            size = _parse_size((p / "size").read_text())
            shared = _cpu_count((p / "shared_cpu_list").read_text()) if (p / "shared_cpu_list").exists() else 1
        except (OSError, ValueError):
            continue
        if kind == "Instruction" or not size:
            continue
        instances = min(math.ceil(threads / shared), max(1, cpus // shared))
        out[f"l{level}"] = {"bytes": size, "shared_by": shared, "instances": instances,
                            "aggregate": size * instances, "source": str(p)}
    if out:
        return out
    for level, name in _SYSCONF.items():
        try:
            size = os.sysconf(name)
        except (ValueError, OSError, AttributeError):
            continue
        if size and size > 0:
            # sysconf does not say which CPUs share a level: the last level is taken as shared,
            # the others as private to each core
            out[f"l{level}"] = {"bytes": size, "shared_by": None, "instances": None, "aggregate": None,
                                "source": f"os.sysconf({name})"}
    if out:
        last = max(out, key=lambda k: int(k[1:]))
        for k, v in out.items():
            inst = 1 if k == last else min(threads, cpus)
            v["instances"], v["aggregate"] = inst, v["bytes"] * inst
    return out


# --- timing ----------------------------------------------------------------------------------


def _timed_us(fn, device, reps: int, warmup: int, warm_s: float, per: int = 1) -> tuple[list[float], int]:
    """µs per call of `reps` timed samples of `fn`, after at least `warmup` untimed calls and
    `warm_s` seconds of them (clocks ramped, caches and allocator warm), and, up to ten times
    that, until the last call is within twice the fastest one (a shared CPU's second thread can
    sit descheduled for milliseconds at a time). On a GPU each sample is `per` back-to-back calls
    (a short kernel timed alone would count its launch). Returns the samples and the warm-up
    calls made."""
    from wlprof.device import synchronize
    from wlprof.timing import gpu_samples, single_call_us

    start, n, fastest, last = time.perf_counter(), 0, math.inf, math.inf
    while n < 10_000:
        elapsed = time.perf_counter() - start
        if n >= warmup and elapsed >= warm_s and (last <= 2 * fastest or elapsed >= 10 * warm_s):
            break
        t0 = time.perf_counter()
        fn()
        synchronize(device)
        last = time.perf_counter() - t0
        fastest = min(fastest, last)
        n += 1
    if per > 1 and device.type == "cuda":
        def run():
            for _ in range(per):
                fn()
        return gpu_samples(run, reps, per), n
    return single_call_us(fn, device, reps), n


def _rates(work: float, us: list[float], per: float) -> list[float]:
    """Rates (work per second, in units of `per`) of each sample."""
    return [work / (t * 1e-6) / per for t in us if t > 0]


BURSTS, BURST_CALLS, BURST_IDLE_S = 10, 6, 0.1
BURST_NOTE = (f"each call timed alone in bursts of {BURST_CALLS} after {BURST_IDLE_S * 1e3:.0f} ms idle "
              "(the first left out): the rate at full clock")


def _burst_us(fn, device, bursts: int = BURSTS, calls: int = BURST_CALLS, idle_s: float = BURST_IDLE_S
              ) -> list[float]:
    """µs of single calls at the GPU's full clock: `bursts` bursts of `calls` back-to-back calls, each
    after `idle_s` seconds idle (the power drawn, and so the clock the power limit allows, back at rest),
    every call timed by events recorded between consecutive calls. A burst's first call (it pays the
    wake-up) is left out. A gap between calls (the host falling behind) can only lengthen a time.
    Elsewhere than on a GPU each call is timed by the host clock."""
    import torch

    from wlprof.device import synchronize

    out = []
    for _ in range(bursts):
        synchronize(device)
        time.sleep(idle_s)
        if device.type != "cuda":
            for i in range(calls):
                t0 = time.perf_counter()
                fn()
                synchronize(device)
                if i:
                    out.append((time.perf_counter() - t0) * 1e6)
            continue
        marks = [torch.cuda.Event(enable_timing=True) for _ in range(calls + 1)]
        marks[0].record()
        for m in marks[1:]:
            fn()
            m.record()
        torch.cuda.synchronize()
        out += [marks[i].elapsed_time(marks[i + 1]) * 1e3 for i in range(1, calls)]
    return out


def _filled(n: int, device, dtype=None, value: float = 1.5):
    """A buffer of `n` elements with every page written (a fresh CPU allocation's pages would
    all map the shared zero page and be read from the cache); the values do not matter to a
    memory ceiling."""
    import torch

    return torch.empty(n, device=device, dtype=dtype or torch.float32).fill_(value)


@dataclass
class _Plan:
    n_mm: dict[str, list[int]]  # dtype -> the square GEMM sizes measured (the ceiling is the best)
    reps: int
    warmup: int
    warm_s: float
    main_bytes: int  # per buffer, for main-memory read/write/copy
    cache_sizes: dict[str, list[int]]  # level -> buffer bytes to measure its read bandwidth at
    cache_bytes: dict[str, int]  # level -> capacity used for placement
    pass_bytes: int  # bytes one broadcast-read call reads (R passes over a cached buffer)
    graph_calls: int  # GPU: back-to-back sums in one CUDA graph, for the L2
    notes: dict[str, Any] = field(default_factory=dict)
    link_bytes: int = 0  # GPU: bytes of one pinned host buffer copied to and from the device (0: not measured)
    # the per-repeat rates' statistic a ceiling is: the median on a GPU; the 90th percentile on a CPU,
    # whose shared cores deschedule a repeat now and then (a stall only ever slows one down)
    statistic: str = "median"


def _gpu_plan(device, quick: bool) -> _Plan:
    import torch

    props = torch.cuda.get_device_properties(device)
    l2 = int(getattr(props, "L2_cache_size", 0) or 0)
    free = torch.cuda.mem_get_info(device)[0]
    main = (1 << 29) if quick else (1 << 31)  # 0.5 or 2 GiB per buffer: 8-34x a 60 MB L2
    main = max(min(main, free // 6), 16 * l2) if l2 else min(main, free // 6)
    # L2-resident buffers: a half and a quarter of the L2 (an H200's L2 is two partitions, about
    # half near each SM), above the SMs' combined L1 where possible
    sizes = ([l2 // 2] if quick else [l2 // 4, l2 // 2]) if l2 else []
    # several sizes: a sustained 8192^3 GEMM draws the most power and can run at lower clocks
    # than a smaller one, so no single size is the peak
    sizes_16 = [4096, 8192] if quick else [2048, 4096, 8192]
    n_mm = {"bfloat16": sizes_16, "float16": sizes_16, "float32": [2048, 4096], "tf32": [4096, 8192]}
    # 8-bit matrix units where torch has their GEMMs (FP8 needs compute capability 8.9 or later)
    if hasattr(torch, "_scaled_mm") and hasattr(torch, "float8_e4m3fn") and (props.major, props.minor) >= (8, 9):
        n_mm["float8_e4m3fn"] = [4096, 8192]
    if hasattr(torch, "_int_mm"):
        n_mm["int8"] = [4096, 8192]
    return _Plan(n_mm=n_mm,
                 reps=10 if quick else 20, warmup=3, warm_s=0.1 if quick else 0.3, main_bytes=int(main),
                 cache_sizes={"l2": sizes} if sizes else {}, cache_bytes={"l2": l2} if l2 else {},
                 pass_bytes=(1 << 30) if quick else (4 << 30), graph_calls=64,
                 notes={"l2_cache_size": l2, "l2_source": "torch.cuda.get_device_properties().L2_cache_size"},
                 link_bytes=min((1 << 28) if quick else (1 << 30), free // 6))


def _cpu_plan(quick: bool, threads: int, root: Path = SYSFS_CACHE) -> _Plan:
    levels = cpu_caches(threads, root)
    cache_bytes = {lv: int(v["aggregate"]) for lv, v in levels.items() if v.get("aggregate")}
    sizes: dict[str, list[int]] = {}
    prev = 0
    for lv in sorted(levels, key=lambda k: int(k[1:])):
        per = int(levels[lv]["bytes"])
        # every thread of the broadcast read reads the whole buffer: it must fit one instance,
        # and be past the level below (its aggregate over the threads)
        hi = per // 2
        lo = max(2 * prev, per // 4 if prev == 0 else 0, 4096)
        if hi <= lo:
            cand = [max(hi, 4096)]
        elif quick:
            cand = [min(hi, 4 * lo, 32 << 20)]
        else:
            cand = [lo, int(math.sqrt(lo * hi)), hi]
        sizes[lv] = sorted({int(c) // 64 * 64 for c in cand})
        prev = int(levels[lv].get("aggregate") or per)
    last = max(cache_bytes.values(), default=0)
    try:
        avail = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        avail = 8 << 30
    want = max(4 * last, 256 << 20)
    main = min(want, (256 << 20) if quick else (2 << 30), max(avail // 6, 64 << 20))
    # every dtype `wlprof run --dtype` offers, so each has its compute roof on a CPU
    return _Plan(n_mm={"float32": [512 if quick else 1024], "bfloat16": [256 if quick else 512],
                       "float16": [256 if quick else 512], "float64": [512 if quick else 1024]},
                 reps=5 if quick else 9, warmup=1 if quick else 2, warm_s=0.02 if quick else 0.1,
                 main_bytes=int(main), cache_sizes=sizes, cache_bytes=cache_bytes,
                 pass_bytes=(16 << 20) if quick else (128 << 20), graph_calls=0,
                 notes={"cpu_caches": levels, "threads": threads,
                        "main_past_last_cache": bool(main > 2 * last) if last else None},
                 statistic="p90")


def _zero_data_rate(best: Measurement, dtype, device, plan: _Plan) -> Measurement:
    """The rate of `best`'s GEMM on all-zero inputs: a GEMM's power, and so the clock it holds,
    depends on its values, and zeros (padding, pruned or masked inputs) draw the least."""
    import torch

    n, per = best.sizes["n"], best.sizes.get("calls_per_sample", 1)
    a = torch.zeros(n, n, device=device, dtype=dtype)
    b = torch.zeros(n, n, device=device, dtype=dtype)
    us, warm = _timed_us(lambda: torch.mm(a, b), device, plan.reps, plan.warmup, plan.warm_s, per)
    how = "torch.mm of two n x n all-zero matrices"
    if "burst_calls" in best.sizes:  # timed as the roof was
        us, how = _burst_us(lambda: torch.mm(a, b), device), f"{how}, {BURST_NOTE}"
    return Measurement.of_rates(_rates(2 * n**3, us, 1e12), "TFLOP/s", f"{how} (not a roof: the data-dependent "
                                "headroom above the randn one)", dict(best.sizes), warm, plan.statistic)


def _measure_matrix(plan: _Plan, device, gen, gpu: bool, errors: dict,
                    zeros: dict | None = None) -> dict[str, Measurement]:
    """The matrix rate per dtype, the best over the plan's sizes on randn inputs; on a GPU the
    16-bit dtypes' zero-data rate at that size goes into `zeros`."""
    import torch

    out = {}
    zeros = {} if zeros is None else zeros
    prev_tf32 = torch.backends.cuda.matmul.allow_tf32 if gpu else None
    try:
        for key, sizes in plan.n_mm.items():
            dtype = torch.float32 if key == "tf32" else getattr(torch, key)
            if gpu:
                torch.backends.cuda.matmul.allow_tf32 = key == "tf32"
            cands = []
            largest = max(sizes, default=0)
            for n in sizes:
                per = max(1, (largest // n) ** 3) if gpu else 1  # about the largest size's time per sample
                try:
                    fn, method = _matrix_call(key, dtype, n, device, gen)
                    us, warm = _timed_us(fn, device, plan.reps, plan.warmup, plan.warm_s, per)
                except RuntimeError as exc:  # a dtype the device cannot multiply in
                    errors[f"matrix:{key}"] = str(exc)[:200]
                    break
                sized = {"n": n, "calls_per_sample": per} if per > 1 else {"n": n}
                cands.append(Measurement.of_rates(_rates(2 * n**3, us, 1e12), "TFLOP/s", method, sized, warm,
                                                  plan.statistic))
                if gpu:  # the same GEMM at full clock: sustained calls run at the clock the power limit allows
                    cands.append(Measurement.of_rates(_rates(2 * n**3, _burst_us(fn, device), 1e12), "TFLOP/s",
                                                      f"{method}, {BURST_NOTE}", {"n": n, "burst_calls": BURST_CALLS},
                                                      warm, plan.statistic))
                del fn
            best = _best(cands)
            if best is None:
                continue
            out[key] = best
            if gpu and key in ("bfloat16", "float16"):
                zeros[key] = _zero_data_rate(best, dtype, device, plan)
    finally:
        if gpu:
            torch.backends.cuda.matmul.allow_tf32 = prev_tf32
    return out


def _matrix_call(key: str, dtype, n: int, device, gen):
    """The timed GEMM of one matrix ceiling (two n x n inputs) and its method text: torch.mm, or for the
    8-bit units torch._scaled_mm (FP8, unit per-tensor scales, bf16 out) and torch._int_mm (int8, int32 out)."""
    import torch

    if key == "int8":
        a = torch.randint(-8, 8, (n, n), device=device, dtype=torch.int8, generator=gen)
        b = torch.randint(-8, 8, (n, n), device=device, dtype=torch.int8, generator=gen)
        return (lambda: torch._int_mm(a, b)), "torch._int_mm of two n x n int8 matrices (int32 out)"
    if key.startswith("float8"):
        a = torch.randn(n, n, device=device, generator=gen).to(dtype)
        b = torch.randn(n, n, device=device, generator=gen).to(dtype).t()  # the second operand column-major
        one = torch.ones((), device=device)
        return ((lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)),
                f"torch._scaled_mm of two n x n {key} matrices (unit scales, bf16 out)")
    a = torch.randn(n, n, device=device, dtype=dtype, generator=gen)
    b = torch.randn(n, n, device=device, dtype=dtype, generator=gen)
    return (lambda: torch.mm(a, b)), "torch.mm of two n x n randn matrices" + (" (TF32 on)" if key == "tf32" else "")


def _best(cands: list[Measurement]) -> Measurement | None:
    """The candidate with the highest median, the others kept as its alternatives."""
    cands = [c for c in cands if c is not None and c.value > 0]
    if not cands:
        return None
    best = max(cands, key=lambda c: c.value)
    best.alternatives = [c.summary() for c in cands if c is not best]
    return best


def _measure_main(plan: _Plan, device, gpu: bool, errors: dict, mem: str) -> dict[str, Measurement]:
    """Main-memory read (sum; gemv), write (fill_) and copy (copy_) on buffers far past the caches."""
    import torch

    nbytes = plan.main_bytes
    n = nbytes // 4
    out: dict[str, Measurement] = {}
    args = (plan.reps, plan.warmup, plan.warm_s)

    def run(name, fn, counted, method, sizes):
        try:
            us, warm = _timed_us(fn, device, *args)
            return Measurement.of_rates(_rates(counted, us, 1e9), "GB/s", method, sizes, warm, plan.statistic)
        except RuntimeError as exc:
            errors[name] = str(exc)[:200]
            return None

    x = _filled(n, device)
    reads = [run(f"{mem}_read/sum", lambda x=x: x.sum(), nbytes, "torch.sum over one fp32 buffer",
                 {"buffer_bytes": nbytes, "bytes_per_call": nbytes})]
    y = torch.empty_like(x)
    write = run(f"{mem}_write", lambda y=y: y.fill_(2.5), nbytes, "fill_ of one fp32 buffer",
                {"buffer_bytes": nbytes, "bytes_per_call": nbytes})
    copy = run(f"{mem}_copy", lambda x=x, y=y: y.copy_(x), 2 * nbytes, "copy_ between two fp32 buffers (read + write counted)",
               {"buffer_bytes": nbytes, "bytes_per_call": 2 * nbytes})
    del x, y
    # a matrix-vector product streams its matrix once: cuBLAS's gemv is the best read kernel
    # on a GPU (a tall-skinny bf16 GEMM reads faster than torch.sum)
    dtype = torch.bfloat16 if gpu else torch.float32
    item = 2 if gpu else 4
    k = 4096
    m = max(1, nbytes // (k * item))
    try:
        a = _filled(m * k, device, dtype, 0.5).view(m, k)
        v = _filled(k, device, dtype, 0.25)
        name = str(dtype).removeprefix("torch.")
        reads.append(run(f"{mem}_read/gemv", lambda a=a, v=v: torch.mv(a, v), m * k * item + k * item + m * item,
                         f"torch.mv of an m x {k} {name} matrix (cuBLAS gemv on a GPU)",
                         {"buffer_bytes": m * k * item, "m": m, "k": k}))
        # the same matrix read as the B of a 1 x m x k GEMM (a row vector times an m x k matrix):
        # a tall-skinny GEMM takes cuBLAS's other gemv kernel
        r = _filled(m, device, dtype, 0.25).view(1, m)
        reads.append(run(f"{mem}_read/row_gemm", lambda a=a, r=r: torch.mm(r, a), m * k * item + m * item + k * item,
                         f"torch.mm of a 1 x m row and an m x {k} {name} matrix (a tall-skinny GEMM)",
                         {"buffer_bytes": m * k * item, "m": m, "k": k}))
        del a, v, r
    except RuntimeError as exc:
        errors[f"{mem}_read/gemv"] = str(exc)[:200]
    for name, meas in ((f"{mem}_read", _best(reads)), (f"{mem}_write", write), (f"{mem}_copy", copy)):
        if meas is not None:
            out[name] = meas
    return out


def _measure_caches(plan: _Plan, device, gpu: bool, errors: dict) -> dict[str, Measurement]:
    """Read bandwidth of each cache level: many passes over a buffer that fits it, in one op
    (`x.expand(R, n).sum(dim=1)`: a stride-0 broadcast, R rows each reading the whole buffer),
    and on a GPU also `graph_calls` back-to-back sums replayed from one CUDA graph."""
    out = {}
    args = (plan.reps, plan.warmup, plan.warm_s)
    for level, sizes in plan.cache_sizes.items():
        cands = []
        for size in sizes:
            n = max(16, size // 4)
            x = _filled(n, device)
            passes = max(4, plan.pass_bytes // (n * 4))
            try:
                us, warm = _timed_us(lambda x=x, r=passes, n=n: x.expand(r, n).sum(dim=1), device, *args)
                cands.append(Measurement.of_rates(
                    _rates(passes * n * 4, us, 1e9), "GB/s",
                    "x.expand(R, n).sum(dim=1): R passes over one cache-resident fp32 buffer in one op",
                    {"buffer_bytes": n * 4, "passes": passes, "bytes_per_call": passes * n * 4}, warm,
                    plan.statistic))
            except RuntimeError as exc:
                errors[f"{level}/broadcast/{n * 4}"] = str(exc)[:200]
            if gpu and plan.graph_calls and size == max(sizes):
                g = _graph_sums(x, device, plan, errors, level)
                if g is not None:
                    cands.append(g)
            del x
        best = _best(cands)
        if best is not None:
            out[level] = best
    return out


HOST_LINK = ("host_to_device", "device_to_host")  # the link roofs: bytes that cross it, once each


def _measure_host_link(plan: _Plan, device, errors: dict) -> dict[str, Measurement]:
    """Copies between one pinned host buffer and the device, each way (the bytes counted once: each
    crosses the link once); a pageable buffer is staged through a pinned one and is slower."""
    import torch

    n = plan.link_bytes // 4
    out: dict[str, Measurement] = {}
    try:
        host = torch.full((n,), 1.5, dtype=torch.float32).pin_memory()
        dev = _filled(n, device)
    except RuntimeError as exc:
        errors["host_link"] = str(exc)[:200]
        return out
    for name, fn, how in (("host_to_device", lambda h=host, d=dev: d.copy_(h, non_blocking=True),
                           "pinned host -> device"),
                          ("device_to_host", lambda h=host, d=dev: h.copy_(d, non_blocking=True),
                           "device -> pinned host")):
        try:
            us, warm = _timed_us(fn, device, plan.reps, plan.warmup, plan.warm_s)
            out[name] = Measurement.of_rates(_rates(plan.link_bytes, us, 1e9), "GB/s",
                                             f"copy_ of one fp32 buffer, {how} (each byte counted once)",
                                             {"buffer_bytes": n * 4, "bytes_per_call": n * 4}, warm, plan.statistic)
        except RuntimeError as exc:
            errors[name] = str(exc)[:200]
    del host, dev
    return out


def _graph_sums(x, device, plan: _Plan, errors: dict, level: str) -> Measurement | None:
    import torch

    k = plan.graph_calls
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                x.sum()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(k):
                x.sum()
        us, warm = _timed_us(graph.replay, device, plan.reps, plan.warmup, plan.warm_s)
    except Exception as exc:  # noqa: BLE001 - capture can be refused; the broadcast read stands alone
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        errors[f"{level}/graph"] = f"{type(exc).__name__}: {str(exc)[:200]}"
        return None
    nbytes = x.numel() * x.element_size()
    return Measurement.of_rates(_rates(k * nbytes, us, 1e9), "GB/s",
                                f"CUDA-graph replay of {k} back-to-back torch.sum over one L2-resident buffer",
                                {"buffer_bytes": nbytes, "calls": k, "bytes_per_call": k * nbytes}, warm,
                                plan.statistic)


def calibrate(device, quick: bool = False, cache_root: Path | None = None) -> Ceilings:
    """Measure the matrix rate per dtype, main-memory read/write/copy and the caches' read bandwidth.

    `cache_root`: where a CPU's cache sizes are read (sysfs; tests point it elsewhere).
    """
    import torch

    gpu = device.type == "cuda"
    plan = _gpu_plan(device, quick) if gpu else _cpu_plan(quick, torch.get_num_threads(), cache_root or SYSFS_CACHE)
    return _calibrate(device, plan, gpu, quick)


def _calibrate(device, plan: _Plan, gpu: bool, quick: bool) -> Ceilings:
    """Run `plan` on `device` and assemble the ceilings (`gpu`: name them as a GPU's, hbm_* and l2)."""
    import torch

    from wlprof.device import device_name

    mem = main_memory("cuda" if gpu else "cpu")
    gen = torch.Generator(device=device).manual_seed(0)
    errors: dict[str, str] = {}
    zeros: dict[str, Measurement] = {}
    matrix = _measure_matrix(plan, device, gen, gpu, errors, zeros)
    if gpu:
        torch.cuda.empty_cache()
    main = _measure_main(plan, device, gpu, errors, mem)
    caches = _measure_caches(plan, device, gpu, errors)
    link = _measure_host_link(plan, device, errors) if gpu and plan.link_bytes else {}
    if gpu:
        torch.cuda.empty_cache()
    measurements: dict[str, Measurement] = {f"matrix:{k}": m for k, m in matrix.items()}
    measurements.update({f"matrix_zeros:{k}": m for k, m in zeros.items()})
    if "float32" in matrix:
        measurements["vector"] = Measurement(**{**asdict(matrix["float32"]), "alternatives": [],
                                                "method": "the fp32 GEMM rate (TF32 off): the vector units' ceiling"})
    measurements.update(main)
    measurements.update(caches)
    measurements.update(link)
    bandwidth = {k: m.value for k, m in {**main, **caches, **link}.items()}
    copy = bandwidth.get(f"{mem}_copy")
    if copy is None:
        raise RuntimeError(f"could not measure the copy bandwidth of {device}: {errors}")
    method: dict[str, Any] = {"reps": plan.reps, "warmup": plan.warmup, "warm_s": plan.warm_s,
                              "statistic": plan.statistic, "spread": "p10-p90 and min-max of the per-repeat rates",
                              "data": "randn (GEMM); filled buffers (bandwidth: values do not matter)",
                              "quick": quick, **plan.notes}
    for k, m in matrix.items():
        method[f"matrix_{k}_n"] = m.sizes.get("n")
    method["copy_bytes_each_way"] = plan.main_bytes
    if link:
        method["host_link_bytes"] = plan.link_bytes
    if errors:
        method["errors"] = errors
    name = device_name(device)
    return Ceilings(
        device_type="cuda" if gpu else "cpu",
        device_name=name,
        matrix_tflops={k: m.value for k, m in matrix.items()},
        vector_tflops=matrix["float32"].value if "float32" in matrix else math.nan,
        copy_gbps=copy,
        source="measured",
        measured_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        torch_version=torch.__version__,
        method=method,
        datasheet=datasheet_for(name, _kineto_props(device)) if gpu else None,
        bandwidth_gbps=bandwidth,
        cache_bytes={k: v for k, v in plan.cache_bytes.items() if k in caches},
        measurements=measurements,
    )


def _kineto_props(device) -> dict[str, Any]:
    """The device's properties under the names Kineto's `deviceProperties` gives them (what a sheet is told by)."""
    import torch

    try:
        p = torch.cuda.get_device_properties(device)
    except (RuntimeError, AssertionError, ValueError):  # no CUDA device of that index: the name alone
        return {}
    return {"totalGlobalMem": int(p.total_memory), "numSms": int(p.multi_processor_count),
            "computeMajor": int(p.major), "computeMinor": int(p.minor)}


def get_ceilings(device, recalibrate: bool = False, quick: bool = False) -> tuple[Ceilings, str]:
    """Cached ceilings for `device`, measuring them first when there are none.

    Returns the ceilings and where they came from ('cache: PATH' or 'measured now').
    """
    from wlprof.device import device_name

    why = ""
    if not recalibrate:
        cached = load_cached(device.type, device_name(device))
        if cached is not None and cached.migrated_from is None:
            return cached, f"cache: {cache_path(device.type, device_name(device))}"
        if cached is not None:  # a format-1 cache has no read, write or cache roofs to place against
            why = f" (the cache was format {cached.migrated_from})"
    check_cache_writable()
    ceilings = calibrate(device, quick=quick)
    path = save(ceilings)
    return ceilings, f"measured now{why}, cached in {path}"

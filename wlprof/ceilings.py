"""The device's ceilings, measured on the device (`wlprof calibrate`) and cached per device.

Measured on random data, never zeros; datasheet numbers are kept beside them, labelled,
and never used in their place. Every run records which ceilings it used.
"""

from __future__ import annotations

import datetime as _dt
import math
import os
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from wlprof.errors import StoreError

# Datasheet values: dense (no sparsity) TFLOP/s and memory bandwidth in GB/s.
DATASHEETS: list[tuple[str, dict[str, Any]]] = [
    ("H200", {"bfloat16": 989.4, "float16": 989.4, "tf32": 494.7, "float32": 66.9, "copy_gbps": 4800.0,
              "source": "NVIDIA H200 Tensor Core GPU datasheet (SXM, dense)"}),
    ("H100", {"bfloat16": 989.4, "float16": 989.4, "tf32": 494.7, "float32": 66.9, "copy_gbps": 3350.0,
              "source": "NVIDIA H100 Tensor Core GPU datasheet (SXM, dense)"}),
    ("A100", {"bfloat16": 312.0, "float16": 312.0, "tf32": 156.0, "float32": 19.5, "copy_gbps": 2039.0,
              "source": "NVIDIA A100 Tensor Core GPU datasheet (SXM 80GB, dense)"}),
]


def datasheet_for(device_name: str) -> dict[str, Any] | None:
    for key, sheet in DATASHEETS:
        if key in device_name:
            return dict(sheet)
    return None


@dataclass
class Ceilings:
    device_type: str
    device_name: str
    matrix_tflops: dict[str, float]  # 'bfloat16', 'float16', 'float32' (TF32 off), 'tf32'
    vector_tflops: float
    copy_gbps: float  # bytes read + bytes written per second, device to device
    source: str  # 'measured'
    measured_at: str
    torch_version: str
    method: dict[str, Any] = field(default_factory=dict)
    datasheet: dict[str, Any] | None = None

    def compute_tflops(self, unit: str, dtype: str | None, tf32: bool = False) -> float:
        if unit == "matrix" and dtype:
            key = "tf32" if (dtype == "float32" and tf32) else dtype
            if key in self.matrix_tflops:
                return self.matrix_tflops[key]
        if unit == "matrix":
            return math.nan
        return self.vector_tflops

    def ridge_flop_per_byte(self, unit: str, dtype: str | None, tf32: bool = False) -> float:
        return self.compute_tflops(unit, dtype, tf32) * 1e12 / (self.copy_gbps * 1e9)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Ceilings:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


def cache_dir() -> Path:
    root = os.environ.get("WLPROF_CACHE_DIR")
    return Path(root) if root else Path.home() / ".cache" / "wlprof"


def cache_path(device_type: str, device_name: str) -> Path:
    from wlprof.store.atomic import slug

    return cache_dir() / f"ceilings-{device_type}-{slug(device_name, 128)}.json"


def load_cached(device_type: str, device_name: str) -> Ceilings | None:
    """The cached ceilings of the device named so, or None (none cached, or a damaged cache)."""
    from wlprof import jsonio

    path = cache_path(device_type, device_name)
    if not path.exists():
        return None
    try:
        return Ceilings.from_dict(jsonio.loads(path.read_bytes()))
    except (ValueError, TypeError, KeyError):
        return None  # a damaged cache is re-measured, not trusted


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


def _median_us(fn, device, reps: int, warmup: int) -> float:
    """Median of `reps` individually timed calls after `warmup` untimed ones."""
    from wlprof.device import synchronize
    from wlprof.timing import single_call_us

    for _ in range(warmup):
        fn()
    synchronize(device)
    return statistics.median(single_call_us(fn, device, reps))


def calibrate(device, quick: bool = False) -> Ceilings:
    """Measure the matrix rate per dtype and the copy bandwidth on `device`."""
    import torch

    from wlprof.device import device_name

    gpu = device.type == "cuda"
    if gpu:
        n_mm = {"bfloat16": 8192, "float16": 8192, "float32": 4096, "tf32": 8192}
        copy_elems = (1 << 28) if not quick else (1 << 26)  # 1 GiB of fp32: far past the 60 MB L2
        reps, warmup = (10, 3) if not quick else (5, 2)
    else:
        n_mm = {"float32": 512 if quick else 1024, "bfloat16": 256 if quick else 512}
        copy_elems = (1 << 24) if quick else (1 << 26)  # 64 or 256 MiB of fp32: past the CPU caches
        reps, warmup = (5, 1) if quick else (7, 2)

    gen = torch.Generator(device=device).manual_seed(0)
    matrix: dict[str, float] = {}
    method: dict[str, Any] = {"reps": reps, "warmup": warmup, "statistic": "median", "data": "randn"}
    prev_tf32 = torch.backends.cuda.matmul.allow_tf32 if gpu else None
    try:
        for key, n in n_mm.items():
            dtype = torch.float32 if key == "tf32" else getattr(torch, key)
            if gpu:
                torch.backends.cuda.matmul.allow_tf32 = key == "tf32"
            a = torch.randn(n, n, device=device, dtype=dtype, generator=gen)
            b = torch.randn(n, n, device=device, dtype=dtype, generator=gen)
            try:
                us = _median_us(lambda a=a, b=b: torch.mm(a, b), device, reps, warmup)
            except RuntimeError as exc:  # a dtype the device cannot multiply in
                method[f"matrix_{key}_error"] = str(exc)[:200]
                continue
            matrix[key] = 2 * n**3 / (us * 1e-6) / 1e12
            method[f"matrix_{key}_n"] = n
            del a, b
    finally:
        if gpu:
            torch.backends.cuda.matmul.allow_tf32 = prev_tf32

    src = torch.randn(copy_elems, device=device, generator=gen)
    dst = torch.empty_like(src)
    copy_us = _median_us(lambda s=src, d=dst: d.copy_(s), device, reps * 2, warmup)
    copy_gbps = 2 * src.numel() * src.element_size() / (copy_us * 1e-6) / 1e9
    method["copy_bytes_each_way"] = src.numel() * src.element_size()
    del src, dst

    name = device_name(device)
    return Ceilings(
        device_type=device.type,
        device_name=name,
        matrix_tflops=matrix,
        vector_tflops=matrix.get("float32", math.nan),
        copy_gbps=copy_gbps,
        source="measured",
        measured_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        torch_version=torch.__version__,
        method=method,
        datasheet=datasheet_for(name) if gpu else None,
    )


def get_ceilings(device, recalibrate: bool = False, quick: bool = False) -> tuple[Ceilings, str]:
    """Cached ceilings for `device`, measuring them first when there are none.

    Returns the ceilings and where they came from ('cache: PATH' or 'measured now').
    """
    from wlprof.device import device_name

    if not recalibrate:
        cached = load_cached(device.type, device_name(device))
        if cached is not None:
            return cached, f"cache: {cache_path(device.type, device_name(device))}"
    ceilings = calibrate(device, quick=quick)
    path = save(ceilings)
    return ceilings, f"measured now, cached in {path}"

"""Who made a trace: the device it ran on and the rank, read from the trace itself."""

from __future__ import annotations

import re
import socket

import numpy as np
import pandas as pd


def device_of(meta: dict, device: pd.DataFrame, gpu_work: bool = False, mtia: bool = False) -> tuple[str, str]:
    """(device type, device name) of a trace: the GPU most of its kernels ran on, named by the
    trace's `deviceProperties` (or `computeProperties`, PyTorch 1.9); a CPU trace is this machine's
    CPU only when its host name is this machine's. `gpu_work`: the trace ran GPU work but lost its
    device events (`RawTrace.gpu_work_without_device`): a GPU, named as above. `mtia`: the device rows
    are MTIA's (`RawTrace.mtia_events`): one that `deviceProperties` does not name is an unknown MTIA."""
    if len(device) or gpu_work:
        props = meta.get("deviceProperties") or meta.get("computeProperties") or []
        names = {p.get("id"): p.get("name") or described(p) for p in props if isinstance(p, dict)}
        name = names.get(_main_index(device)) or next((n for n in names.values() if n), None)
        return "cuda", str(name) if name else "unknown MTIA" if mtia else "unknown GPU"
    host = meta.get("host_name")
    if host == socket.gethostname():
        from wlprof.device import cpu_model

        return "cpu", cpu_model()
    return "cpu", f"CPU of host {host}" if host else "unknown CPU"


def _main_index(device: pd.DataFrame) -> int:
    """The index of the device most of the trace's device rows ran on (0 where none says)."""
    idx = device.device_index.to_numpy() if "device_index" in device else np.zeros(0, np.int64)
    idx = idx[idx >= 0]
    return int(np.bincount(idx).argmax()) if len(idx) else 0


def device_properties(meta: dict, device: pd.DataFrame) -> dict:
    """The `deviceProperties` entry of the GPU `device_of` names (the one most kernels ran on, else the first
    listed): what tells a GPU's variant where its name does not (`totalGlobalMem`, `numSms`, compute
    capability). Empty where the trace lists none."""
    props = [p for p in (meta.get("deviceProperties") or meta.get("computeProperties") or []) if isinstance(p, dict)]
    main = _main_index(device)
    named = next((p for p in props if p.get("name") or described(p)), {})
    return next((p for p in props if p.get("id") == main), named)


def described(props: dict) -> str | None:
    """A GPU that `deviceProperties` lists without a name (ROCm builds of PyTorch may write `"name": ""`),
    named by what it records: the vendor by the build's own key (Kineto writes
    `maxSharedMemoryPerMultiProcessor` from HIP, `sharedMemPerMultiprocessor` from CUDA), the compute
    capability, the SM or CU count and the memory, e.g. "AMD GPU (compute 9.4, 304 CUs, 192 GiB)". None
    where it records none of them."""
    major, minor = props.get("computeMajor"), props.get("computeMinor")
    units, mem = props.get("numSms"), props.get("totalGlobalMem")
    if not any(isinstance(v, int) and v > 0 for v in (major, units, mem)):
        return None
    amd = "maxSharedMemoryPerMultiProcessor" in props
    vendor = "AMD" if amd else "NVIDIA" if "sharedMemPerMultiprocessor" in props else "unnamed"
    parts = [f"compute {major}.{minor}" if isinstance(major, int) and isinstance(minor, int) else None,
             f"{units} {'CUs' if amd else 'SMs'}" if isinstance(units, int) and units > 0 else None,
             f"{mem / 2**30:.0f} GiB" if isinstance(mem, int) and mem > 0 else None]
    return f"{vendor} GPU ({', '.join(p for p in parts if p)})"


_RANK_IN_NAME = re.compile(r"rank[_\-.]?(\d+)", re.IGNORECASE)


def rank_of(meta: dict, default: int, name: str = "", communicates: bool = True) -> int:
    """The trace's distributed rank: `distributedInfo.rank`, else a rank in the file's name
    (`rank3`, `rank_3`, `rank-3`), else `default` (the file's order in its folder) when the trace
    has collective or P2P kernels, and 0 when it has none (a single-process trace)."""
    info = meta.get("distributedInfo")
    if isinstance(info, dict) and isinstance(info.get("rank"), int):
        return info["rank"]
    m = _RANK_IN_NAME.search(name)
    if m:
        return int(m.group(1))
    return default if communicates else 0

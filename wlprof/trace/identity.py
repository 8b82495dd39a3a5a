"""Who made a trace: the device it ran on and the rank, read from the trace itself."""

from __future__ import annotations

import socket

import numpy as np
import pandas as pd


def device_of(meta: dict, device: pd.DataFrame) -> tuple[str, str]:
    """(device type, device name) of a trace: the GPU most of its kernels ran on, named by the
    trace's `deviceProperties` (or `computeProperties`, PyTorch 1.9); a CPU trace is this machine's
    CPU only when its host name is this machine's."""
    if len(device):
        props = meta.get("deviceProperties") or meta.get("computeProperties") or []
        names = {p.get("id"): p.get("name") for p in props if isinstance(p, dict)}
        idx = device.device_index.to_numpy()
        idx = idx[idx >= 0]
        main = int(np.bincount(idx).argmax()) if len(idx) else 0
        name = names.get(main) or next((n for n in names.values() if n), None)
        return "cuda", str(name) if name else "unknown GPU"
    host = meta.get("host_name")
    if host == socket.gethostname():
        from wlprof.device import cpu_model

        return "cpu", cpu_model()
    return "cpu", f"CPU of host {host}" if host else "unknown CPU"


def rank_of(meta: dict, default: int) -> int:
    """The trace's distributed rank (`distributedInfo.rank`), else `default` (the file's order)."""
    info = meta.get("distributedInfo")
    if isinstance(info, dict) and isinstance(info.get("rank"), int):
        return info["rank"]
    return default

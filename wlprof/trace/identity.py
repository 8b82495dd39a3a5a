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
        names = {p.get("id"): p.get("name") for p in props if isinstance(p, dict)}
        idx = device.device_index.to_numpy() if "device_index" in device else np.zeros(0, np.int64)
        idx = idx[idx >= 0]
        main = int(np.bincount(idx).argmax()) if len(idx) else 0
        name = names.get(main) or next((n for n in names.values() if n), None)
        return "cuda", str(name) if name else "unknown MTIA" if mtia else "unknown GPU"
    host = meta.get("host_name")
    if host == socket.gethostname():
        from wlprof.device import cpu_model

        return "cpu", cpu_model()
    return "cpu", f"CPU of host {host}" if host else "unknown CPU"


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

"""Choosing the device and dtype of a run, and describing the device for manifests."""

from __future__ import annotations

import os
import platform
from typing import Any

from wlprof.errors import InputError, did_you_mean

DTYPES = ("bfloat16", "float16", "float32", "float64")
DTYPE_ALIASES = {
    "bf16": "bfloat16", "bfloat16": "bfloat16",
    "fp16": "float16", "half": "float16", "float16": "float16",
    "fp32": "float32", "float": "float32", "float32": "float32",
    "fp64": "float64", "double": "float64", "float64": "float64",
}


def resolve_device(name: str | None, arg: str = "--device"):
    """'cuda', 'cuda:1', 'cpu' or None (the GPU when there is one, else the CPU)."""
    import torch

    if name is None or name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(name)
    except (RuntimeError, TypeError):
        raise InputError(arg, "must be 'cpu', 'cuda', 'cuda:N' or 'auto'", name,
                         hint=did_you_mean(name, ("cpu", "cuda", "auto"))) from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise InputError(arg, "names a CUDA device but this machine has none", name)
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise InputError(arg, f"must name one of the {torch.cuda.device_count()} CUDA devices", name)
        if dev.index is None:
            dev = torch.device("cuda", torch.cuda.current_device())
    elif dev.type != "cpu":
        raise InputError(arg, "must be 'cpu', 'cuda', 'cuda:N' or 'auto'", name,
                         hint=did_you_mean(name, ("cpu", "cuda", "auto")))
    return dev


def default_dtype_name(device) -> str:
    return "bfloat16" if device.type == "cuda" else "float32"


def resolve_dtype(name: str | None, device, arg: str = "--dtype"):
    """A torch dtype the device can compute in; None picks bf16 on a GPU, fp32 on the CPU."""
    import torch

    canon = DTYPE_ALIASES.get((name or default_dtype_name(device)).lower())
    if canon is None:
        aliases = [a for a in DTYPE_ALIASES if a not in DTYPES]
        # a width wlprof does not run (float8, int4) gets no suggestion of another width
        bits = "".join(ch for ch in str(name) if ch.isdigit())
        close = [a for a in DTYPE_ALIASES if "".join(ch for ch in a if ch.isdigit()) == bits] if bits else DTYPE_ALIASES
        prefixed = sorted((a for a in close if a.startswith(str(name).lower())), key=len)  # 'bfloat' -> bfloat16
        hint = f"did you mean {prefixed[0]!r}?" if prefixed else did_you_mean(str(name).lower(), close)
        raise InputError(arg, f"must be one of {', '.join(DTYPES)} (also {', '.join(aliases)})", name, hint=hint)
    dtype = getattr(torch, canon)
    if device.type == "cuda" and dtype == torch.bfloat16 and not torch.cuda.is_bf16_supported():
        raise InputError(arg, f"must be a dtype {device_name(device)} supports; it lacks bfloat16", name)
    # Probe the one thing every workload does: a matrix product in this dtype.
    try:
        a = torch.ones(2, 2, device=device, dtype=dtype)
        (a @ a).sum().item()
    except RuntimeError as exc:
        raise InputError(arg, f"must be a dtype {device_name(device)} can multiply in ({exc})", name) from None
    return dtype


def dtype_name(dtype) -> str:
    return str(dtype).removeprefix("torch.")


def device_name(device) -> str:
    import torch

    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return cpu_model()


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def device_info(device) -> dict[str, Any]:
    """What a manifest records about the device a run used."""
    import torch

    info: dict[str, Any] = {"type": device.type, "name": device_name(device)}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info.update(
            index=device.index,
            sm_count=props.multi_processor_count,
            memory_bytes=props.total_memory,
            compute_capability=f"{props.major}.{props.minor}",
            l2_cache_bytes=getattr(props, "L2_cache_size", None),
        )
    else:
        info.update(threads=torch.get_num_threads(), cores=os.cpu_count())
    return info


def synchronize(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)

"""FlopCounterMode's count of a recorded op call, re-run on meta tensors.

The call is rebuilt from what torch.profiler recorded (`Input Dims`, `Input type`, `Input
Strides`, `Concrete Inputs`): a meta tensor of the recorded shape, strides and dtype per
tensor argument, the recorded value per scalar, None for an absent optional; the
overload is the one whose schema takes the recorded arguments (an `out=` tensor included;
trailing arguments a newer torch added take their defaults). Then the op runs under
`torch.utils.flop_counter.FlopCounterMode`, which counts it from the shapes exactly as it
would the real call.
"""

from __future__ import annotations

import math

import torch
from torch.utils.flop_counter import FlopCounterMode, flop_registry

from wlprof.cost import dtypes
from wlprof.cost.registry import parse_scalar


def registry_ops() -> set[str]:
    """The aten ops FlopCounterMode has a formula for, named as the profiler names them."""
    return {"aten::" + str(k).split(".", 1)[1] for k in flop_registry if str(k).startswith("aten.")}


def _torch_dtype(type_str: str | int | None):
    name = dtypes.canonical(type_str) if isinstance(type_str, str) else dtypes.SCALAR_TYPE_CODES.get(type_str)
    return getattr(torch, name) if name else None


def _candidates(packet, n: int) -> list:
    out = []
    for ov in packet.overloads():
        op = getattr(packet, ov)
        args = op._schema.arguments
        if len(args) >= n and all(a.has_default_value() for a in args[n:]):
            out.append((len(args) != n, op))
    return [op for _, op in sorted(out, key=lambda x: x[0])]


def _value(arg, i: int, dims, types, strides, conc, device: str):
    t = str(arg.type)
    if i < len(types) and dtypes.is_tensor_type(types[i]):
        st = strides[i] if i < len(strides) and len(strides[i]) == len(dims[i]) else None
        dt = _torch_dtype(types[i])
        if st is None:
            return torch.zeros(dims[i], dtype=dt, device=device)
        return torch.zeros(dims[i], dtype=dt, device=device).as_strided(dims[i], st) if 0 in st else \
            torch.empty_strided(dims[i], st, dtype=dt, device=device).zero_()
    if "Tensor" in t:
        return [] if t in ("Tensor[]", "List[Tensor]") else None
    raw = parse_scalar(conc[i]) if i < len(conc) else None
    if "ScalarType" in t:
        return _torch_dtype(raw) if raw is not None else None
    if "Device" in t:
        return torch.device(device) if raw is not None else None
    if any(k in t for k in ("Layout", "MemoryFormat", "Generator")):
        return None
    return raw


def _frames(exc: BaseException):
    import traceback

    return traceback.extract_tb(exc.__traceback__)


def flop_counter_count(name: str, args: dict, device: str = "meta") -> int:
    """FlopCounterMode's total for the recorded call of aten op `name` (raises if it cannot run on meta;
    `device="cpu"` runs it on zero-filled CPU tensors instead, for an op without a meta kernel)."""
    packet = getattr(torch.ops.aten, name.split("::", 1)[1])
    dims, types = args.get("Input Dims", []), args.get("Input type", [])
    strides, conc = args.get("Input Strides", []), args.get("Concrete Inputs", [])
    n = len(types)
    errors = []
    for op in _candidates(packet, n):
        pos, kw = [], {}
        try:
            for i, a in enumerate(op._schema.arguments[:n]):
                v = _value(a, i, dims, types, strides, conc, device)
                if a.kwarg_only or a.is_out:
                    kw[a.name] = v
                else:
                    pos.append(v)
        except (RuntimeError, TypeError, ValueError, IndexError) as exc:
            errors.append(f"{op}: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}")
            continue
        try:
            with FlopCounterMode(display=False) as fc:
                op(*pos, **kw)
            return fc.get_total_flops()
        except TypeError as exc:
            if "flop_counter" in "".join(str(f.filename) for f in _frames(exc)):
                raise  # FlopCounterMode's own formula failed on these arguments: that is the answer
            errors.append(f"{op}: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}")
        except (RuntimeError, ValueError, NotImplementedError, IndexError) as exc:
            errors.append(f"{op}: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}")
    small = sum(math.prod(d) for d in dims if isinstance(d, list) and all(isinstance(x, int) for x in d)) < 2**26
    if device == "meta" and small:
        # a torch without a meta kernel for this op (2.11's _convolution on meta dispatches to
        # convolution_overrideable): FlopCounterMode counts from the shapes, so zero-filled CPU
        # tensors give the same count
        try:
            return flop_counter_count(name, args, device="cpu")
        except LookupError as exc:
            errors.append(str(exc))
    raise LookupError(f"{name}: no overload runs on {device} tensors ({'; '.join(errors) or 'none takes the arguments'})")

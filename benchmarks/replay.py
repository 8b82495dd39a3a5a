"""Re-run one recorded op call from its recorded shapes, dtypes, strides and scalars.

`replay_op` builds fresh random inputs of the recorded sizes, strides and dtypes
(never zeros: they can run faster than real data) and returns a callable that
calls the aten op with them, so one op can be timed alone, unprofiled. The
overload is resolved by the op packet from the arguments, as the dispatcher does.

Integer tensors are filled with 0s and 1s, so index-like inputs stay in range for
any non-empty dimension; ops whose correctness depends on index contents (sparse
structures, offsets) may refuse them: `ReplayError` says why.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from wlprof.cost import dtypes
from wlprof.cost.registry import parse_scalar
from wlprof.errors import WlprofError


class ReplayError(WlprofError):
    """The recorded call cannot be rebuilt or run."""


def _loads(v):
    if v is None or isinstance(v, (list, tuple)):
        return v
    return json.loads(v)


def _tensor(dims, strides, type_str, device, gen):
    import torch

    name = dtypes.canonical(type_str)
    dtype = getattr(torch, name, None) if name else None
    if dtype is None:
        raise ReplayError(f"cannot build a tensor of dtype {type_str!r}")
    dims = list(dims)
    if strides and len(strides) == len(dims):
        storage = 1 + sum((d - 1) * s for d, s in zip(dims, strides, strict=True) if d > 0) if all(dims) else 0
        base = _fill(torch.empty(max(storage, 1), device=device, dtype=dtype), gen)
        return base.as_strided(dims, list(strides))
    return _fill(torch.empty(dims, device=device, dtype=dtype), gen)


def _fill(t, gen):
    import torch

    if t.is_floating_point() or t.is_complex():
        return t.normal_(generator=gen)
    if t.dtype == torch.bool:
        return t.random_(0, 2, generator=gen).bool() if t.numel() else t
    return t.random_(0, 2, generator=gen)


def replay_op(name: str, input_dims, input_types, input_strides, concrete_inputs, device,
              seed: int = 0, copies: int = 1) -> Callable[[], Any]:
    """A zero-argument callable that runs aten op `name` on fresh inputs of the recorded layout.

    With `copies` > 1 it cycles through that many independent input sets, so that
    repeated calls do not find their inputs in the cache (an op inside a real step
    rarely does: the ops before it evict them).
    """
    if copies < 1:
        raise ReplayError(f"copies must be at least 1 (got {copies})")
    calls = [_replay_once(name, input_dims, input_types, input_strides, concrete_inputs, device, seed + i)
             for i in range(copies)]
    if copies == 1:
        return calls[0]
    state = {"i": 0}

    def cycle():
        fn = calls[state["i"]]
        state["i"] = (state["i"] + 1) % copies
        return fn()

    return cycle


def input_bytes(input_dims, input_types) -> int:
    """Bytes of the tensor inputs of a recorded call (dense sizes)."""
    import math

    dims, types = _loads(input_dims) or [], _loads(input_types) or []
    total = 0
    for d, t in zip(dims, types, strict=False):
        size = dtypes.element_size(t)
        if size and isinstance(d, list) and all(isinstance(x, int) for x in d):
            total += math.prod(d) * size
    return total


def _replay_once(name: str, input_dims, input_types, input_strides, concrete_inputs, device,
                 seed: int) -> Callable[[], Any]:
    import torch

    if not name.startswith("aten::"):
        raise ReplayError(f"only aten ops can be replayed (got {name!r})")
    packet = getattr(torch.ops.aten, name.split("::", 1)[1], None)
    if packet is None:
        raise ReplayError(f"{name} is not an aten op of this torch")
    dims, types = _loads(input_dims) or [], _loads(input_types) or []
    strides, conc = _loads(input_strides) or [], _loads(concrete_inputs) or []
    gen = torch.Generator(device=device).manual_seed(seed)
    args = []
    for i, t in enumerate(types):
        d = dims[i] if i < len(dims) else []
        if dtypes.is_tensor_type(t):
            args.append(_tensor(d, strides[i] if i < len(strides) else None, t, device, gen))
        elif t == "TensorList":
            raise ReplayError(f"{name}: tensor-list inputs record no dtype and cannot be rebuilt")
        else:
            args.append(parse_scalar(conc[i] if i < len(conc) else ""))
    # The trace records every argument in schema order, keyword-only ones included
    # (addmm's beta and alpha): bind them by name against each overload until one runs.
    errors = []
    for overload in packet.overloads():
        op = getattr(packet, overload)
        schema_args = op._schema.arguments
        if len(args) > len(schema_args):
            continue
        pos, kw = [], {}
        for a, value in zip(schema_args, args, strict=False):
            if a.kwarg_only:
                if value is not None:
                    kw[a.name] = value
            else:
                pos.append(value)
        while pos and pos[-1] is None:
            pos.pop()
        try:
            op(*pos, **kw)
        except Exception as exc:  # noqa: BLE001 - try the next overload
            errors.append(f"{overload}: {str(exc).splitlines()[0][:120]}")
            continue

        def call(op=op, pos=pos, kw=kw):
            return op(*pos, **kw)

        return call
    raise ReplayError(f"{name}: no overload accepts the recorded arguments ({'; '.join(errors)[:400]})")

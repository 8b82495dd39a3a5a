"""A mix: the models to place, each one configuration of a wlprof workload, with an optional SLO.

```toml
[mix]
name = "dense"                      # optional (default: the file's stem)
description = "..."                 # optional
dtype = "bfloat16"                  # optional (default: bf16 on a GPU, fp32 on the CPU)
cpu_dtype = "float32"               # optional: every model's dtype on the CPU

[[model]]
name = "mlp-b4096"                  # unique in the mix
workload = "mlp"                    # any registered workload
params = { batch = 4096 }           # its parameters, one value each (the request batch is the
                                    # workload's own size: mlp batch, moe tokens, gemm shape)
layers = 1                          # optional: steps per request (a model of N such layers)
slo_us = 5000                       # optional: latency objective of one request, in µs
dtype = "float32"                   # optional: this model's dtype
cpu = { batch = 64, slo_us = 900 }  # optional: params (and slo_us, dtype) replaced on the CPU
```

`load_mix` checks the file's form; `resolve` checks every model against its workload's
declared parameters on a device and returns one sweep point per model. Errors name the
key as it is written in the file (`model[2].params.batch`).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wlprof.errors import InputError, did_you_mean

MIX_KEYS = {"name", "description", "dtype", "cpu_dtype", "device"}
MODEL_KEYS = {"name", "workload", "params", "layers", "slo_us", "dtype", "cpu"}
MAX_MODELS = 64  # the search keeps a group as a bit mask of model indices


@dataclass(frozen=True)
class ModelEntry:
    """One model as the mix file states it (before it is checked against its workload)."""

    name: str
    workload: str
    params: Mapping[str, Any]
    layers: int = 1
    slo_us: float | None = None
    dtype: str | None = None
    cpu: Mapping[str, Any] = field(default_factory=dict)
    where: str = "model[0]"  # how errors name it


@dataclass(frozen=True)
class Mix:
    name: str
    models: tuple[ModelEntry, ...]
    description: str | None = None
    dtype: str | None = None
    device: str | None = None
    source: str | None = None
    cpu_dtype: str | None = None

    def names(self) -> list[str]:
        return [m.name for m in self.models]


@dataclass
class Model:
    """A model resolved on a device: its workload, its one sweep point, its dtype."""

    index: int
    name: str
    workload: str
    point: Any  # wlprof.workloads.Point
    dtype: Any  # torch dtype
    dtype_name: str
    layers: int
    slo_us: float | None
    notes: tuple[str, ...] = ()

    @property
    def params(self) -> dict[str, Any]:
        return dict(self.point.params)

    def key(self, device_name: str) -> str:
        """What identifies this model's configuration across files (co-location calibrations)."""
        body = json.dumps({"device": device_name, "workload": self.workload, "params": _plain(self.params),
                           "dtype": self.dtype_name, "layers": self.layers}, sort_keys=True, default=str)
        return hashlib.sha1(body.encode()).hexdigest()[:16]

    def spec_text(self) -> str:
        """The configuration as `wlprof predict --spec` writes it: 'mlp batch=64 d_model=4096 ...'."""
        parts = [self.workload]
        for k, v in self.params.items():
            if v is None:
                continue
            parts.append(f"{k}={','.join(map(str, v)) if isinstance(v, (list, tuple)) else v}")
        return " ".join(parts)


def _plain(v):
    if isinstance(v, Mapping):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def load_mix(path: str | Path) -> Mix:
    path = Path(path)
    if path.is_dir():
        raise InputError("MIX_FILE", "must be a mix file (TOML), not a folder", str(path))
    if not path.is_file():
        raise InputError("MIX_FILE", "must be an existing mix file (TOML)", str(path))
    return mix_from_toml(path.read_bytes(), str(path))


def mix_from_toml(data: bytes, source: str = "mix.toml") -> Mix:
    import tomllib

    from wlprof.params import toml_loads

    try:
        doc = toml_loads(data.decode())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError("MIX_FILE", f"must be valid TOML ({exc})", source) from None
    unknown = sorted(set(doc) - {"mix", "model"})
    if unknown:
        raise InputError(f"[{unknown[0]}]", "is not a section of a mix file (sections: [mix], [[model]])",
                         unknown[0])
    head = doc.get("mix", {})
    if not isinstance(head, dict):
        raise InputError("mix", "must be a table ([mix])", head)
    bad = sorted(set(head) - MIX_KEYS)
    if bad:
        raise InputError(f"mix.{bad[0]}", f"is not a mix key (keys: {', '.join(sorted(MIX_KEYS))})", head[bad[0]],
                         hint=did_you_mean(bad[0], MIX_KEYS))
    raw_models = doc.get("model", [])
    if not isinstance(raw_models, list) or not raw_models:
        raise InputError("[[model]]", "must list at least one model", raw_models or None)
    if len(raw_models) > MAX_MODELS:
        raise InputError("[[model]]", f"must list at most {MAX_MODELS} models", len(raw_models))
    models, seen = [], {}
    for i, m in enumerate(raw_models):
        where = f"model[{i}]"
        if not isinstance(m, dict):
            raise InputError(where, "must be a table", m)
        bad = sorted(set(m) - MODEL_KEYS)
        if bad:
            raise InputError(f"{where}.{bad[0]}", f"is not a model key (keys: {', '.join(sorted(MODEL_KEYS))})",
                             m[bad[0]], hint=did_you_mean(bad[0], MODEL_KEYS))
        if "workload" not in m:
            raise InputError(f"{where}.workload", "is required", None)
        workload = str(m["workload"])
        name = str(m.get("name") or f"{workload}-{i}")
        if name in seen:
            raise InputError(f"{where}.name", f"must be unique in the mix ({seen[name]} has it too)", name)
        seen[name] = where
        params = m.get("params", {})
        if not isinstance(params, dict):
            raise InputError(f"{where}.params", "must be a table of the workload's parameters", params)
        cpu = m.get("cpu", {})
        if not isinstance(cpu, dict):
            raise InputError(f"{where}.cpu", "must be a table of parameters (and slo_us) for the CPU", cpu)
        layers = m.get("layers", 1)
        if isinstance(layers, bool) or not isinstance(layers, int) or layers < 1:
            raise InputError(f"{where}.layers", "must be a positive integer (steps per request)", layers)
        slo = _slo(m.get("slo_us"), f"{where}.slo_us")
        _slo(cpu.get("slo_us"), f"{where}.cpu.slo_us")
        dtype = m.get("dtype", head.get("dtype"))
        models.append(ModelEntry(name, workload, dict(params), layers, slo, dtype, dict(cpu), where))
    return Mix(name=str(head.get("name") or Path(source).stem), models=tuple(models),
               description=head.get("description"), dtype=head.get("dtype"), device=head.get("device"),
               source=source, cpu_dtype=head.get("cpu_dtype"))


def _slo(v, where: str) -> float | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
        raise InputError(where, "must be a positive number of microseconds", v)
    return float(v)


def resolve(mix: Mix, device) -> list[Model]:
    """Every model checked against its workload on `device`: one sweep point each."""
    from wlprof import workloads
    from wlprof.device import dtype_name, resolve_dtype

    out = []
    for i, e in enumerate(mix.models):
        try:
            wl = workloads.get(e.workload)
        except InputError as exc:
            raise InputError(f"{e.where}.workload", exc.rule_text(), e.workload, hint=exc.hint) from None
        params = dict(e.params)
        slo, dtype_text, where_dtype = e.slo_us, e.dtype, f"{e.where}.dtype"
        if device.type == "cpu":
            if mix.cpu_dtype is not None:
                dtype_text, where_dtype = mix.cpu_dtype, "mix.cpu_dtype"
            for k, v in e.cpu.items():
                if k == "slo_us":
                    slo = float(v)
                elif k == "dtype":
                    dtype_text, where_dtype = v, f"{e.where}.cpu.dtype"
                else:
                    params[k] = v
        dtype = resolve_dtype(dtype_text, device, where_dtype)
        try:
            parsed = wl.parse(params, device, dtype)
            points = wl.points(parsed.spec)
        except InputError as exc:
            raise InputError(f"{e.where}.params.{exc.arg}", exc.rule_text(), exc.value, hint=exc.hint) from None
        if len(points) != 1:
            many = [p.name for p in wl.params if p.many and isinstance(params.get(p.name), (list, tuple))
                    and len(params[p.name]) > 1]
            raise InputError(f"{e.where}.params" + (f".{many[0]}" if many else ""),
                             f"must be one configuration of {e.workload} (it gives {len(points)} sweep points)",
                             [p.variant for p in points][:6])
        out.append(Model(i, e.name, e.workload, points[0], dtype, dtype_name(dtype), e.layers, slo,
                         tuple(parsed.notes)))
    return out

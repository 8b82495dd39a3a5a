"""The workload interface: a spec in, sweep points out, and a built step per point.

A workload parses and validates its parameters (from CLI flags or a study file)
into a frozen spec, expands it into sweep points, and builds each point on the
device: tensors, modules, graphs, routing, plus what it alone knows (useful
FLOPs, the cost of regions whose shapes cannot tell, routing or graph facts).
Parameters and facts become typed columns of every table, so each name a
workload uses must be declared in `wlprof.schema.PARAMS`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from wlprof.cost.registry import Cost
from wlprof.errors import InputError


@dataclass(frozen=True)
class Point:
    variant: str  # a label unique within the sweep
    params: Mapping[str, Any]  # schema PARAMS columns


@dataclass
class Built:
    step: Callable[[], object]
    graph_safe: bool = True  # False when a step syncs with the host (cannot be graph-captured)
    region_costs: dict[str, Cost] = field(default_factory=dict)  # per step, regions shapes cannot cost
    facts: dict[str, Any] = field(default_factory=dict)  # schema PARAMS columns measured at build
    useful_flops: float | None = None  # FLOPs the computation needs per step, where it differs
    # regions whose kernels' FLOPs are the step's "executed" FLOPs, to set beside useful_flops
    # (MoE: ("moe/expert",), padding included); None: every kernel of the step
    executed_regions: tuple[str, ...] | None = None
    note: str | None = None


@dataclass(frozen=True)
class Parsed:
    spec: Any
    notes: tuple[str, ...] = ()


def argname(key: str, prefix: str) -> str:
    """'top_k' -> '--top-k' for the CLI, 'params.top_k' for a study file."""
    return "--" + key.replace("_", "-") if prefix == "--" else f"{prefix}{key}"


class Workload(ABC):
    name: ClassVar[str]
    summary: ClassVar[str]

    @abstractmethod
    def parse(self, params: Mapping[str, Any], device, dtype, prefix: str = "--") -> Parsed:
        """Validate `params` and fill device-dependent defaults; raise InputError naming the argument."""

    @abstractmethod
    def points(self, spec) -> list[Point]:
        ...

    @abstractmethod
    def build(self, point: Point, device, dtype) -> Built:
        ...

    def estimate_bytes(self, point: Point, dtype) -> int:
        """Device memory a point needs, to refuse sizes that cannot fit before allocating."""
        return 0


_REGISTRY: dict[str, type[Workload]] = {}


def register(cls: type[Workload]) -> type[Workload]:
    if cls.name in _REGISTRY:
        raise ValueError(f"workload {cls.name!r} is registered twice")
    _REGISTRY[cls.name] = cls
    return cls


def names() -> list[str]:
    _load_all()
    return sorted(_REGISTRY)


def get(name: str) -> Workload:
    _load_all()
    if name not in _REGISTRY:
        raise InputError("WORKLOAD", f"must be one of {', '.join(sorted(_REGISTRY))}", name)
    return _REGISTRY[name]()


# Modules that register a workload when imported (each calls @register).
_WORKLOAD_MODULES = ("gemm", "mlp", "elementwise", "moe", "gnn")


def _load_all() -> None:
    import importlib

    for module in _WORKLOAD_MODULES:
        importlib.import_module(f"wlprof.workloads.{module}")


# --- small validators shared by workloads ---------------------------------------------


def positive_int(value: Any, arg: str) -> int:
    if isinstance(value, bool):
        raise InputError(arg, "must be a positive integer", value)
    try:
        v = int(value)
    except (TypeError, ValueError):
        raise InputError(arg, "must be a positive integer", value) from None
    if v != value and not (isinstance(value, str) and value.strip().lstrip("+").isdigit()):
        raise InputError(arg, "must be a positive integer", value)
    if v <= 0:
        raise InputError(arg, "must be a positive integer", value)
    return v


def seed_param(value: Any, arg: str, default: int) -> int:
    """A data seed: an integer >= 0 (None: `default`)."""
    if value is None:
        return default
    if isinstance(value, bool):
        raise InputError(arg, "must be an integer >= 0", value)
    try:
        v = int(value)
    except (TypeError, ValueError):
        raise InputError(arg, "must be an integer >= 0", value) from None
    if v != value and not (isinstance(value, str) and value.strip().lstrip("+").isdigit()):
        raise InputError(arg, "must be an integer >= 0", value)
    if v < 0:
        raise InputError(arg, "must be an integer >= 0", value)
    return v


def int_list(value: Any, arg: str) -> list[int]:
    """'1,8,64' or [1, 8, 64] -> [1, 8, 64], each positive."""
    if isinstance(value, str):
        items = [x.strip() for x in value.split(",") if x.strip()]
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        items = [value]
    if not items:
        raise InputError(arg, "must list at least one value", value)
    return [positive_int(x, arg) for x in items]


def str_list(value: Any, arg: str, allowed: list[str] | None = None) -> list[str]:
    if isinstance(value, str):
        items = [x.strip() for x in value.split(",") if x.strip()]
    elif isinstance(value, (list, tuple)):
        items = [str(x).strip() for x in value]
    else:
        raise InputError(arg, "must be a comma-separated list", value)
    if not items:
        raise InputError(arg, "must list at least one value", value)
    if allowed is not None:
        for x in items:
            if x not in allowed:
                raise InputError(arg, f"must be one of {', '.join(allowed)}", x)
    return items


def reject_unknown(params: Mapping[str, Any], known: set[str], prefix: str) -> None:
    for key in params:
        if key not in known:
            raise InputError(argname(key, prefix), f"is not a parameter of this workload (known: {', '.join(sorted(known))})", params[key])

"""Workload generators. Each is one module or package exposing `WORKLOAD`, registered below."""

from __future__ import annotations

import functools
import importlib

from wlprof.errors import InputError, Key, did_you_mean
from wlprof.workloads.base import Built, Parsed, Point, Stated, Workload

# The registration: one line per workload (its module), in the order tables list their columns.
MODULES = (
    "wlprof.workloads.gemm",
    "wlprof.workloads.mlp",
    "wlprof.workloads.elementwise",
    "wlprof.workloads.moe",
    "wlprof.workloads.gnn",
    "wlprof.workloads.halo",
    "wlprof.workloads.layers",
    "wlprof.workloads.optim",
)


@functools.lru_cache(maxsize=1)
def all_workloads() -> tuple[Workload, ...]:
    return tuple(importlib.import_module(m).WORKLOAD for m in MODULES)


def names() -> list[str]:
    return [w.name for w in all_workloads()]


def get(name: str) -> Workload:
    """A fresh instance of the workload (an instance may cache data between the points of one run)."""
    for w in all_workloads():
        if w.name == name:
            return type(w)()
    raise InputError(Key("workload", "study"), f"must be one of {', '.join(names())}", name,
                     hint=did_you_mean(name, names()))


__all__ = ["Built", "Parsed", "Point", "Stated", "Workload", "all_workloads", "get", "names"]

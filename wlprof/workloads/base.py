"""The workload interface: declared parameters in, sweep points out, and a built step per point.

A workload declares its inputs (`params`), the columns its points and facts add to
every table (`columns`), how the report groups its points (`family`, `label`), its
CLI examples and what its regions mean; it turns parsed values into sweep points and
builds each point on the device. Whatever shapes cannot tell (sparse nnz, which
experts are active), the workload states as a `Cost` of the op that does that work.
"""

from __future__ import annotations

import contextlib
import contextvars
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from wlprof.cost.registry import Cost
from wlprof.params import Param, Values, parse_all
from wlprof.schema import Column

_LISTING = contextvars.ContextVar("wlprof_listing", default=False)


@contextlib.contextmanager
def listing_for_another_device():
    """While `predict --spec` lists a step on the CPU for another device: this machine's capability
    probes (a dtype its kernels lack) do not apply."""
    token = _LISTING.set(True)
    try:
        yield
    finally:
        _LISTING.reset(token)


def listing_only() -> bool:
    """Whether a step is being listed for another device (`listing_for_another_device`)."""
    return _LISTING.get()


@dataclass(frozen=True)
class Point:
    variant: str  # a label unique within the sweep
    params: Mapping[str, Any]  # values of the workload's columns


@dataclass(frozen=True)
class Stated:
    """A cost the workload states per step for the ops named `ops` inside `region` (None: every op
    there); the other ops of the region keep their formulas. It is split over the named ops' rows
    in proportion to what their formulas give each (equal calls get equal parts), or by duration
    where a row has no formula value."""

    region: str
    cost: Cost
    ops: tuple[str, ...] | None = None


@dataclass
class Built:
    step: Callable[[], object]
    graph_safe: bool = True  # False when a step syncs with the host (cannot be graph-captured)
    stated: list[Stated] = field(default_factory=list)  # costs shapes cannot tell, per step
    facts: dict[str, Any] = field(default_factory=dict)  # values of fact columns measured at build
    useful_flops: float | None = None  # FLOPs the computation needs per step, where it differs
    # regions whose kernels' FLOPs are the step's "executed" FLOPs, to set beside useful_flops
    # (MoE: ("moe/expert",), padding included); None: every kernel of the step
    executed_regions: tuple[str, ...] | None = None
    note: str | None = None
    # the list ops of one step with their tensor lists' shapes (cost.tensor_lists.ListCall), for the
    # lists the profiler records as `[]` (more than 30 tensors)
    tensor_lists: tuple = ()


@dataclass(frozen=True)
class Parsed:
    spec: Any
    notes: tuple[str, ...] = ()


class Workload(ABC):
    name: ClassVar[str]
    summary: ClassVar[str]  # one line, for `wlprof run --help`
    params: ClassVar[tuple[Param, ...]]
    columns: ClassVar[tuple[Column, ...]]  # point parameters and build facts, typed columns of every table
    examples: ClassVar[tuple[str, ...]] = ()  # `wlprof run ...` lines for --help
    label: ClassVar[str] = ""  # how the report names the workload (default: its name)
    phases: ClassVar[bool] = False  # whether the report breaks its time down by region
    rate_axis: ClassVar[str | None] = None  # the column the report plots achieved TFLOP/s against
    # the report's figure of this workload: "rate" (achieved rate and latency against rate_axis), "phases"
    # (time by region, as shares and on a log axis, with padding waste), "backends" (time and bandwidth
    # per backend, graph and size); None: "rate" where there is a rate_axis, else "phases" where phases
    figure: ClassVar[str | None] = None
    # why `predict --spec` cannot list the step on the meta device as CUDA launches it (None: it can)
    unlistable: ClassVar[str | None] = None

    def parse(self, raw: Mapping[str, Any], device, dtype) -> Parsed:
        """Check `raw` (CLI flags or a study's [params]) and expand it into a spec."""
        return self.spec(parse_all(self.params, raw, device.type, self.name), device, dtype)

    @abstractmethod
    def spec(self, values: Values, device, dtype) -> Parsed:
        """Cross-checks and device-dependent choices over parsed values; the spec and notes for the user."""

    @abstractmethod
    def points(self, spec) -> list[Point]:
        ...

    @abstractmethod
    def build(self, point: Point, device, dtype) -> Built:
        ...

    def prepare(self, point: Point, device) -> None:
        """Build, ahead of `build`, the index data a point's step reads (a GNN's graph): `predict --spec`
        runs this for real on the CPU and only `build` with large floating tensors on the meta device."""
        return None

    def estimate_bytes(self, point: Point, dtype) -> int:
        """Device memory a point needs, to refuse sizes that cannot fit before allocating."""
        return 0

    def prepare_bytes(self, point: Point) -> int:
        """Host memory `prepare` takes on the CPU (the index data drawn for real), to refuse a listing
        that cannot fit before drawing it."""
        return 0

    def size_params(self) -> tuple[str, ...]:
        """The parameters that set a point's size (named when a point does not fit in memory)."""
        return tuple(p.name for p in self.params if p.kind == "int" and p.name != "seed")

    def family(self, rows) -> list[str]:
        """The report family of each row of a table of this workload's points (a DataFrame)."""
        return [self.label or self.name] * len(rows)


def column(rows, name: str) -> list:
    """A column of `rows` as a list, Nones where the table lacks it."""
    return list(rows[name]) if name in rows else [None] * len(rows)

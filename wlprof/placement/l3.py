"""Level 3 for placement: a model's latency alone, predicted from an offline profile without running it.

Two sources, the first that answers:

1. The prediction model of `wlprof predict --profile DIR --spec '...'` (`wlprof.predict`, the
   Level-3 predictor of a configuration's step from its op calls), through `branch_latency`, the
   one function that calls it. It answers only where that package is installed.
2. The offline profile as a wlprof traces folder (`wlprof sweep STUDY --traces DIR`, or the
   `traces/` of a `wlprof profile` folder), read with the ladder of `wlprof/analysis/models.py`:
   - same point: the profile ran this very configuration (workload, every parameter, dtype,
     device): its measured step time, the CUDA-graph replay time for a model the co-runner
     replays as a graph, else the single-call latency;
   - op calls: else the model's op calls (listed by the costing pass: shapes only) predicted one
     by one by the ladder's Level-3 lookups (the same call in the same sweep point, the same call
     anywhere, the nearest shapes) and summed; a call none of them knows takes the ladder's fitted
     roofline (its roofline time over the median roofline fraction of its category in the profile)
     in place of the regression, whose fit takes minutes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from wlprof import workloads
from wlprof.errors import InputError


@dataclass
class Answer:
    us: float
    source: str  # "predictor", "same point", "op calls"
    detail: str = ""


_PREDICTORS: dict[str, Any] = {}  # profile folder -> the predictor's (Predictor, Host, info), loaded once


def branch_latency(profile: Path, model, ops: pd.DataFrame | None, mode: str) -> tuple[float, str] | None:
    """The Level-3 predictor's latency of `model` (µs per request) and what answered, or None where the
    predictor (`wlprof.predict`, `wlprof profile`'s folder format) is not installed. The one place
    placement calls it: the model's op calls (the costing pass's, else listed from its configuration
    on the meta device) predicted one by one and laid on the predictor's host timeline; a model the
    co-runner replays as a CUDA graph takes the calls' kernel time, an eager one the single-call latency."""
    try:
        from wlprof.predict.profile import load_profile
        from wlprof.predict.report import predict_calls
        from wlprof.predict.steps import times_of
    except ImportError:
        return None
    key = str(Path(profile).resolve())
    if key not in _PREDICTORS:
        _PREDICTORS[key] = load_profile(profile)
    predictor, host, _ = _PREDICTORS[key]
    if ops is None:
        from wlprof.predict.spec import parse_spec, record

        ops = record(parse_spec(model.spec_text()), model.dtype_name,
                     launching=frozenset(predictor.meta.get("op_names", [])))
    calls = ops.sort_values("ts_us", kind="stable") if "ts_us" in ops else ops
    d, pred, src = predict_calls(predictor, calls)
    _, latency = times_of(d, pred, host)
    kernel = float(np.sum(pred))
    us = kernel if mode == "graph" else float(latency)
    shares = ", ".join(f"{k} {v:.0%}" for k, v in predictor.sources(src).items() if v)
    return us * model.layers, f"kernel {kernel:,.1f} µs, one call {latency:,.1f} µs; {shares}"


@dataclass
class Profile:
    """An offline profile folder, opened once: its steps and (fitted lazily) the ladder on its op calls.
    `root` is the folder given; `store` the traces folder in it (`root` itself, or `root/traces` in
    the layout `wlprof profile` writes)."""

    root: Path
    steps: pd.DataFrame
    devices: list[str]
    store: Path | None = None
    _ladder: Any = None
    _ops: pd.DataFrame | None = None
    notes: list[str] = field(default_factory=list)

    @classmethod
    def open(cls, root: str | Path | None) -> Profile:
        if root is None:
            raise InputError("--profile", "is required by the profile planner: an offline profile folder "
                             "(`wlprof sweep STUDY --traces DIR` on the device, or `wlprof profile`)", None)
        root = Path(root)
        from wlprof.store.runs import list_runs

        if not root.is_dir():
            raise InputError("--profile", "must be an existing offline profile folder", str(root))
        store = root
        if not list_runs(store) and (root / "traces").is_dir():
            store = root / "traces"  # `wlprof profile`'s layout
        if not list_runs(store) and (root / "steps.parquet").is_file() and (root / "predictor.json").is_file():
            steps = pd.read_parquet(root / "steps.parquet")  # a shipped profile: its tables without the runs
            devices = sorted(str(d) for d in steps.device_name.dropna().unique())
            return cls(root, steps, devices, None)
        if not list_runs(store):
            raise InputError("--profile", "must hold at least one profiled run (a wlprof traces folder, or a "
                             "`wlprof profile` folder with its traces/)", str(root))
        import wlprof

        steps = wlprof.load(store, table="steps")
        devices = sorted(str(d) for d in steps.device_name.dropna().unique())
        return cls(root, steps, devices, store)

    def check_device(self, device_name: str) -> None:
        if device_name not in self.devices:
            raise InputError("--profile", f"must hold runs of the device being planned for ({device_name}); "
                             f"it holds {', '.join(self.devices) or 'none'}", str(self.root))

    # ------------------------------------------------------------------ same point

    def same_point(self, model, device_name: str, mode: str) -> Answer | None:
        s = self.steps
        s = s[(s.workload == model.workload) & (s.dtype == model.dtype_name) & (s.device_name == device_name)]
        if "status" in s:
            s = s[s.status.isna() | (s.status == "ok")]
        declared = {p.name: p.default for p in workloads.get(model.workload).params}
        for k, v in model.params.items():
            if not len(s):
                return None
            col = s[k] if k in s else pd.Series([None] * len(s), index=s.index)
            at_default = k in declared and _same(declared[k], v)  # a run recorded before the workload had
            s = s[[_same(x, v) or (at_default and _missing(x)) for x in col]]  # k ran at its default
        if not len(s):
            return None
        row = s.iloc[-1]
        graph = row.get("graph_us")
        if mode == "graph" and graph is not None and np.isfinite(graph):
            us, what = float(graph), "graph replay"
        else:
            us, what = float(row.latency_us), "single call"
        return Answer(us * model.layers, "same point", f"{row.run_id}: {row.variant}, {what}")

    # ------------------------------------------------------------------ op calls

    def ladder(self):
        if self._ladder is None:
            import wlprof
            from wlprof.analysis import models as ladder_models

            ops = (wlprof.load(self.store, table="ops") if self.store is not None
                   else pd.read_parquet(self.root / "ops.parquet"))
            self._ops = ops
            f = ladder_models.features(ops)
            if f.empty:
                raise InputError("--profile", "must hold op calls with known FLOPs and bytes", str(self.root))
            self._ladder = lookup_ladder(f)
        return self._ladder

    def op_calls(self, model, cost) -> Answer:
        from wlprof.analysis import models as ladder_models

        ladder = self.ladder()
        ops = cost.ops
        f = ladder_models.features(ops)
        pred, src = ladder.l3_predict(f) if len(f) else (np.array([]), np.array([]))
        unknown = np.isnan(pred)
        if unknown.any():  # no lookup knows the call: the roofline time over its category's median fraction
            pred = np.where(unknown, ladder.predict(f)["L2 fitted"], pred)
        total = float(np.nansum(pred))
        rest = ops.drop(index=f.index, errors="ignore")
        looked = 0
        if len(rest):  # calls without known costs: the profile's own median time of the same call
            known = rest.assign(_k=ladder_models.call_key(rest))["_k"].map(ladder.l3_profile or {})
            looked = int(known.notna().sum())
            total += float(known.fillna(0).sum())
        missing = len(rest) - looked
        names = [*ladder_models.SOURCES[:3], "L2 fitted"]
        counts = {s: int((src == i).sum()) for i, s in enumerate(names)}
        detail = ", ".join(f"{k} {v}" for k, v in counts.items() if v)
        if looked:
            detail += f", same call (no cost) {looked}"
        if missing:
            detail += f"; {missing} of {len(ops)} calls unknown to the profile (left out)"
        return Answer(total * model.layers, "op calls", detail)

    def alone(self, model, cost, device_name: str, mode: str) -> Answer:
        note = ""
        try:
            answer = branch_latency(self.root, model, cost.ops if cost is not None else None, mode)
        except Exception as exc:  # noqa: BLE001 - the predictor's failure leaves the lookups below
            answer, note = None, f"; the predictor failed ({type(exc).__name__}: {str(exc).splitlines()[0][:120]})"
        if answer is not None and math.isfinite(answer[0]) and answer[0] > 0:
            return Answer(answer[0], "predictor", answer[1])
        a = self.same_point(model, device_name, mode)
        if a is not None and note:
            a.detail += note
        if a is not None:
            return a
        if cost is None:
            raise InputError("--profile", f"must hold model {model.name}'s configuration, or its op calls must be "
                             "listed (no costing pass ran)", str(self.root))
        a = self.op_calls(model, cost)
        a.detail += note
        return a


class _NoRegression:
    """Stands in for the ladder's Level-3 regression: placement answers a call no lookup knows with the
    ladder's fitted roofline (L2 fitted) instead, since fitting the regression takes minutes on a small
    machine (197 s on 17,649 calls over 2 cores)."""

    def predict(self, x):
        return np.full(len(x), np.nan)


def lookup_ladder(train: pd.DataFrame):
    """`analysis.models.fit`'s Level-3 lookups (same point, same call, nearest shapes) without its
    regression, and its L0-L2 parameters."""
    from wlprof.analysis import models as ladder_models

    ladder = ladder_models.fit(train, l3=False)
    key = ladder_models.call_key(train)
    ladder.l3_profile = train.dur_us.groupby(key).median().to_dict()
    ladder.l3_point = train.dur_us.groupby(ladder_models.point_key(train, key)).median().to_dict()
    ladder.l3_neighbours = ladder_models._neighbours(train, key)
    ladder.l3_columns = list(ladder_models._l3_frame(train).columns)
    ladder.l3 = _NoRegression()
    return ladder


def _missing(x) -> bool:
    """None, NaN or pandas' NA: a value the steps table does not hold."""
    return x is None or (isinstance(x, float) and math.isnan(x)) or x is pd.NA


def _same(x, v) -> bool:
    """A steps-table value equals a point parameter (None and NaN are equal, lists by items)."""
    if _missing(v):
        return _missing(x)
    if isinstance(v, (list, tuple)):
        try:
            return list(x) == list(v)
        except TypeError:
            return False
    if x is None or x is pd.NA or (isinstance(x, float) and math.isnan(x)):
        return False
    if isinstance(v, bool) or isinstance(x, (bool, np.bool_)):
        return bool(x) == bool(v)
    if isinstance(v, (int, float)) and isinstance(x, (int, float, np.integer, np.floating)):
        return float(x) == float(v)
    return str(x) == str(v)

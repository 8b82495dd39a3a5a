"""`wlprof place`'s library side: resolve a mix, cost it, plan it with each planner, measure the plans.

Planners (each a latency model and the search of `search.py`):

- `flops` (L0): FLOPs over the measured peak, co-located models sharing the capacity fairly.
- `roofline` (L2): the roofline time with the measured ceilings, shared the same way.
- `profile` (L3): the offline profile's latency alone (`l3.py`) times the slowdowns measured
  co-running every pair of the mix's models on the device (`calibration.py`), composed per group
  (`latency.Colocated`).
- `oracle`: every group of the mix (2^n - 1 of them) co-run and measured; for mixes of at most
  `ORACLE_MAX_MODELS` models.

`--validate` co-runs each plan's GPU groups on the device, one group at a time, and traces each.
"""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wlprof.errors import InputError, did_you_mean
from wlprof.placement import calibration as cal
from wlprof.placement.latency import Colocated, LatencyModel, Measured, SharedCapacity, fit_kappa
from wlprof.placement.search import Plan, describe_cost, search

PLANNERS = {
    "flops": "L0: FLOPs / measured peak; co-located models share the capacity fairly",
    "roofline": "L2: roofline time on the measured ceilings; shared fairly",
    "profile": "L3: the offline profile's latency alone x the measured pair slowdowns",
    "oracle": "every group co-run and measured on the device",
}
LEVELS = {"flops": "L0", "roofline": "L2", "profile": "L3", "oracle": "measured"}
ORACLE_MAX_MODELS = 8
DEFAULT_REPS = {"cuda": 20, "cpu": 5}

Progress = Callable[[str], None]


@dataclass
class PlaceOptions:
    gpus: int
    planners: Sequence[str] | None = None  # None: flops, roofline, profile (with --profile), oracle (with --validate)
    profile: Path | None = None
    coloc: Sequence[Path] = ()
    validate: bool = False
    device: str | None = None
    reps: int | None = None
    trace: bool = True  # Chrome traces of the validated groups
    method: str = "auto"  # the search: auto, exhaustive, heuristic


@dataclass
class Outcome:
    planner: str
    level: str
    plan: Plan
    latency_model: LatencyModel
    alone: dict[int, tuple[float, str, str]] = field(default_factory=dict)  # predicted alone (us, source, detail)
    notes: list[str] = field(default_factory=list)
    measured: dict[int, float] | None = None  # validated latency per model (median)
    measured_spans: tuple[float, ...] | None = None  # per group, in plan order
    chrome: dict[int, bytes] = field(default_factory=dict)  # group index in the plan -> gzipped trace

    @property
    def measured_max(self) -> float | None:
        return max(self.measured.values()) if self.measured else None


@dataclass
class Measurement:
    stage: str  # calibration, oracle, validation
    names: tuple[str, ...]
    run: Any  # corun.GroupRun


@dataclass
class PlaceResult:
    mix: Any
    models: list
    device_type: str
    device_name: str
    gpus: int
    outcomes: list[Outcome]
    measurements: list[Measurement]
    costs: dict
    modes: dict[str, str]
    calibration: cal.Calibration | None
    notes: list[str]
    seconds: dict[str, float]
    reps: int
    ceilings: dict

    def outcome(self, planner: str) -> Outcome | None:
        return next((o for o in self.outcomes if o.planner == planner), None)


def choose_planners(requested: Sequence[str] | None, n: int, profile, validate: bool) -> tuple[list[str], list[str]]:
    """The planners to run and notes on those left out."""
    notes = []
    if requested:
        names = []
        for r in requested:
            for x in str(r).split(","):
                x = x.strip()
                if not x:
                    continue
                if x == "all":
                    names += list(PLANNERS)
                elif x not in PLANNERS:
                    raise InputError("--planner", f"must be one of {', '.join(PLANNERS)} or all", x,
                                     hint=did_you_mean(x, PLANNERS))
                else:
                    names.append(x)
        names = list(dict.fromkeys(names))
        if not names:
            raise InputError("--planner", "must name at least one planner", requested)
        if "oracle" in names and n > ORACLE_MAX_MODELS:
            raise InputError("--planner", f"oracle measures every group of the mix (2^n - 1 co-runs): at most "
                             f"{ORACLE_MAX_MODELS} models ({2 ** n - 1:,} groups for {n})", "oracle")
        return names, notes
    names = ["flops", "roofline"]
    if profile is not None:
        names.append("profile")
    else:
        notes.append("profile planner skipped: no --profile given")
    if validate and n <= ORACLE_MAX_MODELS:
        names.append("oracle")
    elif validate:
        notes.append(f"oracle skipped: {n} models (at most {ORACLE_MAX_MODELS}: it measures 2^n - 1 groups)")
    return names, notes


def place(mix, opts: PlaceOptions, progress: Progress | None = None,
          on_checked: Callable[[], None] | None = None) -> PlaceResult:
    """Plan `mix` on `opts.gpus` GPUs with each planner; with `opts.validate`, measure every plan.
    `on_checked` is called once every option has been checked, before anything is built or measured."""
    import torch

    from wlprof.ceilings import get_ceilings
    from wlprof.device import device_name, resolve_device
    from wlprof.placement.corun import CoRunner
    from wlprof.placement.costs import cost_step
    from wlprof.placement.mix import resolve

    say = progress or (lambda s: None)
    seconds: dict[str, float] = {}
    t = time.perf_counter()
    if isinstance(opts.gpus, bool) or not isinstance(opts.gpus, int) or opts.gpus < 1:
        raise InputError("--gpus", "must be a positive integer (the GPUs to place the models on)", opts.gpus)
    if opts.reps is not None and opts.reps < 1:
        raise InputError("--reps", "must be a positive integer", opts.reps)
    if opts.method not in ("auto", "exhaustive", "heuristic"):
        raise InputError("--search", "must be auto, exhaustive or heuristic", opts.method)
    device = resolve_device(opts.device or mix.device, "--device")
    models = resolve(mix, device)
    n = len(models)
    planners, notes = choose_planners(opts.planners, n, opts.profile, opts.validate)
    if opts.method == "exhaustive":
        from wlprof.placement.search import EXHAUSTIVE_LIMIT, partitions_count

        if partitions_count(n, opts.gpus) > 50 * EXHAUSTIVE_LIMIT:
            raise InputError("--search", f"exhaustive would enumerate {partitions_count(n, opts.gpus):.3g} "
                             "assignments: use auto or heuristic", "exhaustive")
    profile = None
    if "profile" in planners:
        from wlprof.placement.l3 import Profile

        profile = Profile.open(opts.profile)
    name = device_name(device)
    if profile is not None:
        profile.check_device(name)
    if opts.coloc:
        if "profile" not in planners:
            raise InputError("--coloc", "applies to the profile planner (pass --planner profile with --profile DIR)",
                             ", ".join(map(str, opts.coloc)))
        cal.load(opts.coloc, name)  # a missing or unreadable file is said before anything is built
    if opts.gpus > n:
        notes.append(f"{opts.gpus} GPUs for {n} models: at least {opts.gpus - n} stay idle")
    reps = opts.reps or DEFAULT_REPS[device.type]
    if on_checked is not None:
        on_checked()

    runner = CoRunner(models, device)
    runner.check_memory()
    ceilings, origin = get_ceilings(device)
    say(f"{n} models on {name} (ceilings: {origin})")
    with torch.inference_mode():
        costs = runner.build(cost=lambda m, b: cost_step(m, b, device, ceilings, run_id=f"place-{mix.name}"),
                             progress=say)
    notes += runner.notes()
    modes = runner.modes()
    seconds["build and cost"] = time.perf_counter() - t
    _check_slos(models, costs, name)

    slo = [m.slo_us for m in models]
    outcomes: list[Outcome] = []
    measurements: list[Measurement] = []
    calib = None

    def measure(members: tuple[int, ...], stage: str):
        run = runner.measure(members, reps=reps)
        measurements.append(Measurement(stage, tuple(models[i].name for i in members), run))
        return run

    for planner in planners:
        try:
            t = time.perf_counter()
            alone: dict[int, tuple[float, str, str]] = {}
            pnotes: list[str] = []
            if planner == "flops":
                work = [max(costs[m.name].peak_us, 1e-3) for m in models]
                lm: LatencyModel = SharedCapacity("flops", work)
                alone = {i: (work[i], "FLOPs / peak", "") for i in range(n)}
            elif planner == "roofline":
                work = [max(costs[m.name].roofline_us, 1e-3) for m in models]
                lm = SharedCapacity("roofline", work)
                alone = {i: (work[i], "roofline", "") for i in range(n)}
            elif planner == "profile":
                for m in models:
                    a = profile.alone(m, costs[m.name], name, modes[m.name])
                    alone[m.index] = (a.us, a.source, a.detail)
                keys = [m.key(name) for m in models]
                calib = cal.load(opts.coloc, name) if opts.coloc else cal.Calibration(name)
                miss_alone, miss_pairs = calib.missing(keys)
                if opts.coloc:
                    pnotes.append(f"co-location from {', '.join(map(str, opts.coloc))}")
                if miss_alone or miss_pairs:
                    say(f"calibrate co-location: {len(miss_alone)} alone, {len(miss_pairs)} pairs")
                    for k in miss_alone:
                        i = keys.index(k)
                        calib.alone[k] = measure((i,), "calibration").samples[i]
                    for a, b in miss_pairs:
                        i = keys.index(a)
                        j = next(x for x in range(n) if keys[x] == b and x != i)
                        run = measure((i, j), "calibration")
                        calib.put_pair(a, b, run.samples[i], run.samples[j])
                    pnotes.append(f"co-location measured now: {len(miss_alone)} models alone, {len(miss_pairs)} "
                                  f"pairs, {reps} waves each")
                for m, k in zip(models, keys, strict=True):
                    calib.names.setdefault(k, m.name)
                    calib.modes[k] = modes[m.name]
                A = [alone[i][0] for i in range(n)]
                busy = [min(1.0, costs[m.name].roofline_us / A[m.index]) if A[m.index] > 0 else 1.0 for m in models]
                rho = calib.rho(keys)
                kappa, used = fit_kappa(A, rho, busy)
                lm = Colocated("profile", A, rho, busy, kappa, used)
                if lm.unmeasured_pairs():
                    pnotes.append(f"{lm.unmeasured_pairs()} ordered pairs never measured: the fitted contention "
                                  f"model (kappa {kappa:.2f} on {used} measured pairs)")
            elif planner == "oracle":
                groups = {}
                subsets = [c for k in range(1, n + 1) for c in itertools.combinations(range(n), k)]
                say(f"oracle: co-run {len(subsets)} groups, {reps} waves each")
                for members in subsets:
                    groups[frozenset(members)] = measure(members, "oracle").medians()
                lm = Measured("oracle", groups)
                alone = {i: (groups[frozenset((i,))][i], "measured", "") for i in range(n)}
            else:  # pragma: no cover - choose_planners refuses the rest
                raise ValueError(planner)
            plan = search(lm, slo, opts.gpus, opts.method)
            pnotes = [describe_cost(n, opts.gpus)] + plan.notes + pnotes
            outcomes.append(Outcome(planner, LEVELS[planner], plan, lm, alone, pnotes))
            seconds[f"plan {planner}"] = time.perf_counter() - t
        except Exception as exc:  # noqa: BLE001 - one planner's failure must not lose the others' plans
            if len(planners) == 1:
                raise
            notes.append(f"planner {planner} failed: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}")

    if opts.validate:
        t = time.perf_counter()
        distinct: dict[tuple[int, ...], Any] = {}
        for o in outcomes:
            for g in o.plan.groups:
                distinct.setdefault(g, None)
        say(f"validate: co-run {len(distinct)} distinct groups of {len(outcomes)} plans, {reps} waves each")
        traces: dict[tuple[int, ...], bytes] = {}
        for g in distinct:
            distinct[g] = measure(g, "validation")
            if opts.trace:
                try:
                    traces[g] = runner.trace(g)[0]
                except Exception as exc:  # noqa: BLE001 - a trace is evidence; its failure must not lose the plans
                    notes.append(f"trace of [{', '.join(models[i].name for i in g)}] failed: "
                                 f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}")
        for o in outcomes:
            o.measured = {}
            spans = []
            for k, g in enumerate(o.plan.groups):
                med = distinct[g].medians()
                o.measured.update(med)
                spans.append(max(med.values()))
                if g in traces:
                    o.chrome[k] = traces[g]
            o.measured_spans = tuple(spans)
        seconds["validate"] = time.perf_counter() - t
    return PlaceResult(mix, models, device.type, name, opts.gpus, outcomes, measurements, costs, modes, calib,
                       notes, seconds, reps, {**ceilings.to_dict(), "origin": origin})


def _check_slos(models, costs, device_name: str) -> None:
    """Refuse an SLO below the model's roofline time alone: no placement can meet it."""
    for m in models:
        if m.slo_us is None:
            continue
        floor = costs[m.name].roofline_us
        if floor > m.slo_us:
            from wlprof.cli.render import sig

            raise InputError(f"model[{m.index}].slo_us", f"must be at least {m.name}'s roofline time alone "
                             f"({sig(floor, 3)} µs on {device_name}'s measured ceilings): no placement can meet it",
                             m.slo_us)


def gap(a: float | None, b: float | None) -> float | None:
    """(a - b) / b, or None."""
    if a is None or b is None or b <= 0:
        return None
    return (a - b) / b


def median(xs: Sequence[float]) -> float:
    return float(statistics.median(xs))

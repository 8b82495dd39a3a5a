"""What `wlprof place` writes: the summary, the validation and co-run tables, the costs, the traces.

```
OUT/
  plan.json            every planner's plan, predictions, measurements, gaps, targets, timings
  plan.md              the tables `wlprof place` prints
  validation.parquet   one row per planner and model: predicted and measured latency, SLO, group
  groups.parquet       one row per co-run measurement and member (calibration, oracle, validation)
  costs.parquet        each model's op calls with FLOPs, bytes and roofline time (the costing pass)
  coloc.json           the co-location calibration (reusable with --coloc)
  chrome/<planner>-gpu<k>.json.gz   one request wave of each validated GPU group
```
"""

from __future__ import annotations

import itertools
import math
import statistics
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from wlprof.placement.run import PlaceResult, gap

FORMAT_VERSION = "1.0"
PROFILE_TARGET_GAP = 0.05  # the profile plan's measured max within 5% of the oracle's
PROFILE_TARGET_PRED = 0.10  # and its predicted max within 10% of its own measurement

VALIDATION_COLUMNS = {
    "mix": "the mix's name", "device_name": "the device planned and measured on", "dtype": "models' dtypes",
    "gpus": "GPUs planned for", "planner": "flops, roofline, profile, oracle", "level": "L0, L2, L3, measured",
    "search": "the assignment search used", "gpu": "the GPU (0 = the slowest predicted)",
    "group": "the models sharing that GPU", "model": "the model", "workload": "its workload",
    "variant": "its configuration", "mode": "graph (CUDA-graph replay) or eager",
    "layers": "steps per request", "slo_us": "its SLO (µs)",
    "predicted_alone_us": "the planner's latency alone", "alone_source": "where that came from",
    "predicted_us": "the planner's latency in its group", "measured_us": "measured in its group (median)",
    "measured_p10_us": "10th percentile", "measured_p90_us": "90th percentile",
    "samples_us": "every measured wave", "predicted_max_us": "the plan's predicted max latency",
    "measured_max_us": "the plan's measured max latency",
    "oracle_measured_max_us": "the oracle plan's measured max latency",
    "gap_to_oracle": "(measured max - oracle's) / oracle's",
    "slo_met_predicted": "predicted within its SLO", "slo_met_measured": "measured within its SLO",
    "flops": "FLOPs per request", "bytes": "compulsory bytes per request", "peak_us": "FLOPs / peak",
    "roofline_us": "roofline time",
}


def _q(xs, q):
    return float(np.quantile(np.asarray(xs, dtype=float), q)) if len(xs) else math.nan


def validation_table(r: PlaceResult) -> pd.DataFrame:
    oracle = r.outcome("oracle")
    oracle_max = oracle.measured_max if oracle is not None else None
    samples = {}
    for m in r.measurements:
        if m.stage == "validation":
            samples[m.names] = m.run
    rows = []
    for o in r.outcomes:
        for k, g in enumerate(o.plan.groups):
            names = tuple(r.models[i].name for i in g)
            run = samples.get(names)
            for i in g:
                m, c = r.models[i], r.costs[r.models[i].name]
                s = run.samples[i] if run is not None else []
                meas = o.measured.get(i) if o.measured else None
                pred = o.plan.latency_us[i]
                rows.append({
                    "mix": r.mix.name, "device_name": r.device_name, "dtype": m.dtype_name, "gpus": r.gpus,
                    "planner": o.planner, "level": o.level, "search": o.plan.search, "gpu": k, "group": list(names),
                    "model": m.name, "workload": m.workload, "variant": m.point.variant, "mode": r.modes.get(m.name),
                    "layers": m.layers, "slo_us": m.slo_us, "predicted_alone_us": o.alone.get(i, (math.nan,))[0],
                    "alone_source": o.alone.get(i, (None, None))[1], "predicted_us": pred, "measured_us": meas,
                    "measured_p10_us": _q(s, 0.1) if s else None, "measured_p90_us": _q(s, 0.9) if s else None,
                    "samples_us": list(s), "predicted_max_us": o.plan.max_us, "measured_max_us": o.measured_max,
                    "oracle_measured_max_us": oracle_max, "gap_to_oracle": gap(o.measured_max, oracle_max),
                    "slo_met_predicted": None if m.slo_us is None else bool(pred <= m.slo_us),
                    "slo_met_measured": None if (m.slo_us is None or meas is None) else bool(meas <= m.slo_us),
                    "flops": c.flops, "bytes": c.bytes, "peak_us": c.peak_us, "roofline_us": c.roofline_us,
                })
    return pd.DataFrame(rows, columns=list(VALIDATION_COLUMNS))


def groups_table(r: PlaceResult) -> pd.DataFrame:
    rows = []
    for k, m in enumerate(r.measurements):
        med = m.run.medians()
        span = max(med.values())
        for i in m.run.members:
            s = m.run.samples[i]
            rows.append({"mix": r.mix.name, "device_name": r.device_name, "stage": m.stage, "measurement": k,
                         "group": list(m.names), "size": len(m.names), "model": r.models[i].name,
                         "median_us": med[i], "p10_us": _q(s, 0.1), "p90_us": _q(s, 0.9), "samples_us": list(s),
                         "group_makespan_us": span,
                         "gate_us": statistics.median(m.run.gate_us) if m.run.gate_us else None,
                         "host_enqueue_us": statistics.median(m.run.host_us) if m.run.host_us else None,
                         "sm_clock_mhz_start": m.run.clock_mhz[0], "sm_clock_mhz_end": m.run.clock_mhz[1]})
    return pd.DataFrame(rows)


def coloc_check(r: PlaceResult) -> dict | None:
    """The profile planner's co-location model against the oracle's measurements of every group of two
    or more (makespan), and its latencies alone against the calibration's measurements."""
    prof, oracle = r.outcome("profile"), r.outcome("oracle")
    out: dict[str, Any] = {}
    if prof is not None and r.calibration is not None:
        errs = []
        for m in r.models:
            meas = r.calibration.alone_median(m.key(r.device_name))
            if meas:
                errs.append({"model": m.name, "predicted_us": prof.alone[m.index][0], "measured_us": meas,
                             "source": prof.alone[m.index][1],
                             "error": (prof.alone[m.index][0] - meas) / meas})
        out["alone"] = errs
    if prof is not None and oracle is not None:
        by_size: dict[int, list[float]] = {}
        for k in range(2, len(r.models) + 1):
            for g in itertools.combinations(range(len(r.models)), k):
                pred = max(prof.latency_model.group(g))
                meas = max(oracle.latency_model.group(g))
                by_size.setdefault(k, []).append((pred - meas) / meas)
        out["groups"] = {str(k): {"groups": len(v), "median_abs_error": float(np.median(np.abs(v))),
                                  "max_abs_error": float(np.max(np.abs(v))), "within_10pct": float(
                                      np.mean(np.abs(v) <= 0.10))} for k, v in by_size.items()}
        # the same, with the measured latencies alone in place of L3's: the composition's own error
        calib = r.calibration
        A = [calib.alone_median(m.key(r.device_name)) if calib else None for m in r.models]
        if all(a is not None for a in A):
            lm = prof.latency_model
            by_size = {}
            for k in range(2, len(r.models) + 1):
                for g in itertools.combinations(range(len(r.models)), k):
                    pred = max(A[i] * (1 + sum(lm.pair_rho(i, j)[0] for j in g if j != i)) for i in g)
                    meas = max(oracle.latency_model.group(g))
                    by_size.setdefault(k, []).append((pred - meas) / meas)
            out["composition"] = {str(k): {"groups": len(v), "median_abs_error": float(np.median(np.abs(v))),
                                           "max_abs_error": float(np.max(np.abs(v)))} for k, v in by_size.items()}
    return out or None


def summary(r: PlaceResult) -> dict[str, Any]:
    oracle = r.outcome("oracle")
    oracle_max = oracle.measured_max if oracle is not None else None
    planners = []
    for o in r.outcomes:
        names = lambda g: [r.models[i].name for i in g]  # noqa: E731
        entry = {
            "planner": o.planner, "level": o.level, "search": o.plan.search, "candidates": o.plan.candidates,
            "groups_evaluated": o.plan.groups_evaluated, "search_seconds": o.plan.seconds,
            "assignment": [names(g) for g in o.plan.groups], "idle_gpus": o.plan.idle_gpus,
            "predicted_max_us": o.plan.max_us, "predicted_total_us": o.plan.total_us,
            "predicted_slo_misses": o.plan.misses, "predicted_makespan_us": list(o.plan.makespan_us),
            "predicted_us": {r.models[i].name: v for i, v in o.plan.latency_us.items()},
            "alone": {r.models[i].name: {"us": a[0], "source": a[1], "detail": a[2]} for i, a in o.alone.items()},
            "notes": o.notes,
        }
        if o.measured is not None:
            slo_miss = sum(1 for i, v in o.measured.items() if r.models[i].slo_us is not None
                           and v > r.models[i].slo_us)
            entry.update({
                "measured_max_us": o.measured_max, "measured_makespan_us": list(o.measured_spans or ()),
                "measured_total_us": float(sum(o.measured_spans or ())),
                "measured_us": {r.models[i].name: v for i, v in o.measured.items()},
                "measured_slo_misses": slo_miss,
                "predicted_vs_measured": gap(o.plan.max_us, o.measured_max),
                "gap_to_oracle": gap(o.measured_max, oracle_max),
            })
        planners.append(entry)
    out = {
        "format": FORMAT_VERSION, "mix": r.mix.name, "source": r.mix.source, "description": r.mix.description,
        "device_type": r.device_type, "device_name": r.device_name, "gpus": r.gpus, "reps": r.reps,
        "models": [{"name": m.name, "workload": m.workload, "variant": m.point.variant, "params": m.params,
                    "dtype": m.dtype_name, "layers": m.layers, "slo_us": m.slo_us, "mode": r.modes.get(m.name),
                    "flops": r.costs[m.name].flops, "bytes": r.costs[m.name].bytes,
                    "peak_us": r.costs[m.name].peak_us, "roofline_us": r.costs[m.name].roofline_us,
                    "unknown_flops_share": r.costs[m.name].unknown_share} for m in r.models],
        "planners": planners, "notes": r.notes, "seconds": r.seconds,
        "ceilings": {k: r.ceilings.get(k) for k in ("matrix_tflops", "vector_tflops", "copy_gbps", "origin")},
    }
    note = noise_note(planners)
    if note:
        out["notes"] = [*out["notes"], note]
    prof = next((p for p in planners if p["planner"] == "profile"), None)
    if prof is not None and "measured_max_us" in prof:
        t = {"profile_predicted_within_10pct": abs(prof["predicted_vs_measured"]) <= PROFILE_TARGET_PRED}
        if prof.get("gap_to_oracle") is not None:
            t["profile_within_5pct_of_oracle"] = prof["gap_to_oracle"] <= PROFILE_TARGET_GAP
        out["targets"] = t
    check = coloc_check(r)
    if check:
        out["coloc_check"] = check
    return out


NOISE_NOTE_GAP = 0.05  # a plan measured this much under the oracle's says the validation is noisy


def noise_note(planners: list[dict]) -> str | None:
    """What to say when a plan measured clearly under the oracle's (the best plan by measurement)."""
    below = [p for p in planners if p["planner"] != "oracle" and (p.get("gap_to_oracle") or 0) < -NOISE_NOTE_GAP]
    if not below:
        return None
    worst = min(below, key=lambda p: p["gap_to_oracle"])
    return (f"the {worst['planner']} plan measured {-worst['gap_to_oracle']:.1%} under the oracle's: the oracle "
            "picks by each group's own co-run and the validation co-runs each plan again, so on this device "
            f"differences between plans below about {-worst['gap_to_oracle']:.0%} are within the measurement's "
            "noise (more --reps narrows it)")


def write(r: PlaceResult, out: Path, markdown: str | None = None) -> list[Path]:
    """Write every output file under `out` (created); the paths written."""
    import gzip  # noqa: F401 - the traces come gzipped

    from wlprof import jsonio
    from wlprof.placement import calibration as cal
    from wlprof.placement.costs import costs_table
    from wlprof.store.atomic import atomic_write_bytes

    out.mkdir(parents=True, exist_ok=True)
    written = []

    def put(name: str, data: bytes) -> None:
        p = out / name
        p.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(p, data)
        written.append(p)

    put("plan.json", jsonio.dumps(summary(r), indent=True))
    if markdown is not None:
        put("plan.md", markdown.encode())
    for name, df in (("validation.parquet", validation_table(r)), ("groups.parquet", groups_table(r)),
                     ("costs.parquet", costs_table(r.costs))):
        if len(df):
            put(name, _parquet(df))
    if r.calibration is not None:
        p = out / "coloc.json"
        cal.save(r.calibration, p)
        written.append(p)
    for o in r.outcomes:
        for k, data in o.chrome.items():
            put(f"chrome/{o.planner}-gpu{k}.json.gz", data)
    return written


def _parquet(df: pd.DataFrame) -> bytes:
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(df, preserve_index=False)
    table = table.replace_schema_metadata({**(table.schema.metadata or {}),
                                           b"wlprof.placement": FORMAT_VERSION.encode()})
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="zstd")
    return buf.getvalue()

"""Planning time of `wlprof place` at scale: 20 models onto 8 GPUs, on this machine (a benchmark, not a test).

The 20 models are configurations the committed H200 offline profile holds (MLP batches, the
three GEMM shapes, MoE layers of every dispatch, GNN backends). Planning is what `wlprof place`
does once the device has costed the models: L0/L2 work from their costs, the Level-3 lookup of
each model alone in the profile (the profile folder opened and read), and each planner's search.
The co-location slowdowns of pairs are not measured here (no device): every pair takes the
fitted contention model with its default coefficient, which costs the search the same as
measured ones. The exhaustive search is beyond reach (S(20, k) sums to 4.6e13 assignments), so
each planner runs the greedy + local search; its quality is checked against the exhaustive
optimum on random draws of 10 of the models onto 4 GPUs (43,947 assignments each).

    python benchmarks/place_scale.py --profile benchmarks/results/2026-11-29-h200/offline \
        --out benchmarks/results/<date>-cpu/place_scale.md
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

PARAMS = {  # the point parameters of each workload, as its steps table holds them
    "mlp": ("batch", "d_model", "d_ff", "activation"),
    "gemm": ("m", "k", "n", "shape_class"),
    "moe": ("tokens", "experts", "top_k", "routing", "dispatch", "capacity_factor", "d_model", "d_ff", "activation",
            "seed"),
    "gnn": ("graph", "scale", "edge_factor", "features", "backend", "reduction", "feature_transform", "seed"),
}
PICK = [  # (workload, variant) of 20 points in the profile
    *[("mlp", f"batch {b}") for b in (1, 16, 64, 256, 512, 1024, 2048, 4096)],
    ("gemm", "balanced 2048x2048x2560"), ("gemm", "medium-skinny 32x4096x81920"),
    ("gemm", "tall-skinny 1x4096x2621440"),
    ("moe", "concentrated / grouped"), ("moe", "dispersed / grouped"), ("moe", "balanced / padded"),
    ("moe", "concentrated / loop"), ("moe", "zipf:1.2 / grouped"),
    ("gnn", "rmat s20 F128 / csr / sum"), ("gnn", "uniform s20 F64 / csr / sum"),
    ("gnn", "rmat s20 F64 / scatter / sum"), ("gnn", "rmat s18 F128 / pyg:gcn-csr / sum"),
]


def models_from_profile(steps):
    import math

    from wlprof.placement.mix import Model
    from wlprof.workloads.base import Point

    out, rows = [], []
    for i, (wl, variant) in enumerate(PICK):
        r = steps[(steps.workload == wl) & (steps.variant == variant)].iloc[0]
        params = {}
        for k in PARAMS[wl]:
            v = r.get(k)
            params[k] = None if v is None or (isinstance(v, float) and math.isnan(v)) else (
                v.item() if hasattr(v, "item") else v)
        out.append(Model(i, f"{wl}:{variant}", wl, Point(variant, params), None, str(r["dtype"]), 1, None))
        rows.append(r)
    return out, rows


def plan_all(models, rows, profile, gpus: int, method: str = "auto"):
    import numpy as np

    from wlprof.placement.latency import Colocated, SharedCapacity, fit_kappa
    from wlprof.placement.search import search

    n = len(models)
    device = "NVIDIA H200"
    t = time.perf_counter()
    alone = []
    for m, r in zip(models, rows, strict=True):
        mode = "eager" if not np.isfinite(r.graph_us) else "graph"
        alone.append(profile.same_point(m, device, mode).us)
    t_l3 = time.perf_counter() - t
    peak = [max(float(r.flops) / (float(r.ceiling_tflops) * 1e6), 1e-3) for r in rows]
    roof = [max(float(r.roofline_us), 1e-3) for r in rows]
    busy = [min(1.0, roof[i] / alone[i]) for i in range(n)]
    rho = np.full((n, n), np.nan)
    kappa, used = fit_kappa(alone, rho, busy)
    out = {}
    for name, lm in (("flops", SharedCapacity("flops", peak)), ("roofline", SharedCapacity("roofline", roof)),
                     ("profile", Colocated("profile", alone, rho, busy, kappa, used))):
        t = time.perf_counter()
        plan = search(lm, [None] * n, gpus, method)
        out[name] = (plan, time.perf_counter() - t)
    return out, t_l3


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", type=Path, default=Path("benchmarks/results/2026-11-29-h200/offline"))
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    import wlprof  # noqa: F401
    from wlprof.placement.l3 import Profile

    t_imp = time.perf_counter() - t0
    t = time.perf_counter()
    profile = Profile.open(args.profile)
    t_open = time.perf_counter() - t
    models, rows = models_from_profile(profile.steps)
    results, t_l3 = plan_all(models, rows, profile, args.gpus)
    total = time.perf_counter() - t0

    lines = [f"# Planning {len(models)} models onto {args.gpus} GPUs", "",
             f"- date (UTC): {time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime())}",
             f"- machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
             f"Python {platform.python_version()}; load average {os.getloadavg()[0]:.1f} at the end",
             f"- profile: {args.profile} (the models' configurations, L3 alone from its steps)",
             f"- command: `python benchmarks/place_scale.py --profile {args.profile} --gpus {args.gpus}`", "",
             "| step | seconds |", "|---|---:|",
             f"| import wlprof | {t_imp:.2f} |", f"| open the profile (its steps table) | {t_open:.2f} |",
             f"| L3 alone: 20 same-point lookups | {t_l3:.3f} |"]
    for name, (plan, sec) in results.items():
        lines.append(f"| {name}: {plan.search}, {plan.candidates:,} candidates, {plan.groups_evaluated:,} groups "
                     f"| {sec:.2f} |")
    lines += [f"| **total, from the start of the process** | **{total:.2f}** |", ""]
    lines += ["| planner | predicted max µs | GPUs used | slowest GPU |", "|---|---:|---:|---|"]
    for name, (plan, _) in results.items():
        slow = ", ".join(models[i].name for i in plan.groups[0])
        lines.append(f"| {name} | {plan.max_us:,.0f} | {len(plan.groups)} | {slow} |")

    # the heuristic against the exhaustive optimum where both run: 5 random draws of 10 of the models
    import numpy as np

    rng = np.random.default_rng(0)
    gaps: dict[str, list[float]] = {}
    secs: dict[str, list[float]] = {}
    for _ in range(5):
        pick = sorted(rng.choice(len(models), 10, replace=False))
        sub_m = [models[i] for i in pick]
        for j, m in enumerate(sub_m):
            sub_m[j] = type(m)(j, m.name, m.workload, m.point, m.dtype, m.dtype_name, m.layers, m.slo_us)
        ex, _ = plan_all(sub_m, [rows[i] for i in pick], profile, 4, "exhaustive")
        he, _ = plan_all(sub_m, [rows[i] for i in pick], profile, 4, "heuristic")
        for name in ex:
            gaps.setdefault(name, []).append((he[name][0].max_us - ex[name][0].max_us) / ex[name][0].max_us)
            secs.setdefault(name, []).append(ex[name][1])
    lines += ["", "The heuristic against the exhaustive optimum: 5 random draws of 10 of the models onto 4 GPUs "
              "(43,947 assignments each):", "",
              "| planner | exhaustive search, median s | heuristic's max over the optimum's: median | worst |",
              "|---|---:|---:|---:|"]
    for name in gaps:
        lines.append(f"| {name} | {np.median(secs[name]):.2f} | {np.median(gaps[name]):+.2%} | "
                     f"{max(gaps[name]):+.2%} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""How fast Level 3 predicts: 100,000 op calls, most of them of distinct shapes, on this machine.

    python benchmarks/predict_speed.py --profile benchmarks/profiles/h200 \
        --calls benchmarks/results/2026-11-29-h200/offline_e --n 100000 --out speed.md
    python benchmarks/predict_speed.py --profile-traces benchmarks/results/2026-11-29-h200/offline \
        --calls benchmarks/results/2026-11-29-h200/offline_e --n 100000 --out speed.md

The predictor is a profile folder's (`--profile`: the shipped one, fitted again here so that the fit
is timed too) or is fitted on a traces folder's runs (`--profile-traces`); the calls are `--calls`', repeated with their leading dimensions jittered (x 0.6..1.6, so that most
calls are shapes the profile never saw and the per-shape caches do not help). Timed: the
calls described from their recorded JSON (`calls.describe`) and predicted (`Predictor.predict`),
then composed into steps; the fit separately.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd


def jittered(ops: pd.DataFrame, n: int, seed: int = 0) -> pd.DataFrame:
    """`n` calls from `ops`, each copy with its tensors' leading dims scaled by one random factor."""
    rng = np.random.default_rng(seed)
    reps = int(np.ceil(n / len(ops)))
    out = pd.concat([ops] * reps, ignore_index=True).iloc[:n].copy()
    factors = rng.uniform(0.6, 1.6, size=len(out))
    dims = []
    for d_s, f in zip(out.op_input_dims, factors, strict=True):
        try:
            d = json.loads(d_s)
        except (TypeError, ValueError):
            dims.append(d_s)
            continue
        new = [[max(1, int(t[0] * f)), *t[1:]] if isinstance(t, list) and t and isinstance(t[0], int) else t
               for t in d]
        dims.append(json.dumps(new, separators=(",", ":")))
    out["op_input_dims"] = dims
    out["run_id"] = out.run_id.astype(str) + ":" + (np.arange(len(out)) // len(ops)).astype(str)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--profile", type=Path, help="a profile folder (wlprof profile -o DIR)")
    src.add_argument("--profile-traces", type=Path, help="a traces folder whose runs stand in for a profile")
    ap.add_argument("--calls", type=Path, required=True)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    import os

    import wlprof
    from wlprof.predict.calls import describe, parse_call
    from wlprof.predict.profile import fit_profile
    from wlprof.predict.steps import compose

    if args.profile:
        from wlprof.predict.profile import profile_tables

        prof_ops, prof_steps = profile_tables(args.profile)
        ceilings = json.loads((args.profile / "profile.json").read_text()).get("ceilings")
        traces, source = None, args.profile
    else:
        prof_ops = wlprof.load(args.profile_traces, table="ops")
        prof_steps = wlprof.load(args.profile_traces, table="steps")
        ceilings, traces, source = None, args.profile_traces, args.profile_traces
    t0 = time.perf_counter()
    predictor, host = fit_profile(prof_ops, prof_steps, traces, ceilings)
    fit_s = time.perf_counter() - t0
    calls = jittered(wlprof.load(args.calls, table="ops"), args.n)
    distinct = calls[["op_name", "op_input_dims", "op_input_types", "op_input_strides"]].drop_duplicates()
    parse_call.cache_clear()
    t0 = time.perf_counter()
    d = describe(calls)
    t1 = time.perf_counter()
    pred, src = predictor.predict(calls, d)
    t2 = time.perf_counter()
    steps = compose(calls, pred, d, host)
    t3 = time.perf_counter()
    rows = [("fit the predictor", f"{len(prof_ops):,} profiled calls", fit_s),
            ("describe (parse shapes, data features)", f"{len(calls):,} calls, {len(distinct):,} distinct", t1 - t0),
            ("predict", f"{len(calls):,} calls", t2 - t1),
            ("describe + predict", f"{len(calls):,} calls", t2 - t0),
            ("compose steps (kernel, back-to-back, latency)", f"{len(steps):,} steps", t3 - t2)]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    text = (f"# Level-3 prediction speed\n\n{os.cpu_count()} cores (load average {load:.1f} when it ended); predictor "
            f"fitted on `{source}`, calls from `{args.calls}` with their leading dims jittered.\n\n| what | on | seconds |\n|---|---|---:|\n"
            + "".join(f"| {a} | {b} | {c:.2f} |\n" for a, b, c in rows)
            + f"\n{len(calls) / (t2 - t0):,.0f} calls per second (describe + predict); sources: "
            + ", ".join(f"{k} {v:.1%}" for k, v in predictor.sources(src).items()) + ".\n")
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

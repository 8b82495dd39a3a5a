"""The Level-3 model on the profile's own measurements it was not fitted on: K folds over the grid's
configurations, each fitted on the other folds' calls and scored on its own.

    python benchmarks/l3_cv.py --profile benchmarks/profiles/h200 [--folds 5] [--seed 0] [--misses 25]

A fold's unit is one configuration: a sweep point of a GEMM, elementwise, MLP, layers, optimizer or GNN
study (its every call leaves together), a whole MoE study (its dispatches share the router's calls).
Prints per family the calls within +-10%, their kernel-time share, the median |error| and the steps
within +-5%, and the op groups whose calls miss most (kernel time outside +-10%). Nothing is written.
"""
from __future__ import annotations

import argparse
import json
import time
import zlib
from pathlib import Path

import numpy as np
import pandas as pd


def unit_of(ops: pd.DataFrame) -> pd.Series:
    """A configuration's key: run and point, or the run alone for an MoE study."""
    point = ops["point"].astype(str)
    return ops["run_id"].astype(str) + np.where(ops["workload"].astype(str) == "moe", "", "|" + point)


def folds_of(units: pd.Series, k: int, seed: int) -> np.ndarray:
    """A fold per unit, stable across runs: a hash of the unit's key and the seed."""
    uniq = units.unique()
    f = {u: zlib.crc32(f"{seed}|{u}".encode()) % k for u in uniq}
    return units.map(f).to_numpy()


def main(argv=None) -> int:
    from wlprof.analysis import models
    from wlprof.predict.profile import PROFILE_FILE, fit_profile, profile_tables
    from wlprof.predict.report import predict_calls

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", required=True)
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--misses", type=int, default=25, help="op groups to list, biggest misses first")
    ap.add_argument("--only", default="", help="score only these folds (comma-separated), for a quick look")
    ap.add_argument("--save", default="", help="write the scored calls to this Parquet file")
    a = ap.parse_args(argv)
    info = json.loads((Path(a.profile) / PROFILE_FILE).read_text())
    ops, steps = profile_tables(a.profile)
    fold = folds_of(unit_of(ops), a.folds, a.seed)
    step_unit = unit_of(steps.assign(workload=steps.get("workload", ""))) if "point" in steps else None
    only = {int(x) for x in a.only.split(",") if x} or set(range(a.folds))
    scored_all = []
    t0 = time.time()
    for f in sorted(only):
        train = ops[fold != f]
        keep_units = set(unit_of(train).unique())
        st = steps[step_unit.isin(keep_units)] if step_unit is not None else steps
        pred, _ = fit_profile(train.reset_index(drop=True), st.reset_index(drop=True), None, info.get("ceilings"))
        test = ops[fold == f]
        test = test[pd.to_numeric(test.dur_us, errors="coerce") > 0].reset_index(drop=True)
        sc = models.features(test)
        d, p, src = predict_calls(pred, sc)
        sc = sc.assign(pred_us=p, fold=f, group=d["group"].to_numpy(), cls=d["cls"].to_numpy(), source=src)
        scored_all.append(sc)
        print(f"fold {f}: {len(sc):,} calls, {time.time() - t0:.0f} s", flush=True)
    sc = pd.concat(scored_all, ignore_index=True)
    o, s = models.score_predictions(sc.drop(columns=["pred_us", "fold", "group", "cls", "source"]), {"L3": sc.pred_us.to_numpy()})
    m = o.merge(s, on=["model", "family"])
    cols = ["family", "ops", "within_10pct", "time_within_10pct", "median_ape", "steps", "step_within_5pct"]
    print(m[[c for c in cols if c in m]].to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    err = sc.pred_us / sc.dur_us - 1
    sc = sc.assign(err=err, miss_us=np.where(err.abs() > 0.1, sc.dur_us, 0.0), fam=sc["family"])
    if a.save:
        keep = [c for c in sc.columns if sc[c].dtype != object or c in ("op_name", "fam", "group", "op_input_dims",
                                                                         "workload", "run_id", "point", "op_input_types", "cls", "routing", "dispatch")]
        sc[keep].to_parquet(a.save)
    g = sc.groupby(["fam", "op_name"]).agg(calls=("dur_us", "size"), within=("err", lambda e: (e.abs() <= 0.1).mean()),
                                          median_err=("err", "median"), miss_us=("miss_us", "sum"),
                                          time_us=("dur_us", "sum"))
    print(g.sort_values("miss_us", ascending=False).head(a.misses).to_string(float_format=lambda v: f"{v:.3f}"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The Level-3 profile row of `heldout.py`, fast: fit this tree's model on a profile's tables, with
some of its studies left out (as `wlprof profile --drop` would), and score it on held-out sets.

    python benchmarks/l3_drops.py --profile P --root DIR --sets efg [--drop NAME,NAME] [--fam]

DIR holds the held-out run folders heldout_e, heldout_f, ...; prints per set and their mean the
calls within +-10%, their kernel-time share, the median |error| and the steps within +-5%.
Nothing is written: the profile is fitted in memory.
"""
import argparse
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd

import wlprof
from wlprof.analysis import models
from wlprof.predict.profile import PROFILE_FILE, fit_profile, profile_tables
from wlprof.predict.report import predict_calls

ap = argparse.ArgumentParser()
ap.add_argument("--profile", required=True)
ap.add_argument("--sets", default="efg")
ap.add_argument("--root", default="/work/hold/r")
ap.add_argument("--drop", default="", help="comma-separated study names")
ap.add_argument("--fam", action="store_true")
a = ap.parse_args()
info = json.loads((Path(a.profile) / PROFILE_FILE).read_text())
ops, steps = profile_tables(a.profile)
drop = [s for s in a.drop.split(",") if s]
if drop:
    runs = {s["run_id"] for s in info["sections"] if s["study"] in drop}
    assert all(any(s["study"] == n for s in info["sections"]) for n in drop), drop
    print("dropped s:", round(sum(s["seconds"] for s in info["sections"] if s["study"] in drop), 1))
    ops, steps = ops[~ops.run_id.isin(runs)], steps[~steps.run_id.isin(runs)]
t0 = time.time()
pred, host = fit_profile(ops, steps, None, info.get("ceilings"))
tf = time.time() - t0
tot = []
for s in a.sets:
    t = wlprof.load(f"{a.root}/heldout_{s}", table="ops")
    t = t[pd.to_numeric(t.dur_us, errors="coerce") > 0].reset_index(drop=True)
    sc = models.features(t)
    _, p, _ = predict_calls(pred, sc)
    o, st = models.score_predictions(sc, {"L3": p})
    m = o.merge(st, on=["model", "family"])
    r = m[m.family == "all"].iloc[0]
    tot.append(r)
    print(f"{s}: calls {r.within_10pct:.3f} time {r.time_within_10pct:.3f} median {r.median_ape:.4f} steps {r.step_within_5pct:.3f}")
    if a.fam:
        print(m[["family", "ops", "within_10pct", "time_within_10pct", "median_ape", "step_within_5pct"]].to_string(index=False, float_format=lambda v: f"{v:.3f}"))
print(f"mean: calls {np.mean([r.within_10pct for r in tot]):.4f} time {np.mean([r.time_within_10pct for r in tot]):.4f} median {np.mean([r.median_ape for r in tot]):.4f} steps {np.mean([r.step_within_5pct for r in tot]):.4f}  (fit {tf:.0f}s)")

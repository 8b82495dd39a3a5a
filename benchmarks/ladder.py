"""Score the Level 0-3 performance models on held-out runs, two ways.

1. The grid protocol: fit on the L3 training-grid runs (workloads/l3_grid_*.toml),
   score on every study run (what `wlprof predict --train GRID --test STUDIES` prints).
2. Leave one study out: for each study run, fit on every other run (grids and the
   other studies) and score on it; then pool the held-out predictions per family.

    python benchmarks/ladder.py --traces benchmarks/results/<date>-h200/traces --out ladder.md
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", type=Path, required=True)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    import wlprof
    from wlprof.analysis import models
    from wlprof.cli.markdown import table
    from wlprof.trace.store import list_runs

    runs = list_runs(args.traces)
    grid = [m["run_id"] for m in runs if (m.get("study") or {}).get("name", "").startswith("l3_grid")]
    studies = [m["run_id"] for m in runs if m["run_id"] not in grid]
    ops = wlprof.load(args.traces, table="ops")
    feats = models.features(ops)
    cols = {"model": "model", "family": "family", "ops": "op calls", "within_10pct": "within ±10%",
            "median_ape": "median |error|", "steps": "steps", "step_within_5pct": "steps within ±5%",
            "step_median_ape": "step median |error|"}

    train, test = feats[feats.run_id.isin(grid)], feats[feats.run_id.isin(studies)]
    ladder = models.fit(train)
    o, s = models.score(ladder, test)
    first = o.merge(s, on=["model", "family"])
    lines = ["# The Level 0-3 ladder on held-out runs", "",
             f"Op calls with known FLOPs and bytes: {len(feats)} of {len(ops)}.", "",
             "## 1. Fit on the training grid, score on the studies", "",
             f"Training runs (grid): {', '.join(grid)} ({len(train)} op calls). Test runs: {', '.join(studies)} "
             f"({len(test)} op calls; {ladder.profiled_share(test):.1%} of them were profiled in the grid, "
             "the L3 lookup's share).", "", table(first, cols), ""]

    preds = []
    for run in studies:
        tr, te = feats[feats.run_id != run], feats[feats.run_id == run]
        lad = models.fit(tr)
        p = lad.predict(te)
        preds.append(te.assign(**{f"pred {k}": v for k, v in p.items()}))
    held = pd.concat(preds)
    rows = []
    for model in models.MODELS:
        col = f"pred {model}"
        h = held.assign(pred=held[col], ape=np.abs(held[col] - held.dur_us) / held.dur_us)
        for fam, g in [("all", h), *h.groupby("family")]:
            steps = g.groupby(["run_id", "point", "step"]).agg(pred=("pred", "sum"), true=("dur_us", "sum"))
            sape = (steps.pred - steps.true).abs() / steps.true
            rows.append({"model": model, "family": fam, "ops": len(g), "within_10pct": float((g.ape <= 0.1).mean()),
                         "median_ape": float(g.ape.median()), "steps": len(steps),
                         "step_within_5pct": float((sape <= 0.05).mean()), "step_median_ape": float(sape.median())})
    lines += ["## 2. Leave one study out", "",
              "Each study run scored by models fit on every other run (the grids and the other studies).", "",
              table(pd.DataFrame(rows), cols)]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

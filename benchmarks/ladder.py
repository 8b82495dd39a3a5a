"""Score the Level 0-3 performance models on held-out runs, three ways.

1. Offline profile (the seed note's Level 3): fit on the runs of one capture (its studies,
   the MoE and GNN ones on another data draw, plus the L3 grids) and score on the studies of
   another capture, made in another session on the same kind of device; then the other way
   round. `--offline` names the second capture's traces folder.
2. The grid alone: fit on the L3 training-grid runs (workloads/l3_grid_*.toml) and score on
   every study run (what `wlprof predict --train GRID --test STUDIES` prints).
3. Leave one study out: for each study run of `--traces`, fit on every other run there (the
   grids and the other studies) and score on it; then pool the held-out predictions.

Every table ends with the noise floor: each call predicted by the same call in the other
profiled steps of its own run.

    python benchmarks/ladder.py --traces benchmarks/results/<date>-h200/traces \
        --offline benchmarks/results/<date>-h200/offline --out ladder.md
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

COLS = {"model": "model", "family": "family", "ops": "op calls", "within_10pct": "within ±10%",
        "time_within_10pct": "their time share", "median_ape": "median |error|", "steps": "steps", "step_within_5pct": "steps within ±5%",
        "step_median_ape": "step median |error|"}


def _split(traces: Path) -> tuple[pd.DataFrame, list[str], list[str]]:
    """(op features of every run, grid run ids, study run ids) of a traces folder."""
    import wlprof
    from wlprof.analysis import models
    from wlprof.trace.store import list_runs

    runs = list_runs(traces)
    grid = [m["run_id"] for m in runs if (m.get("study") or {}).get("name", "").startswith("l3_grid")]
    studies = [m["run_id"] for m in runs if m["run_id"] not in grid]
    return models.features(wlprof.load(traces, table="ops")), grid, studies


def _sources(shares: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.1%}" for k, v in shares.items())


BUCKETS = [0, 2, 5, 10, 50, np.inf]  # us


def by_duration(test: pd.DataFrame, preds: dict[str, np.ndarray]) -> pd.DataFrame:
    """Share of calls within +-10% per kernel-time bucket: how much of a miss is timer resolution."""
    labels = [f"{a:g}-{b:g} µs" if np.isfinite(b) else f"> {a:g} µs" for a, b in zip(BUCKETS[:-1], BUCKETS[1:], strict=True)]
    bucket = pd.cut(test.dur_us, BUCKETS, labels=labels)
    out = pd.DataFrame({"calls": test.groupby(bucket, observed=False).size()})
    for name, p in preds.items():
        ok = pd.Series(np.abs(p - test.dur_us.to_numpy()) <= 0.1 * test.dur_us.to_numpy(), index=test.index)
        out[name] = ok.groupby(bucket, observed=False).mean().round(3)
    return out.rename_axis("op call's kernel time").reset_index()


def _merged(op_scores: pd.DataFrame, step_scores: pd.DataFrame) -> pd.DataFrame:
    return op_scores.merge(step_scores, on=["model", "family"])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", type=Path, required=True, help="the studies to score, and the grids")
    ap.add_argument("--offline", type=Path, default=None, help="a second capture: the offline profile")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    from wlprof.analysis import models
    from wlprof.cli.markdown import table

    feats, grid, studies = _split(args.traces)
    lines = ["# The Level 0-3 ladder on held-out runs", "",
             f"Op calls with known FLOPs and bytes in `{args.traces.name}`: {len(feats)}.", ""]
    grids = feats[feats.run_id.isin(grid)]
    study_ops = feats[feats.run_id.isin(studies)]

    if args.offline is not None:
        off, off_grid, off_studies = _split(args.offline)
        grids = pd.concat([grids, off[off.run_id.isin(off_grid)]])
        off_study_ops = off[off.run_id.isin(off_studies)]
        lines += ["## 1. Offline profile: fit on one capture, score on another", "",
                  "The seed note's Level 3: profile the kernels offline, predict a later run. The two captures "
                  "ran the same study files in different sessions on the same kind of device; the MoE and GNN "
                  "studies of the second one on another data draw (`--set seed=1`: other dispersed counts, "
                  "token order, gates and inputs; other graphs of the same generators). Both fit on the L3 grids "
                  "too.", ""]
        for name, tr, te, te_runs in (
                (f"fit on `{args.offline.name}`, score on `{args.traces.name}`", off_study_ops, study_ops, studies),
                (f"fit on `{args.traces.name}`, score on `{args.offline.name}`", study_ops, off_study_ops,
                 off_studies)):
            ladder = models.fit(pd.concat([tr, grids]))
            buckets = by_duration(te, {"L3 profile within ±10%": ladder.predict(te)["L3 profile"],
                                       "noise floor within ±10%": models.remeasured(te)})
            lines += [f"### {name[0].upper()}{name[1:]}", "",
                      f"Test runs: {', '.join(te_runs)} ({len(te)} op calls). L3 answered from: "
                      f"{_sources(ladder.sources(te))}.", "", table(_merged(*models.score(ladder, te)), COLS), "",
                      "By the call's kernel time:", "", table(buckets, {c: c for c in buckets.columns}), ""]

    ladder = models.fit(grids)
    lines += ["## 2. Fit on the training grid alone, score on the studies", "",
              f"Training runs (grid): {', '.join(sorted(set(grids.run_id)))} ({len(grids)} op calls). "
              f"Test runs: {', '.join(studies)} ({len(study_ops)} op calls). L3 answered from: "
              f"{_sources(ladder.sources(study_ops))}.", "",
              table(_merged(*models.score(ladder, study_ops)), COLS), ""]

    preds, sources = [], []
    for run in studies:
        tr, te = feats[feats.run_id != run], feats[feats.run_id == run]
        lad = models.fit(tr)
        p = lad.predict(te)
        sources.append(lad.l3_predict(te)[1])
        preds.append(te.assign(**{f"pred {k}": v for k, v in p.items()}))
    held = pd.concat(preds)
    src = np.concatenate(sources)
    shares = {s: float((src == i).mean()) for i, s in enumerate(models.SOURCES)}
    named = {m: held[f"pred {m}"].to_numpy() for m in models.MODELS}
    named[models.NOISE_FLOOR] = models.remeasured(held)
    lines += ["## 3. Leave one study out", "",
              f"Each study run of `{args.traces.name}` scored by models fit on every other run there (the grids "
              f"and the other studies). L3 answered from: {_sources(shares)}.", "",
              table(_merged(*models.score_predictions(held, named)), COLS)]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

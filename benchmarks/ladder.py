"""Score the Level 0-3 performance models on held-out runs, three ways.

1. Offline profile (the seed note's Level 3): fit on the study runs of one capture (plus the
   L3 grids) and score on the studies of another capture, made in another session on the same
   kind of device, the MoE and GNN ones on another data draw; every ordered pair of captures.
   `--offline` names the other captures' traces folders (repeatable).
2. The grid alone: fit on the L3 training-grid runs (workloads/l3_grid_*.toml) and score on
   every study run (what `wlprof predict --train GRID --test STUDIES` prints).
3. Leave one study out: for each study run of `--traces`, fit on every other run there (the
   grids and the other studies) and score on it; then pool the held-out predictions.

Every table ends with the noise floor: each call predicted by the same call in the other
profiled steps of its own run.

    python benchmarks/ladder.py --traces benchmarks/results/<date>-h200/traces \
        --offline benchmarks/results/<date>-h200/offline --offline benchmarks/results/<date>-h200/offline_e \
        --out ladder.md
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

COLS = {"model": "model", "family": "family", "ops": "op calls", "within_10pct": "within ±10%",
        "time_within_10pct": "their time share", "median_ape": "median |error|", "steps": "steps",
        "step_within_5pct": "steps within ±5%", "step_median_ape": "step median |error|"}


def _split(traces: Path) -> tuple[pd.DataFrame, list[str], list[str]]:
    """(op features of every run, grid run ids, study run ids) of a traces folder."""
    import wlprof
    from wlprof.analysis import models
    from wlprof.store.runs import list_runs

    runs = list_runs(traces)
    grid = [m["run_id"] for m in runs if (m.get("study") or {}).get("name", "").startswith("l3_grid")]
    studies = [m["run_id"] for m in runs if m["run_id"] not in grid]
    feats = models.features(wlprof.load(traces, table="ops"))
    names = {m["run_id"]: (m.get("study") or {}).get("name") or m["run_id"] for m in runs}
    return feats.assign(study=feats.run_id.map(names)), grid, studies


def _sources(shares: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.1%}" for k, v in shares.items())


BUCKETS = [0, 2, 5, 10, 50, np.inf]  # us


def by_duration(test: pd.DataFrame, preds: dict[str, np.ndarray]) -> pd.DataFrame:
    """Share of calls within +-10% per kernel-time bucket: how much of a miss is timer resolution."""
    labels = [f"{a:g}-{b:g} µs" if np.isfinite(b) else f"> {a:g} µs"
              for a, b in zip(BUCKETS[:-1], BUCKETS[1:], strict=True)]
    bucket = pd.cut(test.dur_us, BUCKETS, labels=labels)
    out = pd.DataFrame({"calls": test.groupby(bucket, observed=False).size()})
    for name, p in preds.items():
        ok = pd.Series(np.abs(p - test.dur_us.to_numpy()) <= 0.1 * test.dur_us.to_numpy(), index=test.index)
        out[name] = ok.groupby(bucket, observed=False).mean().round(3)
    return out.rename_axis("op call's kernel time").reset_index()


def draw_spread(captures) -> pd.DataFrame:
    """Per family, the spread (max / min) of each sweep point's step kernel time across captures."""
    per = []
    for name, ops, _ in captures:
        step = ops.groupby(["family", "study", "variant", "step"]).dur_us.sum()
        per.append(step.groupby(["family", "study", "variant"]).median().rename(name))
    t = pd.concat(per, axis=1).dropna()
    ratio = t.max(axis=1) / t.min(axis=1)
    g = ratio.groupby(level="family")
    out = pd.DataFrame({"points": g.size(), "median spread": g.median().round(3), "largest spread": g.max().round(3),
                        "its point": g.idxmax().map(lambda k: f"{k[1]}: {k[2]}")})
    return out.reset_index()


def _merged(op_scores: pd.DataFrame, step_scores: pd.DataFrame) -> pd.DataFrame:
    return op_scores.merge(step_scores, on=["model", "family"])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", type=Path, required=True, help="the studies to score, and the grids")
    ap.add_argument("--offline", type=Path, action="append", default=[],
                    help="another capture of the same studies (repeatable)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    from wlprof.analysis import models
    from wlprof.cli.markdown import table

    feats, grid, studies = _split(args.traces)
    lines = ["# The Level 0-3 ladder on held-out runs", "",
             f"Op calls with known FLOPs and bytes in `{args.traces.name}`: {len(feats)}.", ""]
    grids = feats[feats.run_id.isin(grid)]
    study_ops = feats[feats.run_id.isin(studies)]

    captures = [(args.traces.name, study_ops, studies)]
    for folder in args.offline:
        off, off_grid, off_studies = _split(folder)
        grids = pd.concat([grids, off[off.run_id.isin(off_grid)]])
        captures.append((folder.name, off[off.run_id.isin(off_studies)], off_studies))
    if len(captures) > 1:
        lines += ["## 1. Offline profile: fit on one capture, score on another", "",
                  "The seed note's Level 3: profile the kernels offline, predict a later run. The captures ran "
                  "the same study files in different sessions on the same kind of device, the MoE and GNN studies "
                  "on different data draws (`--set seed=N`: other dispersed counts, token order, gates and inputs; "
                  "other graphs of the same generators). Every fit includes the L3 grids.", ""]
        summary, details = [], []

        def overall(merged: pd.DataFrame, fit_on: str, scored_on: str) -> None:
            for model in ("L3 profile", models.NOISE_FLOOR):
                row = merged[(merged.model == model) & (merged.family == "all")].iloc[0].to_dict()
                summary.append({"fit on": fit_on, "scored on": scored_on, **row})

        for fit_name, tr, _ in captures:
            ladder = models.fit(pd.concat([tr, grids]))
            for test_name, te, te_runs in captures:
                if test_name == fit_name:
                    continue
                merged = _merged(*models.score(ladder, te))
                overall(merged, fit_name, test_name)
                if not details:  # the first pair in full, per family
                    buckets = by_duration(te, {"L3 profile within ±10%": ladder.predict(te)["L3 profile"],
                                               "noise floor within ±10%": models.remeasured(te)})
                    details += [f"### Fit on `{fit_name}`, score on `{test_name}`, per family", "",
                                f"Test runs: {', '.join(te_runs)} ({len(te)} op calls). L3 answered from: "
                                f"{_sources(ladder.sources(te))}.", "", table(merged, COLS), "",
                                "By the call's kernel time:", "", table(buckets, {c: c for c in buckets.columns}), ""]
        if len(captures) > 2:  # each capture against the profile of all the others, every draw together
            for test_name, te, _ in captures:
                others = pd.concat([c[1] for c in captures if c[0] != test_name])
                overall(_merged(*models.score(models.fit(pd.concat([others, grids])), te)),
                        "every other capture", test_name)
        cols = {"fit on": "fit on", "scored on": "scored on", **COLS}
        cols.pop("family")
        spread = draw_spread(captures)
        lines += ["Every ordered pair of captures, and each capture scored by the profile of all the others, "
                  "all families:", "", table(pd.DataFrame(summary), cols), "",
                  "How far the captures' step times lie apart (each sweep point's median kernel time per step, "
                  "max over min across the captures), per family: what a profile of one capture cannot know "
                  "of another.", "", table(spread, {c: c for c in spread.columns}), "", *details]

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

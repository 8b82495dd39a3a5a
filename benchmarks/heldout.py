"""Score the Level 0-3 ladder on configurations the profile never saw, per family, with the noise floor.

Two protocols:

1. `--profile DIR --traces HELDOUT`: the shipped way. L0-L2 (`analysis.models`, unchanged)
   and both Level 3s are fitted on the profile's op calls only (the grid `wlprof profile`
   measured): the lookup-and-regression L3 of `wlprof predict --train` ("L3 lookup") and the
   per-class L3 of `wlprof.predict` ("L3 profile"). Scored on every run of HELDOUT (study
   files `workloads/heldout/heldout_*.toml`: shapes, batches, expert counts, top-k, token counts,
   widths, routings and graphs the grid does not hold).
2. `--folds TRACES...`: an estimate from committed runs of the studies, without a device.
   Whole configurations are held out in turn (an MoE study, a GNN feature width or graph,
   every other MLP batch, the GEMM study, every other elementwise size) and the L3s are
   fitted on every other run of every capture.

Both write one Markdown file: per family the share of op calls within +-10%, their share
of kernel time, the median error, steps composed of the scored calls within +-5%, the
sources the new L3 answered from, by kernel-time bucket, and the whole steps' kernel,
back-to-back and latency times.

    python benchmarks/heldout.py --profile profiles/h200 --traces heldout/ --out heldout.md
    python benchmarks/heldout.py --folds benchmarks/results/2026-11-29-h200/traces \
        benchmarks/results/2026-11-29-h200/offline benchmarks/results/2026-11-29-h200/offline_e --out est.md
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).parent))
from ladder import COLS, by_duration  # noqa: E402

LOOKUP = "L3 lookup"
TIMELINE_COLS = {"family": "family", "steps": "steps", "kernel_within_5pct": "step kernel time within ±5%",
                 "kernel_median_ape": "median |error|", "points": "points",
                 "b2b_within_10pct": "back-to-back within ±10%", "b2b_median_ape": "median |error| ",
                 "latency_within_10pct": "latency within ±10%", "latency_median_ape": "median |error|  "}


def _study_names(folder: Path) -> dict[str, str]:
    from wlprof.store.runs import list_runs

    return {m["run_id"]: (m.get("study") or {}).get("name") or m["run_id"] for m in list_runs(folder)}


def ladder_predictions(profile_ops: pd.DataFrame, test: pd.DataFrame, predictor, lookup: bool) -> dict:
    """Every model's predictions of the scored calls `test` (`models.features` rows)."""
    from wlprof.analysis import models
    from wlprof.predict.report import L3, predict_calls

    train = models.features(profile_ops)
    lad = models.fit(train, l3=lookup)
    preds = lad.predict(test)
    if lookup:
        preds[LOOKUP] = preds.pop("L3 profile")
    t0 = time.perf_counter()
    _, pred, src = predict_calls(predictor, test)
    elapsed = time.perf_counter() - t0
    preds[L3] = pred
    preds[models.NOISE_FLOOR] = models.remeasured(test)
    return {"preds": preds, "src": src, "seconds": elapsed}


def section(title: str, intro: str, profile_ops, test_ops, test_steps, predictor, host, lookup: bool) -> list[str]:
    from wlprof.analysis import models
    from wlprof.cli.markdown import table
    from wlprof.predict.report import L3, predict_calls, timeline_scores
    from wlprof.predict.steps import compose

    test_ops = test_ops[pd.to_numeric(test_ops.dur_us, errors="coerce") > 0].reset_index(drop=True)
    scored = models.features(test_ops)
    res = ladder_predictions(profile_ops, scored, predictor, lookup)
    preds = res["preds"]
    op_s, step_s = models.score_predictions(scored, preds)
    merged = op_s.merge(step_s, on=["model", "family"])
    order = {m: i for i, m in enumerate([*models.MODELS[:-1], LOOKUP, L3, models.NOISE_FLOOR])}
    merged = merged.sort_values(["model", "family"], key=lambda s: s.map(order) if s.name == "model" else s,
                                kind="stable")
    shares = predictor.sources(res["src"])
    buckets = by_duration(scored, {f"{L3} within ±10%": preds[L3], "noise floor within ±10%": preds[models.NOISE_FLOOR]})
    headline = merged[merged.family == "all"]
    d_all, pred_all, _ = predict_calls(predictor, test_ops)
    from wlprof.analysis.families import add_family

    steps = compose(test_ops, pred_all, d_all, host)
    fam = add_family(test_ops)[["run_id", "point", "family"]].drop_duplicates(["run_id", "point"])
    steps = steps.merge(fam, on=["run_id", "point"], how="left")
    if test_steps is not None and len(test_steps):
        meas = test_steps[["run_id", "point", "back_to_back_us", "latency_us"]].drop_duplicates(["run_id", "point"])
        steps = steps.merge(meas, on=["run_id", "point"], how="left")
    timeline = timeline_scores(steps)
    return [f"## {title}", "", intro, "",
            f"Scored: {len(scored)} op calls with known FLOPs and bytes ({len(test_ops)} calls in all) in "
            f"{test_ops.run_id.nunique()} runs. The new L3 answered from: "
            + ", ".join(f"{k} {v:.1%}" for k, v in shares.items())
            + f"; it predicted these {len(scored)} calls in {res['seconds']:.2f} s.", "",
            "All families:", "", table(headline, COLS), "", "Per family:", "", table(merged, COLS), "",
            "By the call's kernel time:", "", table(buckets, {c: c for c in buckets.columns}), "",
            "Whole steps (every call of a step, the ones L0-L2 cannot cost included) and the unprofiled timings "
            "of each point, predicted with the profile's host timeline:", "", table(timeline, TIMELINE_COLS), ""]


def profile_protocol(args) -> list[str]:
    import wlprof
    from wlprof.predict.profile import load_profile, profile_tables

    predictor, host, info = load_profile(args.profile)
    prof_ops, _ = profile_tables(args.profile)
    test_ops = wlprof.load(args.traces, table="ops")
    test_ops = test_ops[pd.to_numeric(test_ops.dur_us, errors="coerce") > 0].reset_index(drop=True)  # as predict
    if test_ops.ceiling_tflops.isna().all():  # runs made without this device's ceilings (ingested traces)
        from wlprof.predict.report import placed_against

        test_ops = placed_against(test_ops, info.get("ceilings"))
    test_steps = wlprof.load(args.traces, table="steps")
    prof_runs = set(prof_ops.run_id)
    leaked = sorted(set(test_ops.run_id) & prof_runs)
    if leaked:
        raise SystemExit(f"held-out runs are in the profile: {leaked}")
    names = _study_names(args.traces)
    cost = (f"Profile `{args.profile}`: {info.get('points', '?')} points, {info.get('op_calls', '?')} op calls, "
            f"{info.get('gpu_minutes') or round(info.get('grid_seconds', 0) / 60, 2)} minutes of "
            f"{(info.get('device') or {}).get('name', '?')} (`{info.get('command')}`); "
            f"{info.get('noisy_points', '?')} noisy and {info.get('throttled_points', '?')} throttled points; "
            f"sections left out by the budget: {len(info.get('skipped', []))}.")
    intro = (cost + " Held-out runs: " + ", ".join(sorted(set(names.get(r, r) for r in test_ops.run_id))) + ".")
    return ["# The ladder on configurations the profile never saw", "",
            *section("Profile grid only, held-out studies", intro, prof_ops, test_ops, test_steps, predictor, host,
                     args.lookup)]


FOLDS = [
    ("MoE routing_128 held out", lambda o: o.study == "moe_routing_128"),
    ("MoE routing_8192 held out", lambda o: o.study == "moe_routing_8192"),
    ("MoE zipf held out", lambda o: o.study == "moe_zipf"),
    ("GNN F=64 held out", lambda o: (o.study == "gnn_backends") & (o.features == 64)),
    ("GNN F=128 held out", lambda o: (o.study == "gnn_backends") & (o.features == 128)),
    ("GNN F=256 held out", lambda o: (o.study == "gnn_backends") & (o.features == 256)),
    ("GNN rmat held out", lambda o: (o.study == "gnn_backends") & (o.graph == "rmat")),
    ("GNN zipf:1.5 held out", lambda o: (o.study == "gnn_backends") & (o.graph == "zipf:1.5")),
    ("PyG held out", lambda o: o.study == "gnn_pyg"),
    ("MLP odd batches held out", lambda o: (o.study == "mlp_batch") & o.batch.isin([2, 8, 32, 128, 512, 2048])),
    ("GEMM study held out", lambda o: o.study == "gemm_same_flops"),
    ("odd elementwise sizes held out", lambda o: (o.study == "l3_grid_elementwise")
     & (np.log2(pd.to_numeric(o.numel, errors="coerce").fillna(1)).round() % 2 == 1)),
]


def folds_protocol(args) -> list[str]:
    import wlprof
    from wlprof.analysis import models
    from wlprof.cli.markdown import table
    from wlprof.predict.profile import fit_profile
    from wlprof.predict.report import L3

    ops, steps = [], []
    for f in args.folds:
        names = _study_names(f)
        o = wlprof.load(f, table="ops")
        s = wlprof.load(f, table="steps")
        ops.append(o.assign(study=o.run_id.map(names)))
        steps.append(s.assign(study=s.run_id.map(names)))
    ops = pd.concat(ops, ignore_index=True)
    steps = pd.concat(steps, ignore_index=True)
    lines = ["# The ladder on held-out configurations of the committed runs (an estimate)", "",
             "No new device run: each fold holds out whole configurations of the committed studies (every capture "
             f"of them: {', '.join(f.name for f in args.folds)}) and fits every model on all the other runs "
             "(the L3 grids and the other studies). The neighbours a fold leaves are the committed studies', "
             "not the profile grid's: denser for some families (MoE at the same widths), sparser for others "
             "(GNN widths, PyG).", ""]
    summary = []
    for name, pick in FOLDS:
        mask = pick(ops).fillna(False).to_numpy(dtype=bool)
        if not mask.any():
            continue
        train, test = ops[~mask], ops[mask]
        ceilings = {}
        predictor, host = fit_profile(train.reset_index(drop=True), steps[~steps.run_id.isin(test.run_id)
                                                                          | ~steps.point.isin(test.point)],
                                      None, ceilings)
        t_steps = steps.merge(test[["run_id", "point"]].drop_duplicates(), on=["run_id", "point"])
        part = section(name, f"Profile: the {len(train)} other op calls.", train, test, t_steps, predictor, host,
                       args.lookup)
        lines += part
        scored = models.features(test[pd.to_numeric(test.dur_us, errors="coerce") > 0])
        res = ladder_predictions(train, scored, predictor, False)
        op_s, step_s = models.score_predictions(scored, {L3: res["preds"][L3],
                                                         models.NOISE_FLOOR: res["preds"][models.NOISE_FLOOR]})
        m = op_s.merge(step_s, on=["model", "family"])
        for r in m[m.family == "all"].itertuples():
            summary.append({"fold": name, "model": r.model, "ops": r.ops, "within_10pct": r.within_10pct,
                            "time_within_10pct": r.time_within_10pct, "median_ape": r.median_ape, "steps": r.steps,
                            "step_within_5pct": r.step_within_5pct, "step_median_ape": r.step_median_ape})
    cols = {"fold": "held out", **{k: v for k, v in COLS.items() if k != "family"}}
    return lines[:4] + ["Every fold, all families:", "", table(pd.DataFrame(summary), cols), ""] + lines[4:]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", type=Path, help="a profile folder (wlprof profile -o DIR)")
    ap.add_argument("--traces", type=Path, help="the held-out runs")
    ap.add_argument("--folds", type=Path, nargs="+", help="committed traces folders: the fold protocol")
    ap.add_argument("--lookup", action="store_true", help="also fit the lookup-and-regression L3 (slow on 2 cores)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    if args.folds:
        lines = folds_protocol(args)
    elif args.profile and args.traces:
        lines = profile_protocol(args)
    else:
        ap.error("give --profile and --traces, or --folds")
    text = "\n".join(lines) + "\n"
    if args.out:  # before printing: a closed pipe must not lose the file
        args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What `wlprof predict --profile` reports: scores of held-out runs, and a step's predicted breakdown.

`score_runs` puts the new Level 3 beside L0-L2 (fitted on the profile's op calls, as
`analysis.models` defines them) and the noise floor, per family; its step rows compose
every call of a step (the calls L0-L2 cannot cost included) and set the predicted
back-to-back time and latency beside the measured ones. `breakdown` is the per-op table
of one predicted step.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from wlprof.predict.model import SOURCES, Predictor
from wlprof.predict.steps import Host, compose

L3 = "L3 profile"


def predict_calls(predictor: Predictor, ops: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """(the calls described, predicted us, source index) of an ops table."""
    from wlprof.predict.calls import describe

    d = describe(ops)
    pred, src = predictor.predict(ops, d)
    return d, pred, src


def score_runs(predictor: Predictor, host: Host, profile_ops: pd.DataFrame, test_ops: pd.DataFrame,
               test_steps: pd.DataFrame | None = None) -> dict:
    """Scores of `test_ops` (held-out runs): {'ops': per model and family, 'steps': the ladder's composed
    steps, 'timeline': per family the full steps' kernel, back-to-back and latency, 'sources': shares}."""
    from wlprof.analysis import models
    from wlprof.analysis.families import add_family

    test_ops = test_ops[pd.to_numeric(test_ops.dur_us, errors="coerce") > 0].reset_index(drop=True)
    scored = models.features(test_ops)  # the calls L0-L2 can cost (known FLOPs and bytes)
    ladder = models.fit(models.features(profile_ops), l3=False)
    preds = ladder.predict(scored)
    d, pred, src = predict_calls(predictor, scored)
    preds[L3] = pred
    preds[models.NOISE_FLOOR] = models.remeasured(scored)
    op_scores, step_scores = models.score_predictions(scored, preds)
    fam = add_family(test_ops)
    d_all, pred_all, src_all = predict_calls(predictor, test_ops)
    steps = compose(test_ops, pred_all, d_all, host)
    steps = steps.merge(fam[["run_id", "point", "family"]].drop_duplicates(["run_id", "point"]),
                        on=["run_id", "point"], how="left")
    if test_steps is not None and len(test_steps):
        meas = test_steps[["run_id", "point", "back_to_back_us", "latency_us"]].drop_duplicates(["run_id", "point"])
        steps = steps.merge(meas, on=["run_id", "point"], how="left")
    timeline = timeline_scores(steps)
    return {"ops": op_scores, "steps": step_scores, "timeline": timeline, "sources": predictor.sources(src),
            "sources_all": predictor.sources(src_all), "scored_calls": len(scored), "calls": len(test_ops),
            "step_rows": steps}


def timeline_scores(steps: pd.DataFrame) -> pd.DataFrame:
    """Per family: the full step's kernel time (every call) within 5%, and per point the back-to-back
    time and the latency (their medians over the profiled steps) within 10% of the measured ones."""
    rows = []
    for fam, g in [("all", steps), *steps.groupby("family")]:
        ke = np.abs(g.pred_kernel_us / g.kernel_us - 1)
        row = {"family": fam, "steps": len(g), "kernel_within_5pct": float((ke <= 0.05).mean()),
               "kernel_median_ape": float(ke.median())}
        if "back_to_back_us" in g:
            per = g.groupby(["run_id", "point"]).agg(b=("pred_back_to_back_us", "median"),
                                                     mb=("back_to_back_us", "first"),
                                                     lat=("pred_latency_us", "median"), ml=("latency_us", "first"))
            be, le = np.abs(per.b / per.mb - 1), np.abs(per.lat / per.ml - 1)
            row.update(points=len(per), b2b_within_10pct=float((be <= 0.10).mean()), b2b_median_ape=float(be.median()),
                       latency_within_10pct=float((le <= 0.10).mean()), latency_median_ape=float(le.median()))
        rows.append(row)
    return pd.DataFrame(rows)


def source_labels(d: pd.DataFrame, src: np.ndarray) -> list[str]:
    """Each call's source by name; a call answered from another dtype names it: 'other dtype (bfloat16)'; a
    backward op answered by its class's forward ops and the profile's backward shift: 'class (backward)'."""
    got = d.answered_dtype.to_numpy(dtype=object) if "answered_dtype" in d else None
    back = d.backward_shift.to_numpy(dtype=bool) if "backward_shift" in d else np.zeros(len(src), dtype=bool)
    other = SOURCES.index("other dtype")
    return [f"{SOURCES[i]} ({got[j]})" if i == other and got is not None
            else f"{SOURCES[i]} (backward)" if back[j] else SOURCES[i] for j, i in enumerate(src)]


LIST_SHOWN = 3  # tensor lists longer than this are shown by count and shape, not tensor by tensor


def shapes_text(dims_json) -> str:
    """Recorded input dims as a short text: a list of more than LIST_SHOWN tensors as `48x[300000]`
    (one shape) or `48 tensors, 1,234,567 elements`; other inputs as recorded."""
    import json
    import math

    if not isinstance(dims_json, str) or "[[[" not in dims_json.replace(" ", ""):
        return dims_json
    try:
        dims = json.loads(dims_json)
    except ValueError:
        return dims_json
    if not isinstance(dims, list):
        return dims_json
    parts = []
    for d in dims:
        shapes = d if isinstance(d, list) and d and all(isinstance(x, list) for x in d) else None
        if shapes is None or len(shapes) <= LIST_SHOWN or not all(
                all(isinstance(v, int) for v in x) for x in shapes):
            parts.append(json.dumps(d, separators=(",", ":")))
        elif all(x == shapes[0] for x in shapes):
            parts.append(f"{len(shapes)}x{json.dumps(shapes[0], separators=(',', ':'))}")
        else:
            parts.append(f"{len(shapes)} tensors, {sum(math.prod(x) for x in shapes):,} elements")
    return "[" + ",".join(parts) + "]"


def breakdown(ops: pd.DataFrame, pred: np.ndarray, src: np.ndarray, top: int = 15,
              labels: list[str] | None = None) -> pd.DataFrame:
    """A step's calls grouped by op and shapes: count, predicted us (total, each), share, sources
    (`labels`: each call's source as `source_labels` names it; default the source's name)."""
    frame = pd.DataFrame({"op": ops.op_name.to_numpy(), "shapes": ops.op_input_dims.to_numpy(),
                          "region": ops.region.to_numpy() if "region" in ops else None,
                          "pred": pred, "source": labels if labels is not None else [SOURCES[i] for i in src]})
    if "measured_us" in ops:
        frame["measured"] = pd.to_numeric(ops.measured_us, errors="coerce").to_numpy()
    agg = {"calls": ("pred", "size"), "pred_us": ("pred", "sum"), "each_us": ("pred", "median"),
           "source": ("source", lambda x: x.value_counts().index[0])}
    if "measured" in frame:
        agg["measured_us"] = ("measured", "sum")
    g = frame.groupby(["op", "shapes"], sort=False, dropna=False).agg(**agg).reset_index()
    g["shapes"] = [shapes_text(x) for x in g.shapes]
    g["share"] = g.pred_us / max(g.pred_us.sum(), 1e-12)
    g = g.sort_values("pred_us", ascending=False)
    if 0 < top < len(g):  # 0: every row
        rest = g.iloc[top:]
        tail = {"op": f"({len(rest)} more)", "shapes": "", "calls": int(rest.calls.sum()),
                "pred_us": float(rest.pred_us.sum()), "each_us": np.nan, "source": "", "share": float(rest.share.sum())}
        if "measured_us" in g:
            tail["measured_us"] = float(rest.measured_us.sum())
        g = pd.concat([g.iloc[:top], pd.DataFrame([tail])], ignore_index=True)
    return g


def placed_against(ops, ceilings: dict | None):
    """`ops` placed against the profile's ceilings (runs made without this device's ceilings, such as an
    ingested trace), so that the ladder's L0-L2 have a peak and a roof to predict from."""
    from wlprof.ceilings import Ceilings
    from wlprof.cost.roofline import add_roofline

    try:
        c = Ceilings.from_dict(ceilings) if ceilings else None
    except (KeyError, TypeError):
        c = None
    if c is None:
        return ops
    ops = ops.copy()
    add_roofline(ops, c)
    return ops

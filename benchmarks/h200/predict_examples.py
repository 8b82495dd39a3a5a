"""`--spec` and `--trace --scale` predictions beside the measured runs of the same configurations.

    python benchmarks/h200/predict_examples.py --profile P --heldout H --out spec.md [--cpu | --set-c | --set-f]

One process (the predictor loaded once): five specs, each listed on the meta device and
predicted, set beside the held-out run of that configuration (matched by its parameters);
then the held-out MLP's raw traces with their batch rewritten (`--scale batch=F`) beside
the held-out point at the scaled batch.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

GPU_SPECS = [
    ("heldout_moe_spec", "moe tokens=4096 experts=32 top_k=2 routing=zipf:1.1"),
    ("heldout_moe_a", "moe tokens=512 experts=32 top_k=2 d_model=3072 d_ff=8192 routing=balanced dispatch=loop"),
    ("heldout_gemm", "gemm shapes=700x12288x3072"),
    ("heldout_mlp_wide", "mlp batch=333 d_model=3072 d_ff=12288 activation=silu"),
    ("heldout_gnn", "gnn graph=rmat scale=19 features=192 backend=segment,scatter dtype=float32"),
]
# held-out set C (workloads/heldout/set_c/): configurations no decision about the model saw
SET_C_SPECS = [
    ("heldout_c_moe_a", "moe tokens=5000 experts=40 top_k=2 d_model=1792 d_ff=4864 routing=zipf:0.9"),
    ("heldout_c_moe_b", "moe tokens=2048 experts=96 top_k=1 d_model=3584 d_ff=2048 routing=dispersed"),
    ("heldout_c_gemm", "gemm shapes=2222x3328x3328,64x18432x4608"),
    ("heldout_c_mlp", "mlp batch=20,300 d_model=1792 d_ff=7168 activation=silu"),
    ("heldout_c_gnn", "gnn graph=rmat scale=19 features=144 edge_factor=20 backend=segment,scatter,csr "
     "dtype=float32"),
]
# held-out set F (workloads/heldout/set_f/)
SET_F_SPECS = [
    ("heldout_f_moe_a", "moe tokens=2560 experts=40 top_k=3 d_model=1280 d_ff=3456 routing=zipf:1.0 dispatch=loop"),
    ("heldout_f_moe_b", "moe tokens=1800 experts=96 top_k=6 d_model=2048 d_ff=1408 routing=dispersed"),
    ("heldout_f_gemm", "gemm shapes=640x1280x5120,6000x3584x3584"),
    ("heldout_f_mlp", "mlp batch=24,700 d_model=3072 d_ff=8192 activation=gelu"),
    ("heldout_f_gnn", "gnn graph=uniform scale=17 features=160 edge_factor=10 backend=segment,scatter,csr "
     "dtype=float32"),
]
CPU_SPECS = [
    ("heldout_moe_spec", "moe tokens=48 experts=6 top_k=2 d_model=48 d_ff=96 routing=zipf:1.1 dtype=float32"),
    ("heldout_moe_a", "moe tokens=48 experts=6 top_k=2 d_model=48 d_ff=96 routing=balanced dispatch=loop "
     "dtype=float32"),
    ("heldout_gemm", "gemm shapes=100x80x320 dtype=float32"),
    ("heldout_mlp", "mlp batch=200 d_model=96 d_ff=384 dtype=float32"),
    ("heldout_gnn", "gnn graph=rmat scale=9 features=24 backend=segment,scatter dtype=float32"),
]
# (held-out MLP point of the trace, factor): batch 96 -> 384, 384 -> 1536, 768 -> 384 (CPU: 12 -> 48, ...)
GPU_TRACES = [(4, 4.0), (6, 4.0), (7, 0.5)]
CPU_TRACES = [(1, 4.0), (2, 0.25), (3, 0.25)]
KEYS = ("tokens", "experts", "top_k", "d_model", "d_ff", "routing", "dispatch", "m", "k", "n", "batch",
        "graph", "scale", "features", "backend")


def measured_point(steps: pd.DataFrame, runs: dict, study: str, params: dict) -> pd.DataFrame:
    def same(a, b) -> bool:
        try:
            return float(a) == float(b)
        except (TypeError, ValueError):
            return str(a) == str(b)

    rows = steps[steps.run_id == runs.get(study)]
    for k, v in params.items():
        if k in rows and k in KEYS and not (isinstance(v, float) and np.isnan(v)):
            rows = rows[[same(x, v) for x in rows[k]]]
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", type=Path, required=True)
    ap.add_argument("--heldout", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--cpu", action="store_true")
    ap.add_argument("--set-c", action="store_true", help="the specs of held-out set C (no rescaled traces)")
    ap.add_argument("--set-f", action="store_true", help="the specs of held-out set F (no rescaled traces)")
    args = ap.parse_args(argv)
    import wlprof
    from wlprof.cli.markdown import table
    from wlprof.predict.profile import load_profile
    from wlprof.predict.report import breakdown, predict_calls
    from wlprof.predict.scale import anchored, ingest_trace, scaled
    from wlprof.predict.spec import parse_spec, record
    from wlprof.predict.steps import times_of

    predictor, host, _ = load_profile(args.profile)
    runs = {r["name"]: r["run_id"] for r in json.loads((args.heldout / "_runs.json").read_text()) if r["run_id"]}
    steps = wlprof.load(args.heldout, table="steps")
    rows, lines = [], ["# --spec and --trace --scale beside their measured runs", ""]

    def times(ops):
        d, pred, src = predict_calls(predictor, ops)
        b2b, lat = times_of(d, pred, host)
        return pred, src, b2b, lat

    specs = CPU_SPECS if args.cpu else SET_C_SPECS if args.set_c else SET_F_SPECS if args.set_f else GPU_SPECS
    for study, text in specs:
        t0 = time.perf_counter()
        try:
            ops = record(parse_spec(text), launching=frozenset(predictor.meta.get("op_names", [])))
        except Exception as exc:  # noqa: BLE001 - one spec that cannot be listed must not lose the others
            lines += [f"## `{text}`", "", f"not listed: {type(exc).__name__}: {exc}", ""]
            continue
        listed = time.perf_counter() - t0
        for variant, g in ops.groupby("variant", sort=False):
            pred, src, b2b, lat = times(g)
            p = g.iloc[0]
            meas = measured_point(steps, runs, study, {k: p[k] for k in KEYS if k in g})
            m = meas.iloc[0] if len(meas) else None
            rows.append({"spec": f"{text} [{variant}]", "calls": len(g),
                         "measured kernels": m.kernels_per_step if m is not None else np.nan,
                         "kernel us": pred.sum(), "measured kernel us": m.kernel_us if m is not None else np.nan,
                         "back-to-back us": b2b, "measured b2b us": m.back_to_back_us if m is not None else np.nan,
                         "latency us": lat, "measured latency us": m.latency_us if m is not None else np.nan,
                         "listed in s": listed})
            lines += [f"## `{text}` [{variant}]", "", table(breakdown(g, pred, src, 10)), ""]
    mlp = None if args.set_c or args.set_f else runs.get("heldout_mlp")
    for point, factor in (CPU_TRACES if args.cpu else GPU_TRACES):
        files = sorted((args.heldout / str(mlp) / "_chrome").glob(f"p{point:03d}-*.raw.json.gz")) if mlp else []
        if not files:
            continue
        ops = ingest_trace(str(files[0]))
        ops = ops[ops.step == ops.step[ops.step >= 0].min()]
        orig = steps[(steps.run_id == mlp) & (steps.point == point)].iloc[0]
        new, value = scaled(ops, "batch", factor)
        pred, src, b2b, lat = times(new)
        raw_pred = pred.sum()
        d_new, _, _ = predict_calls(predictor, new)
        _, pred_u, _ = predict_calls(predictor, ops)
        pred, _ = anchored(pred, pred_u, src, new.measured_us.to_numpy(), d_new.rows_unknown.to_numpy())
        b2b, lat = times_of(d_new, pred, host)
        target = steps[(steps.run_id == mlp) & (steps.batch == round(value * factor))]
        m = target.iloc[0] if len(target) else None
        rows.append({"spec": f"--trace {files[0].name} --scale batch={factor:g} (batch {value} -> "
                             f"{round(value * factor)}; {raw_pred:,.1f} us unanchored)", "calls": len(new),
                     "measured kernels": m.kernels_per_step if m is not None else np.nan, "kernel us": pred.sum(),
                     "measured kernel us": m.kernel_us if m is not None else np.nan, "back-to-back us": b2b,
                     "measured b2b us": m.back_to_back_us if m is not None else np.nan, "latency us": lat,
                     "measured latency us": m.latency_us if m is not None else np.nan, "listed in s": np.nan})
        same, _, _, _ = times(ops.assign(dur_us=np.nan))
        rows.append({"spec": f"--trace {files[0].name} (unscaled, batch {value})", "calls": len(ops),
                     "measured kernels": orig.kernels_per_step, "kernel us": same.sum(),
                     "measured kernel us": orig.kernel_us, "back-to-back us": np.nan,
                     "measured b2b us": orig.back_to_back_us, "latency us": np.nan,
                     "measured latency us": orig.latency_us, "listed in s": np.nan})
    summary = pd.DataFrame(rows)
    if len(summary):
        summary["kernel error"] = summary["kernel us"] / summary["measured kernel us"] - 1
        summary["b2b error"] = summary["back-to-back us"] / summary["measured b2b us"] - 1
        summary["latency error"] = summary["latency us"] / summary["measured latency us"] - 1
    text = "\n".join(lines[:2] + [table(summary) if len(summary) else "(nothing predicted)", ""] + lines[2:]) + "\n"
    args.out.write_text(text)  # before printing: a closed pipe must not lose the file
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Level 3's answer for ops a profile never measured, judged without a held-out set: copies of a profile with
every call of some ops removed (leave-op-out), refitted, predicting those ops' calls in the profile and in traces.

    python benchmarks/leave_op_out.py --profile benchmarks/profiles/h200 --fixtures tests/fixtures/h200_training \
        tests/fixtures/h200_zoo3 tests/fixtures/h200_optim tests/fixtures/h200_zoo [--cases backward,family] \
        [--out FILE.md]

The cases come from the profile's own training-layer studies (its `layer` column): per layer, the ops no other
layer or workload of the profile runs (a convolution's `cudnn_convolution` and `convolution_backward`; not the
`fill_` a loss and a pooling both run). `backward`: the layer's backward ops removed, its forward ops kept (a
profile that measured the forward only); `family`: all of them removed (a profile whose budget stopped before
the layer). Each case copies the profile's tables without those calls into a temporary folder, refits it as
`wlprof profile -o DIR --refit` does, and predicts the removed ops' calls: the profile's own (the grid's points
of that layer) and the traces' (every call of those ops in the fixture folders). Prints per case and op the
calls, measured and predicted time, the median ratio, the share within +-10% and within 2x, and the sources
that answered; then per kind of case the totals, and the fixtures' whole score (every call) beside the full
profile's. Nothing under the profile is written.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
CASES = ("backward", "family")


def families(ops: pd.DataFrame) -> dict[str, list[str]]:
    """Per training layer of the profile, the ops that only its points run."""
    from wlprof.predict.model import is_backward

    layer = ops.get("layer")
    if layer is None:
        return {}
    who = ops.workload.astype(str) + "|" + layer.astype(object).where(layer.notna(), "").astype(str)
    owners = pd.DataFrame({"op": ops.op_name.astype(str), "who": who}).drop_duplicates()
    count = owners.groupby("op").who.nunique()
    out = {}
    for w, g in owners[owners.who.str.startswith("layers|")].groupby("who"):
        own = sorted(o for o in g.op if count[o] == 1)
        if any(is_backward(o) for o in own):
            out[w.split("|", 1)[1]] = own
    return out


def load_fixtures(folders: list[Path], tmp: Path, profile: Path) -> pd.DataFrame:
    """Every trace of the folders ingested, placed against the profile's ceilings as `wlprof predict --trace`
    places it: their op calls with a kernel time."""
    from predict_models import ceilings_file

    import wlprof
    from wlprof.ingest import ingest

    tmp.mkdir(parents=True, exist_ok=True)
    placed = ceilings_file(profile, tmp.parent)
    for folder in folders:
        for f in sorted(folder.glob("*.json.gz")):
            ingest(f, tmp, name=f"{folder.name}-{f.name.split('.')[0]}".replace("_", "-"), jobs=1,
                   ceilings_file=placed)
    ops = wlprof.load(str(tmp), table="ops")
    return ops[pd.to_numeric(ops.dur_us, errors="coerce") > 0].reset_index(drop=True)


def reduced_profile(src: Path, dst: Path, gone: list[str]):
    """A copy of the profile `src` in `dst` without the calls of the ops `gone`, refitted; its predictor."""
    from wlprof.predict.profile import OPS_FILE, PROFILE_FILE, STEPS_FILE, load_profile, refit

    ops = pd.read_parquet(src / OPS_FILE)
    ops[~ops.op_name.isin(gone)].reset_index(drop=True).to_parquet(dst / OPS_FILE)
    for name in (STEPS_FILE, PROFILE_FILE):
        shutil.copy(src / name, dst / name)
    refit(dst)
    return load_profile(dst)[0]


def score(frame: pd.DataFrame) -> dict:
    """Calls, times and error shares of predicted calls (`dur_us`, `pred_us`)."""
    ratio = frame.pred_us / frame.dur_us
    return {"calls": len(frame), "measured_us": float(frame.dur_us.sum()), "predicted_us": float(frame.pred_us.sum()),
            "median_ratio": float(ratio.median()) if len(frame) else np.nan,
            "within_10pct": float(((ratio - 1).abs() <= 0.1).mean()) if len(frame) else np.nan,
            "within_2x": float((np.abs(np.log2(ratio)) <= 1).mean()) if len(frame) else np.nan,
            "abs_err_us": float((frame.pred_us - frame.dur_us).abs().sum())}


def predicted(predictor, ops: pd.DataFrame) -> pd.DataFrame:
    from wlprof.predict.report import predict_calls, source_labels

    d, pred, src = predict_calls(predictor, ops)
    return ops.assign(pred_us=pred, source=source_labels(d, src))


def _md(df: pd.DataFrame) -> str:
    def cell(v):
        if isinstance(v, float):
            return "" if np.isnan(v) else f"{v:,.3f}".rstrip("0").rstrip(".")
        return str(v)

    cols = list(map(str, df.columns))
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines)


def main(argv=None) -> int:
    from wlprof.predict.model import is_backward
    from wlprof.predict.profile import OPS_FILE, load_profile

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", type=Path, default=REPO / "benchmarks" / "profiles" / "h200")
    ap.add_argument("--fixtures", nargs="*", type=Path, default=[], help="folders of *.json.gz traces")
    ap.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, of {', '.join(CASES)}")
    ap.add_argument("--only", default="", help="comma-separated layers to run (default: every one)")
    ap.add_argument("--out", type=Path, default=None, help="also write the tables to this Markdown file")
    a = ap.parse_args(argv)
    kinds = [c for c in a.cases.split(",") if c]
    bad = sorted(set(kinds) - set(CASES))
    if bad:
        ap.error(f"--cases must name {' or '.join(CASES)} (got {', '.join(bad)})")
    profile_ops = pd.read_parquet(a.profile / OPS_FILE)
    profile_ops = profile_ops[pd.to_numeric(profile_ops.dur_us, errors="coerce") > 0].reset_index(drop=True)
    fams = families(profile_ops)
    if a.only:
        fams = {k: v for k, v in fams.items() if k in a.only.split(",")}
    t0 = time.time()
    rows, totals = [], []
    with tempfile.TemporaryDirectory() as tmp:
        fixtures = load_fixtures(a.fixtures, Path(tmp) / "traces", Path(a.profile)) if a.fixtures else pd.DataFrame()
        full = load_profile(a.profile)[0]
        if len(fixtures):
            totals.append({"case": "full profile", **score(predicted(full, fixtures))})
        for kind in kinds:
            for layer, own in fams.items():
                gone = [o for o in own if is_backward(o)] if kind == "backward" else own
                work = Path(tmp) / f"{kind}-{layer}"
                work.mkdir()
                predictor = reduced_profile(a.profile, work, gone)
                shutil.rmtree(work)
                held = [profile_ops[profile_ops.op_name.isin(gone)].assign(where="profile")]
                if len(fixtures):
                    pf = predicted(predictor, fixtures).assign(where="traces")
                    totals.append({"case": f"{kind}: {layer} out", **score(pf)})
                    held.append(pf[pf.op_name.isin(gone)])
                held[0] = predicted(predictor, held[0])
                for (where, op), g in pd.concat(held, ignore_index=True).groupby(["where", "op_name"], sort=False):
                    src = g.source.value_counts()
                    rows.append({"case": kind, "layer": layer, "where": where, "op": op, **score(g),
                                 "sources": ", ".join(f"{s} {n}" for s, n in src.items())})
                print(f"{kind}: {layer} ({', '.join(gone)}) {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    per_op = pd.DataFrame(rows)
    parts = [f"Leave-op-out on {a.profile} ({len(fams)} layers: "
             + "; ".join(f"{k}: {', '.join(v)}" for k, v in fams.items()) + ")"]
    if len(per_op):
        show = per_op.drop(columns=["predicted_us"]).assign(ratio=per_op.predicted_us / per_op.measured_us)
        parts.append("Per case and op (ratio: predicted over measured time; median_ratio: of the calls'):\n\n"
                     + _md(show[["case", "layer", "where", "op", "calls", "measured_us", "ratio", "median_ratio",
                                 "within_10pct", "within_2x", "abs_err_us", "sources"]]))
        summary = []
        for (kind, where), g in per_op.groupby(["case", "where"], sort=False):
            n = g.calls.sum()
            summary.append({"case": kind, "where": where, "ops": len(g), "calls": int(n),
                            "measured_us": g.measured_us.sum(), "ratio": g.predicted_us.sum() / g.measured_us.sum(),
                            "within_10pct": float((g.within_10pct * g.calls).sum() / n),
                            "within_2x": float((g.within_2x * g.calls).sum() / n),
                            "ops_within_2x_by_median": float((np.abs(np.log2(g.median_ratio)) <= 1).mean()),
                            "abs_err_us": g.abs_err_us.sum()})
        parts.append("Totals per kind of case (ops_within_2x_by_median: the ops whose median call is within 2x):\n\n"
                     + _md(pd.DataFrame(summary)))
    if totals:
        parts.append("Every fixture call, with the full profile and with each case's ops removed:\n\n"
                     + _md(pd.DataFrame(totals)[["case", "calls", "within_10pct", "measured_us", "predicted_us",
                                                  "abs_err_us"]]))
    text = "\n\n".join(parts) + "\n"
    print(text)
    if a.out:
        a.out.write_text(text)
    print(json.dumps({"seconds": round(time.time() - t0)}), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

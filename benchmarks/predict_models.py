"""The Level-3 predictor on real model steps it never saw: every trace of the fixture folders (default: the H200
training steps) ingested and predicted op call by op call with the shipped profile, against the kernel time the
trace measured.

    python benchmarks/predict_models.py [--profile benchmarks/profiles/h200] [--fixtures DIR ...] [--out FILE.md]

Prints (and writes) per folder and per model the measured and predicted kernel time of its ops and the share
of calls within +-10%, per op the largest absolute errors with the source that answered them, and per source
its share of the calls and time.
`wlprof predict --profile P --traces T --test RUN ...` over the same folder gives the ladder's scores.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "h200_training"


def ceilings_file(profile: Path, folder: Path) -> Path | None:
    """The profile's ceilings as a file in `folder`, for `ingest(..., ceilings_file=)`: a trace of its GPU is
    placed against them as `wlprof predict --trace` places it (a float32 kernel that ran in TF32 is known as
    such), not left unplaced where this machine holds no ceilings of that GPU."""
    import json

    ceilings = json.loads((Path(profile) / "profile.json").read_text()).get("ceilings")
    if not ceilings:
        return None
    out = Path(folder) / "profile_ceilings.json"
    out.write_text(json.dumps(ceilings))
    return out


def _md(df) -> str:
    """A DataFrame as a Markdown table (index first), numbers with 3 significant decimals at most."""
    def cell(v):
        return f"{v:,.3f}".rstrip("0").rstrip(".") if isinstance(v, float) else str(v)

    cols = [df.index.name or "", *map(str, df.columns)]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(cell(v) for v in (i, *row)) + " |" for i, row in zip(df.index, df.to_numpy().tolist(),
                                                                                       strict=True)]
    return "\n".join(lines)


def main(argv=None) -> int:
    import pandas as pd

    import wlprof
    from wlprof.ingest import ingest
    from wlprof.predict.model import SOURCES
    from wlprof.predict.profile import load_profile
    from wlprof.predict.report import predict_calls

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default=str(REPO / "benchmarks" / "profiles" / "h200"))
    ap.add_argument("--fixtures", nargs="+", type=Path, default=[FIXTURES],
                    help="folders of *.json.gz traces (default: tests/fixtures/h200_training)")
    ap.add_argument("--out", default=None, help="also write the tables to this Markdown file")
    a = ap.parse_args(argv)
    loaded = load_profile(a.profile)
    predictor = loaded[0] if isinstance(loaded, tuple) else loaded
    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory() as side:
        folder_of = {}
        placed = ceilings_file(Path(a.profile), Path(side))
        for folder in a.fixtures:
            for f in sorted(folder.glob("*.json.gz")):
                run = ingest(f, Path(tmp), name=f"{folder.name}-{f.name.split('.')[0]}".replace("_", "-"), jobs=1,
                             ceilings_file=placed)
                folder_of[run.run_id] = folder.name
        ops = wlprof.load(tmp, table="ops")
    ops = ops[pd.to_numeric(ops.dur_us, errors="coerce") > 0].reset_index(drop=True)
    _, pred, src = predict_calls(predictor, ops)
    ops["pred_us"], ops["source"] = pred, [SOURCES[i] for i in src]
    ops["model"] = ops.run_id.str.rsplit("-", n=3).str[0]
    ops["folder"] = ops.run_id.map(folder_of)
    ops["abs_err_us"] = (ops.pred_us - ops.dur_us).abs()
    ops["within_10pct"] = (ops.pred_us / ops.dur_us - 1).abs() <= 0.10
    runs = ops.groupby("model").agg(calls=("dur_us", "size"), measured_us=("dur_us", "sum"),
                                    predicted_us=("pred_us", "sum"), within_10pct=("within_10pct", "mean"))
    runs["ratio"] = runs.predicted_us / runs.measured_us
    ops["ok_us"] = ops.dur_us.where(ops.within_10pct, 0.0)
    folders = ops.groupby("folder").agg(calls=("dur_us", "size"), within_10pct=("within_10pct", "mean"),
                                        measured_us=("dur_us", "sum"), predicted_us=("pred_us", "sum"),
                                        within_us=("ok_us", "sum"), abs_err_us=("abs_err_us", "sum"))
    folders["their_time"] = folders.within_us / folders.measured_us
    folders["abs_err_share"] = folders.abs_err_us / folders.measured_us
    folders = folders.drop(columns=["within_us", "abs_err_us"])
    by_op = ops.groupby("op_name").agg(calls=("dur_us", "size"), measured_us=("dur_us", "sum"),
                                       predicted_us=("pred_us", "sum"), abs_err_us=("abs_err_us", "sum"),
                                       source=("source", lambda x: x.value_counts().index[0]))
    by_op["ratio"] = by_op.predicted_us / by_op.measured_us
    by_op = by_op.sort_values("abs_err_us", ascending=False).head(25)
    by_src = ops.groupby("source").agg(calls=("dur_us", "size"), measured_us=("dur_us", "sum"),
                                       abs_err_us=("abs_err_us", "sum"), within_10pct=("within_10pct", "mean"))
    total = (f"{len(ops):,} op calls of {ops.model.nunique()} models: {ops.within_10pct.mean():.1%} within +-10%; "
             f"measured {ops.dur_us.sum():,.0f} us, predicted {ops.pred_us.sum():,.0f} us "
             f"(sum of |error| {ops.abs_err_us.sum():,.0f} us)")
    text = "\n\n".join([total, "Per folder (their_time: the kernel time of the calls within +-10%; abs_err_share: "
                         "the summed |error| over the measured time):\n\n" + _md(folders),
                         "Per model:\n\n" + _md(runs),
                        "Largest errors by op:\n\n" + _md(by_op),
                        "By the source that answered:\n\n" + _md(by_src)]) + "\n"
    print(text)
    if a.out:
        Path(a.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

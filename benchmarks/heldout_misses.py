"""Where the Level-3 profile predictor misses on held-out runs: its predictions joined to the measured calls.

    python benchmarks/heldout_misses.py --profile P --traces DIR [DIR...] [--by family,op,group] [--top 30] [--refit]

Per (family, op, shape, source) of the scored calls (`models.features`, as `heldout.py` scores them):
calls, measured and predicted kernel time, the signed error of the time (predicted / measured - 1),
the share within +-10%, and the kernel time the calls outside +-10% hold; biggest misses first.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import pandas as pd


def joined(profile: str, traces: list[str], refit: bool = False) -> pd.DataFrame:
    import wlprof
    from wlprof.analysis import models
    from wlprof.analysis.families import add_family  # noqa: F401  (models.features adds the family)
    from wlprof.predict.model import SOURCES
    from wlprof.predict.profile import load_profile
    from wlprof.predict.report import predict_calls

    predictor, _, _ = load_profile(profile, refit)
    out = []
    for t in traces:
        ops = wlprof.load(t, table="ops")
        ops = ops[pd.to_numeric(ops.dur_us, errors="coerce") > 0].reset_index(drop=True)
        scored = models.features(ops)
        d, pred, src = predict_calls(predictor, scored)
        f = pd.DataFrame({"set": t.rstrip("/").rsplit("/", 1)[-1], "family": scored.family.to_numpy(),
                          "op": scored.op_name.to_numpy(), "shape": scored.op_input_dims.astype(str).to_numpy(),
                          "group": d.group.to_numpy(), "cls": d.cls.to_numpy(),
                          "c": [tuple(np.round(r, 2)) for r in d[[f"c{j}" for j in range(5)]].to_numpy()],
                          "src": np.array(SOURCES)[src], "dur": scored.dur_us.to_numpy(dtype=float), "pred": pred})
        out.append(f)
    return pd.concat(out, ignore_index=True)


def summary(f: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    f = f.assign(ok=np.abs(f.pred / f.dur - 1) <= 0.10)
    f = f.assign(miss_us=np.where(f.ok, 0.0, f.dur))
    g = f.groupby(by, dropna=False).agg(calls=("dur", "size"), meas_us=("dur", "sum"), pred_us=("pred", "sum"),
                                        within=("ok", "mean"), miss_us=("miss_us", "sum"))
    g["err"] = g.pred_us / g.meas_us - 1
    return g.sort_values("miss_us", ascending=False)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", required=True)
    ap.add_argument("--traces", nargs="+", required=True)
    ap.add_argument("--by", default="family,op,shape,src")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--refit", action="store_true", help="fit the profile again with this code")
    a = ap.parse_args(argv)
    f = joined(a.profile, a.traces, a.refit)
    pd.set_option("display.width", 250, "display.max_colwidth", 90, "display.max_rows", 500)
    s = summary(f, a.by.split(","))
    print(f"{len(f)} calls, {f.dur.sum() / 1e3:.1f} ms; outside +-10%: {s.miss_us.sum() / 1e3:.1f} ms")
    print(s.head(a.top).to_string(float_format=lambda v: f"{v:.3g}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`wlprof predict --trace --scale batch=F` beside the same step captured at the scaled batch.

For each model of a folder written by `benchmarks/h200/capture_scaled.py`, the step at the base batch
is rescaled to every other captured batch and predicted; beside it: the captured step's measured
kernel time, the prediction of that captured step itself (what the model makes of the real shapes:
the rest is the rescaling's error), and the measured base step times F (linear scaling).

    python benchmarks/scale_check.py --profile benchmarks/profiles/h200 --traces DIR --out scale.md
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

BASE = {"transformer": 4, "convnet": 64, "moe": 4096}
LINE = re.compile(r"kernel time ([\d,.]+) µs(?: \(measured ([\d,.]+) µs\))?")


def predict(profile: Path, trace: Path, scale: str | None) -> tuple[float, float | None]:
    """(predicted kernel µs of the first step, its measured kernel µs where unscaled)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "p.md"
        cmd = [sys.executable, "-m", "wlprof.cli.main", "predict", "--profile", str(profile), "--trace", str(trace),
               "--out", str(out)] + (["--scale", scale] if scale else [])
        subprocess.run(cmd, check=True, capture_output=True, text=True)
        m = LINE.search(out.read_text())
    if not m:
        raise SystemExit(f"no kernel time in the prediction of {trace}")
    num = lambda s: float(s.replace(",", "")) if s else None  # noqa: E731
    return num(m.group(1)), num(m.group(2))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", type=Path, required=True)
    ap.add_argument("--traces", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    info = json.loads((args.traces / "captures.json").read_text())
    caps = [c for c in info["captures"] if "error" not in c]
    rows = []
    for model, base_batch in BASE.items():
        mine = sorted((c for c in caps if c.get("model") == model), key=lambda c: c["batch"])
        base = next((c for c in mine if c["batch"] == base_batch), None)
        if base is None:
            continue
        base_path = args.traces / (base["trace"] + ".gz")
        _, base_measured = predict(args.profile, base_path, None)
        for c in mine:
            path = args.traces / (c["trace"] + ".gz")
            factor = c["batch"] / base_batch
            scaled, _ = predict(args.profile, base_path, f"batch={factor:g}")
            direct, measured = predict(args.profile, path, None)
            rows.append((model, base_batch, c["batch"], measured, scaled, direct,
                         base_measured * factor if base_measured else None))
    lines = [f"# `--trace --scale batch=F` beside the captured step ({info.get('device')}, torch {info.get('torch')})",
             "", f"Profile `{args.profile}`; traces `{args.traces}` captured {info.get('date')}. Kernel time of "
             "each model's first profiled step, µs; errors against the captured step at that batch.", "",
             "| model | base batch | batch | measured | --scale from base | error | predicted from its own trace | "
             "error | base measured x F | error |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    def num(v):
        return f"{v:,.1f}" if v is not None else "-"

    for model, b0, b, meas, sc, direct, lin in rows:
        err = lambda v, meas=meas: f"{v / meas - 1:+.1%}" if meas and v is not None else "-"  # noqa: E731
        lines.append(f"| {model} | {b0} | {b} | {num(meas)} | {num(sc)} | {err(sc)} | {num(direct)} | {err(direct)} "
                     f"| {num(lin)} | {err(lin)} |")
    text = "\n".join(lines) + "\n"
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()

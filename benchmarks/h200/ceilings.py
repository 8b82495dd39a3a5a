"""Every kernel of the committed studies placed against a set of ceilings: its roof, its fraction, and the
reason for any fraction above 1.

On the H200 (one device call, `bash benchmarks/h200/part_g.sh`), with the ceilings it has just measured:

    python3 benchmarks/h200/ceilings.py --ceilings $OUT/ceilings-h200.json --out $OUT

Without a GPU, once such a ceilings JSON exists (the committed runs are Parquet; placement is offline):

    python benchmarks/h200/ceilings.py --ceilings benchmarks/results/<date>-h200/ceilings-v2.json --out placement/

Without --ceilings it calibrates this machine's device first (the GPU where there is one) and writes
ceilings-<device>.json beside the tables. Writes, under --out/placement/: placement.md (per study, every
(variant, op, kernel) with its roof, the fraction against the run's own ceilings and against these, and
the notes; counts by roof and by reason), kernels.csv.gz (every kernel row), and roofline-<folder>.png.
Exits 1 if any fraction above 1 is left without a reason.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "benchmarks" / "results" / "2026-11-29-h200"
DEFAULT_TRACES = [RESULTS / "traces", RESULTS / "offline"]

ROW_COLUMNS = ["study", "run_id", "workload", "variant", "point", "step", "kind", "op_name", "kernel", "dur_us",
               "flops", "bytes", "bytes_written", "working_set_bytes", "achieved_tflops", "achieved_gbps",
               "compute_roof", "memory_roof", "roof", "bound", "ceiling_tflops", "ceiling_gbps", "roofline_us",
               "recorded_fraction", "roofline_fraction", "roof_note"]


def study_names(traces: Path, run_ids) -> dict[str, str]:
    from wlprof.store.runs import read_manifest

    out = {}
    for r in run_ids:
        m = read_manifest(traces / r)
        out[r] = (m.get("study") or {}).get("name") or m.get("workload") or r
    return out


def place_folder(traces: Path, ceilings, runs: list[str] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The kernels and ops of every run in `traces` (or `runs`) of the ceilings' device, re-placed."""
    import wlprof
    from wlprof.analysis.summary import short_kernel_name
    from wlprof.cost.roofline import replace_roofline

    filters = {"device_name": ceilings.device_name}
    if runs:
        filters["run_id"] = list(runs)
    kernels = wlprof.load(traces, table="kernels", **filters)
    ops = wlprof.load(traces, table="ops", **filters)
    if kernels.empty:
        return kernels, ops
    recorded = kernels.roofline_fraction.to_numpy(dtype=float)
    k = replace_roofline(kernels, ceilings)
    k["recorded_fraction"] = recorded
    k["kernel"] = k.name.map(short_kernel_name)
    k["study"] = k.run_id.map(study_names(traces, k.run_id.unique()))
    return k, replace_roofline(ops, ceilings)


def per_kernel(k: pd.DataFrame) -> pd.DataFrame:
    """One row per (study, run, variant, op, kernel): calls per step, time, rates, roof, both fractions, notes."""
    from wlprof.steps import note_union

    k = k[k.step >= 0].assign(op_name=k.op_name.fillna("(no op)"))
    keys = ["study", "run_id", "point", "variant", "op_name", "kernel"]
    steps = k.groupby(["run_id", "point"]).step.nunique().rename("steps")
    g = k.groupby(keys, sort=True)
    roofed = k.roofline_us.notna()
    out = pd.DataFrame({
        "calls": g.size(),
        "dur_us": g.dur_us.sum(),
        "bytes": g["bytes"].sum(min_count=1),
        "flops": g.flops.sum(min_count=1),
        "roofline_us": g.roofline_us.sum(min_count=1),
        "roof_dur": k.dur_us.where(roofed).groupby([k[c] for c in keys], sort=True).sum(min_count=1),
        "recorded_roof": (k.recorded_fraction * k.dur_us).groupby([k[c] for c in keys], sort=True).sum(min_count=1),
        "roof": g.roof.agg(lambda s: s.mode().iloc[0] if s.notna().any() else None),
        "roof_note": g.roof_note.agg(note_union),
        "fraction_max": g.roofline_fraction.max(),
    }).reset_index().merge(steps.reset_index(), on=["run_id", "point"])
    with np.errstate(divide="ignore", invalid="ignore"):
        out["calls_per_step"] = out.calls / out.steps
        out["us_per_step"] = out.dur_us / out.steps
        out["gbps"] = out["bytes"] / out.dur_us / 1e3
        out["tflops"] = out.flops / out.dur_us / 1e6
        out["fraction"] = out.roofline_us / out.roof_dur
        out["recorded_fraction"] = out.recorded_roof / out.roof_dur
    return out


def _fmt(v, fmt="{:,.3f}"):
    if v is None or (isinstance(v, float) and not np.isfinite(v)):
        return "-"
    return fmt.format(v)


def markdown(ceilings, placed: dict[str, pd.DataFrame], sources: list[str]) -> str:
    from wlprof.ceilings import ABOVE_ROOF_NOTES
    from wlprof.cost.roofline import above_roof_unexplained
    from wlprof.store.selection import describe

    k = pd.concat(placed.values(), ignore_index=True)
    lines = ["# Every committed kernel against the new ceilings", "",
             f"Ceilings: {ceilings.device_name}, {describe(ceilings)}.", "",
             "Sources: " + ", ".join(f"`{s}`" for s in sources) + ".", "",
             "Placement rules: docs/ceilings.md. `recorded` is the fraction against the run's own ceilings "
             "(format 1: one copy bandwidth for every kernel); `fraction` against these. A fraction above 1 "
             "carries its reason in the notes.", ""]
    k = k[k.step >= 0]
    above = k[k.roofline_fraction > 1]
    unexplained = above_roof_unexplained(k)
    lines += ["## Summary", "",
              f"- kernel rows: {len(k):,}; placed: {int(k.roofline_us.notna().sum()):,}; "
              f"above 1 against the recorded ceilings: {int((k.recorded_fraction > 1).sum()):,}; "
              f"above 1 now: {len(above):,}; above 1 without a reason: {len(unexplained)}",
              "- by roof (rows, kernel time): " + ", ".join(
                  f"{r} {n:,} ({t / 1e3:,.1f} ms)" for r, n, t in
                  k.groupby("roof").dur_us.agg(["size", "sum"]).sort_values("sum", ascending=False)
                  .itertuples(name=None)),
              "- notes (rows): " + ", ".join(f"{n} {c:,}" for n, c in k.roof_note.dropna().str.split(",").explode()
                                               .value_counts().items()), ""]
    if len(above):
        reasons = above.roof_note.fillna("").map(
            lambda s: ",".join(n for n in s.split(",") if n in ABOVE_ROOF_NOTES) or "(none)")
        lines += ["Above 1, by reason (rows, median and max fraction):", "", "| reason | rows | median | max |",
                  "|---|---:|---:|---:|"]
        for reason, g in above.groupby(reasons):
            lines.append(f"| {reason} | {len(g):,} | {g.roofline_fraction.median():.3f} | "
                         f"{g.roofline_fraction.max():.3f} |")
        lines.append("")
    table = per_kernel(k)
    for study, g in table.groupby("study", sort=True):
        lines += [f"## {study}", "", "| run | variant | op | kernel | n/step | µs/step | GB/s | TFLOP/s | roof | "
                  "recorded | fraction | max | notes |", "|---|---|---|---|---:|---:|---:|---:|---|---:|---:|---:|---|"]
        for r in g.sort_values(["run_id", "point", "us_per_step"], ascending=[True, True, False]).itertuples():
            lines.append(f"| {r.run_id} | {r.variant} | {r.op_name} | {r.kernel} | {_fmt(r.calls_per_step, '{:.0f}')} "
                         f"| {_fmt(r.us_per_step, '{:,.2f}')} | {_fmt(r.gbps, '{:,.0f}')} | {_fmt(r.tflops, '{:,.2f}')} "
                         f"| {r.roof or '-'} | {_fmt(r.recorded_fraction)} | {_fmt(r.fraction)} "
                         f"| {_fmt(r.fraction_max)} | {r.roof_note if isinstance(r.roof_note, str) else ''} |")
        lines.append("")
    return "\n".join(lines)


def calibrate_here(out: Path):
    import torch

    from wlprof import ceilings as C
    from wlprof import jsonio
    from wlprof.store.atomic import slug

    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    c = C.calibrate(dev)
    C.save(c)
    path = out / f"ceilings-{slug(c.device_name, 40)}.json"
    path.write_bytes(jsonio.dumps(c.to_dict(), indent=True))
    print(f"calibrated {c.device_name}: wrote {path}")
    return c


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ceilings", type=Path, help="A ceilings JSON (wlprof calibrate --out); default: calibrate here")
    ap.add_argument("--traces", type=Path, action="append", help="A traces folder (repeatable); default: the "
                    "committed H200 traces/ and offline/")
    ap.add_argument("--runs", nargs="*", help="Only these run ids")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    from wlprof.ceilings import load_file
    from wlprof.cost.roofline import above_roof_unexplained

    out = args.out / "placement"
    out.mkdir(parents=True, exist_ok=True)
    c = load_file(args.ceilings) if args.ceilings else calibrate_here(args.out)
    folders = [p for p in (args.traces or DEFAULT_TRACES) if p.is_dir()]
    placed, ops_by = {}, {}
    for folder in folders:
        k, o = place_folder(folder, c, args.runs)
        if len(k):
            name = folder.name if folder.name not in placed else f"{folder.parent.name}-{folder.name}"
            placed[name], ops_by[name] = k, o
            print(f"{folder}: {k.run_id.nunique()} runs, {len(k):,} kernel rows re-placed")
    if not placed:
        print(f"no runs of {c.device_name} in {', '.join(map(str, folders))}", file=sys.stderr)
        return 2
    rows = pd.concat([k.assign(source=name) for name, k in placed.items()], ignore_index=True)
    rows[["source", *ROW_COLUMNS]].to_csv(out / "kernels.csv.gz", index=False)
    (out / "placement.md").write_text(markdown(c, placed, [str(f.relative_to(REPO)) if f.is_relative_to(REPO)
                                                            else str(f) for f in folders]))
    try:
        from wlprof.analysis.families import add_family
        from wlprof.cli.report_files import _save
        from wlprof.plots import figures

        for name, o in ops_by.items():
            _save(figures.roofline(add_family(o), c, f"Roofline: {name}, re-placed"), out / f"roofline-{name}.png")
    except ImportError as exc:  # no matplotlib on this machine: the tables stand alone
        print(f"no figures: {exc}")
    bad = above_roof_unexplained(rows[rows.step >= 0])
    above = rows[(rows.step >= 0) & (rows.roofline_fraction > 1)]
    print(f"wrote {out}/placement.md, kernels.csv.gz: {len(rows):,} rows, {len(above):,} above 1, "
          f"{len(bad)} of them without a reason")
    print(rows[rows.step >= 0].groupby("roof").size().to_string())
    return 1 if len(bad) else 0


if __name__ == "__main__":
    sys.exit(main())

"""Markdown tables of committed GPU runs: one file per run, with what produced it.

    python benchmarks/study_tables.py --traces TRACES RUN_ID [RUN_ID ...] --out-dir benchmarks/results/<date>-h200

Each file holds the run's device, torch and CUDA versions, date and exact command
(from its manifest), the ceilings it used, the per-variant table (the three
timings, kernel time, FLOPs, bytes, achieved rates, intensity, bound, roofline
fraction) and the top kernels of each variant.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

STEP_COLS = {"variant": "variant", "latency_us": "latency 1 call (µs)", "back_to_back_us": "back-to-back (µs/step)",
             "graph_us": "graph replay (µs/step)", "kernel_us": "profiled kernels (µs/step)",
             "kernels_per_step": "kernels/step", "flops": "FLOPs/step", "bytes": "bytes/step",
             "achieved_tflops": "TFLOP/s (kernels)", "achieved_tflops_latency": "TFLOP/s (1 call)",
             "achieved_gbps": "GB/s (kernels)", "intensity_flop_per_byte": "FLOP/byte", "bound": "bound",
             "roofline_fraction": "fraction of roofline", "roof_note": "roof notes"}


def header(manifest: dict) -> list[str]:
    from wlprof.ceilings import Ceilings
    from wlprof.store.selection import describe

    v, d, c = manifest["versions"], manifest["device"], manifest["ceilings"]
    return [
        f"- date (UTC): {manifest['created_at']}",
        f"- device: {d['name']} ({d.get('sm_count')} SMs, {d.get('memory_bytes', 0) / 2**30:.0f} GiB), "
        f"torch {v['torch']}, CUDA {v['cuda']}, PyG {v['torch_geometric']}, Python {v['python']}",
        f"- command: `{manifest['command']}`  (run `{manifest['run_id']}`, status {manifest['status']})",
        f"- ceilings ({c['source']}): {describe(Ceilings.from_dict(c))}",
    ]


def run_markdown(traces: Path, run_id: str, top: int = 5) -> str:
    import wlprof
    from wlprof.analysis.summary import kernel_summary
    from wlprof.cli.markdown import table
    from wlprof.cli.placement import place
    from wlprof.store.runs import read_manifest

    path = traces / run_id
    m = read_manifest(path)
    # placed as `wlprof show` places it: a run placed before roofs had names is named against its own ceilings
    placed = place(traces, "run", None, wlprof.load(path, table="kernels"), wlprof.load(path, table="steps"))
    steps, kernels = placed.steps.sort_values("point"), placed.kernels
    title = (m.get("study") or {}).get("name") or m["workload"]
    lines = [f"# {title}", "", *header(m), ""]
    desc = (m.get("study") or {}).get("description")
    if desc:
        lines += [f"Study: {desc}", ""]
    for note in m.get("notes", []):
        lines.append(f"Note: {note}  ")
    cols = {k: v for k, v in STEP_COLS.items() if k in steps.columns}
    extra = [c for c in ("useful_flops", "executed_flops", "host_overhead_us", "note") if c in steps.columns
             and steps[c].notna().any() and (c != "useful_flops" or (steps.useful_flops != steps.flops).any())]
    cols.update({c: c for c in extra})
    lines += ["## Per variant", "", table(steps, cols), ""]
    failed = [p for p in m["points"] if p.get("status") != "ok"]
    if failed:
        lines += ["Failed points: " + "; ".join(f"{p['variant']}: {p.get('error')}" for p in failed), ""]
    lines += ["## Top kernels per variant (per step)", ""]
    for (_point, variant), k in kernels.groupby(["point", "variant"], sort=True):
        s = kernel_summary(k).head(top)
        lines += [f"### {variant}", "", table(s, {
            "op_name": "op", "kernel": "kernel", "region": "region", "count_per_step": "n", "dur_us_per_step": "µs",
            "time_share": "share", "achieved_tflops": "TFLOP/s", "achieved_gbps": "GB/s",
            "intensity_flop_per_byte": "FLOP/B", "bound": "bound", "roof": "roof", "roofline_fraction": "roofline",
            "roof_note": "roof notes", "flops_source": "source"}), ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--traces", type=Path, default=Path("traces"))
    ap.add_argument("--out-dir", type=Path, required=True)
    args = ap.parse_args(argv)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    for run_id in args.runs:
        from wlprof.store.runs import read_manifest

        m = read_manifest(args.traces / run_id)
        name = (m.get("study") or {}).get("name") or m["workload"]
        out = args.out_dir / f"{name}.md"
        out.write_text(run_markdown(args.traces, run_id))
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    pd.set_option("display.width", 200)
    sys.exit(main())

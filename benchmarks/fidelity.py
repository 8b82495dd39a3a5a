"""Profiler fidelity: profiled kernel time per step vs unprofiled device time per step.

For every GPU sweep point whose profiled kernel time per step is at least --min-us
(default 20 us), compares:
  kernel_us        sum of CUPTI kernel durations per profiled step (median over steps)
  back_to_back_us  unprofiled device time per step, steps queued between two events
  graph_us         unprofiled time per step by CUDA-graph replay (where capturable)
and shows the single-call latency beside them. Target: kernel/back-to-back within +-3%.

    python benchmarks/fidelity.py --traces traces [--out benchmarks/results/.../fidelity.md]

Reads the steps tables of runs already in the traces folder (e.g. from `wlprof sweep
workloads/*.toml`); it runs nothing itself, so it costs no extra GPU time.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd


def fidelity_table(steps: pd.DataFrame, min_us: float = 20.0, tolerance: float = 0.03) -> pd.DataFrame:
    s = steps[(steps.status == "ok") & (steps.device_type == "cuda") & (steps.kernel_us >= min_us)].copy()
    s["kernel_vs_b2b"] = s.kernel_us / s.back_to_back_us
    s["kernel_vs_graph"] = s.kernel_us / s.graph_us
    s["within_tolerance"] = (s.kernel_vs_b2b - 1).abs() <= tolerance
    return s[["run_id", "workload", "variant", "kernels_per_step", "latency_us", "back_to_back_us", "graph_us",
              "kernel_us", "kernel_vs_b2b", "kernel_vs_graph", "within_tolerance"]].reset_index(drop=True)


def to_markdown(t: pd.DataFrame, tolerance: float) -> str:
    lines = ["| workload | variant | kernels/step | latency 1 call (us) | back-to-back (us/step) | graph (us/step) "
             f"| profiled kernels (us/step) | kernels / back-to-back | kernels / graph | within +-{100 * tolerance:.0f}% |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|:---:|"]
    for _, r in t.iterrows():
        graph = f"{r.graph_us:,.1f}" if pd.notna(r.graph_us) else "-"
        kg = f"{r.kernel_vs_graph:.3f}" if pd.notna(r.kernel_vs_graph) else "-"
        lines.append(f"| {r.workload} | {r.variant} | {r.kernels_per_step:.0f} | {r.latency_us:,.1f} | "
                     f"{r.back_to_back_us:,.1f} | {graph} | {r.kernel_us:,.1f} | {r.kernel_vs_b2b:.3f} | {kg} | "
                     f"{'yes' if r.within_tolerance else 'NO'} |")
    n, ok = len(t), int(t.within_tolerance.sum())
    lines.append("")
    lines.append(f"{ok} of {n} points within +-{100 * tolerance:.0f}% "
                 f"(median ratio {t.kernel_vs_b2b.median():.3f}, worst {t.kernel_vs_b2b.sub(1).abs().max():.3f} off)."
                 if n else "no GPU points at or above the threshold")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", default="traces")
    ap.add_argument("--min-us", type=float, default=20.0)
    ap.add_argument("--tolerance", type=float, default=0.03)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    import wlprof

    steps = wlprof.load(args.traces, table="steps")
    table = fidelity_table(steps, args.min_us, args.tolerance)
    md = to_markdown(table, args.tolerance)
    print(md)
    if args.out:
        args.out.write_text(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())

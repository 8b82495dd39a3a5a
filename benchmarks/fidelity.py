"""Profiler fidelity: profiled kernel time vs unprofiled device time, per op and per step.

Per op (needs a GPU; --replay): every distinct op call in the GPU runs of the traces
folder whose profiled kernel time is at least --min-us (default 20 us) is rebuilt
from its recorded shapes, strides and dtypes (wlprof.replay) and timed alone,
unprofiled: single-call latency, back-to-back device time per call, CUDA-graph
replay. The profiled kernel time per call is the median over its profiled
instances. Target: within +-3% of the unprofiled device time per call, which is
the back-to-back time, or the graph-replay time where the host cannot keep the
device busy (back-to-back more than 5% above graph replay).

Per step (no GPU needed): the same comparison for whole sweep points, from the
steps tables. Multi-kernel steps also carry the device's idle gaps between
dependent kernels, which unprofiled device time includes and summed kernel time
does not.

    python benchmarks/fidelity.py --traces traces --replay --out benchmarks/results/.../fidelity.md
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd


def _reference(b2b: pd.Series, graph: pd.Series) -> tuple[pd.Series, pd.Series]:
    host_bound = graph.notna() & (b2b > 1.05 * graph)
    return host_bound.map({True: "graph", False: "back-to-back"}), b2b.where(~host_bound, graph)


def step_table(steps: pd.DataFrame, min_us: float = 20.0, tolerance: float = 0.03) -> pd.DataFrame:
    s = steps[(steps.status == "ok") & (steps.device_type == "cuda") & (steps.kernel_us >= min_us)].copy()
    s["reference"], ref_us = _reference(s.back_to_back_us, s.graph_us)
    s["kernel_vs_reference"] = s.kernel_us / ref_us
    s["within_tolerance"] = (s.kernel_vs_reference - 1).abs() <= tolerance
    return s.reset_index(drop=True)


def op_calls(ops: pd.DataFrame, min_us: float = 20.0) -> pd.DataFrame:
    """Distinct GPU op calls with their median profiled kernel time per call."""
    o = ops[(ops.device_type == "cuda") & ops.op_input_dims.notna()]
    keys = ["workload", "op_name", "op_input_dims", "op_input_types", "op_input_strides", "op_concrete_inputs"]
    g = o.groupby(keys, dropna=False)
    calls = g.agg(kernel_us=("dur_us", "median"), instances=("dur_us", "size"), kernels=("kernel_count", "median"),
                  variant=("variant", "first")).reset_index()
    return calls[calls.kernel_us >= min_us].reset_index(drop=True)


def events_per_call_us(fn, n: int = 60) -> float:
    """Median of device events recorded around each of n calls queued back to back.

    The host runs ahead, so each pair of events brackets one call's kernels on the
    device without the idle gap between calls: the unprofiled analogue of a kernel's
    duration (plus the events' own few hundred nanoseconds).
    """
    import statistics

    import torch

    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    torch.cuda.synchronize()
    for s, e in zip(starts, ends, strict=True):
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends, strict=True))


def replay_timings(calls: pd.DataFrame, tolerance: float = 0.03) -> pd.DataFrame:
    import math

    import torch
    from replay import ReplayError, input_bytes, replay_op

    from wlprof.capture import sm_clock_mhz
    from wlprof.timing import time_step

    device = torch.device("cuda")
    l2 = torch.cuda.get_device_properties(device).L2_cache_size
    rows = []
    for _, c in calls.iterrows():
        row = c.to_dict()
        # enough input sets to cycle through twice the L2, within 8 GB
        ws = max(input_bytes(c.op_input_dims, c.op_input_types), 1)
        copies = int(min(32, max(1, math.ceil(2 * l2 / ws)), max(1, 8 * 2**30 // ws)))
        try:
            fn = replay_op(c.op_name, c.op_input_dims, c.op_input_types, c.op_input_strides,
                           c.op_concrete_inputs, device, copies=copies)
            for _ in range(5):
                fn()
            clock0 = sm_clock_mhz(device)
            t = time_step(fn, device, latency_reps=20, batches=5, min_batch_ms=20.0)
            ev = events_per_call_us(fn)
            row.update(copies=copies, latency_us=t.latency_median_us, back_to_back_us=t.back_to_back_median_us,
                       graph_us=t.graph_median_us, events_us=ev, clock_start=clock0, clock_end=sm_clock_mhz(device),
                       error=None)
            del fn
        except ReplayError as exc:
            row.update(copies=copies, latency_us=None, back_to_back_us=None, graph_us=None, events_us=None,
                       clock_start=None, clock_end=None, error=str(exc))
        torch.cuda.empty_cache()
        rows.append(row)
    out = pd.DataFrame(rows)
    ok = out.error.isna()
    out["reference"], ref = _reference(out.back_to_back_us.astype(float), out.graph_us.astype(float))
    out["kernel_vs_reference"] = out.kernel_us / ref
    out["kernel_vs_events"] = out.kernel_us / out.events_us.astype(float)
    out["within_tolerance"] = ok & ((out.kernel_vs_reference - 1).abs() <= tolerance)
    out["events_within_tolerance"] = ok & ((out.kernel_vs_events - 1).abs() <= tolerance)
    return out


def _f(v, fmt):
    return fmt.format(v) if pd.notna(v) else "-"


def op_markdown(t: pd.DataFrame, tolerance: float) -> str:
    pct = f"{100 * tolerance:.0f}%"
    lines = ["| workload | op | input shapes | profiled kernel (us/call) | latency 1 call (us) | back-to-back (us/call) "
             f"| graph (us/call) | events per queued call (us) | profiled / reference | within +-{pct} "
             f"| profiled / events | within +-{pct} | input sets | SM MHz |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|:---:|---:|:---:|---:|---|"]
    for _, r in t.iterrows():
        if r.error:
            lines.append(f"| {r.workload} | {r.op_name} | `{r.op_input_dims}` | {r.kernel_us:,.1f} | replay failed: "
                         f"{r.error[:80]} | | | | | | | | | |")
            continue
        lines.append(f"| {r.workload} | {r.op_name} | `{r.op_input_dims}` | {r.kernel_us:,.1f} | "
                     f"{_f(r.latency_us, '{:,.1f}')} | {_f(r.back_to_back_us, '{:,.1f}')} | {_f(r.graph_us, '{:,.1f}')} | "
                     f"{_f(r.events_us, '{:,.1f}')} | {r.kernel_vs_reference:.3f} ({r.reference}) | "
                     f"{'yes' if r.within_tolerance else 'NO'} | {r.kernel_vs_events:.3f} | "
                     f"{'yes' if r.events_within_tolerance else 'NO'} | {r.copies} | "
                     f"{_f(r.clock_start, '{:.0f}')}-{_f(r.clock_end, '{:.0f}')} |")
    n = len(t)
    lines += [""]
    for col, label in (("kernel_vs_reference", "unprofiled device time per call (back-to-back, or graph where "
                                               "launch-bound)"),
                       ("kernel_vs_events", "events around each queued call")):
        dev = t[col].dropna()
        ok = int(t["within_tolerance" if col == "kernel_vs_reference" else "events_within_tolerance"].sum())
        if len(dev):
            lines.append(f"- against {label}: {ok} of {n} op calls within +-{pct} (median ratio {dev.median():.3f}, "
                         f"worst {dev.sub(1).abs().max():.3f} off)")
    return "\n".join(lines) + "\n"


def step_markdown(t: pd.DataFrame, tolerance: float) -> str:
    lines = ["| workload | variant | kernels/step | latency 1 call (us) | back-to-back (us/step) | graph (us/step) "
             f"| profiled kernels (us/step) | reference | profiled / reference | within +-{100 * tolerance:.0f}% | SM MHz start / end |"
             ,
             "|---|---|---:|---:|---:|---:|---:|---|---:|:---:|---|"]
    for _, r in t.iterrows():
        lines.append(f"| {r.workload} | {r.variant} | {r.kernels_per_step:.0f} | {r.latency_us:,.1f} | "
                     f"{r.back_to_back_us:,.1f} | {_f(r.graph_us, '{:,.1f}')} | {r.kernel_us:,.1f} | {r.reference} | "
                     f"{r.kernel_vs_reference:.3f} | {'yes' if r.within_tolerance else 'NO'} | "
                     f"{_f(r.get('sm_clock_mhz_start'), '{:.0f}')} / {_f(r.get('sm_clock_mhz_end'), '{:.0f}')} |")
    n, ok = len(t), int(t.within_tolerance.sum())
    lines += ["", f"{ok} of {n} sweep points within +-{100 * tolerance:.0f}% (median ratio "
                  f"{t.kernel_vs_reference.median():.3f})." if n else "no GPU sweep points at or above the threshold"]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", default="traces")
    ap.add_argument("--min-us", type=float, default=20.0)
    ap.add_argument("--tolerance", type=float, default=0.03)
    ap.add_argument("--replay", action="store_true", help="time each op call alone on the GPU (needs CUDA)")
    ap.add_argument("--workloads", default=None, help="comma-separated workloads to include (default: all)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    import wlprof

    steps = wlprof.load(args.traces, table="steps")
    if args.workloads:
        steps = steps[steps.workload.isin(args.workloads.split(","))]
    md = ["## Per op: profiled kernel time vs the same call timed alone, unprofiled", ""]
    if args.replay:
        ops = wlprof.load(args.traces, table="ops")
        if args.workloads:
            ops = ops[ops.workload.isin(args.workloads.split(","))]
        md.append(op_markdown(replay_timings(op_calls(ops, args.min_us), args.tolerance), args.tolerance))
    else:
        md.append("(not run: pass --replay on a GPU machine)\n")
    md += ["## Per sweep point: profiled kernel time per step vs unprofiled device time per step", "",
           step_markdown(step_table(steps, args.min_us, args.tolerance), args.tolerance)]
    text = "\n".join(md)
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

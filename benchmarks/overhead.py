"""What profiling costs: torch.profiler's overhead and wlprof's post-processing, per 10k kernels.

A step of many tiny kernels (x.mul_(a).add_(b) repeated: two kernels each) is run
--steps times three ways, and each phase is timed on the wall clock:
  unprofiled    the steps alone (synchronized at the end)
  profiled      the same steps under torch.profiler (CPU+CUDA, record_shapes), trace export included
  post-process  wlprof's parse + join + cost annotation + enriched trace + Parquet write of that trace
Reported per 10,000 device kernels (CPU: per 10,000 op rows).

    python benchmarks/overhead.py [--device cuda|cpu] [--pairs 100] [--steps 50] [--out FILE.md]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path


def measure(device_name: str | None, pairs: int, steps: int) -> dict:
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    from wlprof import schema
    from wlprof.ceilings import get_ceilings
    from wlprof.cost.annotate import annotate
    from wlprof.cost.attribution import flag_ops, working
    from wlprof.device import resolve_device, synchronize
    from wlprof.trace.enrich import enriched_trace
    from wlprof.trace.join import join, op_rows
    from wlprof.trace.parse import read_trace

    device = resolve_device(device_name)
    x = torch.randn(4096, device=device)

    def step():
        for _ in range(pairs):
            x.mul_(0.999).add_(0.001)

    for _ in range(3):
        step()
    synchronize(device)
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    synchronize(device)
    unprofiled = time.perf_counter() - t0

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        t0 = time.perf_counter()
        with profile(activities=acts, record_shapes=True) as prof:
            for i in range(steps):
                with record_function(f"wlprof/step#{i}"):
                    step()
            synchronize(device)
        prof.export_chrome_trace(str(path))
        profiled = time.perf_counter() - t0
        trace_mb = path.stat().st_size / 1e6

        ceilings, _ = get_ceilings(device)
        t0 = time.perf_counter()
        trace = read_trace(path)
        t_parse = time.perf_counter()
        joined = join(trace)
        t_join = time.perf_counter()
        flagged = flag_ops(joined.ops)
        kernels, ops = annotate(joined.device_rows if joined.device_rows is not None
                                else op_rows(flagged, working(flagged)), flagged, trace.args_table, ceilings)
        t_cost = time.perf_counter()
        blob = enriched_trace(trace.meta, trace.events, kernels, {})
        (Path(tmp) / "out.json.gz").write_bytes(blob)
        t_chrome = time.perf_counter()
        import pyarrow.parquet as pq

        for c, v in {"run_id": "overhead", "workload": "overhead", "variant": "x", "point": 0}.items():
            kernels[c] = v
            ops[c] = v
        pq.write_table(schema.conform(kernels.drop(columns=["_op_pos", "_event_idx"]), "kernels"),
                       Path(tmp) / "k.parquet")
        pq.write_table(schema.conform(ops, "ops"), Path(tmp) / "o.parquet")
        t_write = time.perf_counter()
    n = len(kernels)
    per = 1e4 / max(n, 1)
    return {
        "device": trace.meta.get("deviceProperties", [{}])[0].get("name") if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "rows": n,
        "trace_events": len(trace.events),
        "trace_mb": trace_mb,
        "unprofiled_s": unprofiled,
        "profiled_s": profiled,
        "profiler_overhead_s_per_10k": (profiled - unprofiled) * per,
        "parse_s_per_10k": (t_parse - t0) * per,
        "join_s_per_10k": (t_join - t_parse) * per,
        "cost_s_per_10k": (t_cost - t_join) * per,
        "chrome_s_per_10k": (t_chrome - t_cost) * per,
        "parquet_s_per_10k": (t_write - t_chrome) * per,
        "postprocess_s_per_10k": (t_write - t0) * per,
    }


def to_markdown(r: dict) -> str:
    return "\n".join([
        f"device: {r['device']}, torch {r['torch']}; {r['rows']:,} kernel rows, {r['trace_events']:,} trace events, "
        f"{r['trace_mb']:.1f} MB of trace JSON",
        "",
        "| phase | wall time |",
        "|---|---:|",
        f"| steps, unprofiled | {r['unprofiled_s']:.3f} s |",
        f"| steps, profiled (trace export included) | {r['profiled_s']:.3f} s |",
        f"| profiler overhead per 10k kernels | {r['profiler_overhead_s_per_10k']:.3f} s |",
        f"| wlprof parse per 10k kernels | {r['parse_s_per_10k']:.3f} s |",
        f"| wlprof join per 10k kernels | {r['join_s_per_10k']:.3f} s |",
        f"| wlprof cost annotation per 10k kernels | {r['cost_s_per_10k']:.3f} s |",
        f"| wlprof enriched Chrome trace per 10k kernels | {r['chrome_s_per_10k']:.3f} s |",
        f"| wlprof Parquet write per 10k kernels | {r['parquet_s_per_10k']:.3f} s |",
        f"| wlprof post-processing in all, per 10k kernels | {r['postprocess_s_per_10k']:.3f} s |",
    ]) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default=None)
    ap.add_argument("--pairs", type=int, default=100, help="mul_/add_ pairs per step (2 kernels each)")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    r = measure(args.device, args.pairs, args.steps)
    md = to_markdown(r)
    print(md)
    if args.out:
        args.out.write_text(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())

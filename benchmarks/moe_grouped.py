"""Does wlprof's grouped MoE dispatch add overhead over bare torch._grouped_mm? (GPU)

For every `grouped` sweep point of the MoE runs in a traces folder, rebuild the
expert computation alone on the same per-expert token counts, shapes and dtype
(random weights and inputs): SwiGLU as three bare `torch._grouped_mm` calls and the
silu * mul between them, and time it unprofiled (back-to-back and graph replay).
Compare with the kernel time per step the run profiled in its `moe/expert` region.
Target: within 10%.

    python benchmarks/moe_grouped.py --traces traces [--out FILE.md]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd


def bare_expert_us(counts: list[int], d_model: int, d_ff: int, ffn: str, dtype_name: str) -> dict:
    import torch
    import torch.nn.functional as F

    from wlprof.timing import time_step

    dev = torch.device("cuda")
    dtype = getattr(torch, dtype_name)
    g = torch.Generator(device=dev).manual_seed(0)
    rows, experts = sum(counts), len(counts)
    xs = torch.randn(rows, d_model, device=dev, dtype=dtype, generator=g)
    # weights stored [E, out, in] as nn.Linear stores them, passed transposed: column-major B
    w1 = torch.randn(experts, d_ff, d_model, device=dev, dtype=dtype, generator=g).transpose(1, 2)
    w2 = torch.randn(experts, d_model, d_ff, device=dev, dtype=dtype, generator=g).transpose(1, 2)
    w3 = torch.randn(experts, d_ff, d_model, device=dev, dtype=dtype, generator=g).transpose(1, 2)
    offs = torch.tensor(counts, device=dev, dtype=torch.int64).cumsum(0).to(torch.int32)
    gmm = torch._grouped_mm
    if ffn == "swiglu":
        def fn():
            return gmm(F.silu(gmm(xs, w1, offs=offs)) * gmm(xs, w3, offs=offs), w2, offs=offs)
    else:
        def fn():
            return gmm(F.gelu(gmm(xs, w1, offs=offs)), w2, offs=offs)
    for _ in range(5):
        fn()
    t = time_step(fn, dev, latency_reps=20, batches=5, min_batch_ms=20.0)
    return {"bare_latency_us": t.latency_median_us, "bare_b2b_us": t.back_to_back_median_us,
            "bare_graph_us": t.graph_median_us}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", default="traces")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    import wlprof

    steps = wlprof.load(args.traces, table="steps", workload="moe", dispatch="grouped")
    steps = steps[steps.status == "ok"]
    kernels = wlprof.load(args.traces, table="kernels", workload="moe", dispatch="grouped")
    expert = (kernels[(kernels.region == "moe/expert") & (kernels.step >= 0)]
              .groupby(["run_id", "variant", "step"]).dur_us.sum().groupby(["run_id", "variant"]).median())
    rows = []
    for _, s in steps.iterrows():
        counts = json.loads(s.expert_counts)
        bare = bare_expert_us(counts, int(s["d_model"]), int(s["d_ff"]), s["activation"], s["dtype"])
        prof = float(expert.get((s.run_id, s.variant), float("nan")))
        ref = bare["bare_graph_us"] or bare["bare_b2b_us"]
        rows.append({"run_id": s.run_id, "variant": s.variant, "tokens": s.tokens, "grouped_path": s.grouped_path,
                     "wlprof_expert_kernels_us": prof, **bare, "ratio": prof / ref,
                     "layer_graph_us": s.graph_us, "layer_latency_us": s.latency_us})
    t = pd.DataFrame(rows)
    lines = ["| variant | tokens | grouped path | wlprof moe/expert kernels (µs/step) | bare back-to-back (µs) | "
             "bare graph (µs) | wlprof / bare | within 10% | whole layer, graph (µs) | whole layer, 1 call (µs) |",
             "|---|---:|---|---:|---:|---:|---:|:---:|---:|---:|"]
    for _, r in t.iterrows():
        graph = f"{r.bare_graph_us:,.1f}" if pd.notna(r.bare_graph_us) else "-"
        lgraph = f"{r.layer_graph_us:,.1f}" if pd.notna(r.layer_graph_us) else "-"
        lines.append(f"| {r.variant} | {r.tokens} | {r.grouped_path} | {r.wlprof_expert_kernels_us:,.1f} | "
                     f"{r.bare_b2b_us:,.1f} | {graph} | {r.ratio:.3f} | {'yes' if abs(r.ratio - 1) <= 0.10 else 'NO'} "
                     f"| {lgraph} | {r.layer_latency_us:,.1f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Workload configurations no test uses, run on the GPU through the CLI: each must exit 0 or refuse with
exit 2 and a message naming the argument; every run is then read back and checked.

    PYTHONPATH=. python3 benchmarks/h200/config_trial.py --out $OUT/config_trial

Writes configs.tsv (command, exit code, wall seconds, kernel rows, checks that failed, the last stderr
line) and, per failed or refused command, its whole stderr.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

FAST = "--steps 2 --warmup 2 --reps 5 -q"
CONFIGS = [
    # gemm: odd, tiny and fp32/fp64 shapes, every layout
    "gemm --shapes 1x1x1,7x13x5,4097x33x65 --dtype float16",
    "gemm --shapes 64x64x64,1000x1000x1000 --dtype float32",
    "gemm --shapes 64x64x64 --dtype float64",
    "gemm --layout nt --shapes 100x300x50,1x8192x8192",
    "gemm --layout linear --shapes 3x4096x11008,17x4096x50257",
    # mlp
    "mlp --batch 1,3,4097 --d-model 1000 --d-ff 3000 --activation silu --dtype fp16",
    "mlp --batch 2 --d-model 8 --d-ff 8 --dtype float64 --activation relu",
    # elementwise micro-kernels at sizes of 1 and primes
    "elementwise --ops copy,relu,gelu,silu,mul,add,dot,matvec,matmul --numel 1,1000003 --matvec-n 1,777 "
    "--matmul-n 1,129 --dtype float16",
    "elementwise --ops dot,matvec --numel 4096 --matvec-n 300 --dtype float64",
    # moe: every routing kind and dispatch at odd sizes; capacity; top-k = experts; fp16/fp32 grouped
    "moe --routing concentrated,balanced,dispersed,zipf:0.5,router --dispatch loop,padded,grouped --tokens 1,7 "
    "--experts 3 --top-k 2 --d-model 72 --d-ff 136",
    "moe --routing explicit:2x5+1x3 --dispatch loop,padded,grouped --tokens 8 --experts 4 --top-k 2 "
    "--d-model 128 --d-ff 256",
    "moe --dispatch padded --capacity-factor 1.0 --routing concentrated,dispersed --ffn gelu --tokens 64 "
    "--experts 8 --top-k 8 --d-model 256 --d-ff 512",
    "moe --dispatch grouped,loop --dtype float32 --tokens 64 --experts 8 --d-model 256 --d-ff 512",
    "moe --dispatch grouped --dtype float16 --tokens 64 --experts 8 --d-model 256 --d-ff 512",
    "moe --routing balanced,dispersed --dispatch grouped,padded --tokens 8192 --experts 128 --top-k 8 "
    "--d-model 1024 --d-ff 512",
    # gnn: every graph, backend and reduction at small scales and odd widths
    "gnn --graph uniform,rmat,zipf:1.5,karate --scale 10 --features 3,64 "
    "--backend scatter,index_add,segment,csr,pyg:gcn,pyg:sage,pyg:gat,pyg:gcn-csr",
    "gnn --graph rmat --scale 10 --features 16 --backend scatter,segment,pyg:sage --reduction sum,mean,max",
    "gnn --graph uniform --scale 12 --features 32 --dtype float32 --transform --edge-factor 1 "
    "--backend scatter,index_add,segment,csr",
    "gnn --graph zipf:2.5 --scale 14 --features 128 --dtype float16 --backend csr,segment,pyg:gcn",
    # halo in one process
    "halo --partitions 2 --graph grid --nodes 4096 --exchange host --features 16",
    "halo --graph rmat --nodes 4096 --exchange d2d --schedule serial,overlap --features 64",
    "halo --graph uniform --nodes 10000 --partitions 3 --features 8 --dtype float32",
    # refusals that must name their argument
    "gemm --shapes 0x4x4",
    "moe --experts 4 --top-k 5 --tokens 8",
    "gnn --backend pyg:gat --reduction max --scale 8",
    "halo --graph grid --nodes 4097",
]
AFTER = [  # read-back commands over the whole traces folder (RUN: the first run's id)
    "ls", "show RUN", "report --out {out}/report", "roofline RUN -o {out}/roofline.png", "compare RUN RUN2",
    "overlap HALO",
    "predict --profile benchmarks/profiles/h200 --spec 'gemm shapes=123x4567x891 dtype=float16'",
    "predict --profile benchmarks/profiles/h200 --spec 'moe tokens=300 experts=24 top_k=3 d_model=1536 d_ff=768 "
    "routing=zipf:0.8 dispatch=grouped'",
    "predict --profile benchmarks/profiles/h200 --spec 'gnn graph=rmat scale=17 features=96 backend=segment'",
    "predict --profile benchmarks/profiles/h200 --spec 'mlp batch=48 d_model=2560 d_ff=10240'",
]


def checks(run_dir: Path) -> list[str]:
    """What is wrong with one run read back: no kernel rows, gemm FLOPs other than 2MKN, rates above
    the device's peaks, a roofline fraction above 1 without its reason."""
    import pandas as pd

    import wlprof

    bad = []
    k = wlprof.load(run_dir)
    if k.empty:
        return ["no kernel rows"]
    kern = k[k.kind == "kernel"]
    if (kern.dur_us <= 0).any():
        bad.append(f"{int((kern.dur_us <= 0).sum())} kernels with dur <= 0")
    if "workload" in k and (k.workload == "gemm").all():
        for _, g in k[k.region.fillna("").str.startswith("gemm")].groupby(["point", "step"]):
            m, kk, n = (int(g[c].iloc[0]) for c in ("m", "k", "n"))
            if abs(g.flops.sum() - 2 * m * kk * n) > 1e-6 * 2 * m * kk * n:
                bad.append(f"gemm {m}x{kk}x{n}: {g.flops.sum():.0f} FLOPs, want {2 * m * kk * n}")
                break
    if "achieved_tflops" in kern and (kern.achieved_tflops > 1000).any():
        bad.append(f"{int((kern.achieved_tflops > 1000).sum())} kernels above 1,000 TFLOP/s")
    if "achieved_gbps" in kern and (kern.achieved_gbps > 20000).any():
        bad.append(f"{int((kern.achieved_gbps > 20000).sum())} kernels above 20 TB/s")
    if "roofline_fraction" in kern:
        above = kern[(kern.roofline_fraction > 1.0) & kern.roof_note.isna()]
        if len(above):
            bad.append(f"{len(above)} kernels above their roof without a reason")
    steps = wlprof.load(run_dir, table="steps")
    failed = steps[steps.status.astype(str) != "ok"] if "status" in steps else pd.DataFrame()
    if len(failed):
        bad.append(f"{len(failed)} failed points: {str(failed.error.iloc[0])[:160]}")
    return bad


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default="", help="comma-separated indices of CONFIGS to run (default: all)")
    a = ap.parse_args(argv)
    only = {int(x) for x in a.only.split(",") if x}
    out = Path(a.out)
    traces = out / "traces"
    (out / "stderr").mkdir(parents=True, exist_ok=True)
    rows = ["#\tcommand\trc\twall_s\tkernel_rows\tproblems\tlast_stderr_line"]
    env = {**os.environ, "COLUMNS": "160"}
    runs: list[str] = []
    for i, cfg in enumerate(CONFIGS):
        if only and i not in only:
            continue
        before = {p.name for p in traces.iterdir()} if traces.exists() else set()
        cmd = [sys.executable, "-m", "wlprof", "run", *shlex.split(cfg), *FAST.split(), "--traces", str(traces)]
        t = time.monotonic()
        res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
        wall = time.monotonic() - t
        new = sorted({p.name for p in traces.iterdir()} - before) if traces.exists() else []
        probs, nk = [], 0
        if res.returncode == 0:
            for r in new:
                runs.append(r)
                try:
                    import wlprof
                    nk += len(wlprof.load(traces / r))
                    probs += checks(traces / r)
                except Exception as exc:  # noqa: BLE001 - the trial records what breaks
                    probs.append(f"read-back failed: {type(exc).__name__}: {exc}")
        elif res.returncode == 2:
            if "Traceback" in res.stderr:
                probs.append("traceback on a refusal")
            if new:
                probs.append(f"refused but left {new}")
        else:
            probs.append("crashed" if "Traceback" in res.stderr else "failed")
        if res.returncode != 0 or probs:
            (out / "stderr" / f"{i:02d}.txt").write_text(f"$ {' '.join(cmd)}\n\n{res.stdout[-6000:]}\n--- stderr\n{res.stderr[-20000:]}")
        last = (res.stderr.strip().splitlines() or [""])[-1][:200].replace("\t", " ")
        rows.append(f"{i}\twlprof run {cfg}\t{res.returncode}\t{wall:.1f}\t{nk}\t{'; '.join(probs)}\t{last}")
        print(rows[-1], flush=True)
        (out / "configs.tsv").write_text("\n".join(rows) + "\n")
    halo = next((r for r in runs if r.startswith("halo")), runs[0] if runs else "x")
    for j, c in enumerate(AFTER):
        c = c.replace("RUN2", runs[1] if len(runs) > 1 else "x").replace("RUN", runs[0] if runs else "x")
        c = c.replace("HALO", halo).format(out=out)
        cmd = [sys.executable, "-m", "wlprof", *shlex.split(c)]
        if not c.startswith("predict"):
            cmd += ["--traces", str(traces)]
        t = time.monotonic()
        res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
        wall = time.monotonic() - t
        (out / "stderr" / f"after{j:02d}.txt").write_text(f"$ {' '.join(cmd)}\n\n{res.stdout[-12000:]}\n--- stderr\n{res.stderr[-8000:]}")
        last = (res.stderr.strip().splitlines() or [""])[-1][:200].replace("\t", " ")
        rows.append(f"a{j}\twlprof {c}\t{res.returncode}\t{wall:.1f}\t\t{'crashed' if 'Traceback' in res.stderr else ''}\t{last}")
        print(rows[-1], flush=True)
        (out / "configs.tsv").write_text("\n".join(rows) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

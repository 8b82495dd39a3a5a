"""Matrix rates sustained (back to back, as `wlprof calibrate` times them) and in bursts (one call after
the GPU idled), for bf16 and FP8 GEMMs of square and of the zoo3 trace's shapes; the SM clock beside each.

    python3 benchmarks/h200/diag_matrix_burst.py --out DIR      # on a GPU; writes DIR/matrix_burst.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from pathlib import Path

import torch


def sm_clock() -> int | None:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10).stdout
        return int(out.split()[0])
    except Exception:  # noqa: BLE001 - a diagnostic: no clock is no error
        return None


def gemm(kind: str, m: int, k: int, n: int):
    g = torch.Generator(device="cuda").manual_seed(0)
    if kind == "fp8":
        a = torch.randn(m, k, device="cuda", generator=g).to(torch.float8_e4m3fn)
        b = torch.randn(n, k, device="cuda", generator=g).to(torch.float8_e4m3fn).t()
        one = torch.ones((), device="cuda")
        return lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=g)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16, generator=g)
    return lambda: torch.mm(a, b)


def timed(fn, calls: int) -> float:
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(calls):
        fn()
    e.record()
    torch.cuda.synchronize()
    return s.elapsed_time(e) * 1e3 / calls  # us per call


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    rows = []
    for kind in ("fp8", "bf16"):
        for m, k, n in ((4096, 4096, 4096), (8192, 8192, 8192), (4096, 4096, 14336), (4096, 14336, 4096)):
            fn = gemm(kind, m, k, n)
            flop = 2 * m * k * n
            for _ in range(3):
                fn()
            torch.cuda.synchronize()
            # sustained: 1 s of back-to-back calls, then 20 samples of about 20 ms each
            per = max(1, int(20e3 / max(timed(fn, 3), 1.0)))
            t_end = time.monotonic() + 1.0
            while time.monotonic() < t_end:
                timed(fn, per)
            sus = sorted(timed(fn, per) for _ in range(20))
            clk_sus = sm_clock()
            # bursts: one call (and one of three back to back) after 100 ms idle
            burst1, burst3 = [], []
            for _ in range(20):
                time.sleep(0.1)
                burst1.append(timed(fn, 1))
                time.sleep(0.1)
                burst3.append(timed(fn, 3))
            burst1.sort()
            burst3.sort()
            r = {"kind": kind, "m": m, "k": k, "n": n,
                 "sustained_tflops_median": flop / sus[10] / 1e6, "sustained_tflops_max": flop / sus[0] / 1e6,
                 "sm_clock_sustained": clk_sus,
                 "burst1_tflops_median": flop / burst1[10] / 1e6, "burst1_tflops_max": flop / burst1[0] / 1e6,
                 "burst3_tflops_median": flop / burst3[10] / 1e6, "burst3_tflops_max": flop / burst3[0] / 1e6,
                 "sm_clock_idle": sm_clock()}
            print(json.dumps({k2: round(v, 1) if isinstance(v, float) else v for k2, v in r.items()}), flush=True)
            rows.append(r)
            del fn
            torch.cuda.empty_cache()
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "matrix_burst.json").write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

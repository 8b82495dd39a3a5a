"""Ingest speed and memory: `wlprof ingest` vs Holistic Trace Analysis on the same large trace.

Makes a trace of --events events by replicating a real fixture's events with fresh ids
(benchmarks/big_trace.py), then times, each in a fresh process and measuring its peak
resident memory:
  - `wlprof ingest` (parse, join, costs, Parquet written: the whole command),
  - HTA's `TraceAnalysis(trace_dir=...)`, which parses the trace into a DataFrame
    (run with --hta-python, a Python that has HolisticTraceAnalysis installed; it is
    installed only for this benchmark, e.g. `python -m venv /tmp/hta && /tmp/hta/bin/pip
    install HolisticTraceAnalysis`).
Targets (issue 6): at most 10 s for 1,000,000 events, peak memory at most twice the
uncompressed JSON, and at least 3x faster than HTA.

    python benchmarks/ingest.py --hta-python /tmp/hta/bin/python --out benchmarks/results/.../ingest.md
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SOURCE = next((ROOT / "tests/fixtures/h200").glob("moe-*/_chrome/p000-dispersed-loop.raw.json.gz"), None)

_MEASURE = """
import resource, subprocess, sys, time
t = time.perf_counter()
r = subprocess.run(sys.argv[1:], capture_output=True, text=True)
wall = time.perf_counter() - t
print({"wall_s": wall, "rc": r.returncode, "peak_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
       "tail": (r.stdout + r.stderr)[-600:]})
"""

_HTA = """
import sys, time
t = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
a = TraceAnalysis(trace_dir=sys.argv[1])
df = a.t.get_trace(0)
print("HTA rows", len(df), "load s", time.perf_counter() - t)
"""


def measure(cmd: list[str]) -> dict:
    out = subprocess.run([sys.executable, "-c", _MEASURE, *cmd], capture_output=True, text=True, check=True)
    import ast

    return ast.literal_eval(out.stdout.strip().splitlines()[-1])


def cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--hta-python", default=None, help="a Python with HolisticTraceAnalysis installed")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from big_trace import replicate

    with tempfile.TemporaryDirectory() as tmp:
        tdir = Path(tmp) / "trace"
        tdir.mkdir()
        trace = tdir / "rank0.json"
        n = replicate(args.source, trace, args.events)
        size_mb = trace.stat().st_size / 1e6
        runs = []
        for i in range(args.repeats):
            out = Path(tmp) / f"traces{i}"
            runs.append(measure([sys.executable, "-m", "wlprof.cli.main", "ingest", str(trace), "-o", str(out), "-q"]))
            if runs[-1]["rc"] != 0:
                raise SystemExit(f"wlprof ingest failed: {runs[-1]['tail']}")
        hta = None
        if args.hta_python:
            hta = measure([args.hta_python, "-c", _HTA, str(tdir)])
            if hta["rc"] != 0:
                raise SystemExit(f"HTA failed: {hta['tail']}")
        best = min(runs, key=lambda r: r["wall_s"])
        import wlprof

        k = wlprof.load(Path(tmp) / "traces0")
    lines = [
        f"# Ingest: {n:,} events ({size_mb:.0f} MB of JSON)",
        "",
        f"- date (UTC): {time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime())}",
        f"- machine: {cpu_model()}, {os.cpu_count()} cores; Python {platform.python_version()}",
        f"- wlprof {wlprof.__version__}; source trace: {args.source.relative_to(ROOT) if args.source.is_relative_to(ROOT) else args.source} replicated "
        "with fresh ids (benchmarks/big_trace.py)",
        f"- command: `python benchmarks/ingest.py {' '.join(argv if argv is not None else sys.argv[1:])}`",
        "",
        "| tool | wall time | peak memory | peak / JSON size |",
        "|---|---:|---:|---:|",
    ]
    for i, r in enumerate(runs):
        lines.append(f"| wlprof ingest (run {i + 1}: parse, join, costs, Parquet written) | {r['wall_s']:.2f} s | "
                     f"{r['peak_mb']:,.0f} MB | {r['peak_mb'] / size_mb:.2f}x |")
    if hta:
        lines.append(f"| HTA TraceAnalysis (parse into a DataFrame) | {hta['wall_s']:.2f} s | {hta['peak_mb']:,.0f} MB | "
                     f"{hta['peak_mb'] / size_mb:.2f}x |")
        lines += ["", f"wlprof is {hta['wall_s'] / best['wall_s']:.1f}x faster than HTA on this trace "
                      f"(best wlprof run against HTA's one run)."]
    else:
        lines += ["", "HTA not measured: pass --hta-python."]
    lines += ["", f"wlprof wrote {len(k):,} kernel rows; {int((k.flops_source == 'unknown').sum()):,} have no FLOP formula "
                  f"({k.dur_us[k.flops_source == 'unknown'].sum() / k.dur_us.sum():.1%} of kernel time)."]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    print(json.dumps({"wlprof": runs, "hta": hta})[:2000], file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

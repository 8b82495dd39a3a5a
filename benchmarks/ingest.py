"""Ingest speed and memory: `wlprof ingest` beside Holistic Trace Analysis, on traces of different make-up.

Each make-up is a real trace replicated with fresh ids to --events events
(benchmarks/big_trace.py): the H200 MoE layer (loop dispatch: small ops, host syncs),
a GEMM/elementwise/index-op probe (GEMMs, elementwise, gather/scatter, sparse mm,
graph replays), a training step (a transformer layer's forward, backward and AdamW:
many small ops), and a folder of four ranks of an NCCL trace. Each tool runs in a
fresh process whose wall time and peak memory are measured:
  - `wlprof ingest` (parse, join, costs, Parquet written: the whole command), best of --repeats;
  - HTA's `TraceAnalysis` parsing the trace into its DataFrames (--hta-python: a Python with
    HolisticTraceAnalysis installed; for a rank folder HTA parses ranks in a process pool).
Memory: the peak, sampled every 100 ms, of the proportional set size (Pss) summed over the
command's whole process tree (its workers and their server included; shared pages counted
once), the memory the command held at once. Both tools' modules are byte-compiled before the
first run, and the repeats alternate (wlprof, HTA, wlprof, HTA, ...) so that a change in the
machine's load falls on both; each tool's best run is compared.

    python benchmarks/ingest.py --hta-python /path/to/hta/bin/python --out benchmarks/results/.../ingest.md
"""

from __future__ import annotations

import argparse
import ast
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "tests" / "fixtures"
MAKEUPS = {
    "moe": ("MoE layer, loop dispatch (H200)", FIX / "h200/moe-20261129-094804-ffc6/_chrome/p000-dispersed-loop.raw.json.gz"),
    "gemm": ("GEMM/elementwise/index probe (H200)", FIX / "h200_probe_ops.json.gz"),
    "train": ("transformer training step (H200)", FIX / "h200_training/transformer_eager.pt.trace.json.gz"),
    "ranks": ("4 ranks of an NCCL trace (A100)", FIX / "public/hta_2024_nccl.json.gz"),
}

_MEASURE = """
import os, resource, subprocess, sys, threading, time


def tree(root):
    kids = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as fh:
                    ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(d))
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def pss_kb(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


peak = [0, 0]  # the tree's summed proportional set size, its largest process's
t = time.perf_counter()
proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def sample():
    while proc.poll() is None:
        sizes = [pss_kb(p) for p in tree(proc.pid)]
        peak[0], peak[1] = max(peak[0], sum(sizes)), max(peak[1], max(sizes, default=0))
        time.sleep(0.1)


th = threading.Thread(target=sample, daemon=True)
th.start()
out = proc.communicate()[0]
wall = time.perf_counter() - t
th.join()
print({"wall_s": wall, "rc": proc.returncode, "peak_mb": peak[0] / 1024, "largest_mb": peak[1] / 1024,
       "rusage_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, "tail": out[-600:]})
"""

_HTA = """
import sys, time
from pathlib import Path
from hta.trace_analysis import TraceAnalysis
files = sorted(p for p in Path(sys.argv[1]).iterdir() if p.name.endswith(".json"))
a = TraceAnalysis(trace_files={i: str(p) for i, p in enumerate(files)}, trace_dir=sys.argv[1])
print("HTA rows", sum(len(a.t.get_trace(r)) for r in a.t.get_all_traces()))
"""


_PACKAGE_DIR = ("import os, sys, importlib.util; "
                "print(os.path.dirname(importlib.util.find_spec(sys.argv[1]).origin))")


def measure(cmd: list[str]) -> dict:
    out = subprocess.run([sys.executable, "-c", _MEASURE, *cmd], capture_output=True, text=True, check=True,
                         cwd=ROOT)
    return ast.literal_eval(out.stdout.strip().splitlines()[-1])


def byte_compile(python: str, package: str) -> None:
    """Write the .pyc files of `package` as `python` imports it, so that no measured run compiles them."""
    where = subprocess.run([python, "-c", _PACKAGE_DIR, package], capture_output=True, text=True, check=True,
                           cwd=ROOT).stdout.strip()
    subprocess.run([python, "-m", "compileall", "-q", where], check=True, cwd=ROOT, stdout=subprocess.DEVNULL)


def cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def make(name: str, source: Path, events: int, tmp: Path) -> tuple[Path, int, float]:
    """The trace folder of a make-up, its event count and its size in MB."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from big_trace import replicate

    folder = tmp / name
    folder.mkdir()
    if name == "ranks":
        n = sum(replicate(source, folder / f"rank{r}.json", events // 4, rank=r) for r in range(4))
    else:
        n = replicate(source, folder / "rank0.json", events)
    return folder, n, sum(p.stat().st_size for p in folder.iterdir()) / 1e6


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--makeups", default=",".join(MAKEUPS), help=f"comma-separated, of {', '.join(MAKEUPS)}")
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--hta-python", default=None, help="a Python with HolisticTraceAnalysis installed")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    import wlprof

    byte_compile(sys.executable, "wlprof")
    if args.hta_python:
        byte_compile(args.hta_python, "hta")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.makeups.split(","):
            label, source = MAKEUPS[name]
            folder, n, size_mb = make(name, source, args.events, Path(tmp))
            target = folder if name == "ranks" else next(folder.iterdir())
            runs, hta_runs = [], []
            for i in range(args.repeats):  # alternating, so that the machine's load falls on both alike
                traces = Path(tmp) / f"traces-{name}-{i}"
                runs.append(measure([sys.executable, "-m", "wlprof.cli.main", "ingest", str(target), "--traces",
                                     str(traces), "-q"]))
                if runs[-1]["rc"] != 0:
                    raise SystemExit(f"wlprof ingest failed on {name}: {runs[-1]['tail']}")
                if args.hta_python:
                    hta_runs.append(measure([args.hta_python, "-c", _HTA, str(folder)]))
                    if hta_runs[-1]["rc"] != 0:
                        raise SystemExit(f"HTA failed on {name}: {hta_runs[-1]['tail']}")
            best = min(runs, key=lambda r: r["wall_s"])
            hta = min(hta_runs, key=lambda r: r["wall_s"]) if hta_runs else None
            k = wlprof.load(Path(tmp) / f"traces-{name}-0")
            rows.append((name, label, n, size_mb, runs, best, hta_runs, hta, len(k)))
            for p in folder.iterdir():
                p.unlink()
    lines = [
        f"# Ingest speed and memory: wlprof beside HTA, {args.events:,} events per make-up",
        "",
        f"- date (UTC): {time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime())}",
        f"- machine: {cpu_model()}, {os.cpu_count()} cores; Python {platform.python_version()}; wlprof {wlprof.__version__}",
        "- traces: real traces replicated with fresh ids to the event count (benchmarks/big_trace.py); each tool in a "
        "fresh process, its wall time and its peak memory: the proportional set size summed over its process tree "
        "(workers included), sampled every 100 ms; both tools byte-compiled first, their repeats alternating; "
        "the best run of each compared",
        f"- command: `python benchmarks/ingest.py {' '.join(argv if argv is not None else sys.argv[1:])}`",
        "",
        "| make-up | JSON | wlprof wall (runs) | wlprof peak (largest process) | peak / JSON | "
        "HTA wall (runs) | HTA peak (largest process) | wlprof faster |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for _name, label, n, size_mb, runs, best, hta_runs, hta, nk in rows:
        walls = ", ".join(f"{r['wall_s']:.1f}" for r in runs)
        h_wall = ", ".join(f"{r['wall_s']:.1f}" for r in hta_runs) + " s" if hta else "-"
        h_peak = f"{hta['peak_mb']:,.0f} MB ({hta['largest_mb']:,.0f} MB)" if hta else "-"
        speed = f"{hta['wall_s'] / best['wall_s']:.1f}x" if hta else "-"
        lines.append(f"| {label} ({n:,} events, {nk:,} kernel rows) | {size_mb:,.0f} MB | {walls} s | "
                     f"{best['peak_mb']:,.0f} MB ({best['largest_mb']:,.0f} MB) | {best['peak_mb'] / size_mb:.2f}x | "
                     f"{h_wall} | {h_peak} | {speed} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

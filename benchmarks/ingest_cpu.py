"""The CPU time of one trace file's ingest, two source trees side by side.

Each round starts, for each tree in turn (the order alternating from round to round), a fresh
process importing that tree (PYTHONPATH) that does what an ingest worker does: it loads the
workers' modules (`wlprof.ingest.WORKER_MODULES`), keeps glibc's freed heap pages
(`wlprof.memory.keep_heap`), then reads, costs and writes the file (`wlprof.ingest._ingest_file`)
`--files` times in a row. For each time it reports the process's CPU (`time.process_time`: user +
system of every thread) and its minor page faults: the first is a worker's first file (its heap and
arenas still growing), the later ones a worker's later files. The best of the rounds and their
median are compared, per file of the process.

    python benchmarks/ingest_cpu.py --before /tmp/base --after . --rounds 7 /tmp/rk/rank0.json
"""

from __future__ import annotations

import argparse
import ast
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_CHILD = r"""
import importlib, resource, shutil, sys, tempfile, time
from pathlib import Path
import wlprof
tree, path, n = Path(sys.argv[1]).resolve(), Path(sys.argv[2]), int(sys.argv[3])
assert Path(wlprof.__file__).resolve().is_relative_to(tree), f"imported {wlprof.__file__}, not {tree}"
from wlprof.ingest import WORKER_MODULES, _ingest_file
for m in WORKER_MODULES:
    importlib.import_module(m)
from wlprof.memory import keep_heap
from wlprof.store.runs import RunWriter
keep_heap()
out = []
for i in range(n):
    d = Path(tempfile.mkdtemp(prefix="ingest_cpu."))
    w = RunWriter(d, "ingest", {"points": [{"index": 0}]}, prefix="cpu", staged=True)
    r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.process_time()
    _ingest_file(w.path, w.run_id, 0, path, None, None)
    t1, r1 = time.process_time(), resource.getrusage(resource.RUSAGE_SELF)
    out.append({"cpu": t1 - t0, "sys": r1.ru_stime - r0.ru_stime, "faults": r1.ru_minflt - r0.ru_minflt})
    shutil.rmtree(d)
print(out)
"""


def run(tree: Path, path: Path, files: int) -> list[dict]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(tree), str(path), str(files)], capture_output=True,
                          text=True, env=env, cwd="/tmp")
    if proc.returncode != 0:
        raise SystemExit(f"{tree} on {path}:\n{proc.stderr[-3000:]}")
    return ast.literal_eval(proc.stdout.strip().splitlines()[-1])


def load() -> str:
    try:
        return " ".join(open("/proc/loadavg").read().split()[:3])
    except OSError:
        return "?"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+", type=Path, help="trace files")
    ap.add_argument("--before", type=Path, required=True, help="a source tree (its root, holding wlprof/)")
    ap.add_argument("--after", type=Path, default=ROOT)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--files", type=int, default=2, help="ingests of the file per process (first, then later)")
    args = ap.parse_args(argv)
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    for path in args.paths:
        got: dict[str, list[list[dict]]] = {k: [] for k in trees}
        loads = [load()]
        for r in range(args.rounds):
            order = list(trees) if r % 2 == 0 else list(reversed(trees))
            for label in order:
                got[label].append(run(trees[label], path.resolve(), args.files))
            loads.append(load())
        print(f"## {path} ({time.strftime('%H:%M:%S')}, load {loads[0]} -> {loads[-1]}; "
              f"{args.rounds} rounds, alternating)")
        print("| file of the process | before CPU best / median (ms) | after CPU best / median (ms) | "
              "after / before (best) | after / before (median) | faults before / after (median) |")
        print("|---|---:|---:|---:|---:|---:|")
        for i in range(args.files):
            b = [rnd[i]["cpu"] * 1e3 for rnd in got["before"]]
            a = [rnd[i]["cpu"] * 1e3 for rnd in got["after"]]
            fb = statistics.median(rnd[i]["faults"] for rnd in got["before"])
            fa = statistics.median(rnd[i]["faults"] for rnd in got["after"])
            which = "first" if i == 0 else f"later ({i + 1})"
            print(f"| {which} | {min(b):.0f} / {statistics.median(b):.0f} | {min(a):.0f} / {statistics.median(a):.0f}"
                  f" | {min(a) / min(b):.3f} | {statistics.median(a) / statistics.median(b):.3f} | "
                  f"{fb / 1e3:.1f}k / {fa / 1e3:.1f}k |")
        for label in trees:
            runs = "; ".join(", ".join(f"{x['cpu'] * 1e3:.0f}" for x in rnd) for rnd in got[label])
            print(f"- {label} (ms per round, first and later files): {runs}")
        print(f"- load (1, 5, 15 min) before each round and after the last: {' | '.join(loads)}")
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())

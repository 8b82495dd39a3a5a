"""Check that two source trees of wlprof ingest the same traces to equal outputs.

Each tree (`--before`, `--after`: a source root, imported through PYTHONPATH) ingests every target
in one process of its own (`wlprof.ingest.ingest`, `--chrome-top` kernels' enriched Chrome trace,
`--jobs` processes) into OUT/before/ and OUT/after/. Then, target by target:
  - both ingests succeed, or both fail with the same message;
  - the run folders hold the same files;
  - every Parquet table is equal: the same Arrow schema with its metadata and the same number of rows,
    and `pandas.testing.assert_frame_equal(check_exact=True)` of the frames read back (columns, dtypes,
    values, row order), the `run_id` column aside (each run has its own id); tables whose rows are
    split into row groups otherwise are counted and told apart;
  - every enriched Chrome trace is the same JSON, and so are the manifests (run ids, times, the
    command line and the writing process aside) and the ingest summaries.

    python benchmarks/ingest_equal.py --before /tmp/base --after . --out /tmp/eq \\
        --each tests/fixtures/public --each tests/fixtures/torch_versions /tmp/rk

A target is a trace file or a folder of per-rank traces; `--each DIR` adds every trace file below DIR
and every folder below it holding two or more, each as a target of its own.
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# What a tree's process runs: ingest each target, write one line of JSON per target.
_RUN = r"""
import dataclasses, json, sys
from pathlib import Path
import wlprof
from wlprof.errors import WlprofError
from wlprof.ingest import ingest
tree, out, chrome_top, jobs = Path(sys.argv[1]).resolve(), Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
assert Path(wlprof.__file__).resolve().is_relative_to(tree), f"imported {wlprof.__file__}, not {tree}"
for i, target in enumerate(sys.argv[5:]):
    try:
        res = ingest(target, out / f"t{i:03d}", chrome_top=chrome_top, jobs=jobs, command="ingest_equal")
        row = {"target": target, "ok": True, "run": str(res.path),
               "files": [dataclasses.asdict(f) for f in res.files], "skipped": res.skipped,
               "ceilings_origin": res.ceilings_origin}
    except (WlprofError, ValueError) as exc:
        row = {"target": target, "ok": False, "error": f"{type(exc).__name__}: {exc}"}
    print(json.dumps(row, default=str), flush=True)
"""

# manifest keys that differ between any two runs of one input
VOLATILE = ("run_id", "created_at", "finished_at", "pid", "command", "started_at", "updated_at")
TRACE_SUFFIXES = (".json", ".json.gz")


def targets_in(folder: Path) -> list[Path]:
    """Every trace file below `folder`, and every folder below it holding two or more trace files
    (read as the ranks of one run), each a target."""
    out = []
    for p in sorted(folder.iterdir()):
        if p.is_dir():
            if sum(1 for f in p.iterdir() if f.is_file() and f.name.endswith(TRACE_SUFFIXES)) >= 2:
                out.append(p)
            out.extend(targets_in(p))
        elif p.is_file() and p.name.endswith(TRACE_SUFFIXES):
            out.append(p)
    return out


def run_tree(tree: Path, out: Path, targets: list[Path], chrome_top: int, jobs: int) -> list[dict]:
    out.mkdir(parents=True, exist_ok=False)
    env = {"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin", "HOME": str(out)}
    proc = subprocess.run([sys.executable, "-c", _RUN, str(tree), str(out), str(chrome_top), str(jobs),
                           *map(str, targets)], capture_output=True, text=True, env=env, cwd=out)
    if proc.returncode != 0:
        raise SystemExit(f"{tree}: the ingest process failed:\n{proc.stderr[-3000:]}")
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def _normalized(value, run_id: str):
    """`value` (JSON) with the run id replaced and the volatile manifest keys dropped."""
    if isinstance(value, dict):
        return {k: _normalized(v, run_id) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_normalized(v, run_id) for v in value]
    if isinstance(value, str):
        return value.replace(run_id, "RUN_ID")
    return value


LAYOUT: list[str] = []  # tables whose rows are grouped otherwise (the same rows): told, not a difference


def compare_parquet(a: Path, b: Path) -> str | None:
    import pandas as pd
    import pyarrow.parquet as pq

    ma, mb = pq.read_metadata(a), pq.read_metadata(b)
    if not ma.schema.to_arrow_schema().equals(mb.schema.to_arrow_schema(), check_metadata=True):
        return "Arrow schemas differ"
    if ma.num_rows != mb.num_rows:
        return f"rows differ: {ma.num_rows} vs {mb.num_rows}"
    if ma.num_row_groups != mb.num_row_groups:
        LAYOUT.append(f"{a.parent.name}/{a.name}: {ma.num_rows} rows in {ma.num_row_groups} -> {mb.num_row_groups} "
                      "row groups")
    fa, fb = pd.read_parquet(a), pd.read_parquet(b)
    fa, fb = fa.drop(columns=["run_id"], errors="ignore"), fb.drop(columns=["run_id"], errors="ignore")
    try:
        pd.testing.assert_frame_equal(fa, fb, check_exact=True)
    except AssertionError as exc:
        return f"frames differ: {str(exc)[:500]}"
    return None


def compare_run(a: Path, b: Path) -> list[str]:
    """What differs between two run folders of one target (nothing: an empty list)."""
    problems = []
    fa = sorted(str(p.relative_to(a)) for p in a.rglob("*") if p.is_file())
    fb = sorted(str(p.relative_to(b)) for p in b.rglob("*") if p.is_file())
    if fa != fb:
        return [f"files differ: {sorted(set(fa) ^ set(fb))}"]
    for rel in fa:
        pa_, pb_ = a / rel, b / rel
        if rel.endswith(".parquet"):
            why = compare_parquet(pa_, pb_)
        elif rel.endswith(".json.gz") or rel.endswith(".json"):
            opener = gzip.open if rel.endswith(".gz") else open
            with opener(pa_, "rb") as fh:
                ja = _normalized(json.load(fh), a.name)
            with opener(pb_, "rb") as fh:
                jb = _normalized(json.load(fh), b.name)
            why = None if ja == jb else "JSON differs"
        else:
            why = None if pa_.read_bytes() == pb_.read_bytes() else "bytes differ"
        if why:
            problems.append(f"{rel}: {why}")
    return problems


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("targets", nargs="*", type=Path, help="trace files or folders of per-rank traces")
    ap.add_argument("--each", action="append", type=Path, default=[], help="every trace and trace folder in DIR")
    ap.add_argument("--before", type=Path, required=True, help="a source tree (its root, holding wlprof/)")
    ap.add_argument("--after", type=Path, default=ROOT, help="a source tree; default: this one")
    ap.add_argument("--out", type=Path, required=True, help="a new folder for both trees' runs")
    ap.add_argument("--chrome-top", type=int, default=200)
    ap.add_argument("--jobs", type=int, default=1)
    args = ap.parse_args(argv)
    targets = [p.resolve() for p in args.targets] + [p.resolve() for d in args.each for p in targets_in(d)]
    if not targets:
        ap.error("no targets: give trace files or folders, or --each DIR")
    rows = {}
    for label, tree in (("before", args.before), ("after", args.after)):
        rows[label] = run_tree(tree.resolve(), args.out / label, targets, args.chrome_top, args.jobs)
        if len(rows[label]) != len(targets):
            raise SystemExit(f"{label}: {len(rows[label])} results for {len(targets)} targets")
    failed, tables, refused = 0, 0, 0
    for ra, rb in zip(rows["before"], rows["after"], strict=True):
        problems = []
        if ra["ok"] != rb["ok"]:
            problems.append(f"before ok={ra['ok']} ({ra.get('error')}), after ok={rb['ok']} ({rb.get('error')})")
        elif not ra["ok"]:
            refused += 1
            if ra["error"] != rb["error"]:
                problems.append(f"different errors: {ra['error']!r} vs {rb['error']!r}")
        else:
            a, b = Path(ra["run"]), Path(rb["run"])
            problems += compare_run(a, b)
            tables += sum(1 for p in a.rglob("*.parquet"))
            sa = _normalized({k: ra[k] for k in ("files", "skipped", "ceilings_origin")}, a.name)
            sb = _normalized({k: rb[k] for k in ("files", "skipped", "ceilings_origin")}, b.name)
            if sa != sb:
                problems.append("ingest summaries differ")
        if problems:
            failed += 1
            print(f"DIFFERENT {ra['target']}:\n  " + "\n  ".join(problems))
    print(f"{len(targets)} targets ({len(targets) - refused} ingested, {refused} refused alike), {tables} Parquet "
          f"tables compared: {failed} different")
    if LAYOUT:
        print(f"{len(LAYOUT)} equal tables whose rows are grouped otherwise (Parquet row groups), e.g. {LAYOUT[0]}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

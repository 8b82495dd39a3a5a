"""Run every `wlprof` line of the README from a fresh clone, on this machine, and time each one.

    python benchmarks/readme_lines.py --out benchmarks/results/<date>-cpu [--limit 90] [--with-tests]

The committed HEAD is cloned into a temporary folder; the quick start's first line (a fresh venv,
`pip install torch==2.13.0 -e '.[test]'`, `wlprof run gemm`) runs as written there, then every other
line of the README's bash blocks and every `wlprof ...` command quoted in its text, in README order,
each in `bash` with the venv active. Placeholders are filled from the runs made so far (RUN_ID: the
latest run; RUN_A:VARIANT: two points of the MoE routing run; RUNS: the GEMM and MLP runs to train on,
the MoE run to test); the ingest lines name fixture traces of the repository; a line that reads
`offline/` waits until a line has written it. Each line's exit status and time are recorded, with the
lines of its stderr that are not wlprof's own (progress, notes, errors), and at the end `git status`
says whether the clone holds anything `.gitignore` misses. The table and a log are written to --out.
The quick start's second line (`pytest`) runs only with --with-tests. Left out of `pytest` (minutes).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EVERY_STUDY = "wlprof sweep workloads/*.toml --device cpu"
OWN = re.compile(r"^(\[\d+/\d+\] |note: |error: |read \d+/\d+: |interrupted: |aborted)")

def readme_lines(readme: str) -> list[tuple[str, str]]:
    """(where, command) for each line of the bash blocks and each `wlprof ...` quoted in the text."""
    out: list[tuple[str, str]] = []
    in_block = False
    section = ""
    for line in readme.splitlines():
        if line.startswith("#"):
            if not in_block:
                section = line.lstrip("# ").strip()
        if line.startswith("```"):
            in_block = line.strip() == "```bash" if not in_block else False
            continue
        if in_block:
            cmd = re.split(r"\s{2,}#", line)[0].strip()
            if cmd and not cmd.startswith("#"):
                out.append((section, cmd))
        else:
            for span in re.findall(r"`(wlprof [^`]+)`", line):
                # a command quoted in the text (not a bare command name); the sweep of every study is the
                # extra run at the end (minutes: a study each)
                if "..." not in span and len(span.split()) >= 3 and span.strip() != EVERY_STUDY:
                    out.append((section + " (text)", span.strip()))
    seen, unique = set(), []
    for where, cmd in out:
        if cmd not in seen:
            seen.add(cmd)
            unique.append((where, cmd))
    return unique


def order(lines: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """README order, except that a line reading the offline profile follows the lines that write it."""
    readers = [x for x in lines if "--train-traces offline/" in x[1]]
    rest = [x for x in lines if x not in readers]
    writers = [i for i, (_, c) in enumerate(rest) if "--traces offline/" in c]
    at = writers[-1] + 1 if writers else len(rest)
    return rest[:at] + readers + rest[at:]


def runs(folder: Path) -> list[dict]:
    found = []
    for m in sorted(folder.glob("*/_manifest.json")):
        try:
            found.append(json.loads(m.read_text()))
        except (OSError, ValueError):
            continue
    return sorted(found, key=lambda m: (m.get("created_at") or "", m.get("run_id")))


def fill(cmd: str, clone: Path) -> str | None:
    """The command with its placeholders filled from the runs so far; None where one cannot be."""
    traces = runs(clone / "traces")
    by = {}
    for m in traces:
        by.setdefault(m["workload"], []).append(m)
    latest = traces[-1]["run_id"] if traces else None
    moe_all = next((m for m in reversed(by.get("moe", []))
                    if {"concentrated / grouped", "dispersed / grouped"} <= {p["variant"] for p in m["points"]}), None)
    moe_last = by["moe"][-1]["run_id"] if by.get("moe") else None
    filled = cmd
    if "RUN_A:VARIANT RUN_B:VARIANT" in filled:
        if moe_all is None:
            return None
        a = moe_all["run_id"]
        filled = filled.replace("RUN_A:VARIANT RUN_B:VARIANT", f"{a}:'concentrated / grouped' {a}:'dispersed / grouped'")
    if "--train RUNS" in filled:
        train = ",".join(by[w][0]["run_id"] for w in ("gemm", "mlp") if by.get(w))
        if not train or moe_last is None:
            return None
        filled = filled.replace("--train RUNS", f"--train {train}")
    for token in ("--test RUNS", "--test RUN_ID"):
        if token in filled:
            if moe_last is None:
                return None
            filled = filled.replace(token, f"--test {moe_last}")
    if "RUN..." in filled or "RUN_ID" in filled:
        if latest is None:
            return None
        filled = filled.replace("RUN...", latest).replace("RUN_ID", latest)
    if re.search(r"\b(FILE|KEY=VALUE|VARIANT|RUNS)\b", filled):
        return None
    return filled


def run_line(cmd: str, clone: Path, env: dict, first: bool, timeout: float) -> dict:
    script = cmd if first else f". .venv/bin/activate && {cmd}"
    t0 = time.perf_counter()
    try:
        res = subprocess.run(["bash", "-c", script], cwd=clone, env=env, capture_output=True, text=True,
                             timeout=timeout)
        code, out, err = res.returncode, res.stdout, res.stderr
    except subprocess.TimeoutExpired as exc:
        code = "timeout"
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        err = exc.stderr.decode() if isinstance(exc.stderr, bytes) else (exc.stderr or "")
    seconds = time.perf_counter() - t0
    lines = [x for x in err.splitlines() if x.strip()]
    if first:  # pip's own output comes before wlprof runs
        lines = [x for x in lines if not x.startswith(("WARNING: Location", "WARNING: ", "[notice]"))]
    foreign = [x for x in lines if not OWN.match(x)] if not first else []
    return {"code": code, "seconds": seconds, "stdout": out, "stderr": err, "foreign": foreign}


def machine() -> str:
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, Python {sys.version.split()[0]}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="folder for readme_lines.md and readme_lines.log")
    ap.add_argument("--limit", type=float, default=90.0, help="seconds a line may take (default 90)")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds before a line is stopped (default 900)")
    ap.add_argument("--with-tests", action="store_true", help="also run the quick start's `pytest` line")
    ap.add_argument("--no-studies", action="store_true",
                    help="skip the extra `wlprof sweep workloads/*.toml --device cpu` (not a README line)")
    ap.add_argument("--keep", type=Path, help="clone into this folder and keep it (default: a temporary one)")
    args = ap.parse_args()

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                            check=True).stdout.strip()
    base = args.keep or Path(tempfile.mkdtemp(prefix="wlprof-readme-"))
    clone = base / "wlprof"
    if clone.exists():
        shutil.rmtree(clone)
    subprocess.run(["git", "clone", "--quiet", "--no-local", str(REPO), str(clone)], check=True)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if ".venv" not in p)
    env.pop("COLUMNS", None)
    env["WLPROF_CACHE_DIR"] = str(base / "cache")  # a new user's machine: no ceilings cached yet
    lines = readme_lines((clone / "README.md").read_text())
    rows, log = [], []
    load0 = os.getloadavg()[0]
    started = dt.datetime.now(dt.timezone.utc)
    queue = order(lines)
    first = True
    while queue:
        where, cmd = queue.pop(0)
        if cmd.endswith("pytest") and not cmd.startswith("wlprof") and not args.with_tests:
            rows.append({"where": where, "cmd": cmd, "as_run": None, "code": "not run", "seconds": None,
                         "foreign": [], "why": "the test suite (run with --with-tests; CI runs it)"})
            continue
        as_run = cmd if first else fill(cmd, clone)
        if as_run is None:
            rows.append({"where": where, "cmd": cmd, "as_run": None, "code": "not run", "seconds": None,
                         "foreign": [], "why": "a template (its placeholders name no run made here)"})
            continue
        print(f"$ {as_run}", flush=True)
        r = run_line(as_run, clone, env, first, args.timeout)
        print(f"  -> {r['code']} in {r['seconds']:.1f} s", flush=True)
        rows.append({"where": where, "cmd": cmd, "as_run": as_run if as_run != cmd else None, **r, "why": ""})
        log += [f"$ {as_run}", f"# exit {r['code']} in {r['seconds']:.1f} s", "# stderr:", r["stderr"].rstrip(),
                "# stdout (last 60 lines):", *r["stdout"].rstrip().splitlines()[-60:], ""]
        first = False
    extra = None
    if not args.no_studies:
        cmd = f"{EVERY_STUDY} --traces studies_cpu/"
        print(f"$ {cmd}", flush=True)
        extra = run_line(cmd, clone, env, False, 3600)
        log += [f"$ {cmd}", f"# exit {extra['code']} in {extra['seconds']:.1f} s", "# stderr:",
                extra["stderr"].rstrip(), "# stdout (last 40 lines):", *extra["stdout"].rstrip().splitlines()[-40:]]
        shutil.rmtree(clone / "studies_cpu", ignore_errors=True)
    status = subprocess.run(["git", "status", "--porcelain"], cwd=clone, capture_output=True, text=True).stdout
    left = [x[3:] for x in status.splitlines()]
    load1 = os.getloadavg()[0]

    ran = [r for r in rows if isinstance(r["seconds"], float)]
    wl_rows = [r for r in ran if r is not rows[0]]
    text = [
        f"# Every README line on a CPU, from a fresh clone ({started:%Y-%m-%d %H:%M} UTC)", "",
        f"- machine: {machine()}; load average {load0:.1f} at the start, {load1:.1f} at the end (other "
        "processes shared these cores: timings are this machine's, not a quiet laptop's)",
        f"- commit {commit}, cloned fresh; `python benchmarks/readme_lines.py --out {args.out}`",
        f"- {len(ran)} lines ran: {sum(r['code'] == 0 for r in ran)} exited 0; {sum(r['seconds'] <= args.limit for r in wl_rows)} "
        f"of the {len(wl_rows)} after the set-up line took at most {args.limit:.0f} s (the slowest "
        f"{max((r['seconds'] for r in wl_rows), default=0):.1f} s)",
        f"- stderr lines that are not wlprof's own (progress, notes, errors): "
        f"{sum(len(r['foreign']) for r in ran)}",
        "- files the lines left that `.gitignore` misses: " + (", ".join(left) if left else "none"),
        "- the ingest lines read the repository's own fixture traces", "",
        "| # | README line | run as | exit | seconds | ≤ limit |", "|---|---|---|---|---:|---|",
    ]
    for i, r in enumerate(rows, 1):
        secs = f"{r['seconds']:.1f}" if isinstance(r["seconds"], float) else "-"
        ok = "-" if not isinstance(r["seconds"], float) else ("yes" if r["seconds"] <= args.limit else "**no**")
        if i == 1 and isinstance(r["seconds"], float):
            ok = "(set-up: venv, pip install, then `wlprof run gemm`)"
        as_run = f"`{r['as_run']}`" if r["as_run"] else (r["why"] or "as written")
        text.append(f"| {i} | `{r['cmd']}` | {as_run} | {r['code']} | {secs} | {ok} |")
    if extra is not None:
        text += ["", "Not a README line: every committed study at its CPU scale, "
                 f"`wlprof sweep workloads/*.toml --device cpu`: exit {extra['code']} in {extra['seconds']:.1f} s "
                 f"({len(list((REPO / 'workloads').glob('*.toml')))} studies)."]
    foreign = [(r["cmd"], x) for r in ran for x in r["foreign"]]
    if foreign:
        text += ["", "stderr lines not wlprof's own:", ""] + [f"- `{c}`: {shlex.quote(x)}" for c, x in foreign[:40]]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "readme_lines.md").write_text("\n".join(text) + "\n")
    (args.out / "readme_lines.log").write_text("\n".join(log) + "\n")
    print(f"wrote {args.out / 'readme_lines.md'}")
    if args.keep is None:
        shutil.rmtree(base, ignore_errors=True)
    return 0 if all(r["code"] == 0 for r in ran) and not left else 1


if __name__ == "__main__":
    raise SystemExit(main())

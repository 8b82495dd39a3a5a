"""Mutation testing of wlprof's numeric core, outside CI: `python benchmarks/mutation.py [GROUP ...]`.

Runs mutmut 3.x (install it into your own environment: `pip install mutmut==3.8.1`; it is not
a project dependency) over one group of modules at a time, each with only the fast tests
that exercise it, in a scratch copy of the work tree (the repository is never touched).
Every surviving mutant must be killed by a test or explained in
benchmarks/mutation_survivors.toml (mutant name -> why it is equivalent or not worth a test);
the script prints killed / explained / unexplained per group, each survivor with the line it
changes (so that an explanation can be checked against its mutant), and exits 1 when any
survivor is unexplained.

A key of that file is a mutant's name (`wlprof.steps.x_spread__mutmut_12`), a glob over names
(a CUDA-only function), or the function and its change, which stays right when the mutants are
numbered anew after an edit: `"wlprof.steps.spread: np.nanmedian(v) -> np.nanmedian(None)"`
(as the script prints it; it applies only while no other mutant of the function makes that change).

    python benchmarks/mutation.py                 # every group (tens of minutes on 2 cores)
    python benchmarks/mutation.py steps roofline  # some groups
    python benchmarks/mutation.py --list          # the groups, their modules and tests
"""

from __future__ import annotations

import argparse
import ast
import difflib
import fnmatch
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import tomllib

REPO = Path(__file__).resolve().parents[1]
SURVIVORS = REPO / "benchmarks" / "mutation_survivors.toml"

# group -> (modules to mutate, the fast tests that exercise them)
GROUPS = {
    "roofline": (["wlprof/cost/roofline.py"], ["tests/unit/test_roofline.py", "tests/unit/test_roof_placement.py",
                                              "tests/unit/test_roofline_edges.py",
                                              "tests/unit/test_hierarchical_roofline.py"]),
    "steps": (["wlprof/steps.py", "wlprof/timing.py"], ["tests/unit/test_steps.py", "tests/unit/test_timing.py",
                                                       "tests/unit/test_timing_spread.py",
                                                       "tests/unit/test_steps_roofline.py"]),
    "join": (["wlprof/trace/join.py"], ["tests/unit/test_parse_cpu.py", "tests/unit/test_join.py",
                                        "tests/integration/test_pipeline_h200.py"]),
    "store": (["wlprof/store/*.py"], ["tests/integration/test_store.py", "tests/unit/test_store_selection.py",
                                      "tests/unit/test_store_writer.py", "tests/unit/test_store_collectives.py",
                                      "tests/unit/test_store_details.py",
                                      "tests/unit/test_file_modes.py"]),
    # wlprof/cost/ but roofline.py, which is the roofline group's (its survivors are explained there)
    "cost": (sorted(f"wlprof/cost/{p.name}" for p in (REPO / "wlprof" / "cost").glob("*.py") if p.name != "roofline.py"),
             ["tests/unit/test_cost_formulas.py", "tests/unit/test_flop_counter_agreement.py",
              "tests/unit/test_costs_activations.py", "tests/unit/test_costs_attention.py",
              "tests/unit/test_costs_convolution.py", "tests/unit/test_costs_indexing_data.py",
              "tests/unit/test_costs_inductor.py", "tests/unit/test_costs_losses.py",
              "tests/unit/test_costs_mechanics.py", "tests/unit/test_costs_more_forms.py",
              "tests/unit/test_costs_norms.py", "tests/unit/test_costs_optimizers.py",
              "tests/unit/test_costs_pooling.py", "tests/unit/test_costs_resampling.py",
              "tests/unit/test_cost_factories.py", "tests/unit/test_cost_formula_gaps.py",
              "tests/unit/test_cost_rnn.py", "tests/unit/test_costs_model_ops.py",
              "tests/unit/test_comm_costs.py", "tests/unit/test_written_bytes.py", "tests/unit/test_cost_split.py",
              "tests/unit/test_cost_tables.py", "tests/unit/test_cost_edges.py",
              "tests/unit/test_roofline.py", "tests/unit/test_roofline_edges.py",
              "tests/unit/test_parse_cpu.py", "tests/integration/test_pipeline_h200.py"]),
}
STATUS_KILLED = {"killed", "caught by type check"}


def scratch_copy(group: str) -> Path:
    """The tracked files of the work tree (as they are now) in a folder of their own."""
    dest = Path(os.environ.get("WLPROF_MUTATION_DIR", "/tmp/wlprof-mutation")) / group
    if dest.exists():
        shutil.rmtree(dest)
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True)
    if listed.returncode == 0:
        files = listed.stdout.decode().split("\0")
    else:  # a copy of the tree without its git folder: every file but the scratch and build folders
        skip = {".git", ".venv", ".whl", "mutants", "__pycache__", ".pytest_cache"}
        files = [str(q.relative_to(REPO)) for q in REPO.rglob("*")
                 if q.is_file() and not skip.intersection(q.relative_to(REPO).parts)]
    for f in filter(None, files):
        src = REPO / f
        if src.is_file():
            (dest / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / f)
    return dest


def write_config(dest: Path, modules: list[str], tests: list[str]) -> None:
    tests = [t for t in tests if (dest / t).exists()]
    lines = ["[mutmut]", "source_paths=wlprof", "only_mutate=", *[f"    {m}" for m in modules],
             "pytest_add_cli_args_test_selection=", *[f"    {t}" for t in tests],
             "pytest_add_cli_args=", "    -p", "    no:cacheprovider", "    -m", "    not slow", "    -q",
             "    -n", "    0",  # one process: mutmut switches mutants in the process it runs the tests in
             "process_isolation=forkserver", ""]
    (dest / "setup.cfg").write_text("\n".join(lines))
    # mutmut reads [tool.mutmut] from pyproject.toml first: keep the project's file without it
    assert "[tool.mutmut]" not in (dest / "pyproject.toml").read_text()


def run_group(group: str, max_children: int) -> tuple[dict[str, str], Path]:
    modules, tests = GROUPS[group]
    dest = scratch_copy(group)
    write_config(dest, modules, tests)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": ""}
    mutmut = shutil.which("mutmut") or str(Path(sys.executable).with_name("mutmut"))
    proc = subprocess.run([mutmut, "run", "--max-children", str(max_children)], cwd=dest, env=env,
                          capture_output=True, text=True)
    (dest / "mutmut-run.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        sys.exit(f"mutmut run failed for {group} (see {dest / 'mutmut-run.log'}):\n{(proc.stdout + proc.stderr)[-3000:]}")
    res = subprocess.run([mutmut, "results", "--all", "true"], cwd=dest, env=env, capture_output=True, text=True)
    out = {}
    for line in res.stdout.splitlines():
        name, sep, status = line.strip().rpartition(": ")
        if sep and name:
            out[name] = status.strip()
    return out, dest


def mutant_changes(dest: Path, names: list[str]) -> dict[str, str]:
    """Each mutant's change, 'old lines -> new lines', from the mutated modules mutmut wrote in `dest`."""
    out: dict[str, str] = {}
    by_module: dict[str, list[str]] = {}
    for n in names:
        by_module.setdefault(n.rsplit(".", 1)[0], []).append(n)
    for module, members in by_module.items():
        path = dest / "mutants" / Path(*module.split(".")).with_suffix(".py")
        if not path.is_file():
            continue
        src = path.read_text()
        lines = src.splitlines()
        funcs = {f.name: "\n".join(lines[f.lineno - 1:f.end_lineno]) for f in ast.walk(ast.parse(src))
                 if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and "__mutmut_" in f.name}
        for n in members:
            func = n.rsplit(".", 1)[1]
            base = func.rsplit("__mutmut_", 1)[0]
            orig, mutant = funcs.get(f"{base}__mutmut_orig"), funcs.get(func)
            if orig is None or mutant is None:
                continue
            a = orig.splitlines()
            b = mutant.replace(func, f"{base}__mutmut_orig", 1).splitlines()
            diff = [d for d in difflib.unified_diff(a, b, lineterm="", n=0) if d[:1] in "+-" and d[:3] not in ("+++", "---")]
            old = " / ".join(d[1:].strip() for d in diff if d.startswith("-"))
            new = " / ".join(d[1:].strip() for d in diff if d.startswith("+"))
            out[n] = f"{old} -> {new}".replace(f"{base}__mutmut_orig", _plain(base))
    return out


def _plain(func: str) -> str:
    """mutmut's name of a function as its source spells it: 'x_spread' -> 'spread', 'xǁCǁm' -> 'C.m'."""
    return func[2:] if func.startswith("x_") else func.lstrip("x").strip("ǁ").replace("ǁ", ".")


def content_key(name: str, change: str | None) -> str | None:
    """The key that names a mutant by its function and change: 'module.function: old -> new'."""
    if not change:
        return None
    module, func = name.rsplit("__mutmut_", 1)[0].rsplit(".", 1)
    return f"{module}.{_plain(func)}: {change}"


def unique_keys(names: list[str], changes: dict[str, str]) -> dict[str, str | None]:
    """Each mutant's content key, None where another mutant of its function makes the same change."""
    keys = {n: content_key(n, changes.get(n)) for n in names}
    counts: dict[str, int] = {}
    for k in keys.values():
        counts[k] = counts.get(k, 0) + 1
    return {n: k if k and counts[k] == 1 else None for n, k in keys.items()}


def reason(why: dict[str, str], name: str, key: str | None = None) -> str | None:
    """Why a survivor is kept: its exact name, its function and change (`key`), or a glob over names."""
    return (why.get(name) or (why.get(key) if key else None)
            or next((r for pat, r in why.items() if fnmatch.fnmatchcase(name, pat)), None))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("groups", nargs="*", help=f"groups to run (default: all): {', '.join(GROUPS)}")
    ap.add_argument("--list", action="store_true", help="print the groups and exit")
    ap.add_argument("--max-children", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--json", type=Path, help="also write every mutant's status here")
    args = ap.parse_args()
    if args.list:
        for g, (mods, tests) in GROUPS.items():
            print(f"{g}: {' '.join(mods)}\n    tests: {' '.join(tests)}")
        return 0
    explained = tomllib.loads(SURVIVORS.read_text()) if SURVIVORS.exists() else {}
    import importlib.metadata as md

    print(f"mutmut {md.version('mutmut')}; survivors explained in {SURVIVORS.relative_to(REPO)}")
    total = {"killed": 0, "explained": 0, "unexplained": 0}
    every = {}
    unexplained_all = []
    for group in args.groups or list(GROUPS):
        results, dest = run_group(group, args.max_children)
        every.update(results)
        killed = [n for n, s in results.items() if s in STATUS_KILLED]
        survived = [n for n, s in results.items() if s not in STATUS_KILLED]
        changes = mutant_changes(dest, list(results))
        keys = unique_keys(list(results), changes)
        why = explained.get(group, {})
        ok = [n for n in survived if reason(why, n, keys[n])]
        bad = [n for n in survived if not reason(why, n, keys[n])]
        unexplained_all += [(n, results[n]) for n in bad]
        total["killed"] += len(killed)
        total["explained"] += len(ok)
        total["unexplained"] += len(bad)
        print(f"{group}: {len(results)} mutants: {len(killed)} killed, {len(ok)} explained, {len(bad)} unexplained")
        for n in ok:
            print(f"    explained {n} ({results[n]}) [{changes.get(n, '?')}]: {reason(why, n, keys[n])}")
        for n in bad:
            print(f"    UNEXPLAINED {n} ({results[n]}) [{changes.get(n, '?')}]")
    print(f"total: {total['killed']} killed, {total['explained']} explained, {total['unexplained']} unexplained")
    if args.json:
        args.json.write_text(json.dumps(every, indent=1, sort_keys=True) + "\n")
    return 1 if unexplained_all else 0


if __name__ == "__main__":
    sys.exit(main())

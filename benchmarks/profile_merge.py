"""Add measured studies of one profile to another of the same device, then refit it.

    python benchmarks/profile_merge.py --into P --from Q [--section moe] [--pass 2] --reason TEXT

The studies of Q (its `sections` in profile.json, filtered by section and pass) that P does not
hold are added with their op calls and steps; P's grid seconds and GPU-minutes grow by theirs, and
profile.json records what came from where (`merged`). Nothing is measured. Refused: profiles of
different devices, and a merge that adds nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import pandas as pd


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--into", type=Path, required=True, help="the profile to add to (rewritten)")
    ap.add_argument("--from", dest="source", type=Path, required=True, help="the profile to take studies from")
    ap.add_argument("--section", default=None, help="only studies of this grid section")
    ap.add_argument("--pass", dest="passno", type=int, default=None, help="only studies of this pass (1 or 2)")
    ap.add_argument("--reason", required=True, help="why, as profile.json records it")
    args = ap.parse_args(argv)
    from wlprof.predict.profile import (
        PROFILE_FILE,
        _study_key,
        _write_parquet,
        check,
        fit_profile,
        profile_tables,
        write_predictor,
    )
    from wlprof.store.atomic import atomic_write_bytes

    into = json.loads((args.into / PROFILE_FILE).read_text())
    src = json.loads((args.source / PROFILE_FILE).read_text())
    if (into.get("device") or {}).get("name") != (src.get("device") or {}).get("name"):
        print(f"error: --from must be a profile of {into.get('device')} (got {src.get('device')})", file=sys.stderr)
        return 2
    have = {_study_key(s) for s in into.get("sections", [])} | {s.get("run_id") for s in into.get("sections", [])}
    take = [s for s in src.get("sections", [])
            if (args.section is None or s.get("section") == args.section)
            and (args.passno is None or s.get("pass") == args.passno)
            and _study_key(s) not in have and s.get("run_id") not in have]
    if not take:
        print("error: --from must hold studies the profile lacks (none matched)", file=sys.stderr)
        return 2
    runs = {s["run_id"] for s in take}
    ops, steps = profile_tables(args.into)
    s_ops, s_steps = profile_tables(args.source)
    ops = pd.concat([ops, s_ops[s_ops.run_id.isin(runs)]], ignore_index=True)
    steps = pd.concat([steps, s_steps[s_steps.run_id.isin(runs)]], ignore_index=True)
    added_s = round(sum(float(s.get("seconds") or 0) for s in take), 1)
    grid_s = round(float(into.get("grid_seconds") or 0) + added_s, 1)
    taken = {_study_key(s) for s in take}
    info = {**into, "sections": [*into.get("sections", []), *take], "grid_seconds": grid_s,
            "skipped": [x for x in into.get("skipped", []) if _study_key(x) not in taken],
            "merged": [*into.get("merged", []), {
                "from": str(args.source), "from_command": src.get("command"), "from_started": src.get("started"),
                "section": args.section, "pass": args.passno, "studies": len(take), "seconds": added_s,
                "reason": args.reason, "merged": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}]}
    if info.get("gpu_minutes") is not None:
        info["gpu_minutes"] = round(grid_s / 60, 2)
    info.update(check(ops, steps))
    _write_parquet(ops, args.into / "ops.parquet")
    _write_parquet(steps, args.into / "steps.parquet")
    t1 = time.monotonic()
    predictor, host = fit_profile(ops, steps, None, info.get("ceilings"))
    write_predictor(args.into, predictor, host)
    info["fit_seconds"] = round(time.monotonic() - t1, 1)
    atomic_write_bytes(args.into / PROFILE_FILE, (json.dumps(info, indent=1, default=str) + "\n").encode())
    print(f"added {len(take)} studies ({added_s} s) from {args.source}; the profile now holds {info.get('points')} "
          f"points, {grid_s} s of grid ({info.get('gpu_minutes')} GPU-minutes); refitted")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

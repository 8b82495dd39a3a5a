"""Run several study files in one process (one torch and CUDA start-up instead of one per file).

    python benchmarks/h200/sweep_many.py --traces DIR workloads/heldout/heldout_*.toml

Prints each run id as it finishes and writes DIR/_runs.json (study file, name, run id, status,
seconds). A study that fails is recorded and the next one runs.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

# the CPU miniature of each workload's sizes (--shrink)
SHRINK = {
    "gemm": {"shapes": ["5x96x160", "40x160x96", "100x80x320", "24x200x48"]},
    "mlp": {"d_model": 96, "d_ff": 384, "batch": [3, 12, 48, 200]},
    "elementwise": {"numel": [3000, 100000, 777777], "matvec_n": [300], "matmul_n": [100]},
    "moe": {"d_model": 48, "d_ff": 96, "tokens": [48], "experts": 6},
    "gnn": {"scale": [9], "features": [24]},
}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("studies", nargs="+", type=Path)
    ap.add_argument("--traces", type=Path, required=True)
    ap.add_argument("--device", default=None)
    ap.add_argument("--shrink", action="store_true",
                    help="CPU miniatures of the studies (small sizes, same sweep axes): a dry run of a device script")
    args = ap.parse_args(argv)
    from dataclasses import replace

    from wlprof.study import load_study, run_study

    done = []
    for f in args.studies:
        t0 = time.monotonic()
        try:
            study = load_study(f)
            if args.device:
                study = replace(study, device=args.device)
            if args.shrink:
                study = replace(study, params={**study.params, **SHRINK.get(study.workload, {})},
                                dtype="float32", capture=replace(study.capture, warmup=1, latency_reps=3, batches=1,
                                                                 min_batch_ms=1.0, profiled_steps=2))
            res = run_study(study, args.traces, command=f"sweep_many {f}")
            entry = {"file": str(f), "name": study.name, "run_id": res.run_id, "status": res.status}
        except Exception as exc:  # noqa: BLE001 - one failed study must not lose the others
            traceback.print_exc()
            entry = {"file": str(f), "name": None, "run_id": None, "status": f"error: {type(exc).__name__}: {exc}"}
        entry["seconds"] = round(time.monotonic() - t0, 1)
        done.append(entry)
        print(json.dumps(entry), flush=True)
    args.traces.mkdir(parents=True, exist_ok=True)
    (args.traces / "_runs.json").write_text(json.dumps(done, indent=1) + "\n")
    return 0 if all(e["run_id"] for e in done) else 1


if __name__ == "__main__":
    sys.exit(main())

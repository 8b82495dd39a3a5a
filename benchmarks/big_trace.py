"""Make a large torch.profiler trace by replicating a real trace's events with fresh ids.

Each copy of the source trace's events is shifted in time past the previous copy and
gets fresh `External id`, `correlation`, flow `id` and `Ev Idx` values, so the joins
stay one-to-one. Events are written one per line after Kineto's two-space indent, the
layout torch.profiler writes; `--compact` writes the whole file on one line instead.

    python benchmarks/big_trace.py SOURCE.json.gz OUT.json --events 1000000
"""

from __future__ import annotations

import argparse
import gzip
import sys
from pathlib import Path


def replicate(source: Path, out: Path, events: int, compact: bool = False, rank: int | None = None) -> int:
    from wlprof.jsonio import dumps_fast as dumps
    from wlprof.trace.parse import load_events

    meta, evs = load_events(source)
    base = [e for e in evs if isinstance(e, dict) and e.get("ph") != "M"]
    meta_events = [e for e in evs if isinstance(e, dict) and e.get("ph") == "M"]
    ts = [float(e["ts"]) for e in base if "ts" in e]
    span = (max(float(e["ts"]) + float(e.get("dur", 0)) for e in base if "ts" in e) - min(ts)) + 10.0
    id_keys = ("External id", "correlation", "Ev Idx", "Record function id")
    max_id = 1
    for e in base:
        a = e.get("args") or {}
        for k in id_keys:
            if isinstance(a.get(k), int):
                max_id = max(max_id, a[k])
        if isinstance(e.get("id"), int):
            max_id = max(max_id, e["id"])
    stride = max_id + 1
    copies = max(1, -(-(events - len(meta_events)) // len(base)))
    opener = gzip.open if out.suffix == ".gz" else open
    written = 0
    sep = b"," if compact else b",\n  "
    with opener(out, "wb") as fh:
        head = {k: v for k, v in meta.items()}
        if rank is not None:  # one rank of a multi-rank folder
            head["distributedInfo"] = {**(head.get("distributedInfo") or {}), "rank": rank}
        head_bytes = dumps(head)[:-1]  # without the closing brace
        fh.write(head_bytes + (b', "traceEvents": [' if compact else b',\n  "traceEvents": [\n  '))
        first = True
        for ev in meta_events:
            fh.write((b"" if first else sep) + dumps(ev))
            first = False
            written += 1
        for c in range(copies):
            shift, off = c * span, c * stride
            for e in base:
                if written >= events:
                    break
                e2 = dict(e)
                if "ts" in e2:
                    e2["ts"] = round(float(e2["ts"]) + shift, 3)
                if isinstance(e2.get("id"), int):
                    e2["id"] = e2["id"] + off
                a = e2.get("args")
                if isinstance(a, dict):
                    a = dict(a)
                    for k in id_keys:
                        if isinstance(a.get(k), int) and a[k] >= 0:
                            a[k] = a[k] + off
                    e2["args"] = a
                fh.write((b"" if first else sep) + dumps(e2))
                first = False
                written += 1
        fh.write(b"]}" if compact else b"\n  ]\n}\n")
    return written


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--compact", action="store_true")
    ap.add_argument("--rank", type=int, default=None, help="write distributedInfo.rank (one file of a rank folder)")
    args = ap.parse_args(argv)
    n = replicate(args.source, args.out, args.events, args.compact, args.rank)
    print(f"wrote {n:,} events to {args.out} ({args.out.stat().st_size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

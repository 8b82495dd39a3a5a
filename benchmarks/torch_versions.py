"""Traces of other torch versions (`capture_versions.py`'s folders) through wlprof, checked against the raw JSON.

For each NAME.json[.gz] with its NAME.flops.json in each folder given, one row: the torch version that
wrote it, its events, the op rows wlprof read against the raw `cpu_op` events (a plain `json` load), the
ProfilerStep#N regions against the steps wlprof found, the device wlprof names, the working-op rows and
the shares of their self time with known FLOPs and bytes, the warnings the reader gave, and wlprof's
FLOPs per op (each profiled step's, credited to the outermost enclosing op FlopCounterMode counts)
against FlopCounterMode's count of one step, where the torch that wrote the trace has it (2.1 and later);
for an earlier one, against the count of a folder given by `--reference` (the same model, captured by a
later torch: only the totals are compared, as its ops differ).

    python benchmarks/torch_versions.py DIR... [--reference DIR] [--markdown OUT.md]
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for _p in (ROOT, ROOT / "tests" / "integration"):  # wlprof, and the parity tests' FLOPs crediting
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))


def raw(path: Path) -> dict:
    """The trace's raw facts by a plain json load: events, cpu_op events, ProfilerStep names, top-level keys."""
    data = path.read_bytes()
    doc = json.loads(gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data)
    events = doc["traceEvents"]
    ops = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "Operator")]
    steps = sorted({e["name"] for e in events if str(e.get("name", "")).startswith("ProfilerStep#")})
    return {"events": len(events), "cpu_ops": len(ops), "steps": steps, "keys": sorted(k for k in doc if k != "traceEvents"),
            "concrete": any("Concrete Inputs" in e.get("args", {}) for e in ops)}


def check(path: Path, ref_folder: Path | None) -> dict:
    from fcm_credit import flop_counter_ops, flops_by_counted_op_per_step

    from wlprof.pipeline import costed, read
    from wlprof.trace.identity import device_of

    name = path.name.removesuffix(".gz").removesuffix(".json")
    meta = json.loads((path.parent / f"{name}.flops.json").read_text())
    r = raw(path)
    trace = read(path)
    dev = device_of(trace.meta, trace.device, trace.gpu_work_without_device is not None, trace.mtia_events > 0)
    c = costed(trace)
    k = c.kernels
    us = k.dur_us.sum()
    row = {"torch": meta["torch"], "trace": path.name, "events": r["events"], "raw_ops": r["cpu_ops"],
           "op_rows": len(c.joined.ops), "raw_steps": r["steps"], "steps": sorted(int(s) for s in k.step.unique()),
           "device": f"{dev[0]}: {dev[1]}", "rows": len(k), "concrete": r["concrete"],
           "flops_known": float(k.dur_us[k.flops.notna()].sum() / us) if us else float("nan"),
           "bytes_known": float(k.dur_us[k["bytes"].notna()].sum() / us) if us else float("nan"),
           "warnings": list(trace.warnings),
           "no_flops": k[k.flops.isna()].groupby("op_name").dur_us.sum().sort_values(ascending=False).head(3).round(1).to_dict()}
    ref = {op: v for op, v in meta["flops"].items() if v}
    per = {st: {op: v for op, v in d.items() if v} for st, d in flops_by_counted_op_per_step(c).items()}
    registry = flop_counter_ops()
    row["flops_step"] = {st: int(sum(d.values())) for st, d in per.items()}
    row["fcm"] = int(sum(ref.values()))
    row["fcm_of"] = meta["torch"]
    if not meta["profiler_options"].get("record_shapes"):
        row["agree"] = "no shapes"
    elif ref:  # every step, op by op, over the ops FlopCounterMode counts
        diff = {st: {op: (d.get(op), ref.get(op)) for op in set(d) | set(ref)
                     if op in registry and d.get(op) != ref.get(op)} for st, d in per.items()}
        row["agree"] = "equal" if per and not any(diff.values()) else f"differ: {diff}"
    elif ref_folder is not None and (ref_folder / f"{name}.flops.json").exists():
        # a torch without FlopCounterMode: a later torch's count of the same model, on the ops both count
        later = json.loads((ref_folder / f"{name}.flops.json").read_text())
        ref = {op: v for op, v in later["flops"].items() if v}
        row["fcm"], row["fcm_of"] = int(sum(ref.values())), later["torch"]
        common = {op for d in per.values() for op in d} & set(ref)
        same = all(d.get(op) == ref[op] for d in per.values() for op in common)
        only = sorted({op for d in per.values() for op in d} - set(ref))
        row["agree"] = (f"{'equal' if same else 'differ'} on {', '.join(sorted(common)) or 'no op'}"
                        + (f"; counted here only: {', '.join(only)}" if only else ""))
    else:
        row["agree"] = meta.get("flop_counter_error") or "no reference"
    return row


def _pct(x: float) -> str:
    return "—" if x != x else f"{100 * x:.1f}%"


def render(rows: list[dict]) -> str:
    lines = ["| torch | trace | events | cpu_op events / op rows | ProfilerStep (raw) / steps | device | working rows "
             "| FLOPs known | bytes known | FLOPs per step / FlopCounterMode | warnings |",
             "|---|---|---:|---|---|---|---:|---:|---:|---|---|"]
    for r in rows:
        fl = ", ".join(f"{v:,}" for _, v in sorted(r["flops_step"].items())) or "0"
        verdict = r["agree"]
        lines.append(f"| {r['torch']} | {r['trace']} | {r['events']:,} | {r['raw_ops']:,} / {r['op_rows']:,} | "
                     f"{', '.join(s.removeprefix('ProfilerStep') for s in r['raw_steps'])} / {r['steps']} | "
                     f"{r['device']} | {r['rows']:,} | {_pct(r['flops_known'])} | {_pct(r['bytes_known'])} | "
                     f"{fl} / {r['fcm']:,} of {r['fcm_of']} ({verdict}) | {'; '.join(r['warnings']) or '—'} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folders", nargs="+", type=Path)
    ap.add_argument("--reference", type=Path, help="a later torch's captures of the same models, for a torch "
                    "without FlopCounterMode (totals only)")
    ap.add_argument("--markdown", type=Path)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    rows = []
    for folder in a.folders:
        for p in sorted(folder.iterdir()):
            if p.name.endswith((".json", ".json.gz")) and not p.name.endswith(".flops.json"):
                rows.append(check(p, a.reference))
                r = rows[-1]
                print(f"{r['torch']:14} {r['trace']:20} rows {r['rows']:5} flops known {_pct(r['flops_known']):>6} "
                      f"bytes known {_pct(r['bytes_known']):>6} FCM: {r['agree']}; no FLOPs {r['no_flops']} "
                      f"warnings {r['warnings']}", file=sys.stderr, flush=True)
    text = render(rows)
    print(text)
    if a.markdown:
        a.markdown.write_text(text + "\n")
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""`predict --spec`'s op calls beside a real CPU run of the same configuration, for random configurations.

For each workload a seeded generator draws configurations (unusual but valid: odd sizes, few or many
experts, skewed routings, small graphs of every generator and backend). Each is listed as `--spec`
lists it (`predict.spec.record`, the meta device) and run on the CPU for real (`study.run_study`,
as `wlprof run` runs it). The run's profiled step goes through the same listing of the calls CUDA
launches (`spec.calls_of_trace`), so what differs is what the meta-device listing gets wrong: per
point the calls' names, input dims, dtypes, strides and scalars, the FLOPs and bytes `predict`
costs them with (`predict.calls.describe`, the point's facts included), the build facts (expert
counts, edges, degrees), and the step's FLOPs beside the run's own ops table.

    python benchmarks/spec_check.py --per 6 --seed 23 --out spec_check.md
"""

from __future__ import annotations

import argparse
import difflib
import glob
import json
import math
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

PROFILE = Path(__file__).parent / "profiles" / "h200" / "predictor.json"
FACTS = ("expert_counts", "capacity", "dropped_tokens", "edges", "nodes", "max_in_degree", "unique_destinations",
         "dst_sorted", "grouped_path")


def odd(rng, lo: int, hi: int) -> int:
    """A size in [lo, hi], log-uniform, odd or prime-ish more often than not."""
    v = int(round(math.exp(rng.uniform(math.log(lo), math.log(hi)))))
    return max(lo, min(hi, v + int(rng.integers(0, 2))))


def pick(rng, items, k: int | None = None):
    items = list(items)
    if k is None:
        return items[int(rng.integers(len(items)))]
    idx = rng.choice(len(items), size=min(k, len(items)), replace=False)
    return [items[i] for i in sorted(idx)]


GNN_BACKENDS = ("scatter", "index_add", "segment", "csr", "pyg:gcn", "pyg:gcn-csr", "pyg:sage", "pyg:sage-csr",
                "pyg:gat", "pyg:gat-csr")
GRAPHS = ("uniform", "rmat", "zipf:0.7", "zipf:2.2", "karate")
ROUTINGS = ("balanced", "dispersed", "concentrated", "concentrated:2", "zipf:0.3", "zipf:1.1", "zipf:2.5", "router",
            "explicit")


def draw(workload: str, rng, i: int) -> dict:
    """The `i`-th random configuration of `workload`, every parameter given (no default of the CPU or GPU).
    Half the draws are large enough that the listing holds their activations on the meta device (more than
    `spec.BIG` elements), half small enough that it holds them all for real; the MoE routings, GNN graphs
    and backends go round so that a few draws cover them all; a third of the draws are in bfloat16."""
    big = bool(rng.integers(0, 2))
    dtype = "bfloat16" if rng.integers(0, 3) == 0 else "float32"
    s = 4 if big else 1  # sizes' upper bounds

    if workload == "gemm":
        shapes = ",".join(f"{odd(rng, 1, 150 * s)}x{odd(rng, 1, 150 * s)}x{odd(rng, 1, 150 * s)}"
                          for _ in range(int(rng.integers(1, 3))))
        return {"shapes": shapes, "layout": pick(rng, ("nn", "nt", "linear")), "dtype": dtype}
    if workload == "mlp":
        return {"batch": sorted({odd(rng, 1, 100 * s) for _ in range(int(rng.integers(1, 3)))}),
                "d_model": odd(rng, 2, 100 * s), "d_ff": odd(rng, 2, 300 * s),
                "activation": pick(rng, ("gelu", "relu", "silu")), "dtype": dtype}
    if workload == "elementwise":
        ops = pick(rng, ("copy", "relu", "gelu", "silu", "mul", "add", "dot", "matvec", "matmul"),
                   int(rng.integers(2, 6)))
        return {"ops": ops, "numel": [odd(rng, 3, 60_000 * s * s)], "matvec_n": [odd(rng, 2, 200 * s)],
                "matmul_n": [odd(rng, 2, 100 * s)], "dtype": dtype}
    if workload == "moe":
        experts = int(rng.integers(1, 24))
        top_k = int(rng.integers(1, min(experts, 4) + 1))
        tokens = odd(rng, 1, 150 * s)
        routing = ROUTINGS[i % len(ROUTINGS)]
        if routing == "concentrated:2" and experts < 2:
            routing = "balanced"
        if routing == "explicit":  # every assignment on the experts given, none past the tokens
            total, counts = tokens * top_k, []
            while total > 0 and len(counts) < experts:
                c = min(total, tokens, int(rng.integers(1, tokens + 1)))
                counts.append(c)
                total -= c
            if total > 0:
                routing = "balanced"
            else:
                routing = "explicit:" + "+".join(f"1x{c}" for c in counts)
        return {"tokens": tokens, "experts": experts, "top_k": top_k, "routing": routing,
                "dispatch": ["loop", "padded", "grouped"], "d_model": 4 * odd(rng, 1, 24 * s),
                "d_ff": 4 * odd(rng, 1, 40 * s), "ffn": pick(rng, ("swiglu", "gelu")),
                "capacity_factor": round(float(rng.uniform(0.3, 2.5)), 2), "seed": int(rng.integers(0, 1000)),
                "dtype": dtype}
    if workload == "gnn":
        backends = sorted({GNN_BACKENDS[(2 * i) % 10], GNN_BACKENDS[(2 * i + 1) % 10], pick(rng, GNN_BACKENDS)})
        sums_only = any(b.startswith(("pyg:gcn", "pyg:gat")) for b in backends)
        red = "sum" if sums_only else pick(rng, ("sum", "mean") if any(b in ("index_add", "csr")
                                                                      for b in backends) else ("sum", "mean", "max"))
        csr = any("csr" in b for b in backends)  # the CPU's sparse mm has no bfloat16
        return {"graph": GRAPHS[i % len(GRAPHS)], "dtype": "float32" if csr else dtype,
                "scale": int(rng.integers(9, 13) if big else rng.integers(3, 9)),
                "edge_factor": int(rng.integers(1, 13)),
                "features": [odd(rng, 1, 40 * s)], "backend": backends, "reduction": [red],
                "transform": bool(rng.integers(0, 2)), "seed": int(rng.integers(0, 1000))}
    if workload == "optim":
        return {"optimizer": pick(rng, ("adamw", "adam", "sgd"), int(rng.integers(1, 3))),
                "impl": pick(rng, ("foreach", "fused"), int(rng.integers(1, 3))),
                "tensors": [odd(rng, 1, 45)], "numel": [odd(rng, 1, 20_000 * s * s)], "dtype": dtype}
    raise ValueError(workload)


def spec_text(workload: str, params: dict) -> str:
    def val(v):
        if isinstance(v, bool):
            return str(v).lower()
        if isinstance(v, list):
            return ",".join(str(x) for x in v)
        return str(v)

    return " ".join([workload, *(f"{k}={val(v)}" for k, v in params.items())])


def split(params: dict):
    """(the workload's parameters, the torch dtype) of a drawn configuration."""
    import torch

    rest = dict(params)
    return rest, getattr(torch, rest.pop("dtype"))


def valid(workload: str, params: dict) -> str | None:
    """None if the CLI accepts the configuration on the CPU, else its refusal."""
    from wlprof.errors import InputError
    from wlprof.study import Study, prepare

    rest, dtype = split(params)
    try:
        prepare(Study(workload=workload, params=rest, device="cpu", dtype=str(dtype).split(".")[1]))
    except InputError as exc:
        return str(exc)
    return None


def described(ops: pd.DataFrame) -> pd.DataFrame:
    """The calls with predict's FLOPs and bytes."""
    from wlprof.predict.calls import describe

    if ops.empty:
        return ops.assign(flops=[], bytes=[])
    d = describe(ops.reset_index(drop=True))
    return ops.reset_index(drop=True).assign(flops=d.flops.to_numpy(), bytes=d.bytes.to_numpy(),
                                             cls=d.cls.to_numpy())


def real(workload: str, params: dict, launching: frozenset, root: Path):
    """{variant: (calls as CUDA launches them, the run's ops table of that step, facts)} of a CPU run."""
    import torch

    from wlprof import workloads
    from wlprof.capture import CaptureConfig
    from wlprof.params import parse_all
    from wlprof.predict.spec import _without_host_step_reads, calls_and_left_out
    from wlprof.study import Study, run_study

    cfg = CaptureConfig(warmup=1, latency_reps=1, batches=1, min_batch_ms=1.0, profiled_steps=1,
                        graph=False)
    rest, dtype = split(params)
    res = run_study(Study(workload=workload, params=rest, device="cpu", dtype=str(dtype).split(".")[1],
                          capture=cfg), traces=root, command="spec_check")
    table = __import__("wlprof").load(res.path, table="ops")
    wl = workloads.get(workload)
    points = wl.points(wl.spec(parse_all(wl.params, rest, "cpu", wl.name), torch.device("cpu"), dtype).spec)
    out = {}
    for i, point in enumerate(points):
        with torch.no_grad():
            wl.prepare(point, torch.device("cpu"))
        built = wl.build(point, torch.device("cpu"), dtype)  # the tensor lists of the step's list ops
        path = sorted(glob.glob(str(res.path / "_chrome" / f"p{i:03d}-*.json.gz")))
        path = [p for p in path if not p.endswith(".raw.json.gz")][0]
        calls, left = calls_and_left_out(path, launching, built.tensor_lists)
        step = calls.trace_step.min()
        calls = _without_host_step_reads(calls[calls.trace_step == step].drop(columns="trace_step")
                                         .reset_index(drop=True))
        left = sorted(left[left.trace_step == step].op_name)  # CPU work no listed call covers
        t = table[table.point == i]
        t = t[t.step == t.step.min()]
        calls["dtype"] = str(dtype).split(".")[1]  # as the listing's rows carry it (a list's element size)
        for k, v in {**point.params, **built.facts}.items():
            calls[k] = [v] * len(calls) if isinstance(v, list) else v
        out[point.variant] = (calls, t, built.facts, left)
    return out


def same_fact(x, y) -> bool:
    """Two values of a fact equal as numbers where they are numbers (a column's 1.0 is a fact's 1)."""
    def norm(v):
        if isinstance(v, (list, tuple, np.ndarray)):
            return [norm(e) for e in v]
        try:
            return float(v)
        except (TypeError, ValueError):
            return str(v)

    return norm(x) == norm(y)


def key(row) -> tuple:
    return (row.op_name, row.op_input_dims, row.op_input_types)


def compare(spec_ops: pd.DataFrame, run_calls: pd.DataFrame) -> dict:
    """Per point: the calls only one side has, and the matched calls whose strides, scalars, FLOPs or bytes
    differ."""
    a, b = described(spec_ops), described(run_calls)
    ka = [key(r) for r in a.itertuples()]
    kb = [key(r) for r in b.itertuples()]
    sm = difflib.SequenceMatcher(a=kb, b=ka, autojunk=False)
    missing, extra, differ, scalars = [], [], [], []
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            for i, j in zip(range(i1, i2), range(j1, j2), strict=True):
                ra, rb = a.iloc[j], b.iloc[i]
                what = []
                if str(ra.op_input_strides) != str(rb.op_input_strides):
                    what.append(f"strides: spec {ra.op_input_strides} run {rb.op_input_strides}")
                if str(ra.op_concrete_inputs) != str(rb.op_concrete_inputs):
                    if float_lists_only(ra.op_concrete_inputs, rb.op_concrete_inputs):
                        scalars.append(ra.op_name)  # an optimizer's per-step values (lr / bias correction)
                    else:
                        what.append(f"scalars: spec {ra.op_concrete_inputs} run {rb.op_concrete_inputs}")
                what += cost_differences(ra, rb)
                if what:
                    differ.append((ra.op_name, ra.op_input_dims, "; ".join(what)))
            continue
        missing += [(b.op_name.iat[i], b.op_input_dims.iat[i], b.op_input_types.iat[i]) for i in range(i1, i2)]
        extra += [(a.op_name.iat[j], a.op_input_dims.iat[j], a.op_input_types.iat[j]) for j in range(j1, j2)]
    tot = {f"{s}_{c}": float(np.nansum(df[c].to_numpy(dtype=float))) for s, df in (("spec", a), ("run", b))
           for c in ("flops", "bytes")}
    return {"spec_calls": len(a), "run_calls": len(b), "missing": missing, "extra": extra, "differ": differ,
            "scalars_only": scalars, **tot}


def cost_differences(a, b, names=("spec", "run")) -> list[str]:
    """'flops: spec X run Y' for the FLOPs and bytes where two described calls differ (NaN equals NaN)."""
    out = []
    for col in ("flops", "bytes"):
        x, y = float(a[col]), float(b[col])
        if not (x == y or (math.isnan(x) and math.isnan(y))):
            out.append(f"{col}: {names[0]} {x:,.0f} {names[1]} {y:,.0f}")
    return out


def float_lists_only(x, y) -> bool:
    """Whether two recorded scalar lists differ only in the values of their scalar lists (same positions)."""
    try:
        a, b = json.loads(x), json.loads(y)
    except (TypeError, ValueError):
        return False
    if len(a) != len(b):
        return False
    for u, v in zip(a, b, strict=True):
        if u != v and not (str(u).startswith("[") and str(v).startswith("[") and u.count(",") == v.count(",")):
            return False
    return True


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per", type=int, default=6, help="configurations per workload")
    ap.add_argument("--seed", type=int, default=23)
    ap.add_argument("--workloads", default="gemm,mlp,elementwise,moe,gnn,optim")
    ap.add_argument("--out", type=Path, required=True, help="markdown report")
    ap.add_argument("--json", type=Path, help="every comparison, as JSON")
    args = ap.parse_args()

    from wlprof.predict.spec import parse_spec, record

    launching = frozenset(json.loads(PROFILE.read_text())["predictor"]["meta"]["op_names"])
    rng = np.random.default_rng(args.seed)
    results, refused = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for workload in args.workloads.split(","):
            got, tries = 0, 0
            while got < args.per and tries < 10 * args.per:
                tries += 1
                params = draw(workload, rng, got)
                why = valid(workload, params)
                if why:
                    refused.append((workload, params, why))
                    continue
                got += 1
                text = spec_text(workload, params)
                t0 = time.perf_counter()
                listed = record(parse_spec(text), launching=launching)
                t1 = time.perf_counter()
                ran = real(workload, params, launching, Path(tmp))
                for variant, g in listed.groupby("variant", sort=False):
                    calls, table, facts, left = ran[variant]
                    row = {"workload": workload, "spec": text, "variant": variant, **compare(g, calls),
                           "table_flops": float(table.flops.sum()), "table_calls": len(table),
                           "spec_s": t1 - t0, "left_out": left}
                    fact_diff = []
                    for f in FACTS:
                        if f in g and f in facts:
                            x, y = g[f].iat[0], facts[f]
                            if not same_fact(x, y):
                                fact_diff.append(f"{f}: spec {x} run {y}")
                    row["facts"] = fact_diff
                    results.append(row)
                    flag = "ok" if not (row["missing"] or row["extra"] or row["differ"] or fact_diff) else "DIFF"
                    print(f"{flag} {workload} {variant}: {row['spec_calls']} / {row['run_calls']} calls", flush=True)
    if args.json:
        args.json.write_text(json.dumps({"results": results, "refused": refused}, indent=1, default=str))
    args.out.write_text(report(results, refused, args))
    print(args.out.read_text())


def report(results: list[dict], refused: list, args) -> str:
    lines = [f"Seed {args.seed}, {args.per} configurations per workload ({len(refused)} drawn and refused at "
             "parse, redrawn).", "",
             "| workload | spec | point | calls spec / run | missing | extra | matched but differ | scalar lists only | facts | "
             "FLOPs spec / run | bytes spec / run | FLOPs of the run's ops table | run's work no call covers |",
             "|---|---|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---|"]
    for r in results:
        lines.append(f"| {r['workload']} | `{r['spec']}` | {r['variant']} | {r['spec_calls']} / {r['run_calls']} | "
                     f"{len(r['missing'])} | {len(r['extra'])} | {len(r['differ'])} | {len(r['scalars_only'])} | "
                     f"{'; '.join(r['facts']) or '-'} | {r['spec_flops']:,.0f} / {r['run_flops']:,.0f} | "
                     f"{r['spec_bytes']:,.0f} / {r['run_bytes']:,.0f} | {r['table_flops']:,.0f} | "
                     f"{', '.join(sorted(set(r['left_out']))) or '-'} |")
    lines += ["", "## Differences, call by call", ""]
    for r in results:
        if not (r["missing"] or r["extra"] or r["differ"]):
            continue
        lines.append(f"- {r['workload']} `{r['spec']}`, {r['variant']}:")
        for name, dims, types in r["missing"][:8]:
            lines.append(f"  - only in the run: {name} {dims} {types}")
        for name, dims, types in r["extra"][:8]:
            lines.append(f"  - only in the spec: {name} {dims} {types}")
        for name, dims, what in r["differ"][:8]:
            lines.append(f"  - {name} {dims}: {what}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()

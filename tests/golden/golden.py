"""The golden comparison: a fixed CPU study and two ingests, reduced to what does not depend on timing.

`python tests/golden/golden.py` rewrites the golden files (commit them with the reason);
`tests/integration/test_golden.py` runs the same study and compares; `--digests` rewrites only
`ingest_digests.json`, the whole tables (timings included) of a few ingested traces, which
`tests/integration/test_ingest_digests.py` compares. Kept are the
tables' columns and Arrow types, and every value that is a function of the code
and the recorded shapes: op names, shapes, regions, FLOPs, bytes and their sources,
parameters and workload facts. Dropped are times and what is derived from them
(durations, rates, cost shares, roofline placement against this machine's ceilings)
and ids that depend on the process (run ids, External ids, correlations).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
REPO = HERE.parent.parent
FIXTURES = REPO / "tests" / "fixtures"

FAST = ["--steps", "2", "--warmup", "1", "--reps", "3", "-q", "--device", "cpu"]
STUDY = [
    ["gemm", "--shapes", "16x32x64,1x32x256"],
    ["mlp", "--batch", "1,4", "--d-model", "32", "--d-ff", "64"],
    ["elementwise", "--ops", "copy,relu,gelu,mul,dot,matvec,matmul", "--numel", "4096", "--matvec-n", "64",
     "--matmul-n", "32"],
    ["moe", "--routing", "concentrated,balanced", "--dispatch", "loop,padded,grouped", "--tokens", "16",
     "--experts", "4", "--top-k", "2", "--d-model", "32", "--d-ff", "64"],
    ["gnn", "--graph", "karate,rmat", "--scale", "6", "--features", "8",
     "--backend", "scatter,index_add,segment,csr,pyg:gcn,pyg:sage"],
]
INGESTS = [
    FIXTURES / "h200" / "moe-20261129-094804-ffc6" / "_chrome" / "p000-dispersed-loop.raw.json.gz",
    FIXTURES / "h200_probe_ops.json.gz",
]
TRACES_OPTION = "--traces"  # the option naming the traces folder
# Traces whose ingested tables are kept whole, timings included, as one digest per column: a
# rank folder, the NCCL trace the benchmark's rank folder is made of, a training step, graph replays.
PUBLIC = FIXTURES / "public"
DIGESTED = [PUBLIC / "hta_2023_two_ranks", PUBLIC / "hta_2024_nccl.json.gz", *INGESTS,
            FIXTURES / "h200_training" / "transformer_eager.pt.trace.json.gz",
            PUBLIC / "tracelens_mi300_hip_graph.json.gz"]
DIGESTS = HERE / "ingest_digests.json"
# what names the run or the place of its input, not its content
PLACE = {"run_id", "source_file"}

# Columns whose values depend on timing, this machine's ceilings or the process.
VOLATILE = {
    "run_id", "source_file", "ts_us", "dur_us", "cpu_dur_us", "cost_share", "achieved_tflops", "achieved_gbps",
    "ceiling_tflops", "ceiling_gbps", "ridge_flop_per_byte", "bound", "roofline_us", "roofline_fraction",
    "external_id", "correlation", "latency_us", "latency_p10_us", "latency_p90_us", "latency_samples_us",
    "back_to_back_us", "back_to_back_samples_us", "calls_per_batch", "graph_us", "graph_error", "kernel_us",
    "kernel_busy_us", "host_overhead_us", "unknown_time_share", "bytes_unknown_time_share", "achieved_tflops_latency",
    "achieved_tflops_useful", "achieved_tflops_executed", "sm_clock_mhz_start", "sm_clock_mhz_end",
    "roof", "compute_roof", "memory_roof", "roof_note", "working_set_bytes",
    "timing_spread", "timing_spread_of", "noisy",
}
# On a workload-costed row (its region's cost split by duration) FLOPs and bytes are timing too;
# their sums per step and region are not.
SPLIT = ("flops", "bytes", "bytes_written", "intensity_flop_per_byte")


def run_all(tmp: Path, invoke) -> dict[str, Path]:
    """Run the study and the ingests into folders under `tmp` with `invoke(args) -> exit code`."""
    roots = {}
    for args in STUDY:
        root = tmp / args[0]
        code = invoke(["run", *args, *FAST, TRACES_OPTION, str(root)])
        if code != 0:
            raise RuntimeError(f"wlprof run {' '.join(args)} exited {code}")
        roots[args[0]] = root
    for path in INGESTS:
        root = tmp / f"ingest-{path.name.split('.')[0]}"
        code = invoke(["ingest", str(path), TRACES_OPTION, str(root), "-q"])
        if code != 0:
            raise RuntimeError(f"wlprof ingest {path} exited {code}")
        roots[root.name] = root
    return roots


def _rounded(text):
    """A recorded scalar list with its non-integer numbers to 4 significant digits (a scalar computed from
    the data, e.g. a reduction's result, differs in its last bits between CPUs' summation orders)."""
    if not isinstance(text, str) or not text.startswith("["):
        return text
    try:
        values = json.loads(text)
    except ValueError:
        return text

    def r(v):
        try:
            f = float(v)
        except (TypeError, ValueError):
            return v
        return v if f == int(f) or not np.isfinite(f) else f"{f:.4g}"

    return json.dumps([r(v) for v in values], separators=(",", ":")) if isinstance(values, list) else text


def machine_free(df):
    """The table without what depends on the machine: the CPU's model name (a CPU run is named after the
    machine it ran on) and the last bits of scalars computed from the data."""
    df = df.copy()
    if "device_name" in df and "device_type" in df:
        df.loc[df.device_type == "cpu", "device_name"] = "(this CPU)"
    if "op_concrete_inputs" in df:
        df["op_concrete_inputs"] = df.op_concrete_inputs.map(_rounded)
    return df


def reduce(root: Path) -> dict:
    """The timing-free content of every table of the one run under `root`."""
    import pandas as pd
    import pyarrow.parquet as pq

    import wlprof

    out = {}
    for table in ("kernels", "ops", "steps"):
        df = wlprof.load(root, table=table)
        sub = {"kernels": "", "ops": "_ops", "steps": "_steps"}[table]
        files = sorted((next(p for p in root.iterdir() if p.is_dir()) / sub).glob("*.parquet"))
        schema = pq.read_schema(files[0])
        out[f"{table}_schema"] = [[f.name, str(f.type)] for f in schema]
        order = [c for c in ("point", "step", "ts_us") if c in df]
        df = df.sort_values(order, kind="stable").reset_index(drop=True)
        if table != "steps" and "flops_source" in df:
            stated = df.flops_source == "workload"
            summed = [c for c in ("flops", "bytes", "bytes_written") if c in df]
            sums = (df[stated].groupby(["point", "step", "region"])[summed].sum(min_count=1).reset_index()
                    if stated.any() else pd.DataFrame(columns=["point", "step", "region", *summed]))
            out[f"{table}_workload_sums"] = sums
            df.loc[stated, list(SPLIT)] = float("nan")
        df = machine_free(df).drop(columns=[c for c in df.columns if c in VOLATILE])
        for c in df.columns:  # nullable integers (schema 2.3's pandas metadata) as the floats they were stored as
            if pd.api.types.is_integer_dtype(df[c].dtype) and isinstance(df[c].dtype, pd.api.extensions.ExtensionDtype):
                df[c] = df[c].astype("float64")
        for c in df.columns:  # list columns as compact JSON, comparable and storable in any version
            if df[c].dtype == object and df[c].map(lambda v: hasattr(v, "__len__") and not isinstance(v, str)).any():
                df[c] = df[c].map(lambda v: None if v is None else json.dumps([int(x) for x in v],
                                                                               separators=(",", ":")))
        out[table] = df[[c for c in df.columns if df[c].notna().any()]]  # presence: the schema lists
    return out


def _canonical(v):
    """A value as JSON can hold it exactly (arrays as lists, numpy scalars as Python ones)."""
    if hasattr(v, "tolist"):
        return v.tolist()
    if isinstance(v, (list, tuple)):
        return [_canonical(x) for x in v]
    return v


def digests(root: Path) -> dict[str, dict]:
    """Per table of the one run under `root`: its row count, its columns without a value (with their dtypes),
    and per other column the SHA-256 of its dtype and its values in row order."""
    import hashlib

    import wlprof

    out = {}
    for table in ("kernels", "ops", "steps", "overlap", "collectives"):
        df = wlprof.load(root, table=table)
        cols, empty = {}, []
        for c in sorted(set(df.columns) - PLACE) if len(df) else ():
            if df[c].isna().all():  # named, not hashed: most tables carry many columns no trace fills
                empty.append(f"{c}: {df[c].dtype}")
                continue
            values = [_canonical(v) for v in df[c].tolist()]
            text = json.dumps([str(df[c].dtype), values], default=repr, allow_nan=True)
            cols[c] = hashlib.sha256(text.encode()).hexdigest()[:16]
        out[table] = {"rows": len(df), "empty": empty, **cols}
    return out


def ingest_digests(tmp: Path) -> dict[str, dict]:
    """`digests` of each DIGESTED trace, ingested under `tmp`."""
    from wlprof.ingest import ingest

    out = {}
    for path in DIGESTED:
        run = ingest(path, tmp / path.name)
        out[path.relative_to(FIXTURES).as_posix()] = digests(run.path)
    return out


def write(tmp: Path) -> None:
    from typer.testing import CliRunner

    from wlprof.cli.main import app

    runner = CliRunner()

    def invoke(args):
        res = runner.invoke(app, args)
        if res.exit_code != 0:
            print(res.output, file=sys.stderr)
        return res.exit_code

    roots = run_all(tmp, invoke)
    manifest = {}
    for name, root in roots.items():
        for key, value in reduce(root).items():
            if key.endswith("_schema"):
                manifest[f"{name}/{key}"] = value
            else:
                value.to_parquet(HERE / f"{name}-{key}.parquet", index=False)
    (HERE / "schemas.json").write_text(json.dumps(manifest, indent=1) + "\n")


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        if sys.argv[1:] == ["--digests"]:  # only the ingests' digests
            DIGESTS.write_text(json.dumps(ingest_digests(Path(d)), indent=1, sort_keys=True) + "\n")
        else:
            write(Path(d))
    print(f"wrote the golden files under {HERE}")

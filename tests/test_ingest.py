"""wlprof ingest: the same parser, join and costs for any torch.profiler trace; bad input refused cleanly."""

from __future__ import annotations

import gzip
import json
import shutil

import pandas as pd
import pytest
from conftest import FIXTURES, h200_manifest, h200_run
from typer.testing import CliRunner

import wlprof
from wlprof import pipeline
from wlprof.cli.main import app
from wlprof.trace.parse import read_trace

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def listing(path):
    return sorted(str(p.relative_to(path)) for p in path.rglob("*")) if path.exists() else []


def _raw(prefix="moe", point=0):
    m = h200_manifest(prefix)
    return h200_run(prefix) / m["points"][point]["files"]["raw_chrome"]


def test_ingest_matches_a_direct_parse_and_keeps_unknowns(tmp_path):
    raw = _raw("moe")  # dispersed / loop: the host-syncing nonzero and where (nonzero's count read from the trace)
    out = tmp_path / "traces"
    res = invoke("ingest", raw, "--traces", out, "--name", "moe-h200", "--chrome-top", "20")
    assert res.exit_code == 0, res.output
    assert "has no FLOP formula" in res.output
    k = pd.read_parquet(out)
    assert (k.workload == "ingest").all() and (k["rank"] == 0).all() and k.run_id.iloc[0].startswith("moe-h200-")
    assert k.source_file.iloc[0] == str(raw) and (k.device_name == "NVIDIA H200").all()
    _c = pipeline.costed(read_trace(raw), None)
    direct, _ = _c.kernels, _c.ops
    assert len(k) == len(direct)
    assert k.flops.sum() == pytest.approx(direct.flops.sum())
    assert set(k.flops_source) <= {"formula", "unknown"} and (k.op_name == "aten::nonzero").any()
    # the small enriched trace: the 20 longest kernels, with their launches and ops
    run = next(out.iterdir())
    manifest = json.loads((run / "_manifest.json").read_text())
    doc = json.loads(gzip.decompress((run / manifest["points"][0]["files"]["chrome"]).read_bytes()))
    kernels = [e for e in doc["traceEvents"] if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    assert len(kernels) == 20 and all("flops source" in e["args"] for e in kernels)
    cats = {e.get("cat") for e in doc["traceEvents"]}
    assert cats >= {"cpu_op", "kernel", "user_annotation"} and cats & {"cuda_runtime", "cuda_driver"}
    launches = [e for e in doc["traceEvents"] if e.get("cat") in ("cuda_runtime", "cuda_driver")]
    assert {e["args"]["correlation"] for e in kernels} <= {e["args"]["correlation"] for e in launches}


def test_ingest_a_folder_of_ranks(tmp_path):
    src = tmp_path / "run"
    src.mkdir()
    doc = json.loads(gzip.decompress(_raw("gemm").read_bytes()))
    for rank in (1, 0):
        doc["distributedInfo"] = {"rank": rank, "world_size": 2}
        (src / f"host_{rank}.pt.trace.json").write_text(json.dumps(doc))
    out = tmp_path / "traces"
    res = invoke("ingest", src, "--traces", out, "--name", "llama-train", "-q")
    assert res.exit_code == 0, res.output
    k = wlprof.load(out, workload="ingest")
    assert sorted(k["rank"].unique()) == [0, 1] and set(k.variant) == {"rank 0", "rank 1"}
    steps = wlprof.load(out, table="steps")
    assert len(steps) == 2 and steps.latency_us.isna().all() and steps.kernel_us.gt(0).all()


def test_ingest_cpu_trace_of_another_torch(tmp_path):
    # torch 2.13 on the CPU (tests/fixtures/cpu) beside the H200's 2.11: the same parser
    run = next((FIXTURES / "cpu").iterdir())
    raw = next((run / "_chrome").glob("*.raw.json.gz"))
    out = tmp_path / "traces"
    assert invoke("ingest", raw, "--traces", out, "-q").exit_code == 0
    k = pd.read_parquet(out)
    assert (k.kind == "cpu_op").all() and (k.device_type == "cpu").all()
    assert {"aten::addmm", "aten::gelu"} <= set(k.name)
    # batch 4, 64 -> 256 -> 64: 2*2*4*64*256 + 20*4*256 = 262,144 + 20,480 = 282,624 FLOPs per step
    assert k.groupby("step").flops.sum().tolist() == [282_624] * 2


@pytest.mark.parametrize(("content", "needle"), [
    (b"", "is empty"),
    (b"   \n", "is empty"),
    (b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur"', "invalid JSON at byte"),
    (b'{"schemaVersion": 1, "events": []}', "not a Chrome trace"),
    (b'{"traceEvents": [{"ph": "X", "cat": "gpu_op", "name": "draw", "ts": 1, "dur": 2}]}',
     "not a torch.profiler trace"),
    (b"\x1f\x8b\x08\x00garbage-not-deflate", "not a readable gzip file"),
    (b"\xff\xfe{}", "invalid JSON"),
])
def test_bad_traces_are_refused_and_the_store_is_untouched(tmp_path, content, needle):
    out = tmp_path / "traces"
    ok = invoke("ingest", _raw("gemm"), "--traces", out, "-q")  # something already in the store
    assert ok.exit_code == 0
    before = listing(out)
    bad = tmp_path / "bad.json.gz"
    bad.write_bytes(content)
    res = invoke("ingest", bad, "--traces", out)
    assert res.exit_code == 2, res.output
    assert needle in res.output and str(bad) in res.output
    assert listing(out) == before  # no half-written run, nothing else touched


def test_truncated_gzip_names_the_file(tmp_path):
    full = _raw("gemm").read_bytes()
    bad = tmp_path / "cut.json.gz"
    bad.write_bytes(full[: len(full) // 2])
    res = invoke("ingest", bad, "--traces", tmp_path / "t")
    assert res.exit_code == 2 and str(bad) in res.output
    assert listing(tmp_path / "t") == []


def test_a_folder_with_one_bad_file_writes_nothing(tmp_path):
    src = tmp_path / "run"
    src.mkdir()
    shutil.copy(_raw("gemm"), src / "a.json.gz")
    (src / "b.json").write_text('{"traceEvents": [')
    out = tmp_path / "traces"
    res = invoke("ingest", src, "--traces", out)
    assert res.exit_code == 2 and "b.json" in res.output
    assert [p for p in listing(out) if not p.startswith(".wlprof")] == []


def test_missing_path_and_empty_folder(tmp_path):
    res = invoke("ingest", tmp_path / "nope.json", "--traces", tmp_path / "t")
    assert res.exit_code == 2 and "PATH must be an existing trace file or folder" in res.output
    (tmp_path / "empty").mkdir()
    res = invoke("ingest", tmp_path / "empty", "--traces", tmp_path / "t")
    assert res.exit_code == 2 and "*.json" in res.output
    res = invoke("ingest", _raw("gemm"), "--traces", tmp_path / "t", "--chrome-top", "0")
    assert res.exit_code == 2 and "--chrome-top" in res.output


def test_streamed_and_whole_parses_agree(tmp_path):
    # the chunked reader (events one per indented block) and the whole-file parse of the same
    # events written minified must give the same tables
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
    from big_trace import replicate

    import wlprof.trace.parse as P

    lines, compact = tmp_path / "lines.json", tmp_path / "compact.json"
    old = P.CHUNK_BYTES
    P.CHUNK_BYTES = 4096  # many chunks even for a small trace
    try:
        replicate(_raw("moe"), lines, 3000)
        replicate(_raw("moe"), compact, 3000, compact=True)
        a = P.read_trace(lines, keep_events=False)
        b = P.read_trace(compact, keep_events=False)
    finally:
        P.CHUNK_BYTES = old
    assert a.event_count == b.event_count == 3000
    for name in ("ops", "annotations", "launches", "device"):
        pd.testing.assert_frame_equal(getattr(a, name).drop(columns=["args_id"], errors="ignore"),
                                      getattr(b, name).drop(columns=["args_id"], errors="ignore"))
    assert [a.args_table[i] for i in a.ops.args_id] == [b.args_table[i] for i in b.ops.args_id]

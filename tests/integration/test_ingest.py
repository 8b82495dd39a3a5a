"""wlprof ingest: the same parser, join and costs for any torch.profiler trace; bad input refused cleanly."""

from __future__ import annotations

import gzip
import json
import re
import shutil

import pandas as pd
import pytest
from conftest import FIXTURES, files_under, h200_manifest, h200_run

import wlprof
from wlprof.errors import TraceFormatError

DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def _raw(prefix="moe", point=0):
    m = h200_manifest(prefix)
    return h200_run(prefix) / m["points"][point]["files"]["raw_chrome"]


def _events(path):
    return json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]


def _by_step_from_json(events) -> dict[int, list[dict]]:
    """Device activities per profiled step, straight from the JSON (none of wlprof's parser or join):
    an activity's launch (the runtime/driver event of its correlation id) lies inside the
    `wlprof/step#N` annotation of its step."""
    steps = [(e["ts"], e["ts"] + e["dur"], int(e["name"].split("#")[1])) for e in events
             if e.get("cat") == "user_annotation" and e.get("name", "").startswith("wlprof/step#")]
    launch_ts = {e["args"]["correlation"]: e["ts"] for e in events
                 if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    out: dict[int, list[dict]] = {}
    for e in events:
        if e.get("cat") in DEVICE_CATS:
            ts = launch_ts[e["args"]["correlation"]]
            (step,) = [n for a, b, n in steps if a <= ts <= b]
            out.setdefault(step, []).append(e)
    return out


def test_ingest_keeps_every_device_activity_and_counts_gemms_by_hand(tmp_path, cli):
    raw = _raw("moe")  # dispersed / loop: the host-syncing nonzero and where (nonzero's count read from the trace)
    out = tmp_path / "traces"
    res = cli("ingest", raw, "--traces", out, "--name", "moe-h200", "--chrome-top", "20")
    assert res.exit_code == 0, res.output
    assert "has no FLOP formula" in res.output
    k = pd.read_parquet(out)
    assert (k.workload == "ingest").all() and (k["rank"] == 0).all() and k.run_id.iloc[0].startswith("moe-h200-")
    assert k.source_file.iloc[0] == str(raw) and (k.device_name == "NVIDIA H200").all()
    # an independent read of the same JSON: 254 kernels + 20 memcpys = 274 activities, 552.256 us
    events = _events(raw)
    device = [e for e in events if e.get("cat") in DEVICE_CATS]
    assert len(k) == len(device) == 274
    assert k.dur_us.sum() == pytest.approx(sum(e["dur"] for e in device)) == pytest.approx(552.256)
    per_step = _by_step_from_json(events)
    assert sorted(per_step) == [1, 2]
    got = k.groupby("step").dur_us.sum().to_dict()
    assert got == pytest.approx({s: sum(e["dur"] for e in evs) for s, evs in per_step.items()})
    # GEMM FLOPs by hand from the recorded shapes: every aten::mm [M, K] x [K, N] is 2*M*K*N,
    # e.g. the router's [16, 512] x [512, 8] = 2*16*512*8 = 131,072
    mms = [e for e in events if e.get("cat") == "cpu_op" and e.get("name") == "aten::mm"]
    assert len(mms) == 50 and mms[0]["args"]["Input Dims"] == [[16, 512], [512, 8]]
    hand = sum(2 * a[0] * a[1] * b[1] for a, b in (e["args"]["Input Dims"] for e in mms))
    assert k[k.op_name == "aten::mm"].flops.sum() == pytest.approx(hand)
    assert set(k.flops_source) <= {"formula", "unknown"} and (k.op_name == "aten::nonzero").any()
    nonzero = k[k.op_name == "aten::nonzero"]
    assert (nonzero.flops_source == "formula").all()  # its output count is read from the nested resize_
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


def test_ingest_a_folder_of_ranks(tmp_path, cli):
    src = tmp_path / "run"
    src.mkdir()
    doc = json.loads(gzip.decompress(_raw("gemm").read_bytes()))
    for rank in (1, 0):
        doc["distributedInfo"] = {"rank": rank, "world_size": 2}
        (src / f"host_{rank}.pt.trace.json").write_text(json.dumps(doc))
    out = tmp_path / "traces"
    res = cli("ingest", src, "--traces", out, "--name", "llama-train", "-q")
    assert res.exit_code == 0, res.output
    k = wlprof.load(out, workload="ingest")
    assert sorted(k["rank"].unique()) == [0, 1] and set(k.variant) == {"rank 0", "rank 1"}
    steps = wlprof.load(out, table="steps")
    assert len(steps) == 2 and steps.latency_us.isna().all()
    # kernel_us: the median over the 2 profiled steps of each step's summed durations, i.e. their
    # mean, from the JSON directly; both ranks carry the same events
    per_step = [sum(e["dur"] for e in evs) for evs in _by_step_from_json(doc["traceEvents"]).values()]
    assert len(per_step) == 2
    assert steps.kernel_us.tolist() == pytest.approx([sum(per_step) / 2] * 2)
    # the gemm fixture's point 0 is 256x512x1024: 2*256*512*1024 = 268,435,456 FLOPs a step
    assert steps.flops.tolist() == [268_435_456] * 2
    shown = cli("show", k.run_id.iloc[0], "--traces", out)
    assert shown.exit_code == 0, shown.output
    assert "│ rank 0 " in shown.output and "rank 0 (rank 0)" not in shown.output  # the rank said once


def test_two_captures_of_the_same_ranks_get_distinct_variants(tmp_path, cli):
    # a folder of 2 captures x 2 ranks: every point is "rank 0" or "rank 1", so each duplicate is named
    # after its file, in the kernels, ops and steps tables and in the manifest
    src = tmp_path / "run"
    src.mkdir()
    doc = json.loads(gzip.decompress(_raw("gemm").read_bytes()))
    for capture in ("a", "b"):
        for rank in (0, 1):
            doc["distributedInfo"] = {"rank": rank, "world_size": 2}
            (src / f"{capture}_{rank}.pt.trace.json").write_text(json.dumps(doc))
    doc["distributedInfo"] = {"rank": 2, "world_size": 3}  # a rank captured once keeps its plain name
    (src / "c_2.pt.trace.json").write_text(json.dumps(doc))
    out = tmp_path / "traces"
    assert cli("ingest", src, "--traces", out, "-q").exit_code == 0
    want = {"rank 0 (a_0.pt.trace.json)", "rank 1 (a_1.pt.trace.json)", "rank 0 (b_0.pt.trace.json)",
            "rank 1 (b_1.pt.trace.json)", "rank 2"}
    for table in ("kernels", "ops", "steps"):
        assert set(wlprof.load(out, table=table).variant) == want, table
    run = next(p for p in out.iterdir() if p.is_dir())
    manifest = json.loads((run / "_manifest.json").read_text())
    assert {p["variant"] for p in manifest["points"]} == want
    shown = cli("show", run.name, "--traces", out, "--variant", "rank 1 (b_1.pt.trace.json)")
    assert shown.exit_code == 0, shown.output
    assert "b_1.pt.trace.json" in shown.output and "a_1.pt.trace.json" not in shown.output


def test_ingest_cpu_trace_of_another_torch(tmp_path, cli):
    # torch 2.13 on the CPU (tests/fixtures/cpu) beside the H200's 2.11: the same parser
    run = next((FIXTURES / "cpu").iterdir())
    raw = next((run / "_chrome").glob("*.raw.json.gz"))
    out = tmp_path / "traces"
    assert cli("ingest", raw, "--traces", out, "-q").exit_code == 0
    k = pd.read_parquet(out)
    assert (k.kind == "cpu_op").all() and (k.device_type == "cpu").all()
    assert {"aten::addmm", "aten::gelu"} <= set(k.name)
    # batch 4, 64 -> 256 -> 64: 2*2*4*64*256 + 20*4*256 = 262,144 + 20,480 = 282,624 FLOPs per step
    assert k.groupby("step").flops.sum().tolist() == [282_624] * 2


@pytest.mark.slow
def test_a_trace_recorded_without_shapes_says_so_in_ingest_and_roofline(tmp_path, cli, cpu_ceilings):
    # HTA's 2024 NCCL trace was captured without record_shapes: its ops carry no Input Dims
    out = tmp_path / "traces"
    res = cli("ingest", FIXTURES / "public" / "hta_2024_nccl.json.gz", "--traces", out)
    flat = " ".join(res.output.split())
    assert res.exit_code == 0 and "1 of 1 file recorded no shapes (hta_2024_nccl.json.gz)" in flat
    assert "record_shapes=True" in flat
    # its aten::mm has a formula: the headline does not blame one (it read "has no FLOP formula")
    assert "has no FLOPs: its op has no FLOP formula or its shapes were not recorded" in flat
    assert "has no FLOP formula (kept" not in flat
    run = next(p.name for p in out.iterdir() if p.is_dir())
    res = cli("roofline", run, "--traces", out, "-o", tmp_path / "r.png")
    flat = " ".join(res.output.split())
    assert res.exit_code == 0 and "wrote" in flat and " of " in flat
    assert re.search(r"\([0-9,]+ of [0-9,]+ op calls placed; the trace recorded no shapes", flat)
    # a trace with shapes is not flagged
    raw = next((next((FIXTURES / "cpu").iterdir()) / "_chrome").glob("*.raw.json.gz"))
    res = cli("ingest", raw, "--traces", tmp_path / "t2")
    assert res.exit_code == 0 and "recorded no shapes" not in res.output


@pytest.mark.parametrize(("content", "needle"), [
    (b"", "is empty"),
    (b"   \n", "is empty"),
    (b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur"',
     "ends at byte 79 before its event list is closed (truncated)"),
    (b'{"schemaVersion": 1, "events": []}', "not a Chrome trace"),
    (b'{"traceEvents": [{"ph": "X", "cat": "gpu_op", "name": "draw", "ts": 1, "dur": 2}]}',
     "not a torch.profiler trace"),
    (b"\x1f\x8b\x08\x00garbage-not-deflate", "not a readable gzip file"),
    (b"\xff\xfe{}", "invalid JSON"),
    (b"\xfe\xff\xd8\x00", "not valid UTF-16-BE text at byte 2"),  # a lone surrogate
    (b"version https://git-lfs.github.com/spec/v1\noid sha256:d7e7\nsize 564133236\n",
     "is a Git LFS pointer, not the trace: its content was never downloaded"),
    (b'{"traceEvents": []}', "has no events (its event list is empty)"),
    # Nsight Systems' `nsys export --type json`: one JSON object per line; it read "invalid JSON at byte 31"
    (b'{"type": "ProcessInfo", "pid": 1}\n{"Type": 79, "CudaEvent": {"startNs": "1", "endNs": "2"}}\n',
     "holds one JSON document per line (JSON Lines, as `nsys export --type json` writes), not a Chrome trace"),
    # what tensorboard_trace_handler writes when nothing ran between the profiler's start and stop
    (b'{"schemaVersion": 1, "traceEvents": [{"name": "thread_name", "ph": "M", "ts": 0, "pid": 9, "tid": 9, '
     b'"args": {"name": "thread 9 ()"}}, {"name": "Record Window End", "ph": "i", "s": "g", "pid": "", "tid": "", '
     b'"ts": 1736417948403182}], "traceName": "./log/resnet18/host_93917.1736417948403527000.pt.trace.json"}',
     "is a torch.profiler trace that recorded no op, kernel or runtime event (2 events, all of the profiler's "
     "own bookkeeping): nothing ran while it was recording"),
    # a window that caught one device synchronize and nothing else (an sglang B200 capture): read before
    # as a run with no rows on "unknown CPU"
    (b'{"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA B200"}], "traceEvents": ['
     b'{"ph": "X", "cat": "overhead", "name": "Resource", "pid": -1, "tid": 0, "ts": 7794028844742.8, "dur": 5.6}, '
     b'{"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": 11, "tid": 13, '
     b'"ts": 7794028628791.5, "dur": 229398.3, "args": {"cbid": 165, "correlation": 3}}, '
     b'{"name": "Record Window End", "ph": "i", "s": "g", "pid": "", "tid": "", "ts": 7794028858336.8}]}',
     "recorded no op, kernel or launch: its 1 runtime calls (cudaDeviceSynchronize x1) put no work on the device"),
    # export_memory_timeline's JSON (cwilson51/CO-Colloquium-Pytorch-profiler keeps one among its traces):
    # it read "not a torch.profiler trace"
    (b'[[1726077563878112, 1726077563878113], [[0, 102440608, 0, 512936], [0, 102228128, 0, 512936]]]',
     "is torch.profiler's memory timeline (export_memory_timeline's JSON"),
    # another tool's trace with Kineto's top-level keys (a Triton line profiler's): not torch.profiler's
    (b'{"schemaVersion": 1, "displayTimeUnit": "ns", "traceEvents": [{"ph": "X", "cat": "Line 55", '
     b'"name": "tl.load", "ts": 1, "dur": 2, "pid": 0, "tid": 0}, {"ph": "X", "cat": ["odd"], "name": "x", '
     b'"ts": 3, "dur": 1}]}', "has no torch.profiler events (cpu_op, kernel, cuda_runtime): not a torch.profiler"),
    # a PyTorch execution trace (HTA's and param's test data keep them beside their Kineto traces): it read
    # "not a Chrome trace: expected an object with a 'traceEvents' list"
    (b'{"schema": "1.0.1", "pid": 563677, "time": "2023-07-14 11:53:07", "start_ts": 6278907328, "nodes": [{'
     b'"name": "aten::empty", "id": 5, "rf_id": 3, "parent": 4, "inputs": [], "input_shapes": []}]}',
     "is a PyTorch execution trace (ExecutionTraceObserver's 'nodes'), not a Chrome trace: ingest the Kineto trace"),
    # a ts that is a string but no number (a date): cpu_op events there, none read; the first one is named,
    # not called "no torch.profiler events"
    (b'[{"ph": "X", "name": "aten::empty", "pid": 7, "tid": 7, "ts": "2024-01-02 03:04:05.491", "dur": 13.08, '
     b'"cat": "cpu_op", "args": {}}, {"name": "AscendCL@aclrtMemcpy", "pid": 8, "tid": 7, '
     b'"ts": "2024-01-02 03:04:05.605", "dur": 52.4, "ph": "X"}]',
     "none with a number for its ts and dur (a cpu_op event's ts is str '2024-01-02 03:04:05.491')"),
])
def test_bad_traces_are_refused_and_the_store_is_untouched(tmp_path, cli, content, needle):
    out = tmp_path / "traces"
    ok = cli("ingest", _raw("gemm"), "--traces", out, "-q")  # something already in the store
    assert ok.exit_code == 0
    before = files_under(out)
    bad = tmp_path / "bad.json.gz"
    bad.write_bytes(content)
    res = cli("ingest", bad, "--traces", out)
    assert res.exit_code == 2, res.output
    assert needle in res.output and str(bad) in res.output
    # the argument, the rule and the value: it read "error: FILE: problem", naming no argument
    assert res.output.startswith("error: PATH must be a torch.profiler trace; bad.json.gz: ")
    assert res.output.rstrip().endswith(f"(got {str(bad)!r})")
    assert files_under(out) == before  # no half-written run, nothing else touched


def test_truncated_gzip_names_the_file(tmp_path, cli):
    full = _raw("gemm").read_bytes()
    bad = tmp_path / "cut.json.gz"
    bad.write_bytes(full[: len(full) // 2])
    res = cli("ingest", bad, "--traces", tmp_path / "t")
    assert res.exit_code == 2 and str(bad) in res.output
    assert files_under(tmp_path / "t") == []


def test_a_refused_ingest_leaves_no_traces_folder_it_created(tmp_path, cli):
    # `wlprof run` refuses bad input before it creates --traces; a refused ingest removes what it made
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": 5}')
    res = cli("ingest", bad, "--traces", tmp_path / "new" / "traces")
    assert res.exit_code == 2 and "not a Chrome trace" in res.output
    assert not (tmp_path / "new").exists()
    kept = tmp_path / "kept"
    kept.mkdir()  # a folder that was there stays, empty
    res = cli("ingest", bad, "--traces", kept)
    assert res.exit_code == 2 and kept.is_dir() and list(kept.iterdir()) == []


def test_a_folder_with_one_bad_file_writes_nothing(tmp_path, cli):
    src = tmp_path / "run"
    src.mkdir()
    shutil.copy(_raw("gemm"), src / "a.json.gz")
    (src / "b.json").write_text('{"traceEvents": [')
    out = tmp_path / "traces"
    res = cli("ingest", src, "--traces", out)
    assert res.exit_code == 2 and "b.json" in res.output
    assert res.output.startswith("error: PATH must hold torch.profiler traces; b.json: invalid JSON at byte 17 ")
    assert res.output.rstrip().endswith(f"(got {str(src)!r})")
    assert [p for p in files_under(out) if not p.startswith(".wlprof")] == []


def test_a_folder_whose_traces_lie_in_sub_folders_names_them(tmp_path, cli):
    # the profiler tutorial's tensorboard_trace_handler('./log/resnet18'): `ingest log` read nothing and said
    # only that log held no trace
    log = tmp_path / "log"
    for sub in ("resnet18", "gpt"):
        (log / sub).mkdir(parents=True)
        shutil.copy(_raw("gemm"), log / sub / "host_1.1.pt.trace.json.gz")
    (log / "notes").mkdir()
    (log / "notes" / "config.json").write_text('{"lr": 0.1}')
    res = cli("ingest", log, "--traces", tmp_path / "t")
    flat = " ".join(res.output.split())
    assert res.exit_code == 2 and not (tmp_path / "t").exists()
    assert (f"its sub-folders hold traces, which a folder's ingest does not read: gpt/ (1 trace), resnet18/ "
            f"(1 trace); ingest one of them (wlprof ingest {log / 'gpt'})") in flat
    empty = tmp_path / "empty"
    empty.mkdir()
    res = cli("ingest", empty, "--traces", tmp_path / "t")
    assert res.exit_code == 2 and "sub-folders" not in res.output


def test_missing_path_and_empty_folder(tmp_path, cli):
    res = cli("ingest", tmp_path / "nope.json", "--traces", tmp_path / "t")
    assert res.exit_code == 2 and "PATH must be an existing trace file or folder" in res.output
    (tmp_path / "empty").mkdir()
    res = cli("ingest", tmp_path / "empty", "--traces", tmp_path / "t")
    assert res.exit_code == 2 and "*.json" in res.output
    res = cli("ingest", _raw("gemm"), "--traces", tmp_path / "t", "--chrome-top", "0")
    assert res.exit_code == 2 and "--chrome-top" in res.output


def test_streamed_and_whole_parses_agree(tmp_path):
    # the chunked reader (events one per indented block) and the whole-file parse of the same
    # events written minified must give the same tables
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
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


def test_a_truncated_trace_of_many_chunks_names_its_last_byte(tmp_path, monkeypatch):
    # the offset counts every chunk read before the end, not one byte too many per chunk
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
    from big_trace import replicate

    import wlprof.trace.parse as P

    monkeypatch.setattr(P, "CHUNK_BYTES", 4096)  # many chunks past the first MB, read whole
    whole, cut = tmp_path / "whole.json", tmp_path / "cut.json"
    replicate(_raw("moe"), whole, 12000)
    data = whole.read_bytes()
    cut.write_bytes(data[:len(data) * 2 // 3])
    with pytest.raises(TraceFormatError, match=rf"ends at byte {len(data) * 2 // 3 - 1} before its event list"):
        P.read_trace(cut, keep_events=False)


def test_ingest_of_a_gpu_trace_without_kernels_says_why(tmp_path, cli):
    # zoology's A100 trace lost its device events: no "nan%" share, the reason printed, a GPU device
    res = cli("ingest", FIXTURES / "public" / "zoology_2023_a100_launches_without_kernels.json.gz",
              "--traces", tmp_path / "t", "-q")
    flat = " ".join(res.output.split())
    assert res.exit_code == 0, res.output
    assert "nan%" not in flat and "no kernel time to cost" in flat
    assert "GPU work (268 kernel launches or copies" in flat and "no kernel rows" in flat
    assert "NVIDIA A100 80GB PCIe" in flat  # the ceilings line names the trace's GPU, not "unknown CPU"
    k = pd.read_parquet(tmp_path / "t")
    assert len(k) == 0
    ops = wlprof.load(tmp_path / "t", table="ops")
    assert len(ops) > 0 and ops.dur_us.isna().all() and (ops.device_type == "cuda").all()


def test_an_ingested_run_records_its_kernel_time_per_dtype(tmp_path):
    import pandas as pd

    from wlprof.ingest import dominant_dtype, ingest
    from wlprof.store.runs import list_runs

    run = ingest(FIXTURES / "h200_training" / "vit.pt.trace.json.gz", tmp_path, jobs=1)  # a ViT step under fp16 autocast
    (listed,) = list_runs(tmp_path)
    k = pd.read_parquet(run.path)
    by = k.groupby("cost_dtype").dur_us.sum()
    assert listed["dtype"] == by.idxmax() == "float16"
    assert listed["points"][0]["dtype_us"]["float16"] == pytest.approx(by["float16"], abs=0.01)
    # over several files the times add up before the largest is taken; no time: no dtype
    assert dominant_dtype([{"bfloat16": 5.0, "float32": 4.0}, {"float32": 2.0}, None]) == "float32"
    assert dominant_dtype([{}, None]) is None


def test_an_ingested_run_with_matrix_work_is_listed_with_the_dtype_its_matrix_units_computed_in(tmp_path):
    # the eager transformer step: its bf16 GEMMs take 2,810 us, its float32 elementwise and optimizer kernels
    # 4,231 us; the run is a bf16 one
    import pandas as pd

    from wlprof.ingest import ingest
    from wlprof.store.runs import list_runs

    run = ingest(FIXTURES / "h200_training" / "transformer_eager.pt.trace.json.gz", tmp_path, jobs=1)
    (listed,) = list_runs(tmp_path)
    k = pd.read_parquet(run.path)
    by = k[k.cost_unit == "matrix"].groupby("cost_dtype").dur_us.sum()
    assert k.groupby("cost_dtype").dur_us.sum().idxmax() == "float32"
    assert listed["dtype"] == by.idxmax() == "bfloat16"
    assert listed["points"][0]["matrix_dtype_us"]["bfloat16"] == pytest.approx(by["bfloat16"], abs=0.01)
    # every table's dtype column says so too, as a generated run's does (it was null on every ingested row)
    import wlprof

    for table in ("ops", "steps", "overlap"):
        assert set(wlprof.load(tmp_path, table=table).dtype) == {"bfloat16"}, table
    assert set(k.dtype) == {"bfloat16"}


def test_an_h2d_copy_of_a_real_h200_trace_goes_against_the_measured_link(tmp_path, monkeypatch):
    # the H200's own ceilings (call W: pinned host -> device 55.45 GB/s) in the cache, then the two-stream
    # training fixture ingested: its 128 MiB host -> device copy (aten::copy_ counts 256 MiB, read + write)
    # crosses the link at 134217728 B / 2426.5 us = 55.3 GB/s: 99.8% of it, not 2.6% of the HBM copy roof
    from wlprof import ceilings
    from wlprof.ingest import ingest

    monkeypatch.setenv("WLPROF_CACHE_DIR", str(tmp_path / "cache"))
    c = ceilings.load_file(FIXTURES / "h200_ceilings_2026-12-01.json")
    assert c.bandwidth("host_to_device") == pytest.approx(55.446, abs=0.001)
    ceilings.save(c)
    run = ingest(FIXTURES / "h200_training" / "streams.pt.trace.json.gz", tmp_path / "t", jobs=1)
    k = pd.read_parquet(run.path)
    h2d = k[(k.kind == "memcpy") & k.name.str.contains("HtoD")]
    assert len(h2d) == 2 and set(h2d.roof) == {"host_to_device"}
    want = h2d.bytes_written / (c.bandwidth("host_to_device") * 1e3) / h2d.dur_us
    assert h2d.roofline_fraction.tolist() == pytest.approx(want.tolist())
    assert h2d.roofline_fraction.between(0.99, 1.0).all() and h2d.roof_note.isna().all()
    d2d = k[(k.kind == "memcpy") & k.name.str.contains("DtoD")]
    assert set(d2d.roof) == {"hbm_copy"}


def test_a_folder_s_json_files_that_are_not_traces_are_skipped_and_named(tmp_path, cli):
    # a run folder holding a trace and a metrics file: the metrics file is skipped, named, and noted
    src = tmp_path / "run"
    src.mkdir()
    shutil.copy(FIXTURES / "public" / "hta_2022_inference_capitalized.json.gz", src / "rank1.json.gz")
    (src / "metrics.json").write_text('{"loss": [2.5, 2.1], "step": 2}')
    res = cli("ingest", str(src), "--traces", str(tmp_path / "t"))
    flat = " ".join(res.output.split())
    assert res.exit_code == 0, res.output
    assert "skipped 1 JSON file that is not a Chrome trace: metrics.json" in flat
    (run,) = [p for p in (tmp_path / "t").iterdir() if p.is_dir()]
    manifest = json.loads((run / "_manifest.json").read_text())
    assert [p["source_file"] for p in manifest["points"]] == [str(src / "rank1.json.gz")]
    assert "skipped metrics.json: a JSON file that is not a Chrome trace" in manifest["notes"]
    assert len(wlprof.load(tmp_path / "t")) > 0
    # a folder of nothing but such files is refused, naming them
    only = tmp_path / "only"
    only.mkdir()
    (only / "config.json").write_text('{"lr": 0.1}')
    res = cli("ingest", str(only), "--traces", str(tmp_path / "t2"))
    assert res.exit_code != 0 and "(config.json are not traces)" in " ".join(res.output.split())


def test_what_a_folder_s_json_file_must_start_with_to_be_read_as_a_trace(tmp_path):
    from wlprof.ingest import looks_like_trace

    cases = {"array.json": b"[1, 2, 3]", "empty.json": b"", "text.json": b"garbage", "config.json": b'{"lr": 0.1}',
             "events.json": b'[{"ph": "X", "name": "a"}]', "truncated.json": b'{"traceEvents": [{"ph": "X"',
             "utf16.json": '{"traceEvents": []}'.encode("utf-16")}
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
    got = {name: looks_like_trace(tmp_path / name) for name in cases}
    # read (and refused by the parser where broken): events, a truncated trace, UTF-16 text
    assert got == {"array.json": False, "empty.json": False, "text.json": False, "config.json": False,
                   "events.json": True, "truncated.json": True, "utf16.json": True}


def test_ceilings_given_as_a_file_place_the_traces_of_their_device(tmp_path, cli, monkeypatch):
    # an empty cache: without --ceilings nothing is placed; with the H200's file, the H200 trace is placed
    # and the A100 one is not (its note says whose the file holds); a missing file is refused first
    monkeypatch.setenv("WLPROF_CACHE_DIR", str(tmp_path / "cache"))
    ceil = FIXTURES / "h200_ceilings_2026-12-01.json"
    h200 = FIXTURES / "h200_zoo3" / "bert.pt.trace.json.gz"
    a100 = FIXTURES / "public" / "hta_2024_nccl.json.gz"
    res = cli("ingest", h200, "--traces", tmp_path / "t", "--name", "plain")
    assert res.exit_code == 0 and "no measured ceilings for NVIDIA H200" in " ".join(res.output.split())
    res = cli("ingest", h200, "--traces", tmp_path / "t", "--name", "given", "--ceilings", ceil)
    assert res.exit_code == 0 and f"ceilings: file: {ceil}" in " ".join(res.output.split())
    res = cli("ingest", a100, "--traces", tmp_path / "t", "--name", "other", "--ceilings", ceil)
    assert res.exit_code == 0
    assert "holds NVIDIA H200's, not NVIDIA A100-PG509-200's" in " ".join(res.output.split())
    k = wlprof.load(tmp_path / "t")
    placed = k.groupby(k.run_id.str.split("-").str[0]).roofline_fraction.apply(lambda s: s.notna().mean())
    assert placed["plain"] == 0 and placed["given"] == 1 and placed["other"] == 0
    res = cli("ingest", h200, "--traces", tmp_path / "t2", "--ceilings", tmp_path / "none.json")
    assert res.exit_code == 2 and "--ceilings must be datasheet or a readable ceilings JSON file" in res.output
    assert not (tmp_path / "t2").exists()


def test_a_folder_of_traces_from_different_devices_is_refused(tmp_path, cli):
    # a folder of per-rank traces is one job on one kind of device: a folder mixing an H100's and an
    # MI300X's traces was ingested as one run named after whichever file a worker finished first
    src = tmp_path / "mixed"
    src.mkdir()
    public = FIXTURES / "public"
    shutil.copy(public / "pytorch_2025_h100_kernels_without_runtime.json.gz", src / "a.json.gz")
    shutil.copy(public / "tracelens_mi300_triton.json.gz", src / "b.json.gz")
    out = tmp_path / "traces"
    ok = cli("ingest", _raw("gemm"), "--traces", out, "-q")
    assert ok.exit_code == 0
    before = files_under(out)
    res = cli("ingest", src, "--traces", out)
    assert res.exit_code == 2, res.output
    text = " ".join(res.output.split())
    assert "PATH" in text and "one device" in text and str(src) in text
    assert "NVIDIA H100 (a.json.gz)" in text and "AMD Instinct MI300X (b.json.gz)" in text
    assert "Traceback" not in res.output
    assert files_under(out) == before


def test_a_folder_of_ranks_on_one_gpu_model_is_still_one_run(tmp_path):
    from wlprof.ingest import ingest

    run = ingest(FIXTURES / "public" / "hta_2023_two_ranks", tmp_path, jobs=1)
    assert len(run.files) == 2


@pytest.mark.parametrize("name", ["///", "", "_._", " "])
def test_a_name_without_letters_or_digits_is_refused(tmp_path, cli, name):
    # slug() turned these into "x", so the rule "must contain letters or digits" never fired
    res = cli("ingest", _raw("gemm"), "--traces", tmp_path / "t", "--name", name)
    assert res.exit_code == 2, res.output
    assert "--name must contain letters or digits" in " ".join(res.output.split())
    assert not (tmp_path / "t").exists()


def _stepped_trace(step_us: list[float]) -> dict:
    """A CPU trace of one 8x8x8 aten::mm per ProfilerStep, each step's op lasting `step_us`."""
    events, ts = [], 0.0
    for i, dur in enumerate(step_us):
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i}", "pid": 1, "tid": 1,
                       "ts": ts, "dur": dur + 2})
        events.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": ts + 1,
                       "dur": dur, "args": {"Input Dims": [[8, 8], [8, 8]], "Input type": ["float", "float"],
                                            "Input Strides": [[8, 1], [8, 1]]}})
        ts += dur + 10
    return {"schemaVersion": 1, "traceEvents": events}


def test_an_ingest_whose_steps_spread_is_called_noisy(tmp_path, cli):
    # 100, 110 and 1,000 us steps: (1000 - 100) / 110 = 818% of the median step
    noisy = tmp_path / "noisy.pt.trace.json"
    noisy.write_text(json.dumps(_stepped_trace([100.0, 110.0, 1000.0])))
    res = cli("ingest", noisy, "--traces", tmp_path / "t")
    flat = " ".join(res.output.split())
    assert res.exit_code == 0, res.output
    assert "noisy.pt.trace.json: noisy: its 3 profiled steps' kernel times spread 818% of their median" in flat
    steps = wlprof.load(tmp_path / "t", table="steps")
    assert steps.noisy.tolist() == [True] and steps.timing_spread.iloc[0] == pytest.approx(900 / 110)
    assert steps.kernel_us.iloc[0] == 110.0
    steady = tmp_path / "steady.pt.trace.json"
    steady.write_text(json.dumps(_stepped_trace([100.0, 101.0, 102.0])))
    res = cli("ingest", steady, "--traces", tmp_path / "t2")
    assert res.exit_code == 0 and "noisy" not in res.output

"""Every trace format wlprof meets: public traces of other projects, and re-serialized copies of ours.

The expected numbers come from the raw JSON, read here with the standard json module
(device events counted and their durations summed by category), not from wlprof's parser.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
import torch

import wlprof
from wlprof import pipeline
from wlprof.errors import TraceFormatError
from wlprof.trace.identity import device_of, rank_of

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
PUBLIC = FIXTURES / "public"
DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset"}


def raw(path: Path):
    doc = json.loads(gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes())
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    return (doc if isinstance(doc, dict) else {}), events


def raw_device(events) -> tuple[int, float]:
    # MTIA's device events: kernels and DMA copies; its event records and waits are synchronization
    dev = [e for e in events if isinstance(e, dict) and e.get("ph") == "X" and (
        e.get("cat") in DEVICE_CATS
        or e.get("cat") == "mtia_ccp_events" and e.get("name") not in ("event_record", "event_wait"))]
    return len(dev), float(sum(e.get("dur", 0) for e in dev))


PUBLIC_FILES = sorted(PUBLIC.glob("*.json.gz")) + sorted(PUBLIC.glob("*/*.json.gz"))
# the fixtures of over 1 MB take more than a second each: the fast tier reads the smaller ones
PUBLIC_PARAMS = [pytest.param(p, marks=pytest.mark.slow) if p.stat().st_size > 1_000_000 else p
                 for p in PUBLIC_FILES]


@pytest.mark.parametrize("path", PUBLIC_PARAMS, ids=lambda p: p.name)
def test_every_device_event_of_a_public_trace_is_one_row(path):
    _, events = raw(path)
    n, dur = raw_device(events)
    for keep in (False, True):  # the streaming reader and the whole-file parse agree
        c = pipeline.costed(pipeline.read(path, keep_events=keep))
        # gloo's work on a CPU trace is a `comm` row from a user_annotation, not a device event
        dev = c.kernels[~c.kernels.kind.isin(["cpu_op", "comm"])]
        assert len(dev) == n
        assert dev.dur_us.sum() == pytest.approx(dur, rel=1e-9, abs=1e-6)


@pytest.mark.parametrize("name, device, methods, has_op_at_least", [
    # PyTorch 1.8 (2020): launches name their op by a lowercase `external id`; the 896 kernels
    # without one have no runtime event in the file (794) or ran outside every op (102)
    ("kineto_2020_resnet50_array.json.gz", "unknown GPU", {"external_id": 8952, "none": 896}, 0.909),
    ("kineto_2021_gpu_metrics_col0.json.gz", "Tesla V100-DGXS-32GB", {"external_id": 32}, 1.0),
    # no runtime event at all: each kernel names its op by its own External id
    ("pytorch_2025_h100_kernels_without_runtime.json.gz", "NVIDIA H100", {"kernel_external_id": 2}, 1.0),
    ("tokenomics_2024_rtx4090_fsdp2_coalesced.json.gz", "NVIDIA GeForce RTX 4090", {"external_id": 2}, 1.0),
    # External id == correlation: every launch placed in its op by time, none through the id
    ("hta_2023_simple_add_ext_eq_corr.json.gz", "NVIDIA A100-PG509-200", {"time": 98}, 1.0),
    ("hta_2024_nccl.json.gz", "NVIDIA A100-PG509-200", {"external_id": 3774}, 1.0),
    ("tracelens_mi300_bert_indent2.json.gz", "AMD Instinct MI300X VF", {"external_id": 61}, 1.0),
    ("tracelens_b200_eager_indent4.json.gz", "NVIDIA B200", {"external_id": 927, "none": 2}, 0.997),
    # 421 kernels replayed from HIP graphs: kept without an op; its deviceProperties name no device
    # ("name": ""), so it is named by what they record
    ("tracelens_mi300_hip_graph.json.gz", "AMD GPU (compute 9.4, 304 CUs, 192 GiB)",
     {"external_id": 13, "graph": 421}, 0.0),
    # torch.compile(mode="reduce-overhead") on an H200: 327 kernels replayed by a cudaGraphLaunch inside the
    # compiled region, whose External id names the region (it ran none of them): graph replays, no op
    ("openpi_2026_h200_compiled_cuda_graph_in_region.json.gz", "NVIDIA H200", {"graph": 327, "external_id": 1},
     0.003),
    # ROCm 7 on an MI300X (gfx942) that names no device: 77 kernels replayed by hipGraphLaunch, 2 fills launched
    ("openpi_2026_mi300x_unnamed_hip_graph.json.gz", "AMD GPU (compute 9.4, 304 CUs, 192 GiB)",
     {"external_id": 2, "graph": 77}, 0.02),
    ("hta_2022_inference_capitalized.json.gz", "unknown GPU", {"none": 4}, 0.0),
    # ROCm 6.2 on an MI250 that names itself "AMD Radeon Graphics": hipLaunchKernel and hipExtModuleLaunchKernel
    ("hta_2024_mi250_rocm62.json.gz", "AMD Radeon Graphics", {"external_id": 16}, 1.0),
    # torch 2.x on an H100: python_function stacks, [memory] instant events, cuLaunchKernel beside cudaLaunchKernel
    ("tracelens_h100_python_function_memory.json.gz", "NVIDIA H100 80GB HBM3", {"external_id": 156}, 1.0),
    # ROCm on an MI210 with no cpu_op at all: every launch names no op
    ("tracelens_mi210_gpu_only.json.gz", "AMD Instinct MI210", {"none": 562}, 0.0),
    ("tracelens_mi300_foreach_unexpanded.json.gz", "AMD Instinct MI300X", {"external_id": 2}, 1.0),
    # converted from rocprof: no correlation; kernels and launches share an External id that names no op
    ("tracelens_2026_rocprof_linked_by_external_id.json.gz", "unknown GPU", {"time": 10}, 1.0),
])
def test_join_methods_and_device_of_public_traces(name, device, methods, has_op_at_least):
    path = PUBLIC / name
    trace = pipeline.read(path, keep_events=False)
    assert device_of(trace.meta, trace.device) == ("cuda", device)
    k = pipeline.costed(trace).kernels
    dev = k[k.kind != "cpu_op"]
    assert dev.join_method.value_counts().to_dict() == methods
    assert dev.has_op.mean() >= has_op_at_least
    assert (dev.has_op == dev.join_method.isin(["external_id", "kernel_external_id", "time"])).all()


def test_graph_replayed_kernels_are_named_and_their_share_is_told(tmp_path, cli):
    # TraceLens' MI300 HIP-graph trace: 421 kernels replayed by one hipGraphLaunch, 10,388.482 us of the
    # 10,717.708 us of kernel and memcpy time the ingest summary counts (96.9%); no op launched them, so
    # nothing records their shapes
    out = tmp_path / "traces"
    res = cli("ingest", PUBLIC / "tracelens_mi300_hip_graph.json.gz", "--traces", out, "--wide")
    flat = " ".join(res.output.split())
    assert res.exit_code == 0, res.output
    assert "(graph replay) 10.4 ms" in flat and "(no op)" not in flat
    assert "96.9% of kernel time was replayed from CUDA/HIP graphs" in flat
    k = wlprof.load(out)
    replayed = k[k.join_method == "graph"]
    assert len(replayed) == 421 and replayed.dur_us.sum() == pytest.approx(10388.482)
    # a trace without graphs says nothing of them
    res = cli("ingest", PUBLIC / "hta_2024_nccl.json.gz", "--traces", tmp_path / "t2")
    assert res.exit_code == 0 and "replayed from CUDA/HIP graphs" not in " ".join(res.output.split())


def test_a_graph_replayed_inside_an_op_is_told_as_a_replay_not_as_a_missing_formula(tmp_path, cli):
    # H200, torch.compile(mode="reduce-overhead"): the cudaGraphLaunch of one compiled-region call replays 327
    # kernels (1,065.549 us) and names the region by its External id; one aten::mul beside it launches its
    # own kernel (1.6 us). The replayed kernels were joined to the region by that id, so the summary counted
    # no replay and blamed a missing FLOP formula for 99.9% of the kernel time
    path = PUBLIC / "openpi_2026_h200_compiled_cuda_graph_in_region.json.gz"
    res = cli("ingest", path, "--traces", tmp_path / "traces")
    flat = " ".join(res.output.split())
    assert res.exit_code == 0, res.output
    # 1,065.549 / (1,065.549 + 1.6) = 99.85%
    assert "99.9% of kernel time was replayed from CUDA/HIP graphs" in flat
    assert "has no FLOPs: its op has no FLOP formula or it was replayed from a CUDA/HIP graph" in flat
    assert "(graph replay) 1.07 ms" in flat and "Torch-Compiled Region" not in flat
    k = wlprof.load(tmp_path / "traces")
    assert k.groupby("join_method").dur_us.sum().round(3).to_dict() == {"external_id": 1.6, "graph": 1065.549}
    # the op beside the region is costed: a 0-d float times a [1, 10, 32] float, 320 products; 4 + 1,280
    # bytes read, 1,280 written
    mul = k[k.join_method == "external_id"].iloc[0]
    assert (mul.op_name, mul.flops, mul.bytes) == ("aten::mul", 320, 2564)


@pytest.mark.parametrize(("name", "device_rows"), [
    # ROCm on an MI210 profiled without ProfilerActivity.CPU: 562 kernels launched by hip* calls, no cpu_op
    ("tracelens_mi210_gpu_only.json.gz", 562),
    # CUDA, 2022, `Runtime`/`Kernel` categories: 4 kernels and no op
    ("hta_2022_inference_capitalized.json.gz", 4),
])
def test_a_trace_without_cpu_ops_says_so_and_the_ingest_tells_how_to_record_them(tmp_path, cli, name, device_rows):
    # the kernels have no op to cost: the summary blamed a missing FLOP formula ("has no FLOP formula")
    path = PUBLIC / name
    _, events = raw(path)
    assert not any(e.get("cat") in ("cpu_op", "Operator") for e in events if isinstance(e, dict))
    assert sum(e.get("cat") in ("kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset")
               for e in events if isinstance(e, dict)) == device_rows
    trace = pipeline.read(path)
    assert trace.device_work_without_ops == f"{device_rows:,} kernels, copies and memsets, and no CPU op"
    res = cli("ingest", path, "--traces", tmp_path / "traces")
    flat = " ".join(res.output.split())
    assert res.exit_code == 0, res.output
    assert f"1 of 1 file recorded no CPU op ({name}): their kernels have no op to cost" in flat
    assert "activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]" in flat
    assert "has no FLOPs: its op has no FLOP formula or the trace recorded no op to cost it" in flat
    assert "has no FLOP formula (kept" not in flat


def test_a_trace_with_cpu_ops_is_not_told_to_record_them(tmp_path, cli):
    # HTA's 2024 NCCL trace (A100): ops and kernels; a CPU-only trace (gloo): ops and no device row
    for name in ("hta_2024_nccl.json.gz", "hta_2024_cpu_only_gloo.json.gz"):
        assert pipeline.read(PUBLIC / name).device_work_without_ops is None
    res = cli("ingest", PUBLIC / "hta_2024_nccl.json.gz", "--traces", tmp_path / "traces")
    assert res.exit_code == 0 and "recorded no CPU op" not in " ".join(res.output.split())


def test_time_join_finds_the_op_that_launched_the_kernel():
    # hta_2023_simple_add: a convolution kernel's launch lies inside aten::cudnn_convolution; linking
    # through the runtime event's External id (its own correlation) would have named another op
    k = pipeline.costed(pipeline.read(PUBLIC / "hta_2023_simple_add_ext_eq_corr.json.gz")).kernels
    k = k[k.kind == "kernel"]
    _, events = raw(PUBLIC / "hta_2023_simple_add_ext_eq_corr.json.gz")
    names = [e["name"] for e in events if isinstance(e, dict) and e.get("cat") == "kernel"]
    for pattern, op in (("cudnn", "aten::cudnn_convolution"), ("sgemm", "aten::addmm"),
                        ("max_pool_forward", "aten::max_pool2d_with_indices")):
        sel = k[k.name.str.contains(pattern)]
        assert len(sel) == sum(pattern in n for n in names) > 0 and (sel.op_name == op).all(), pattern


@pytest.mark.slow
def test_pytorch_1_8_profiler_steps_recorded_as_ops_are_steps():
    _, events = raw(PUBLIC / "kineto_2020_resnet50_array.json.gz")
    steps = sorted(int(e["name"].split("#")[1]) for e in events
                   if isinstance(e, dict) and str(e.get("name", "")).startswith("ProfilerStep#"))
    assert steps == [5, 6, 7, 8, 9, 10]
    c = pipeline.costed(pipeline.read(PUBLIC / "kineto_2020_resnet50_array.json.gz"))
    assert set(c.kernels.step.unique()) - {-1} == set(steps)
    assert not c.joined.ops.name.str.startswith("ProfilerStep#").any()  # markers, not ops


def test_rank_and_world_from_distributed_info():
    for i, path in enumerate(sorted((PUBLIC / "hta_2023_two_ranks").glob("*.json.gz"))):
        meta, _ = raw(path)
        assert meta["distributedInfo"]["rank"] == i
        assert rank_of(pipeline.read(path, keep_events=False).meta, default=99) == i
    # no distributedInfo: a rank in the file's name, else the file's order for a trace that communicates,
    # else 0 (a folder of single-process traces is not a run of ranks)
    assert rank_of({}, default=7, name="step_rank_3.pt.trace.json") == 3
    assert rank_of({}, default=7, name="worker-Rank12.json.gz") == 12
    assert rank_of({}, default=7, name="trace.json", communicates=True) == 7
    assert rank_of({}, default=7, name="trace.json", communicates=False) == 0
    assert rank_of({"distributedInfo": {"rank": 2}}, default=7, name="rank5.json") == 2


# ---------------------------------------------------------------- layouts of one trace


OURS = FIXTURES / "h200_probe_ops.json.gz"


def _layouts(tmp_path: Path) -> dict[str, Path]:
    doc = json.loads(gzip.decompress(OURS.read_bytes()))
    out = {}
    for name, text in {
        "indent2": json.dumps(doc, indent=2),
        "indent4": json.dumps(doc, indent=4),
        "minified": json.dumps(doc, separators=(",", ":")),
        "array": json.dumps(doc["traceEvents"]),
        # early Kineto: events one per line at column 2, the list closed at column 0
        "col0": "{\n" + "".join(f'  "{k}": {json.dumps(v)},\n' for k, v in doc.items() if k != "traceEvents")
        + '  "traceEvents": [\n' + ",\n".join("  " + json.dumps(e) for e in doc["traceEvents"]) + "\n]}\n",
    }.items():
        p = tmp_path / f"{name}.json"
        p.write_text(text)
        out[name] = p
        gz = tmp_path / f"{name}.json.gz"
        gz.write_bytes(gzip.compress(text.encode()))
        out[name + ".gz"] = gz
    return out


@pytest.mark.slow
def test_every_layout_gives_the_same_tables(tmp_path):
    ref = pipeline.costed(pipeline.read(OURS)).kernels
    cols = ["name", "dur_us", "op_name", "op_input_dims", "flops", "bytes", "join_method", "step", "region"]
    for name, path in _layouts(tmp_path).items():
        for keep in (False, True):
            got = pipeline.costed(pipeline.read(path, keep_events=keep)).kernels
            assert got[cols].equals(ref[cols]), (name, keep)


@pytest.mark.parametrize(("encoding", "mark"), [
    ("utf-8", b"\xef\xbb\xbf"),  # Windows PowerShell 5's `Out-File -Encoding utf8`
    ("utf-16-le", b"\xff\xfe"),  # its `>` and default `Out-File`
    ("utf-16-be", b""),  # no byte-order mark: told by where the zero bytes fall
    ("utf-32-le", b"\xff\xfe\x00\x00"),
])
def test_a_trace_saved_in_utf16_or_with_a_byte_order_mark_gives_the_same_tables(tmp_path, encoding, mark):
    ref = pipeline.costed(pipeline.read(OURS)).kernels
    cols = ["name", "dur_us", "op_name", "op_input_dims", "flops", "bytes", "join_method", "step", "region"]
    data = mark + json.dumps(json.loads(gzip.decompress(OURS.read_bytes())), indent=2).encode(encoding)
    for name, content in {"t.json": data, "t.json.gz": gzip.compress(data)}.items():
        p = tmp_path / name
        p.write_bytes(content)
        for keep in (False, True):
            got = pipeline.costed(pipeline.read(p, keep_events=keep)).kernels
            assert got[cols].equals(ref[cols]), (name, keep)


def test_a_truncated_trace_is_refused_with_its_byte_offset(tmp_path):
    text = (_layouts(tmp_path)["indent2"]).read_bytes()
    for cut in (len(text) // 3, len(text) - 40):
        p = tmp_path / f"cut{cut}.json"
        p.write_bytes(text[:cut])
        for keep in (False, True):
            with pytest.raises(TraceFormatError, match=r"byte \d+") as exc:
                pipeline.read(p, keep_events=keep)
            offset = int(str(exc.value).split("byte ")[1].split()[0].rstrip(")"))
            assert 0 < offset <= cut


def test_cpu_trace_of_another_host_is_not_this_cpu():
    assert device_of({"host_name": "elsewhere-42"}, _no_device()) == ("cpu", "CPU of host elsewhere-42")


def _no_device():
    import pandas as pd

    return pd.DataFrame({"device_index": np.array([], dtype=np.int64)})


LEGACY = FIXTURES / "cpu_legacy" / "autograd_export_chrome_trace.json.gz"


@pytest.mark.parametrize("keep", [False, True])
def test_the_legacy_autograd_export_is_read_as_cpu_ops(keep):
    # `function_events.export_chrome_trace` (the only export of torch <= 1.7) writes a bare array of
    # events with no `cat`, ops under pid "CPU functions": once refused as "not a torch.profiler trace"
    _, events = raw(LEGACY)
    cpu = [e for e in events if e.get("ph") == "X" and e.get("pid") == "CPU functions"]
    assert len(cpu) == 103 and all("cat" not in e for e in cpu)
    trace = pipeline.read(LEGACY, keep_events=keep)
    assert len(trace.ops) == 103 and len(trace.device) == 0 and trace.warnings == []
    c = pipeline.costed(trace)
    assert (c.kernels.kind == "cpu_op").all() and len(c.kernels) > 0
    ops = c.joined.ops
    # events 2 and 3: aten::transpose (ts 3738.914, dur 67.065 us) holds aten::as_strided (ts 3794.237,
    # dur 9.688 us): its parent, and the transpose's self time is 67.065 - 9.688 = 57.377 us
    assert ops.name[2] == "aten::transpose" and ops.name[3] == "aten::as_strided"
    assert ops.parent[3] == 2 and ops.self_ns[2] == 67_065 - 9_688


def test_legacy_cuda_intervals_are_not_kernels(tmp_path):
    # torch <= 1.7 with use_cuda: beside each op, an interval under "CUDA functions" named after the op
    # (CUDA events around it, covering its children's) and a flow arrow to it; not a kernel
    events = [
        {"name": "aten::mm", "ph": "X", "ts": 1.0, "dur": 10.0, "tid": 1, "pid": "CPU functions", "args": {}},
        {"name": "aten::mm", "ph": "s", "ts": 1.0, "tid": 1, "pid": "CPU functions", "id": 0, "cat": "cpu_to_cuda",
         "args": {}},
        {"name": "aten::mm", "ph": "f", "ts": 2.0, "tid": 0, "pid": "CUDA functions", "id": 0, "cat": "cpu_to_cuda",
         "args": {}},
        {"name": "aten::mm", "ph": "X", "ts": 2.0, "dur": 5.0, "tid": 0, "pid": "CUDA functions", "args": {}},
    ]
    path = tmp_path / "legacy_cuda.json"
    path.write_text(json.dumps(events))
    trace = pipeline.read(path)
    assert len(trace.ops) == 1 and len(trace.device) == 0 and trace.legacy_device_events == 1
    assert "1 'CUDA functions' events of the legacy autograd profiler were not read" in trace.warnings[0]
    # GPU work whose device activity is unreadable: a GPU trace with no kernel rows, not a CPU trace
    assert device_of(trace.meta, trace.device, trace.gpu_work_without_device is not None) == ("cuda", "unknown GPU")
    c = pipeline.costed(trace)
    assert len(c.kernels) == 0 and c.ops.op_name.tolist() == ["aten::mm"] and c.ops.dur_us.isna().all()


ZOOLOGY = PUBLIC / "zoology_2023_a100_launches_without_kernels.json.gz"


@pytest.mark.parametrize("keep", [False, True])
def test_a_gpu_trace_that_lost_its_kernels_is_a_gpu_trace_without_kernel_rows(keep):
    # HazyResearch/zoology's trace.json (A100): 1,206 ops and 268 launches and copies (236 cudaLaunchKernel,
    # 24 cuLaunchKernel, 8 cudaMemcpyAsync) but no kernel/memcpy/memset event. It was read as a CPU trace
    # ("unknown CPU") whose 308 working ops' host self times were costed as the work.
    meta, events = raw(ZOOLOGY)
    assert raw_device(events) == (0, 0.0)
    runtime = [e["name"] for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")]
    assert sum(n in ("cudaLaunchKernel", "cuLaunchKernel", "cudaMemcpyAsync") for n in runtime) == 236 + 24 + 8
    trace = pipeline.read(ZOOLOGY, keep_events=keep)
    assert trace.gpu_work_without_device == "268 kernel launches or copies (cuda_runtime/cuda_driver events)"
    assert device_of(trace.meta, trace.device, True) == ("cuda", "NVIDIA A100 80GB PCIe")
    assert any("no kernel rows" in w for w in trace.warnings)
    c = pipeline.costed(trace)
    assert len(c.kernels) == 0
    # the ops keep their host times and costs, with no device time and so no rates
    assert len(c.ops) > 0 and (c.ops.cpu_dur_us > 0).all() and c.ops.dur_us.isna().all()
    assert c.ops.achieved_gbps.isna().all() and (c.ops.kernel_count == 0).all()
    assert (c.ops.flops_source == "formula").any()


def test_a_cpu_trace_written_on_a_gpu_machine_stays_a_cpu_trace(tmp_path):
    # deviceProperties name a GPU, but no launch and no GPU-only op: CPU ops are the work
    events = {"deviceProperties": [{"id": 0, "name": "Tesla T4"}], "traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::relu", "pid": 1, "tid": 1, "ts": 0, "dur": 5,
         "args": {"Input Dims": [[4]], "Input type": ["float"]}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaGetDeviceCount", "pid": 1, "tid": 1, "ts": 6, "dur": 1,
         "args": {"correlation": 1}}]}
    path = tmp_path / "cpu.json"
    path.write_text(json.dumps(events))
    trace = pipeline.read(path)
    assert trace.gpu_work_without_device is None
    assert device_of(trace.meta, trace.device, False) == ("cpu", "unknown CPU")
    assert pipeline.costed(trace).kernels.kind.tolist() == ["cpu_op"]


def test_a_cpu_lstm_asking_cudnn_is_acceptable_stays_a_cpu_trace(tmp_path):
    # nn.LSTM on the CPU calls aten::cudnn_is_acceptable (a query, no GPU work) before its mkldnn layers:
    # a CPU trace (it was read as a GPU trace that lost its kernels: no rows at all)
    events = {"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::cudnn_is_acceptable", "pid": 1, "tid": 1, "ts": 0, "dur": 1,
         "args": {"Input Dims": [[4, 3, 8]], "Input type": ["float"]}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::relu", "pid": 1, "tid": 1, "ts": 2, "dur": 5,
         "args": {"Input Dims": [[4]], "Input type": ["float"]}}]}
    path = tmp_path / "cpu_lstm.json"
    path.write_text(json.dumps(events))
    trace = pipeline.read(path)
    assert trace.gpu_work_without_device is None
    assert pipeline.costed(trace).kernels.name.tolist() == ["aten::relu"]


def test_an_event_whose_category_is_not_a_string_is_skipped_not_fatal(tmp_path):
    # a hand-edited or foreign event ("cat": ["odd"]) beside a torch.profiler op: the op is read, the event
    # counted as foreign (it used to raise TypeError: unhashable type 'list')
    p = tmp_path / "odd.json"
    p.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "cat": ["odd"], "name": "x", "ts": 3, "dur": 1},
        {"ph": "X", "cat": {"a": 1}, "name": "y", "ts": 4, "dur": 1},
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "ts": 1, "dur": 2, "pid": 1, "tid": 1}]}))
    for keep in (False, True):
        trace = pipeline.read(p, keep_events=keep)
        assert trace.ops.name.tolist() == ["aten::add"] and trace.foreign_events == 2


# libkineto/include/ActivityType.h (pytorch/kineto @ 114171dfba68, 2026): every category Kineto writes
KINETO_ACTIVITY_TYPES = (
    "cpu_op", "user_annotation", "gpu_user_annotation", "gpu_memcpy", "gpu_memset", "kernel",
    "external_correlation", "cuda_runtime", "cuda_driver", "cpu_instant_event", "python_function", "overhead",
    "mtia_runtime", "mtia_ccp_events", "mtia_insight", "cuda_sync", "cuda_event", "mtia_counters",
    "glow_runtime", "cuda_profiler_range", "hpu_op", "xpu_runtime", "xpu_driver", "collective_comm",
    "privateuse1_runtime", "privateuse1_driver", "xpu_scope_profiler", "xpu_sync", "hardware_counters",
    # names the same table held in earlier commits (2021-2025)
    "gpu_user_Annotation", "mtia_workloadd", "mtia_collective_comm")


@pytest.mark.parametrize("keep", [False, True])
def test_every_kineto_category_is_read_or_ignored_as_kineto_writes_it(tmp_path, keep):
    # One aten::mm([64, 32], [32, 16]) per host runtime Kineto knows (CUDA, XPU, PrivateUse1, MTIA; runtime
    # and driver), each launching one kernel by correlation; MTIA's device work is an mtia_ccp_events
    # event. Beside them one complete event of every other category on the device's stream or a host
    # thread: none of them is a row, none is foreign. Each mm: 2 x 64 x 32 x 16 = 65,536 FLOPs.
    from wlprof.trace.parse import _CATEGORY, KINETO_CATEGORIES

    assert all(c in _CATEGORY or c in KINETO_CATEGORIES for c in KINETO_ACTIVITY_TYPES)
    runtimes = [("cuda_runtime", "cudaLaunchKernel", "kernel"), ("cuda_driver", "cuLaunchKernel", "kernel"),
                ("xpu_runtime", "urEnqueueKernelLaunch", "kernel"), ("xpu_driver", "zeCommandListAppendLaunchKernel",
                                                                      "kernel"),
                ("privateuse1_runtime", "aclrtLaunchKernel", "kernel"),
                ("privateuse1_driver", "LaunchKernel", "kernel"), ("mtia_runtime", "mtiaLaunchKernel", "mtia_ccp_events")]
    events = []
    for i, (cat, api, dev_cat) in enumerate(runtimes, 1):
        t = 100 * i
        events += [
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": t, "dur": 20,
             "args": {"External id": i, "Input Dims": [[64, 32], [32, 16]], "Input type": ["float", "float"]}},
            {"ph": "X", "cat": cat, "name": api, "pid": 1, "tid": 1, "ts": t + 5, "dur": 3,
             "args": {"External id": i, "correlation": 1000 + i}},
            {"ph": "X", "cat": dev_cat, "name": f"gemm_{cat}", "pid": 0, "tid": 7, "ts": t + 30, "dur": 4,
             "args": {"External id": i, "correlation": 1000 + i, "device": 0, "stream": 7}}]
    read = set(_CATEGORY)
    for j, cat in enumerate(c for c in KINETO_ACTIVITY_TYPES if c not in read):
        events.append({"ph": "X", "cat": cat, "name": f"other_{cat}", "pid": 0, "tid": 7, "ts": 1000 + j,
                       "dur": 0.5, "args": {"correlation": 5000 + j}})
    events.append({"ph": "C", "cat": "hardware_counters", "name": "sm__cycles", "pid": "GPU 0 Counters",
                   "tid": 0, "ts": 1100, "args": {"": 7}})
    p = tmp_path / "every_category.json"
    p.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    trace = pipeline.read(p, keep_events=keep)
    assert trace.foreign_events == 0
    k = pipeline.costed(trace).kernels
    assert sorted(k.name) == sorted(f"gemm_{c}" for c, _, _ in runtimes)
    assert (k.kind == "kernel").all() and (k.join_method == "external_id").all()
    assert (k.op_name == "aten::mm").all() and (k.flops == 2 * 64 * 32 * 16).all()
    assert sorted(k.launch_api) == sorted(api for _, api, _ in runtimes)
    # a category Kineto does not write is foreign, and read as nothing
    p.write_text(json.dumps({"traceEvents": events[:3] + [{**events[2], "cat": "npu_kernel"}]}))
    trace = pipeline.read(p, keep_events=keep)
    assert trace.foreign_events == 1 and len(pipeline.costed(trace).kernels) == 1


@pytest.mark.parametrize("keep", [False, True])
def test_mtia_device_events_are_kernels_and_dma_copies_and_their_waits_are_skipped(tmp_path, keep):
    # HTA's MTIA training trace (Nov 2024; no deviceProperties): `mtia_runtime` runFunction calls carry the
    # correlation of their `mtia_ccp_events` kernel and no External id, so the kernel takes the op its launch
    # lies in. fc-dtype_Float (45,577.336 us) runs in addmm.out(bias [256], x [1024,1463], w [1463,256], 1, 1,
    # out [1024,256]): 2 x 1024 x 1463 x 256 = 767,033,344 FLOPs; bytes 256*4 + 1024*1463*4 + 1463*256*4
    # read + 1024*256*4 written = 1,024 + 5,992,448 + 1,498,112 + 1,048,576 = 8,540,160. mul.out of three
    # float [1024,256]: 262,144 FLOPs, 2 reads + 1 write = 3,145,728 bytes. Two dma_request copies move
    # their `size` (16 and 163,840 bytes).
    t = pipeline.read(PUBLIC / "hta_2024_mtia_training_trimmed.json.gz", keep_events=keep)
    assert t.mtia_events == 4 and t.foreign_events == 0
    assert device_of(t.meta, t.device, mtia=True) == ("cuda", "unknown MTIA")  # it read "unknown GPU"
    k = pipeline.costed(t).kernels.sort_values("ts_us")
    assert k.kind.tolist() == ["memcpy", "memcpy", "kernel", "kernel"]
    assert k.dur_us.tolist() == pytest.approx([8.136, 48.024, 45_577.336, 150.552])
    assert k["bytes"].tolist() == [16, 163_840, 8_540_160, 3_145_728]
    assert k.flops.tolist()[2:] == [767_033_344, 262_144]
    assert k.op_name.tolist()[2:] == ["aten::addmm", "aten::mul"] and k.join_method.tolist()[2:] == ["time"] * 2
    if keep:  # `wlprof ingest` names the device so
        from wlprof.ingest import ingest

        run = ingest(PUBLIC / "hta_2024_mtia_training_trimmed.json.gz", traces=tmp_path, jobs=1)
        assert set(wlprof.load(run.path).device_name) == {"unknown MTIA"}
    # HTA's MTIA inference trace (Jan 2026, an ARTEMIS device): an event_wait of 15,863.105 us and an
    # event_record are no rows; a dma_request of 1,024 bytes and a merge kernel (no op launched it) are
    t = pipeline.read(PUBLIC / "hta_2026_mtia_inference_event_wait.json.gz", keep_events=keep)
    assert t.mtia_events == 2 and device_of(t.meta, t.device, mtia=True) == ("cuda", "ARTEMIS")
    k = pipeline.costed(t).kernels.sort_values("ts_us")
    assert list(zip(k.kind, k.name, k.dur_us, strict=True)) == [("memcpy", "dma_request", 5.24),
                                                                ("kernel", "merge", 7_606.409)]
    assert k["bytes"].tolist()[0] == 1_024 and not k.has_op.any()


def test_fsdp2_collectives_without_record_param_comms_are_sized_by_their_ops():
    # torch 2.3's FSDP2 on 2 ranks: _c10d_functional::reduce_scatter_tensor(float [4096, 8, 1024]) around
    # c10d::reduce_scatter_tensor_coalesced_(out [[2048, 8, 1024]], in [[4096, 8, 1024]]), and the all_gather
    # back. S: the reduce_scatter's input, the all_gather's output, 33,554,432 floats = 134,217,728 bytes
    k = pipeline.costed(pipeline.read(PUBLIC / "tokenomics_2024_rtx4090_fsdp2_coalesced.json.gz")).kernels
    k = k.set_index("collective")
    rs, ag = k.loc["reduce_scatter"], k.loc["all_gather"]
    assert (rs.group_size, rs.comm_dtype, rs.comm_bytes) == (2, "float32", 134217728)
    assert (ag.group_size, ag.comm_dtype, ag.comm_bytes) == (2, "float32", 134217728)
    # the reduce_scatter's kernel is costed from its op: the input read, half of it written, 1/2 x S adds
    assert (rs.bytes, rs.flops, rs.flops_source) == (134217728 + 67108864, 16777216, "formula")
    assert rs.algbw_gbps == pytest.approx(134217728 / rs.dur_us / 1e3)
    # the all_gather's op names no dtype (tensor lists) and NCCL's AllGather kernel none: bytes unknown
    assert np.isnan(ag.bytes) and ag.flops == 0


def test_record_param_comms_without_a_message_is_sized_by_its_c10d_op():
    # param's DLRM rank 0 of 8 (V100, Sep 2023): record_param_comms records no `In msg nelems` or dtype,
    # only its own first input. Nested in c10d::alltoall_base_(out float [6144], in float [6144]): the
    # SendRecv kernel reads 6,144 x 4 = 24,576 bytes and writes as many, 0 FLOPs. The all_reduce_'s
    # TensorList is recorded as `[]` (no size anywhere): its kernel stays unknown.
    k = pipeline.costed(pipeline.read(PUBLIC / "param_2023_v100_dlrm_c10d_record_param_comms.json.gz")).kernels
    k = k.set_index("collective")
    a2a, ar = k.loc["all_to_all"], k.loc["all_reduce"]
    assert a2a.op_name == "record_param_comms" and a2a.cost_dtype == "float32"
    assert (a2a.flops, a2a.bytes, a2a.bytes_written) == (0, 2 * 24576, 24576)
    assert (a2a.comm_bytes, a2a.group_size) == (24576, 8)
    assert ar.op_name == "record_param_comms" and np.isnan(ar.bytes) and np.isnan(ar.flops)


def test_cudnn_kernels_with_index_types_type_an_untyped_convolution():
    # Kineto's autograd-API ResNet-50 sample (V100, Jan 2021: `Input type` []). cudnn_convolution(
    # [32, 1024, 14, 14], [512, 1024, 1, 1]) launched im2col4d_kernel<float, long> and
    # explicit_convolve_sgemm<float, int, ...>: each names an index type beside float, float is the
    # type they share. Output [32, 512, 14, 14] from the backward's grad_output:
    # 2 x 32 x 512 x 14 x 14 x 1024 = 6,576,668,672 FLOPs; bytes 4 x (32 x 1024 x 196 + 512 x 1024 +
    # 32 x 512 x 196) = 40,632,320, split over the two kernels. It was unknown.
    k = pipeline.costed(pipeline.read(PUBLIC / "kineto_2021_v100_cudnn_index_typed_kernels.json.gz")).kernels
    assert len(k) == 2 and (k.op_name == "aten::cudnn_convolution").all()
    assert k.flops.sum() == pytest.approx(6_576_668_672) and k["bytes"].sum() == pytest.approx(40_632_320)
    assert (k.cost_dtype == "float32").all()


def test_an_xpu_trace_as_kinetos_xpu_plugin_writes_it(tmp_path):
    # The layout of libkineto/src/plugin/xpupti/XpuptiActivityHandlers.cpp (pytorch/kineto @ 114171dfba68):
    # `xpu_runtime` urEnqueueKernelLaunch calls, kernels on a SYCL queue (`sycl queue`, `l0 queue`, no
    # `stream`), copies named by Intel PTI's kinds (`Memcpy D2D (DEVICE -> DEVICE)`) with their `bytes`,
    # deviceProperties of a SYCL device (no computeMajor). aten::mm([64, 32], [32, 16]) float:
    # 2 x 64 x 32 x 16 = 65,536 FLOPs, 4 x (2,048 + 512 + 1,024) = 14,336 bytes. Copies of 4,096 bytes
    # that no op launched: D2D reads and writes device memory (8,192, 4,096 written), D2H only reads it
    # (4,096, none written), H2D only writes it.
    ev = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 7, "tid": 7, "ts": 100.0, "dur": 20.0,
           "args": {"External id": 1, "Input Dims": [[64, 32], [32, 16]], "Input type": ["float", "float"],
                    "Concrete Inputs": ["", ""]}},
          {"ph": "X", "cat": "xpu_runtime", "name": "urEnqueueKernelLaunch", "pid": 7, "tid": 7, "ts": 105.0,
           "dur": 4.0, "args": {"External id": 1, "correlation": 4131}},
          {"ph": "X", "cat": "kernel", "name": "gemm_kernel", "pid": 0, "tid": 64, "ts": 130.0, "dur": 8.96,
           "args": {"External id": 1, "appended": "129.500", "submitted": "129.800", "device": 0,
                    "context": "0x000055d08918fc78", "sycl queue": 64, "l0 queue": "0x000055d08b8fc138",
                    "kernel_id": 1, "correlation": 4131}}]
    for i, (kind, src, dst) in enumerate((("D2D", "DEVICE", "DEVICE"), ("D2H", "DEVICE", "HOST"),
                                          ("H2D", "HOST", "DEVICE"))):
        ev += [{"ph": "X", "cat": "xpu_runtime", "name": "urEnqueueUSMMemcpy", "pid": 7, "tid": 7,
                "ts": 200.0 + 100 * i, "dur": 3.0, "args": {"External id": 0, "correlation": 5000 + i}},
               {"ph": "X", "cat": "gpu_memcpy", "name": f"Memcpy {kind} ({src} -> {dst})", "pid": 0, "tid": 64,
                "ts": 230.0 + 100 * i, "dur": 2.0,
                "args": {"l0 call": "zeCommandListAppendMemoryCopy", "device": 0, "sycl queue": 64,
                         "correlation": 5000 + i, "memory_op_id": i, "bytes": 4096}}]
    props = [{"id": 0, "name": "Intel(R) Data Center GPU Max 1550", "totalGlobalMem": 68719476736,
              "maxComputeUnits": 448, "maxWorkGroupSize": 1024, "vendor": "Intel(R) Corporation"}]
    p = tmp_path / "xpu.json"
    p.write_text(json.dumps({"schemaVersion": 1, "deviceProperties": props, "traceEvents": ev}))
    trace = pipeline.read(p, keep_events=False)
    assert trace.foreign_events == 0
    assert device_of(trace.meta, trace.device) == ("cuda", "Intel(R) Data Center GPU Max 1550")
    k = pipeline.costed(trace).kernels.set_index("name")
    mm = k.loc["gemm_kernel"]
    assert (mm.op_name, mm.join_method, mm.launch_api) == ("aten::mm", "external_id", "urEnqueueKernelLaunch")
    assert (mm.flops, mm.bytes, mm.stream) == (65536, 14336, 64)
    copies = k[k.kind == "memcpy"]
    assert copies.bytes.to_dict() == {"Memcpy D2D (DEVICE -> DEVICE)": 8192, "Memcpy D2H (DEVICE -> HOST)": 4096,
                                      "Memcpy H2D (HOST -> DEVICE)": 4096}
    assert copies.bytes_written.to_dict() == {"Memcpy D2D (DEVICE -> DEVICE)": 4096,
                                              "Memcpy D2H (DEVICE -> HOST)": 0, "Memcpy H2D (HOST -> DEVICE)": 4096}


def test_kernels_of_a_trace_without_runtime_events_carry_their_ops_costs():
    # pytorch's inductor test example: aten::addmm(bias [1000], [1, 2048], [2048, 1000]) launched cutlass_addmm
    # directly: 2 x 1 x 2048 x 1000 = 4,096,000 FLOPs; bytes (fp32) 4 x (1000 + 2048 + 2,048,000 + 1000)
    k = pipeline.costed(pipeline.read(PUBLIC / "pytorch_2025_h100_kernels_without_runtime.json.gz")).kernels
    gemm = k.set_index("name").loc["void cutlass_addmm"]
    assert (gemm.op_name, gemm.flops, gemm.bytes) == ("aten::addmm", 4096000, 4 * (1000 + 2048 + 2048000 + 1000))


def test_kernels_without_correlation_find_their_launch_by_external_id_and_the_op_by_time():
    # TraceLens' MI300 GEMM eval (converted from rocprof): ten aten::mm(half [131072, 32], [32, 32]), each
    # launching one kernel by hipExtModuleLaunchKernel; no event has a correlation, a kernel shares its
    # launch's External id (2, 4, ... 20), which is not its op's (1, 2, ... 10): kernel i belongs to op i.
    # 2 x 131072 x 32 x 32 FLOPs; 2 x (131072 x 32 + 32 x 32 + 131072 x 32) bytes.
    trace = pipeline.read(PUBLIC / "tracelens_2026_rocprof_linked_by_external_id.json.gz", keep_events=False)
    assert any("no correlation ids" in w for w in trace.warnings)
    k = pipeline.costed(trace).kernels
    assert k.correlation.tolist() == list(range(2, 22, 2))
    assert k.external_id.tolist() == list(range(1, 11))
    assert (k.flops == 2 * 131072 * 32 * 32).all()
    assert (k.bytes == 2 * (131072 * 32 + 32 * 32 + 131072 * 32)).all()


def test_microsecond_epoch_timestamps_keep_whole_nanoseconds():
    # the same trace's ops start and end on whole microseconds since the epoch (1.77e15 us): back to back,
    # op 7 ends where op 8 starts; scaled as one float they were 256-ns multiples and overlapped, nesting
    # op 8 in op 7 (an aten::mm inside an aten::mm reads as a dispatcher, its cost dropped)
    trace = pipeline.read(PUBLIC / "tracelens_2026_rocprof_linked_by_external_id.json.gz", keep_events=False)
    ts, dur = trace.ops.ts_ns.to_numpy(), trace.ops.dur_ns.to_numpy()
    assert ts[0] == 1771536568809805000 and (ts % 1000 == 0).all() and (dur % 1000 == 0).all()
    assert ts[6] + dur[6] == ts[7] == 1771536568810011000


def test_a_trace_without_input_types_is_costed_by_its_kernels_element_type():
    # PyTorch 1.8 pre-release: `Input dims` without `Input type` ([]). aten::add_ of two float [32, 256, 56, 56]
    # launched AddFunctor<float>: n = 25,690,112 adds, 3 x 4 x n bytes (two reads, self written); it and every
    # other op were unknown (3.7% of the device rows had FLOPs)
    k = pipeline.costed(pipeline.read(PUBLIC / "kineto_2020_resnet50_array.json.gz", keep_events=False)).kernels
    n = 32 * 256 * 56 * 56
    add = k[(k.op_name == "aten::add_") & (k.op_input_dims == "[[32,256,56,56],[32,256,56,56],[]]")]
    assert len(add) == 18 and (add.flops == n).all() and (add.bytes == 12 * n).all()
    assert (add.cost_dtype == "float32").all()
    # aten::mm([32, 1000], [1000, 2048]) on volta_sgemm and its split-K reduce: 2 x 32 x 1000 x 2048 in all
    mm = k[(k.op_name == "aten::mm") & (k.op_input_dims == "[[32,1000],[1000,2048]]")]
    assert mm.flops.sum() == pytest.approx(2 * 32 * 1000 * 2048 * mm.external_id.nunique())
    # max_pool2d_with_indices_backward's kernel reads long indices beside float data: no one type, unknown
    assert k[k.op_name == "aten::max_pool2d_with_indices_backward"].bytes.isna().all()
    dev = k[k.kind != "cpu_op"]
    assert dev.flops.notna().mean() > 0.66


def test_torch2_h100_trace_with_python_stacks_costs_its_gemms_and_attention():
    # TraceLens' H100 ViT trace: 2,117 python_function events and 620 [memory] instant events around the ops
    k = pipeline.costed(pipeline.read(PUBLIC / "tracelens_h100_python_function_memory.json.gz")).kernels
    # aten::addmm(bias [768], [788, 768], [768, 768]) in bf16: 2 x 788 x 768 x 768 FLOPs;
    # bytes 2 x (768 + 788 x 768 + 768 x 768 + 788 x 768 written)
    mm = k[(k.op_name == "aten::addmm") & (k.op_input_dims == "[[768],[788,768],[768,768],[],[]]")]
    assert len(mm) > 0 and (mm.flops == 2 * 788 * 768 * 768).all()
    assert (mm.bytes == 2 * (768 + 788 * 768 + 768 * 768 + 788 * 768)).all()
    # _flash_attention_forward(q, k, v [4, 197, 12, 64]), not causal: 4 x B x H x S^2 x D
    fa = k[k.op_name == "aten::_flash_attention_forward"]
    assert (fa.flops == 4 * 4 * 12 * 197 * 197 * 64).all()


def test_gloo_collectives_of_a_cpu_only_rank_are_comm_rows():
    # HTA's cpu_only rank 34 of 300 (gloo): ten gloo:all_reduce annotations of float [321271] and [2082411]
    # on two worker threads, their c10d ops outside the sampled window
    trace = pipeline.read(PUBLIC / "hta_2024_cpu_only_gloo.json.gz")
    assert device_of(trace.meta, trace.device) == ("cpu", "unknown CPU")
    assert rank_of(trace.meta, -1) == 34
    k = pipeline.costed(trace).kernels
    assert k.kind.tolist() == ["comm"] * 10 and (k.collective == "all_reduce").all()
    assert sorted(set(k.comm_bytes)) == [4 * 321271, 4 * 2082411]
    assert (k.group_size == 300).all() and (k.comm_dtype == "float32").all()


def test_an_unexpanded_tensor_list_leaves_its_foreach_op_unknown():
    # TraceLens' MI300 ResNet trace (trimmed to two ops): aten::_foreach_add_(TensorList, TensorList, -0.001)
    # recorded as Input Dims [[], [], []] launched a 32 us multi_tensor_apply kernel; it was costed 0 and 0
    k = pipeline.costed(pipeline.read(PUBLIC / "tracelens_mi300_foreach_unexpanded.json.gz")).kernels.set_index("op_name")
    fe = k.loc["aten::_foreach_add_"]
    assert np.isnan(fe.flops) and np.isnan(fe.bytes) and fe.flops_source == "unknown"
    # aten::mul(bf16 [1000], a 0-d double, out bf16 [1000]) beside it: 1,000 multiplies; 2,000 bytes read, the
    # double's 8, 2,000 written
    mul = k.loc["aten::mul"]
    assert (mul.flops, mul.bytes) == (1000, 4008)



# mpashkovskiy/pytorch-trace-tui's test_trace.json: a memcpy and a memset with no `bytes` arg, and
# grid/block written as strings ("[128, 1, 1]")
TUI_EVENTS = [
    {"ph": "X", "cat": "kernel", "name": "volta_sgemm_128x64_nn", "pid": 0, "tid": 7, "ts": 1234567.89,
     "dur": 42.5, "args": {"device": 0, "stream": 7, "grid": "[128, 1, 1]", "block": "[256, 1, 1]",
                           "correlation": 12345}},
    {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "pid": 0, "tid": 7, "ts": 1234600.0, "dur": 15.2,
     "args": {"device": 0, "stream": 7, "correlation": 11111}},
    {"ph": "X", "cat": "gpu_memset", "name": "Memset", "pid": 0, "tid": 3, "ts": 1234580.0, "dur": 3.1,
     "args": {"device": 0, "stream": 3, "correlation": 33333}},
    {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoD (Device -> Device)", "pid": 0, "tid": 7,
     "ts": 1234700.0, "dur": 2.0, "args": {"device": 0, "stream": 7, "correlation": 11112, "bytes": 4096}}]


def _tui_kernels(tmp_path, keep):
    p = tmp_path / "tui.json"
    p.write_text(json.dumps({"traceEvents": TUI_EVENTS}))
    return pipeline.costed(pipeline.read(p, keep_events=keep)).kernels.set_index("name")


@pytest.mark.parametrize("keep", [False, True])
def test_a_copy_without_a_bytes_arg_moves_unknown_bytes(tmp_path, keep):
    # both copies read as 0 bytes, known (flops_source formula)
    k = _tui_kernels(tmp_path, keep)
    assert np.isnan(k.loc["Memcpy HtoD", "bytes"]) and np.isnan(k.loc["Memset", "bytes"])
    assert k.loc["Memcpy HtoD", "flops_source"] == "unknown"
    assert k.loc["Memcpy DtoD (Device -> Device)", "bytes"] == 2 * 4096  # read and written on the device


@pytest.mark.parametrize("keep", [False, True])
def test_a_grid_written_as_a_string_is_read(tmp_path, keep):
    # it read as 0 x 0 x 0
    g = _tui_kernels(tmp_path, keep).loc["volta_sgemm_128x64_nn"]
    assert (g.grid_x, g.grid_y, g.grid_z, g.block_x, g.block_y, g.block_z) == (128, 1, 1, 256, 1, 1)


def test_a_b300_moe_trace_joins_its_driver_launched_gemms_and_costs_the_expert_gather():
    # TraceLens' B300 MoE eval (CUDA 13.1, torch with sm103 cuBLAS): 36 kernels, 9 of them nvjet GEMMs
    # launched by cuLaunchKernelEx, the rest by cudaLaunchKernel; experts gathered by aten::index
    path = PUBLIC / "tracelens_2026_b300_moe_index_gather.json.gz"
    trace = pipeline.read(path)
    assert device_of(trace.meta, trace.device, False) == ("cuda", "NVIDIA B300 SXM6 AC")
    c = pipeline.costed(trace)
    k = c.kernels
    assert len(k) == 36 and k.has_op.all() and k.flops.notna().all() and k.bytes.notna().all()
    assert k.dur_us.sum() == pytest.approx(231.454, abs=1e-6)
    assert (k.launch_api == "cuLaunchKernelEx").sum() == 9 and k[k.launch_api == "cuLaunchKernelEx"].name.str.startswith(
        "nvjet_sm103").all()
    o = c.ops.drop_duplicates(["op_name", "op_input_dims"]).set_index(["op_name", "op_input_dims"])
    # router: [16, 512] x [512, 64] bf16: 2*16*512*64 FLOPs, (16*512 + 512*64 + 16*64) * 2 bytes
    assert o.loc[("aten::mm", "[[16,512],[512,64]]"), ["flops", "bytes"]].tolist() == [1_048_576, 83_968]
    # expert w1: [32, 1, 512] x [32, 512, 1024]: 2*32*512*1024 FLOPs, (32*512 + 32*512*1024 + 32*1024) * 2 bytes
    assert o.loc[("aten::bmm", "[[32,1,512],[32,512,1024]]"), ["flops", "bytes"]].tolist() == [33_554_432, 33_652_736]
    # w1[idx] with 32 int64 indices (the nested as_strided gives [32, 512, 1024]): the 32 gathered
    # experts read and written (2 * 32*512*1024 * 2 bytes) and the indices read (32 * 8), not all 64 experts
    assert o.loc[("aten::index", "[[64,512,1024],[]]"), "bytes"] == 2 * 32 * 512 * 1024 * 2 + 32 * 8


def _as_begin_end(events, cats=None) -> list:
    """Complete events (of `cats`, or all) rewritten as Chrome's begin/end pairs, each E right after its B."""
    out = []
    for e in events:
        if isinstance(e, dict) and e.get("ph") == "X" and (cats is None or e.get("cat") in cats):
            out.append({**{k: v for k, v in e.items() if k != "dur"}, "ph": "B"})
            out.append({"ph": "E", "pid": e["pid"], "tid": e["tid"], "ts": e["ts"] + e["dur"]})
        else:
            out.append(e)
    return out


@pytest.mark.parametrize("keep", [False, True])
@pytest.mark.parametrize(("name", "n", "us"), [
    ("tracelens_2026_b300_moe_index_gather.json.gz", 36, 231.454),
    # whole-µs times: a kernel ends where the next on its stream begins, and the file is not in time order
    ("hta_2023_simple_add_ext_eq_corr.json.gz", 98, 49_816.0),
])
def test_begin_end_pairs_read_as_the_complete_events_they_stand_for(tmp_path, keep, name, n, us):
    # read as 'recorded no op, kernel or runtime event: nothing ran' (every B/E event dropped); the
    # second, paired in time order, closed a kernel at the start of the next one on its stream
    path = PUBLIC / name
    doc, events = raw(path)
    p = tmp_path / "be.json"
    p.write_text(json.dumps({**doc, "traceEvents": _as_begin_end(events)}))
    cols = ["name", "dur_us", "op_name", "op_input_dims", "flops", "bytes", "join_method", "step", "has_op"]
    ref = pipeline.costed(pipeline.read(path))
    got = pipeline.costed(pipeline.read(p, keep_events=keep))
    assert raw_device(events) == (n, pytest.approx(us, abs=1e-6))
    assert (len(got.kernels), got.kernels.dur_us.sum()) == (n, pytest.approx(us, abs=1e-6))
    assert got.kernels[cols].equals(ref.kernels[cols])
    assert got.ops[["op_name", "flops", "bytes", "dur_us"]].equals(ref.ops[["op_name", "flops", "bytes", "dur_us"]])


@pytest.mark.parametrize("keep", [False, True])
def test_profiler_steps_written_as_begin_end_pairs_keep_their_steps(tmp_path, keep):
    # only the user annotations as B/E (the ops, launches and kernels complete): the ProfilerStep#N
    # regions were dropped, so every kernel fell into step 0
    doc, events = raw(FIXTURES / "h200_probe_ops.json.gz")
    steps = sorted({e["name"] for e in events if isinstance(e, dict) and str(e.get("name")).startswith("ProfilerStep#")})
    assert steps == ["ProfilerStep#1", "ProfilerStep#2"]
    p = tmp_path / "ann_be.json"
    p.write_text(json.dumps({**doc, "traceEvents": _as_begin_end(events, {"user_annotation"})}))
    ref = pipeline.costed(pipeline.read(FIXTURES / "h200_probe_ops.json.gz")).kernels
    got = pipeline.costed(pipeline.read(p, keep_events=keep)).kernels
    assert sorted(got.step.unique()) == [1, 2]
    assert got[["name", "step", "region", "op_name"]].equals(ref[["name", "step", "region", "op_name"]])


def test_a_begin_without_its_end_is_skipped_and_told(tmp_path):
    doc, events = raw(PUBLIC / "tracelens_2026_b300_moe_index_gather.json.gz")
    be = _as_begin_end(events)
    last_end = max(i for i, e in enumerate(be) if isinstance(e, dict) and e.get("ph") == "E")
    p = tmp_path / "open.json"
    p.write_text(json.dumps({**doc, "traceEvents": be[:last_end] + be[last_end + 1:]}))
    trace = pipeline.read(p)
    assert any("1 begin/end (ph B/E) events without their other half were skipped" in w for w in trace.warnings)


def test_pytorch_1_8_cudnn_backward_halves_are_costed_from_their_callers_record():
    # cudnn_convolution_backward(self [32,512,7,7], grad_output [32,2048,7,7], weight [2048,512,1,1]) runs
    # _backward_input([], grad_output, weight) and _backward_weight([], grad_output, self): each half records
    # its size argument as [], its caller the tensor. Both halves: 2 x 32 x 2048 x 512 x 7 x 7 x 1 x 1 =
    # 3,288,334,336 FLOPs. Bytes in float32: grad_output 32*2048*49*4 = 12,845,056 read by each; the input
    # half reads the weight (2048*512*4 = 4,194,304) and writes the input's gradient (32*512*49*4 =
    # 3,211,264); the weight half reads the input and writes the weight's gradient: 20,250,624 each.
    k = pipeline.costed(pipeline.read(PUBLIC / "kineto_2020_resnet50_array.json.gz", keep_events=False)).kernels
    flops, nbytes = 2 * 32 * 2048 * 512 * 7 * 7, 12_845_056 + 4_194_304 + 3_211_264
    for name, dims in (("aten::cudnn_convolution_backward_input", "[[],[32,2048,7,7],[2048,512,1,1]"),
                       ("aten::cudnn_convolution_backward_weight", "[[],[32,2048,7,7],[32,512,7,7]")):
        half = k[(k.op_name == name) & k.op_input_dims.str.startswith(dims)]
        assert half.external_id.nunique() > 0
        per_call = half.groupby("external_id")[["flops", "bytes"]].sum()
        # the op's cost is shared over its kernels: their sum gives it back up to the float rounding
        assert per_call.flops.to_numpy() == pytest.approx(flops, rel=1e-12)
        assert per_call["bytes"].to_numpy() == pytest.approx(nbytes, rel=1e-12)
    # every half of every layer is costed
    dev = k[k.kind == "kernel"]
    halves = dev[dev.op_name.fillna("").str.startswith("aten::cudnn_convolution_backward_")]
    assert len(halves) and halves.flops.notna().all()


def test_pytorch_1_8_convolution_forwards_take_their_output_from_the_backwards_grad_output():
    # cudnn_convolution(self, weight, ...) records no stride, padding or output. Its backward
    # cudnn_convolution_backward(self, grad_output, weight) records the output's dims as grad_output's:
    # the stem [32,3,224,224] x [64,3,7,7] has grad_output [32,64,112,112], so
    # 2 x 32 x 64 x 112 x 112 x 3 x 7 x 7 = 7,552,892,928 FLOPs per call; bytes in float32:
    # input 32*3*224*224*4 = 19,267,584, weight 64*3*49*4 = 37,632, output 32*64*112*112*4 = 102,760,448.
    from torch.utils.flop_counter import FlopCounterMode

    _, events = raw(PUBLIC / "kineto_2020_resnet50_array.json.gz")
    k = pipeline.costed(pipeline.read(PUBLIC / "kineto_2020_resnet50_array.json.gz", keep_events=False)).kernels
    dev = k[k.kind == "kernel"]
    conv = dev[dev.op_name == "aten::cudnn_convolution"]
    stem = conv[conv.op_input_dims.str.startswith("[[32,3,224,224],[64,3,7,7]")].groupby("external_id").sum()
    assert len(stem) == 6  # the inner of each nested pair, six steps
    assert stem.flops.to_numpy() == pytest.approx(7_552_892_928, rel=1e-12)
    assert stem["bytes"].to_numpy() == pytest.approx(19_267_584 + 37_632 + 102_760_448, rel=1e-12)
    # every costed forward against FlopCounterMode on meta tensors of the same shapes (the counts
    # depend on the shapes only): the stride and padding that give the backward's output dims
    outputs = {}
    for e in events:
        if isinstance(e, dict) and e.get("name") == "aten::cudnn_convolution_backward":
            x, go, w = e["args"]["Input dims"][:3]
            outputs.setdefault((tuple(x), tuple(w)), set()).add(tuple(go))
    checked = 0
    for dims, calls in conv[conv.flops.notna()].groupby("op_input_dims"):
        x, w = json.loads(dims)[:2]
        (out,) = outputs[(tuple(x), tuple(w))]
        kh = w[2]
        xt, wt = torch.empty(x, device="meta"), torch.empty(w, device="meta")
        with FlopCounterMode(display=False) as counter:
            y = torch.nn.functional.conv2d(xt, wt, stride=x[2] // out[2], padding=(kh - 1) // 2)
        assert tuple(y.shape) == out, dims
        per_call = calls.groupby("external_id").flops.sum().to_numpy()
        assert per_call == pytest.approx(counter.get_total_flops(), rel=1e-12), dims
        checked += 1
    assert checked == 23
    # every forward is costed, the two shapes whose kernels name an index type beside float
    # (im2col4d_kernel<float, long>, explicit_convolve_sgemm<float, int, ...>) too: 451,507 + 130,507 =
    # 582,014 us of the 649,603 us of kernel time have FLOPs (89.6%; 69.5% without the forwards)
    assert conv.dur_us[conv.flops.notna()].sum() == pytest.approx(130_507)
    assert dev.dur_us[dev.flops.notna()].sum() == pytest.approx(582_014)


def test_an_inference_trace_without_concrete_inputs_costs_its_convolutions_by_the_ops_after_them():
    # DTU MLOps exercise (Jan 2023, PyTorch 1.12 on a CPU): ResNet-18's forward, recorded with shapes but no
    # Concrete Inputs and no backward; trimmed to the stem conv (7x7, stride 2, padding 3) and a 1x1 stride-2
    # downsample conv, each with the BatchNorm after it (whose counter add_ runs first)
    k = pipeline.costed(pipeline.read(PUBLIC / "dtu_mlops_2023_cpu_resnet18_conv_without_concrete_inputs.json.gz")
                        ).kernels
    conv = k[k.name == "aten::mkldnn_convolution"].set_index("op_input_dims")
    stem = conv.loc["[[5,3,224,224],[64,3,7,7],[],[],[],[],[]]"]
    down = conv.loc["[[5,64,56,56],[128,64,1,1],[],[],[],[],[]]"]
    # 2 x 5 x 64 x 112^2 x 3 x 49, the same as the course's 2024 trace of this model with Concrete Inputs
    assert stem.flops == 2 * 5 * 64 * 112 * 112 * 3 * 49
    # reads x and w, writes the [5, 64, 112, 112] output (fp32)
    assert stem.bytes == 4 * (5 * 3 * 224 * 224 + 64 * 3 * 49 + 5 * 64 * 112 * 112)
    assert down.flops == 2 * 5 * 128 * 28 * 28 * 64


def test_a_windows_trace_spells_int64_as_msvc_does_and_its_ops_are_costed():
    # DTU MLOps exercise on Windows (Jan 2023, PyTorch 1.13, CPU): MSVC writes a 64-bit integer's type
    # as '__int64' (GCC 'long int', Clang 'long long'); no Concrete Inputs. Trimmed to the stem conv, the
    # BatchNorm after it (whose running-count add_ on 0-d int64 tensors runs first), the ReLU, the max pool
    # and the next conv, BatchNorm and ReLU
    k = pipeline.costed(pipeline.read(PUBLIC / "dtu_mlops_2023_windows_cpu_msvc_int64.json.gz")).kernels
    assert list(k.name) == ["aten::mkldnn_convolution", "aten::add_", "aten::native_batch_norm", "aten::clamp_min_",
                            "aten::max_pool2d_with_indices"] + ["aten::mkldnn_convolution", "aten::add_",
                                                                "aten::native_batch_norm", "aten::clamp_min_"]
    add = k[k.name == "aten::add_"].iloc[0]
    assert add.op_input_types == '["__int64","__int64","Scalar"]'
    # one add; reads two 0-d int64 (8 + 8 bytes), writes one (8)
    assert (add.flops, add.bytes, add.cost_dtype) == (1, 24, "int64")
    # each conv's output dims come from the BatchNorm after it: 2 x 5 x 64 x 112^2 x 3 x 49 for the stem,
    # 2 x 5 x 64 x 56^2 x 64 x 9 for the 3x3 one
    conv = k[k.name == "aten::mkldnn_convolution"]
    assert conv.flops.tolist() == [2 * 5 * 64 * 112 * 112 * 3 * 49, 2 * 5 * 64 * 56 * 56 * 64 * 9]
    # the max pool's window is not recorded: no FLOPs; its output dims come from the conv after it, so its
    # bytes are known: x read (5*64*112*112 fp32), the [5, 64, 56, 56] output (fp32) and indices (int64) written
    pool = k[k.name == "aten::max_pool2d_with_indices"].iloc[0]
    assert np.isnan(pool.flops)
    assert pool.bytes == 4 * 5 * 64 * 112 * 112 + 12 * 5 * 64 * 56 * 56
    assert k.bytes.notna().all() and k.flops.isna().sum() == 1

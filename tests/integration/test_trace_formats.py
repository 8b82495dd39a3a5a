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
    dev = [e for e in events if isinstance(e, dict) and e.get("ph") == "X" and e.get("cat") in DEVICE_CATS]
    return len(dev), float(sum(e.get("dur", 0) for e in dev))


PUBLIC_FILES = sorted(PUBLIC.glob("*.json.gz")) + sorted(PUBLIC.glob("*/*.json.gz"))


@pytest.mark.parametrize("path", PUBLIC_FILES, ids=lambda p: p.name)
def test_every_device_event_of_a_public_trace_is_one_row(path):
    _, events = raw(path)
    n, dur = raw_device(events)
    for keep in (False, True):  # the streaming reader and the whole-file parse agree
        c = pipeline.costed(pipeline.read(path, keep_events=keep))
        dev = c.kernels[c.kernels.kind != "cpu_op"]
        assert len(dev) == n
        assert dev.dur_us.sum() == pytest.approx(dur, rel=1e-9, abs=1e-6)


@pytest.mark.parametrize("name, device, methods, has_op_at_least", [
    # PyTorch 1.8 (2020): launches name their op by a lowercase `external id`; the 896 kernels
    # without one have no runtime event in the file (794) or ran outside every op (102)
    ("kineto_2020_resnet50_array.json.gz", "unknown GPU", {"external_id": 8952, "none": 896}, 0.909),
    ("kineto_2021_gpu_metrics_col0.json.gz", "Tesla V100-DGXS-32GB", {"external_id": 32}, 1.0),
    # External id == correlation: every launch placed in its op by time, none through the id
    ("hta_2023_simple_add_ext_eq_corr.json.gz", "NVIDIA A100-PG509-200", {"time": 98}, 1.0),
    ("hta_2024_nccl.json.gz", "NVIDIA A100-PG509-200", {"external_id": 3774}, 1.0),
    ("tracelens_mi300_bert_indent2.json.gz", "AMD Instinct MI300X VF", {"external_id": 61}, 1.0),
    ("tracelens_b200_eager_indent4.json.gz", "NVIDIA B200", {"external_id": 927, "none": 2}, 0.997),
    # 421 kernels replayed from HIP graphs: kept without an op
    ("tracelens_mi300_hip_graph.json.gz", "unknown GPU", {"external_id": 13, "graph": 421}, 0.0),
    ("hta_2022_inference_capitalized.json.gz", "unknown GPU", {"none": 4}, 0.0),
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


def test_every_layout_gives_the_same_tables(tmp_path):
    ref = pipeline.costed(pipeline.read(OURS)).kernels
    cols = ["name", "dur_us", "op_name", "op_input_dims", "flops", "bytes", "join_method", "step", "region"]
    for name, path in _layouts(tmp_path).items():
        for keep in (False, True):
            got = pipeline.costed(pipeline.read(path, keep_events=keep)).kernels
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

"""Traces written by other torch versions (tests/fixtures/torch_versions: 1.13.1, 2.1.2, 2.5.1, 2.14.1), read
by the torch wlprof runs with: every cpu_op event a row, the profiler's steps found, FLOPs per op equal to the
FlopCounterMode of the torch that wrote the trace (or, for 1.13, to counts derived by hand), no false warnings.

Each fixture holds 2 profiled steps (`schedule(wait=0, warmup=1, active=2)`) of a model of
`benchmarks/capture_versions.py`, beside FlopCounterMode's per-op count of one more step.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest
from fcm_credit import flop_counter_ops, flops_by_counted_op_per_step

ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "torch_versions"
TRACES = sorted(ROOT.glob("*/*.json.gz"))
IDS = [f"{p.parent.name}/{p.name.removesuffix('.json.gz')}" for p in TRACES]
_COSTED: dict = {}
# the versions whose schedule names its active steps ProfilerStep#0 and #1 (later ones: #1 and #2)
FROM_ZERO = {"1.13.1", "2.1.2"}


def _raw(path: Path) -> list[dict]:
    return json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]


def _costed(path: Path):
    from wlprof.pipeline import costed, read

    if path not in _COSTED:
        trace = read(path)
        _COSTED[path] = (trace, costed(trace))
    return _COSTED[path]


def _meta(path: Path) -> dict:
    return json.loads((path.parent / (path.name.removesuffix(".json.gz") + ".flops.json")).read_text())


def _flops_per_step(c, counted: set[str]) -> dict[int, dict[str, float]]:
    return {s: {op: v for op, v in d.items() if v} for s, d in flops_by_counted_op_per_step(c, counted).items()}


def test_fixtures_are_the_versions_they_name():
    assert len(TRACES) == 14
    for p in TRACES:
        meta = _meta(p)
        assert meta["torch"].split("+")[0] == p.parent.name and meta["device"] == "cpu"
        assert (meta["flop_counter_error"] is None) == (p.parent.name != "1.13.1")


@pytest.mark.parametrize("path", TRACES, ids=IDS)
def test_every_cpu_op_event_is_an_op_row(path):
    trace, c = _costed(path)
    raw = [e for e in _raw(path) if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    assert len(c.joined.ops) == len(raw)
    assert sorted(c.joined.ops.name.astype(str)) == sorted(e["name"] for e in raw)


@pytest.mark.parametrize("path", TRACES, ids=IDS)
def test_the_profiled_steps_are_found(path):
    # torch 1.13 and 2.1's schedule names its active steps ProfilerStep#0 and #1, 2.5 and later #1 and #2;
    # the ops outside them are the profiler's own start (a few zeros in 1.13)
    trace, c = _costed(path)
    raw = _raw(path)
    marked = sorted(int(e["name"].split("#")[1]) for e in raw if str(e.get("name", "")).startswith("ProfilerStep#"))
    assert marked == ([0, 1] if path.parent.name in FROM_ZERO else [1, 2])
    steps = c.joined.ops.step.value_counts()
    assert set(steps.index) - {-1} == set(marked)
    assert steps.get(-1, 0) <= 6
    a, b = (steps[s] for s in marked)
    assert a == b  # the same step twice: the same ops


def test_step_markers_written_at_their_steps_ends_are_stretched():
    # torch 2.5.1 with with_stack=True writes each ProfilerStep#N as a ~20 µs span at the prof.step() call that
    # ends the step: no op lies in either. Each step is then taken from the end of the marker before it to the
    # end of its own; the ops' Ev Idx (the order the profiler recorded them in) checks the split: every op
    # recorded before ProfilerStep#2's marker (Ev Idx 1021) is in step 1, every one after in step 2
    from wlprof.trace.join import STEPS_AT_THEIR_ENDS

    path = ROOT / "2.5.1" / "stack-memory.json.gz"
    trace, c = _costed(path)
    assert trace.warnings == [STEPS_AT_THEIR_ENDS]
    raw = _raw(path)
    marker = {e["name"]: e for e in raw if str(e.get("name", "")).startswith("ProfilerStep#")}
    ops = [e for e in raw if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    inside = [e for e in ops for m in marker.values() if m["ts"] <= e["ts"] < m["ts"] + m["dur"]]
    assert inside == []
    second = marker["ProfilerStep#2"]["args"]["Ev Idx"]
    by_idx = {e["args"]["Ev Idx"]: (1 if e["args"]["Ev Idx"] < second else 2) for e in ops}
    rows = c.joined.ops
    assert len(rows) == len(ops) == len(by_idx)
    assert sorted(rows.step.tolist()) == sorted(by_idx.values())
    assert rows.step.value_counts().to_dict() == {1: 1018, 2: 1018}


@pytest.mark.parametrize("path", [p for p in TRACES if p.parent.name != "1.13.1" and "noshapes" not in p.name],
                         ids=[i for i, p in zip(IDS, TRACES, strict=True)
                              if p.parent.name != "1.13.1" and "noshapes" not in p.name])
def test_flops_per_op_of_each_step_equal_the_flop_counter_of_the_torch_that_wrote_it(path):
    # e.g. 2.14.1/convnet: convolution 1,032,192 (2*4*8*16*16*3*9 + 2*4*16*8*8*8*9), convolution_backward
    # 1,622,016 (both gradients of the second conv, 2 x 589,824, and the weight gradient of the first, 442,368:
    # its input needs none), addmm 1,280 (2*4*16*10), mm 2,560: per step, both steps
    trace, c = _costed(path)
    ref = {op: v for op, v in _meta(path)["flops"].items() if v}
    per = _flops_per_step(c, flop_counter_ops())
    marked = [0, 1] if path.parent.name in FROM_ZERO else [1, 2]
    assert sorted(per) == marked
    for step in marked:
        ours = {op: v for op, v in per[step].items() if op in flop_counter_ops()}
        assert ours == ref, step


def test_torch_1_13_convolution_backward_without_concrete_inputs():
    # torch 1.13.1 records no Concrete Inputs: convolution_backward's transposed and output_mask are read from
    # its tensors (grad_output [4,16,8,8] has the weight [16,8,3,3]'s dim 0 as channels: not transposed) and
    # from the gradients it allocates inside (as_strided_ to [4,8,8,8], [16], [16,8,3,3]: all three; the first
    # conv's to [8] and [8,3,3,3] only: no grad_input for the data). Per step, as FlopCounterMode of later
    # versions counts this model: 2*4*16*64*8*9 * 2 = 1,179,648 and 2*4*8*256*3*9 = 442,368
    path = ROOT / "1.13.1" / "convnet.json.gz"
    trace, c = _costed(path)
    k = c.kernels
    later = _meta(ROOT / "2.14.1" / "convnet.json.gz")["flops"]
    for step in (0, 1):
        bw = k[(k.op_name == "aten::convolution_backward") & (k.step == step)]
        assert sorted(bw.flops.tolist()) == [442_368, 1_179_648]
        assert bw.flops.sum() == later["aten::convolution_backward"]
        fw = k[(k.op_name == "aten::mkldnn_convolution") & (k.step == step)]
        assert fw.flops.sum() == later["aten::convolution"] == 1_032_192
    # bytes: grad_output read, the weight read and the input read where both gradients are made, the
    # gradients written: 4*(4*16*64 + 16*72 + 4*8*64 + 4*8*64 + 16*72 + 16) = 42,048
    assert set(k[k.op_name == "aten::convolution_backward"]["bytes"]) == {42_048, 45_952}
    assert trace.warnings == []


def test_torch_1_13_transformer_matches_later_flop_counter():
    # 2 x 16 tokens, d 32, 2 heads of 16, vocab 64; attention by matmul-softmax-matmul (no SDPA in 1.13):
    # addmm (the four linears with bias, forward): 2*32*32*96 + 2*32*32*32 + 2*32*32*128 * 2 = 786,432;
    # bmm: QK^T and AV, 2*4*16*16*16 each, forward and their 4 backward products: 6 * 32,768 = 196,608;
    # mm: the tied head forward 2*32*32*64 = 131,072 and every linear's two backward products
    # (2 * (196,608 + 65,536 + 262,144 * 2 + 131,072) = 1,835,008): 1,966,080.
    # addmm and mm equal FlopCounterMode's counts of the same model in torch 2.14.1 (its SDPA is one op there)
    path = ROOT / "1.13.1" / "transformer.json.gz"
    trace, c = _costed(path)
    later = _meta(ROOT / "2.14.1" / "transformer.json.gz")["flops"]
    for step in (0, 1):
        ours = _flops_per_step(c, flop_counter_ops())[step]
        assert ours == {"aten::addmm": 786_432, "aten::mm": 1_966_080, "aten::bmm": 196_608}
        assert ours["aten::addmm"] == later["aten::addmm"] and ours["aten::mm"] == later["aten::mm"]
    assert trace.warnings == []


def test_torch_1_13_rnn_flops_by_hand():
    # 4 x 10 tokens, d 16; LSTM (2 layers, gates 64), GRU (gates 48), head 16 -> 50. Forward:
    # LSTM: per layer the input projection 2*40*16*64 = 81,920 and 10 hidden products 2*4*16*64 = 8,192 each;
    # GRU: 2*40*16*48 = 61,440 and 10 x 6,144; head 2*40*16*50 = 64,000: 514,560. Backward: two products per
    # forward one, less the hidden state's gradient at t = 0 (h0 needs none): 2 x 8,192 + 6,144 = 22,528 fewer:
    # 1,006,592. Per step 1,521,152 (FlopCounterMode of later versions does not count their fused CPU LSTM,
    # mkldnn_rnn_layer, so it is no reference here)
    path = ROOT / "1.13.1" / "rnn.json.gz"
    trace, c = _costed(path)
    k = c.kernels
    for step in (0, 1):
        m = k[(k.cost_unit == "matrix") & (k.step == step)]
        assert m.flops.sum() == 1_521_152
        hidden_bw = m[m.op_input_dims.isin(["[[4,64],[64,16]]", "[[4,48],[48,16]]"])]
        assert hidden_bw.groupby("op_input_dims").size().to_dict() == {"[[4,48],[48,16]]": 9, "[[4,64],[64,16]]": 18}
    assert trace.warnings == []


def test_torch_1_13_index_ops_and_empty_lists():
    # embedding's index_select records no dim in 1.13: 0 inside an embedding, 32 rows of 32 floats copied:
    # 32*32*4 read + 32*8 index + 32*32*4 written = 8,448 bytes. embedding_dense_backward's num_weights (64) is
    # the rows of the [64, 32] grad_weight it zero-fills: 2*16*32 adds, 4,096 + 256 + 32*32*4 (32 rows touched)
    # = 8,448 bytes. cat's tensor lists are recorded as []: bytes unknown, not 0
    trace, c = _costed(ROOT / "1.13.1" / "transformer.json.gz")
    k = c.kernels
    sel = k[k.op_name == "aten::index_select"]
    assert len(sel) == 2 and set(sel["bytes"]) == {8_448} and set(sel.flops) == {0}
    emb = k[k.op_name == "aten::embedding_dense_backward"]
    assert len(emb) == 2 and set(emb.flops) == {1_024} and set(emb["bytes"]) == {8_448}
    cat = k[k.op_name == "aten::cat"]
    assert len(cat) == 2 and cat["bytes"].isna().all() and set(cat.op_input_dims) == {"[[],[]]"}


@pytest.mark.parametrize("path", TRACES, ids=IDS)
def test_no_false_warnings_and_the_cpu_is_unknown_without_a_host_name(path):
    from wlprof.trace.identity import device_of

    trace, c = _costed(path)
    if path.name != "stack-memory.json.gz" or path.parent.name != "2.5.1":
        assert trace.warnings == []
    kind, name = device_of(trace.meta, trace.device, trace.gpu_work_without_device is not None, trace.mtia_events > 0)
    assert kind == "cpu"
    # 2.14.1 writes host_name (this machine's: 'vm'); 1.13.1, 2.1.2 and 2.5.1 write none
    assert ("host_name" in trace.meta) == (path.parent.name == "2.14.1")
    if "host_name" not in trace.meta:
        assert name == "unknown CPU"


def test_the_ingest_summary_names_the_ops_costed_by_bytes_alone(cli, tmp_path):
    """A max pool of torch 1.13 (no Concrete Inputs: its window unrecorded) has bytes and no FLOPs: the summary
    names it, not Inductor's Triton kernels (there are none); a torch.compile trace names its Triton kernels."""
    res = cli("ingest", ROOT / "1.13.1" / "convnet.json.gz", "--traces", tmp_path / "a")
    assert res.exit_code == 0, res.output
    line = " ".join(res.output.split())
    named = re.search(r"has bytes but no FLOPs \(ops whose arithmetic the trace does not record: ([^)]*)\)", line)
    assert named, line
    assert named.group(1).startswith("aten::max_pool2d_with_indices "), named.group(1)
    assert "Triton" not in named.group(1)
    public = ROOT.parent / "public" / "tracelens_mi300_triton.json.gz"
    res = cli("ingest", public, "--traces", tmp_path / "b")
    assert res.exit_code == 0, res.output
    line = " ".join(res.output.split())
    assert "has bytes but no FLOPs (ops whose arithmetic the trace does not record: Triton kernels " in line, line

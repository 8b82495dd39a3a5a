"""The CPU model zoo captured on the H200 (tests/fixtures/h200_zoo, torch 2.11): every kernel joined and
costed, and FLOPs per op equal to FlopCounterMode's.

Each fixture is one profiled step (CPU + CUDA activity, record_shapes) of a small model of
`benchmarks/capture_cpu_models.py --device cuda` (recurrent layers, 1-d/3-d/transposed
convolutions, resampling, pooling, norms, attention with masks and dropout, FFT, scatters and
embedding bags, losses, every optimizer, bf16 autocast, torch.compile, TorchScript, torch.func,
checkpointing), beside FlopCounterMode's per-op count of one more step of the same model
(NAME.flops.json). FLOPs are credited to the outermost enclosing op FlopCounterMode counts, as in
test_costs_h200_training.py.
"""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "h200_zoo"
NAMES = sorted(p.name.removesuffix(".json.gz") for p in FIXTURES.glob("*.json.gz"))
COMPILED = {"compile-infer", "compile-train"}  # Triton kernels: bytes from their buffers, FLOPs unknown
# FlopCounterMode sees other ops than the profiler records: under torch.compile the graph's GEMMs
# (Inductor calls aten::mm for FlopCounterMode's aten.addmm), and the attention fast path's
# products (aten::mm under the fast path's op, aten.bmm to FlopCounterMode); there the totals agree
SAME_TOTAL_ONLY = {"compile-infer", "compile-train", "mha-infer"}
# products the profiler records nested in an op FlopCounterMode sees as one without a formula:
# grid_sample's affine_grid_generator runs a bmm of [2, 400, 3] @ [2, 3, 2] (2*2*400*3*2 = 9,600 FLOPs)
# that FlopCounterMode's dispatch never reaches
EXTRA = {"convt2d-train": {"aten::bmm"}}


def flop_counter_ops() -> set[str]:
    from torch.utils.flop_counter import flop_registry

    return {"aten::" + str(k).split(".", 1)[1] for k in flop_registry if str(k).startswith("aten.")}


@pytest.fixture(scope="module")
def costed():
    from wlprof.pipeline import costed as run
    from wlprof.pipeline import read

    cache = {}

    def get(name):
        if name not in cache:
            cache[name] = run(read(FIXTURES / f"{name}.json.gz"))
        return cache[name]

    return get


def reference(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.flops.json").read_text())


def test_fixtures_are_the_zoo_on_the_h200():
    assert len(NAMES) == 19  # lstm-packed-infer did not run there (its lengths were on the GPU)
    for n in NAMES:
        meta = reference(n)
        assert meta["device"] == "cuda" and meta["torch"].startswith("2.11")


@pytest.mark.parametrize("name", NAMES)
def test_every_kernel_is_joined_and_its_bytes_known(name, costed):
    with gzip.open(FIXTURES / f"{name}.json.gz") as f:
        raw = [e for e in json.load(f)["traceEvents"] if e.get("cat") == "kernel" and e.get("ph") == "X"]
    k = costed(name).kernels
    kk = k[k.kind == "kernel"]
    assert len(kk) == len(raw) and kk.has_op.all()
    unknown = kk[kk["bytes"].isna()].groupby("op_name").dur_us.sum()
    assert unknown.empty, unknown.to_dict()
    no_flops = kk[kk.flops.isna()]
    if name in COMPILED:
        assert (no_flops.name.str.startswith("triton_")).all(), no_flops.name.head().tolist()
    else:
        assert no_flops.empty, no_flops.groupby("op_name").dur_us.sum().to_dict()


def flops_by_counted_op(c) -> dict[str, float]:
    registry = flop_counter_ops()
    ops = c.joined.ops
    names, parent = ops.name.to_numpy(dtype=object), ops.parent.to_numpy()
    k = c.kernels
    k = k[(k._op_pos >= 0) & (k.cost_unit == "matrix") & k.flops.notna()]
    out: dict[str, float] = defaultdict(float)
    for pos, f in k.groupby("_op_pos").flops.sum().items():
        key, p = names[pos], pos
        while p >= 0:
            if names[p] in registry:
                key = names[p]
            p = parent[p]
        out[key] += float(round(f))
    return out


@pytest.mark.parametrize("name", [n for n in NAMES if reference(n)["flop_counter_error"] is None])
def test_flops_per_op_equal_flop_counter(name, costed):
    registry = flop_counter_ops()
    ref = {op: v for op, v in reference(name)["flops"].items() if v}
    ours = {op: v for op, v in flops_by_counted_op(costed(name)).items() if op in registry and v}
    if name in SAME_TOTAL_ONLY:
        assert sum(ours.values()) == sum(ref.values()) > 0
    else:
        # e.g. conv3d-train: convolution and convolution_backward of Conv3d, grouped Conv3d and
        # ConvTranspose3d; rnn-train: FlopCounterMode counts only the classifier's mm (its RNNs have no
        # formula there; wlprof's _cudnn_rnn ones are beyond it)
        assert {op: ours.get(op) for op in ref} == ref
        assert set(ours) - set(ref) == EXTRA.get(name, set())

"""The CPU model zoo captured on the H200 (tests/fixtures/h200_zoo, torch 2.11): every kernel joined and
costed, and FLOPs per op equal to FlopCounterMode's.

Each fixture is one profiled step (CPU + CUDA activity, record_shapes) of a small model of
`benchmarks/capture_cpu_models.py --device cuda` (recurrent layers, 1-d/3-d/transposed
convolutions, resampling, pooling, norms, attention with masks and dropout, FFT, scatters and
embedding bags, losses, every optimizer, bf16 autocast, torch.compile, TorchScript, torch.func,
checkpointing), beside FlopCounterMode's per-op count of one more step of the same model
(NAME.flops.json). FLOPs are credited to the outermost enclosing op FlopCounterMode counts, as in
test_costs_h200_training.py (`fcm_credit`).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from fcm_credit import Zoo

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "h200_zoo"
COMPILED = {"compile-infer", "compile-train"}  # Triton kernels: bytes from their buffers, FLOPs unknown
# FlopCounterMode sees other ops than the profiler records: under torch.compile the graph's GEMMs
# (Inductor calls aten::mm for FlopCounterMode's aten.addmm), and the attention fast path's
# products (aten::mm under the fast path's op, aten.bmm to FlopCounterMode), and the packed LSTM with a
# projection (the profiled step ran cuDNN's _cudnn_rnn, FlopCounterMode's its cell's addmm and mm:
# 133,632 + 11,136 = 144,768, as wlprof's _cudnn_rnn); there the totals agree
SAME_TOTAL_ONLY = {"compile-infer", "compile-train", "mha-infer", "lstm-packed-infer"}
# products the profiler records nested in an op FlopCounterMode sees as one without a formula:
# grid_sample's affine_grid_generator runs a bmm of [2, 400, 3] @ [2, 3, 2] (2*2*400*3*2 = 9,600 FLOPs)
# that FlopCounterMode's dispatch never reaches
EXTRA = {"convt2d-train": {"aten::bmm"}}


ZOO = Zoo(FIXTURES)
NAMES = ZOO.names


@pytest.fixture(scope="module")
def costed():
    return ZOO.costed


def reference(name: str) -> dict:
    return ZOO.reference(name)


def test_fixtures_are_the_zoo_on_the_h200():
    assert len(NAMES) == 20
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


@pytest.mark.parametrize("name", [n for n in NAMES if reference(n)["flop_counter_error"] is None])
def test_flops_per_op_equal_flop_counter(name):
    # e.g. conv3d-train: convolution and convolution_backward of Conv3d, grouped Conv3d and
    # ConvTranspose3d; rnn-train: FlopCounterMode counts only the classifier's mm (its RNNs have no
    # formula there; wlprof's _cudnn_rnn ones are beyond it)
    ZOO.assert_flops_equal_flop_counter(name, "every" if name in SAME_TOTAL_ONLY else None, EXTRA.get(name, ()))

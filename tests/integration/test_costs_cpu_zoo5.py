"""Round 5 of model families no earlier capture holds, captured on the CPU (tests/fixtures/cpu_zoo5, torch 2.13):
every working op costed but for the ones whose bytes a CPU trace cannot tell, FLOPs per op equal to
FlopCounterMode's, and the share of working time with known bytes per trace.

Each fixture is one profiled step (CPU activity, record_shapes) of a model of
`benchmarks/capture_zoo5.py` at its CPU sizes (a GAN with spectral norm, eager and with the generator
compiled; a GPT with complex rotary embeddings and a LAMB-like _foreach optimizer; a DeiT under fp16
autocast with a GradScaler; PyG GATv2/GIN/TransformerConv; a DLRM with sparse gradients; an stft/istft
audio model with a packed LSTM; 3-d convolutions; cdist, nn.Bilinear and Rprop; LBFGS, ASGD,
Adafactor), beside FlopCounterMode's per-op count of one more step (NAME.flops.json).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fcm_credit import Zoo

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "cpu_zoo5"
ZOO = Zoo(FIXTURES)
NAMES = ZOO.names
# Rows whose bytes a CPU trace cannot tell: Inductor's C++ kernels (recorded as ops without shapes with
# cpp.enable_kernel_profile) and Dynamo's and AOTAutograd's own spans; a cat whose TensorList's dtype no op
# around it records (the packed LSTM's own cats of its steps; clip_grad_norm_'s stack of 35 norms and AMP's
# unscale over gradient lists the profiler recorded as []; a cat of PyG's self-loop attributes no next op
# reads whole); the sparse adds of SGD's momentum over a sparse gradient (nnz is not recorded).
COMPILED_SPANS = {"CompiledFunction", "CompiledFunctionBackward", "Torch-Compiled Region: 0/0",
                  "TorchDynamo Cache Lookup", "AOTDispatcher Runtime Wrapper Prologue", "Pregraph bytecode"}
UNKNOWN_BYTES = {
    "gan-compiled": COMPILED_SPANS,
    "audio-train": {"aten::cat"},
    "deit-amp-train": {"aten::cat", "aten::_amp_foreach_non_finite_check_and_unscale_"},
    "pyg-train": {"aten::cat"},
    "recsys-train": {"aten::add"},
}
# The share of working time on rows with known bytes (benchmarks/coverage.py's "bytes known"), at least
KNOWN_SHARE = {"gan-compiled": 0.90, "audio-train": 0.99, "deit-amp-train": 0.99, "pyg-train": 0.99,
               "recsys-train": 0.89}
# bilinear's _trilinear runs bmm inside it, below FlopCounterMode's dispatch (which has no _trilinear formula)
EXTRA = {"retrieval-train": {"aten::bmm"}}


@pytest.fixture(scope="module")
def costed():
    return ZOO.costed


def test_fixtures_are_the_zoo_on_the_cpu():
    ZOO.assert_captured_on_cpu(10)


@pytest.mark.parametrize("name", NAMES)
def test_every_row_is_a_working_op_with_its_bytes_known(name):
    k = ZOO.working_rows(name)
    unknown = {n for n in k[k["bytes"].isna()].op_name if not n.startswith("graph_0_cpp_fused")}
    assert unknown <= UNKNOWN_BYTES.get(name, set()), unknown - UNKNOWN_BYTES.get(name, set())
    share = k.loc[k["bytes"].notna(), "dur_us"].sum() / k.dur_us.sum()
    assert share >= KNOWN_SHARE.get(name, 1.0), share


@pytest.mark.parametrize("name", NAMES)
def test_flops_per_op_equal_flop_counter(name):
    # e.g. gan-train: the generator's transposed convolutions and the discriminator's convolutions, forward and
    # backward, over the real batch, the detached fake and the fake again: 33,198,080 in all
    ZOO.assert_flops_equal_flop_counter(name, extra=EXTRA.get(name, frozenset()))


def _by_op(c, name):
    k = c.kernels
    return k[k.op_name == name]


def test_distances_pads_and_overlap_add_by_hand(costed):
    r = costed("retrieval-train")
    # cdist of the 16 x 8 embeddings with themselves: 256 pairs of 3 * 8 + 1 = 25 FLOPs; its backward runs
    # twice (x1's and x2's gradients), 256 pairs of 3 * 8 + 1 each
    assert _by_op(r, "aten::_cdist_forward").flops.sum() == 6_400
    assert _by_op(r, "aten::_cdist_backward").flops.sum() == 2 * 6_400
    # Rprop's `grad[sign == etaminus] = 0` runs as masked_fill_: no _index_put_impl_ row in the optimizer
    assert not (_by_op(r, "aten::_index_put_impl_").region.fillna("").str.startswith("Optimizer.step")).any()
    a = costed("audio-train")
    # stft's reflection pad of [1, 2, 512] by 32 on each side writes [1, 2, 576] floats
    assert _by_op(a, "aten::reflection_pad1d").bytes_written.tolist() == [4_608]
    # istft's overlap-add of 33 windows of 64 (hop 16) into 2 x 576 samples, and of the squared window (its
    # 64 values broadcast) into 576: 4,224 and 2,112 adds
    assert sorted(_by_op(a, "aten::unfold_backward").flops.tolist()) == [2_112, 4_224]
    assert not {"aten::stft", "aten::istft"} & set(a.kernels.op_name)


def test_complex_rotary_and_sparse_gradients(costed):
    g = costed("gpt-train")
    # rotary embeddings as a complex multiply of q and k [2, 16, 2, 8] by [1, 16, 1, 8] complex64 in each of 2
    # layers: 512 products of 6 real FLOPs, 3,072 per call
    mul = _by_op(g, "aten::mul")
    assert sorted(set(mul[mul.op_input_types.str.contains("complex")].flops)) == [3_072]
    assert "aten::_conj" not in set(g.kernels.op_name)
    s = costed("recsys-train")
    # the sparse embedding gradients are index_select (grad rows per index), mul_ (per_sample_weights) and views
    assert not {"aten::_embedding_bag_sparse_backward", "aten::embedding_sparse_backward"} & set(s.kernels.op_name)
    # SGD's momentum over the sparse gradients of 3 tables of [50, 8]: sparse adds not costed at 400 elements
    add = _by_op(s, "aten::add")
    add = add[add.op_input_dims == "[[50,8],[50,8],[],[50,8]]"]
    assert len(add) == 6 and add["bytes"].isna().all() and add.region.eq("Optimizer.step#SGD.step").all()

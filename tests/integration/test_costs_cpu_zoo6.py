"""Round 6 of model families no earlier capture holds, captured on the CPU (tests/fixtures/cpu_zoo6, torch 2.13):
every working op costed but for the ones whose bytes a CPU trace cannot tell, FLOPs per op equal to
FlopCounterMode's, and the share of working time with known bytes per trace.

Each fixture is one profiled step (CPU activity, record_shapes) of a model of `benchmarks/capture_zoo6.py`
at its CPU sizes (T5 with relative position buckets; MLP-Mixer; Perceiver; a VAE and a VQ-VAE; NeRF with
volume rendering and scans; CLIP with Embedding(max_norm); grouped-query attention with LoRA and a KV
cache; super-resolution under weight_norm, spectral_norm and orthogonal parametrizations;
torch.distributions with sparse COO and CSR products; DDP over gloo, rank 0 of 2), beside
FlopCounterMode's per-op count of one more step (NAME.flops.json).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fcm_credit import Zoo

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "cpu_zoo6"
ZOO = Zoo(FIXTURES)
NAMES = ZOO.names
# Rows whose bytes a CPU trace cannot tell: embedding_renorm_'s own pass over its indices (the rows it
# renormalizes are data); the fused Adagrad's TensorLists (no dtype recorded); the sparse products and
# conversions (nnz is not recorded) and the Dirichlet/Gamma samplers; the c10d ops on the calling thread
# (their TensorLists record no dtype, an all_reduce no group size) and DDP's reducer's own ops.
UNKNOWN_BYTES = {
    "clip-train": {"aten::embedding_renorm_"},
    "vae-vq-train": {"aten::_fused_adagrad_"},
    "dist-sparse-train": {"_Dirichlet", "aten::_is_all_true", "aten::_sample_dirichlet", "aten::_sparse_addmm",
                          "aten::_sparse_mm", "aten::_standard_gamma", "aten::_to_sparse_csr", "aten::addmm",
                          "aten::ccol_indices", "aten::isclose", "aten::row_indices", "aten::to_sparse_csr"},
    "ddp-gloo-train": {"aten::cat", "c10d::_allgather_base_", "c10d::_reduce_scatter_base_", "c10d::allreduce_",
                       "c10d::broadcast_", "torch.distributed.ddp.reducer::copy_bucket_to_grad",
                       "torch::distributed::reducer::mul_out"},
}
# The share of working time on rows with known bytes (benchmarks/coverage.py's "bytes known"), at least
KNOWN_SHARE = {"clip-train": 0.98, "vae-vq-train": 0.99, "dist-sparse-train": 0.93, "ddp-gloo-train": 0.05}
# the matrix exponential's Taylor products run as bmm inside linalg_matrix_exp, below FlopCounterMode's dispatch
EXTRA = {"sr-param-train": {"aten::bmm"}}


def test_fixtures_are_the_zoo_on_the_cpu():
    ZOO.assert_captured_on_cpu(10)


@pytest.mark.parametrize("name", NAMES)
def test_every_row_is_a_working_op_with_its_bytes_known(name):
    k = ZOO.working_rows(name)
    unknown = set(k[k["bytes"].isna()].op_name)
    assert unknown <= UNKNOWN_BYTES.get(name, set()), unknown - UNKNOWN_BYTES.get(name, set())
    share = k.loc[k["bytes"].notna(), "dur_us"].sum() / k.dur_us.sum()
    assert share >= KNOWN_SHARE.get(name, 1.0), share


@pytest.mark.parametrize("name", [n for n in NAMES if n != "dist-sparse-train"])
def test_flops_per_op_equal_flop_counter(name):
    # e.g. t5-train: the projections, scores and head of a 2 + 2 layer encoder-decoder, forward and backward
    ZOO.assert_flops_equal_flop_counter(name, extra=EXTRA.get(name, frozenset()))


def test_sparse_products_are_unknown_where_flop_counter_counts_them_dense():
    # FlopCounterMode counts torch.sparse.mm's and the CSR matmul's products at the dense sizes of the
    # [10, 10] adjacency by [10, 8]: 2 * 10 * 10 * 8 = 1,600 each, three of them (the COO product, its
    # gradient of the dense operand, the CSR product) = 4,800 of its 10,240 mm FLOPs; wlprof leaves a sparse
    # product unknown (nnz is not in the trace) and counts the dense rest, 5,440, as it does
    from fcm_credit import flop_counter_ops, flops_by_counted_op

    ref = ZOO.reference("dist-sparse-train")["flops"]
    ours = flops_by_counted_op(ZOO.costed("dist-sparse-train"))
    assert ref["aten::mm"] - ours["aten::mm"] == 4_800
    others = {op for op in ref if op != "aten::mm" and ref[op]}
    assert {op: ours.get(op) for op in others} == {op: ref[op] for op in others}
    assert {op for op, v in ours.items() if v and op in flop_counter_ops()} == {op for op, v in ref.items() if v}


def _by_op(c, name):
    k = c.kernels
    return k[k.op_name == name]


def test_scans_weight_norm_and_repeats_by_hand():
    n = ZOO.costed("nerf-train")
    # logcumsumexp of the [8, 6] log-weights: 48 x 6 = 288 FLOPs a call, three calls of [8, 6] (the forward's
    # and the two its backward runs); its wrapper and cummax's are no rows
    assert _by_op(n, "aten::_logcumsumexp").flops.tolist() == [288] * 3
    assert not {"aten::logcumsumexp", "aten::cummax", "aten::cumprod_backward",
                "aten::cummaxmin_backward"} & set(n.kernels.op_name)
    s = ZOO.costed("sr-param-train")
    # weight_norm of the head conv v [8, 3, 5, 5]: 3 x 600 + 2 x 8 = 1,816 FLOPs per call
    w = _by_op(s, "aten::_weight_norm_interface")
    assert 1_816 in set(w.flops) and w["bytes"].notna().all()
    assert not {"aten::linalg_matrix_exp", "aten::_weight_norm"} & set(s.kernels.op_name)
    g = ZOO.costed("gqa-lora-train")
    # K/V heads repeated by repeat_interleave(x, 2, dim=1): the clone's copy_ is the row, not repeat_interleave
    assert "aten::repeat_interleave" not in set(g.kernels.op_name)


def test_gloo_reduce_scatter_work_joins_its_op():
    # gloo runs _reduce_scatter_base_ as an all-reduce of its [8, 24] input: that work is the reduce-scatter's,
    # and the metric's all_reduce of 2 floats gets the last allreduce_
    k = ZOO.costed("ddp-gloo-train").kernels
    comm = k[k.kind == "comm"]
    assert comm.op_name.notna().all()
    rs = comm[comm.op_name == "c10d::_reduce_scatter_base_"]
    assert rs.name.tolist() == ["gloo:all_reduce"] and rs.comm_bytes.tolist() == [768.0]

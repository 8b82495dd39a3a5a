"""The parser, join and cost annotation on real H200 traces wlprof captured (tests/fixtures/), and gzip by magic."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from conftest import FIXTURES, h200_manifest, h200_run
from torch.utils.flop_counter import FlopCounterMode

from wlprof import pipeline
from wlprof.ceilings import Ceilings
from wlprof.trace.parse import read_trace

WRAPPERS_NEVER_ROWS = {"aten::linear", "aten::matmul", "aten::relu", "aten::to", "aten::_to_copy", "aten::clone"}


def _annotated(run_prefix: str, point: int):
    m = h200_manifest(run_prefix)
    path = h200_run(run_prefix) / m["points"][point]["files"]["raw_chrome"]
    c = pipeline.costed(read_trace(path), Ceilings.from_dict(m["ceilings"]))
    joined, kernels, ops = c.joined, c.kernels, c.ops
    return m, joined, kernels, ops


def _flop_counter(fn) -> int:
    with FlopCounterMode(display=False) as fc:
        fn()
    return fc.get_total_flops()


# (point, M, K, N) of tests/fixtures/studies/h200_fixture_gemm.toml
GEMM_POINTS = [(0, 256, 512, 1024), (1, 1, 4096, 8192)]


@pytest.mark.parametrize(("point", "m", "k", "n"), GEMM_POINTS)
def test_h200_gemm_every_kernel_has_op_shapes_and_flops(point, m, k, n):
    manifest, joined, kernels, ops = _annotated("gemm", point)
    assert joined.device_rows is not None
    assert manifest["device"]["name"] == "NVIDIA H200"
    kernel_rows = kernels[kernels.kind == "kernel"]
    assert len(kernel_rows) >= 2  # two profiled steps
    assert kernels.has_op.all()
    assert set(kernels.op_name) == {"aten::mm"}
    assert kernels.op_input_dims.notna().all() and kernels.op_input_types.notna().all()
    assert (kernels.flops_source == "formula").all()
    assert kernels.grid_x.gt(0).all() and kernels.block_x.gt(0).all()
    # 256x512x1024: 2*256*512*1024 = 268,435,456 per step; 1x4096x8192: 2*1*4096*8192 = 67,108,864
    expected = 2 * m * k * n
    per_step = kernels.groupby("step").flops.sum()
    assert per_step.tolist() == [expected] * len(per_step)
    # bf16 bytes: 2*(M*K + K*N + M*N); 256x512x1024: 2*(131072 + 524288 + 262144) = 1,835,008
    assert kernels.groupby("step")["bytes"].sum().iloc[0] == 2 * (m * k + k * n + m * n)
    # an independent reference: FlopCounterMode on meta tensors of the same shapes
    a = torch.empty(m, k, device="meta", dtype=torch.bfloat16)
    b = torch.empty(k, n, device="meta", dtype=torch.bfloat16)
    assert per_step.iloc[0] == _flop_counter(lambda: torch.matmul(a, b))
    # counted once: kernels, ops and the run total agree
    assert kernels.flops.sum() == ops.flops.sum()


# (point, batch) of tests/fixtures/studies/h200_fixture_mlp.toml: d_model 1024, d_ff 4096, gelu
@pytest.mark.parametrize(("point", "batch"), [(0, 4), (1, 64)])
def test_h200_mlp_join_regions_and_no_double_count(point, batch):
    _, joined, kernels, ops = _annotated("mlp", point)
    d, f = 1024, 4096
    assert kernels.has_op.all()
    assert not set(kernels.op_name) & WRAPPERS_NEVER_ROWS  # linear never counted beside its addmm
    assert set(ops.op_name) <= {"aten::addmm", "aten::gelu"}
    assert set(kernels.region) == {"mlp/fc1", "mlp/act", "mlp/fc2"}
    assert (kernels.flops_source == "formula").all()
    # batch 4: fc1 2*4*1024*4096 = 33,554,432; gelu 20*4*4096 = 327,680; fc2 33,554,432
    # total 67,436,544 per step (batch 64: 1,073,741,824 + 5,242,880 = 1,078,984,704)
    expected = 2 * (2 * batch * d * f) + 20 * batch * f
    per_step = kernels.groupby("step").flops.sum()
    assert np.allclose(per_step.to_numpy(), expected, rtol=0, atol=1e-3)
    by_region = kernels.groupby(["step", "region"]).flops.sum().groupby("region").mean()
    assert by_region["mlp/fc1"] == pytest.approx(2 * batch * d * f)
    assert by_region["mlp/act"] == pytest.approx(20 * batch * f)
    # FlopCounterMode counts the two linears (not gelu): equal to the matrix-unit FLOPs
    x = torch.empty(batch, d, device="meta", dtype=torch.bfloat16)
    fc1 = torch.nn.Linear(d, f, device="meta", dtype=torch.bfloat16)
    fc2 = torch.nn.Linear(f, d, device="meta", dtype=torch.bfloat16)
    matrix = kernels[kernels.cost_unit == "matrix"].groupby("step").flops.sum()
    assert matrix.iloc[0] == pytest.approx(_flop_counter(lambda: fc2(fc1(x))))
    assert kernels.flops.sum() == pytest.approx(ops.flops.sum())
    # a split-K GEMM's kernels share its op's cost by duration: shares of an op sum to 1
    shares = kernels.groupby(["step", "external_id"]).cost_share.sum()
    assert np.allclose(shares.to_numpy(), 1.0)


def test_h200_committed_parquet_loads_and_matches_a_fresh_parse():
    import wlprof

    run = h200_run("gemm")
    committed = wlprof.load(run, table="kernels")
    _, _, fresh, _ = _annotated("gemm", 0)
    first = committed[committed.point == 0].sort_values("ts_us")
    assert first.flops.tolist() == fresh.sort_values("ts_us").flops.tolist()
    assert first.dur_us.tolist() == pytest.approx(fresh.sort_values("ts_us").dur_us.tolist())
    steps = wlprof.load(run, table="steps")
    assert set(steps.columns) >= {"latency_us", "back_to_back_us", "graph_us", "kernel_us"}
    assert (steps.latency_us > steps.kernel_us).all()  # a caller waits beyond the kernels


def _probe():
    path = FIXTURES / "h200_probe_ops.json.gz"
    c = Ceilings("cuda", "NVIDIA H200", {"bfloat16": 789.0, "float32": 50.4}, 50.4, 4208.0, "measured", "", "")
    costed = pipeline.costed(read_trace(path), c)
    return costed.joined, costed.kernels, costed.ops


def test_h200_probe_graph_replays_are_kept_and_flagged():
    _, kernels, _ = _probe()
    graph = kernels[kernels.launch_api == "cudaGraphLaunch"]
    assert len(graph) == 4  # 2 kernels per replay, 2 profiled steps
    assert not graph.has_op.any()
    assert (graph.flops_source == "unknown").all()
    assert set(graph.step) == {1, 2}  # still placed in their step by the launch's time
    assert kernels[kernels.launch_api != "cudaGraphLaunch"].has_op.all()


def test_h200_probe_sparse_mm_is_not_costed_as_dense():
    # torch.sparse.mm(csr [1000x1000], X [1000x64]) launches cuSPARSE kernels under aten::addmm
    # nested in _sparse_addmm: dense-equivalent would be 2*1000*1000*64; it must stay unknown.
    _, kernels, _ = _probe()
    sparse = kernels[kernels.name.str.contains("cusparse")]
    assert len(sparse) == 6 and set(sparse.op_name) == {"aten::addmm"}
    assert (sparse.flops_source == "unknown").all() and sparse.flops.isna().all()


def test_h200_probe_grouped_mm_topk_and_totals():
    _, kernels, ops = _probe()
    # _grouped_mm(x[64,256], w[4,256,128], offs): 2*64*256*128 = 4,194,304 per call (FlopCounterMode: 0)
    g = ops[ops.op_name == "aten::_grouped_mm"]
    assert g.flops.tolist() == [4_194_304, 4_194_304]
    # topk on 2^20 floats ran 22 device activities; its cost is split and sums back to the op's
    topk = kernels[kernels.op_name == "aten::topk"]
    assert (topk.op_kernel_count == 22).all()
    assert topk.groupby("step").cost_share.sum().round(9).tolist() == [1.0, 1.0]
    assert set(kernels.region.dropna()) == {"t/gemm", "t/elementwise", "t/index", "t/grouped"}
    known = kernels.flops.notna()
    assert kernels.flops[known].sum() == pytest.approx(ops.flops.sum())


def test_trace_json_is_read_from_gzip_by_magic_not_name(tmp_path):
    import gzip

    src = FIXTURES / "h200_probe_ops.json.gz"
    renamed = tmp_path / "trace.json"  # gzip content, misleading name
    renamed.write_bytes(src.read_bytes())
    plain = tmp_path / "plain.json.gz"  # plain JSON, misleading name
    plain.write_bytes(gzip.decompress(src.read_bytes()))
    assert len(read_trace(renamed).device) == len(read_trace(plain).device) == len(read_trace(src).device)
    assert json.loads(plain.read_bytes())["deviceProperties"][0]["name"] == "NVIDIA H200"

"""The MoE and GNN paths on real H200 traces that wlprof captured (tests/fixtures/h200/)."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import FIXTURES, h200_manifest, h200_run
from torch.utils.flop_counter import FlopCounterMode

import wlprof
from wlprof import pipeline
from wlprof.ceilings import Ceilings
from wlprof.trace.parse import read_trace
from wlprof.workloads.moe import flops_per_row


def _point(run_prefix: str, variant: str):
    m = h200_manifest(run_prefix)
    (p,) = [p for p in m["points"] if p["variant"] == variant]
    return m, p, h200_run(run_prefix) / p["files"]["raw_chrome"]


def test_moe_grouped_runs_torch_grouped_mm_and_wlprof_counts_it():
    # 16 tokens, 8 experts, top-1, d_model 512, d_ff 1024, SwiGLU, bf16 (h200_fixture_moe.toml)
    m, p, raw = _point("moe", "dispersed / grouped")
    steps = wlprof.load(h200_run("moe"), table="steps").set_index("variant")
    assert steps.loc["dispersed / grouped", "grouped_path"] == "torch._grouped_mm"  # the CUTLASS path, sm90
    # useful = 16 rows * (6*512*1024 + 6*1024) = 16 * 3,151,872 = 50,429,952 FLOPs per step
    assert flops_per_row(512, 1024, "swiglu") == 3_151_872
    assert steps.loc["dispersed / grouped", "useful_flops"] == 50_429_952
    # the formulas, without the workload's region cost: three _grouped_mm of 2*16*512*1024 =
    # 16,777,216 each, silu 5*16*1024 = 81,920, the gating mul 16*1024 = 16,384: 50,429,952 again
    _c = pipeline.costed(read_trace(raw), Ceilings.from_dict(m["ceilings"]))
    kernels, ops = _c.kernels, _c.ops
    g = ops[ops.op_name == "aten::_grouped_mm"]
    assert len(g) == 3 * 2 and set(g.flops) == {16_777_216} and (g.flops_source == "formula").all()
    expert = kernels[kernels.region == "moe/expert"].groupby("step").flops.sum()
    assert expert.tolist() == [50_429_952] * 2
    # ... which FlopCounterMode does not count
    x = torch.empty(16, 512, device="meta", dtype=torch.bfloat16)
    w = torch.empty(8, 1024, 512, device="meta", dtype=torch.bfloat16).transpose(1, 2)
    offs = torch.empty(8, device="meta", dtype=torch.int32)
    with FlopCounterMode(display=False) as fc:
        torch._grouped_mm(x, w, offs=offs)
    assert fc.get_total_flops() == 0


def test_moe_loop_syncs_with_the_host_per_expert():
    m, p, raw = _point("moe", "dispersed / loop")
    _c = pipeline.costed(read_trace(raw), Ceilings.from_dict(m["ceilings"]))
    kernels, _ = _c.kernels, _c.ops
    steps = wlprof.load(h200_run("moe"), table="steps").set_index("variant")
    active = int(steps.loc["dispersed / loop", "active_experts"])
    assert active == 8
    dtoh = kernels[(kernels.kind == "memcpy") & kernels.name.str.contains("DtoH")].groupby("step").size()
    assert (dtoh >= active).all()  # a device-to-host copy (and sync) per expert, at least
    assert set(kernels.region) == {"moe/router", "moe/dispatch", "moe/expert", "moe/combine"}
    loop = steps.loc["dispersed / loop"]
    assert loop.graph_us != loop.graph_us and "host syncs" in loop.graph_error  # NaN: not capturable
    assert loop.latency_us > 1.5 * loop.kernel_us  # the idle GPU only the caller's latency shows


@pytest.mark.parametrize("variant", ["karate F16 / scatter / sum", "karate F16 / csr / sum"])
def test_gnn_aggregate_cost_comes_from_the_graph(variant):
    m, p, raw = _point("gnn", variant)
    steps = wlprof.load(h200_run("gnn"), table="steps").set_index("variant")
    assert steps.loc[variant, "edges"] == 156 and steps.loc[variant, "nodes"] == 34  # KarateClub
    k = wlprof.load(h200_run("gnn"), variant=variant)
    agg = k[(k.region == "gnn/aggregate") & (k.step >= 0)]
    assert (agg.flops_source == "workload").all()
    per_step = agg.groupby("step")[["flops", "bytes"]].sum()
    # 156 edges x 16 features = 2,496 adds; bytes 156*16*4 + 156*8 + 34*16*4 = 9,984 + 1,248 + 2,176 = 13,408
    assert per_step.flops.round(6).tolist() == [2_496.0] * len(per_step)
    assert per_step["bytes"].round(6).tolist() == [13_408.0] * len(per_step)
    # the profiler would credit the CSR SpMM with dense-equivalent 2*34*34*16 = 36,992 FLOPs: never counted
    assert k[k.step >= 0].groupby("step").flops.sum().max() < 36_992


def test_schema_1_0_runs_load_under_a_newer_minor_version():
    old = FIXTURES / "h200_schema_1.0"
    run = next(old.iterdir())
    manifest = json.loads((run / "_manifest.json").read_text())
    assert manifest["schema_version"] == "1.0"
    k = wlprof.load(old)
    assert len(k) > 0 and k.op_input_strides.isna().all()  # a 1.1 column the 1.0 files lack
    assert set(k.op_name) == {"aten::mm"}


def _stated(workload: str, params: dict):
    """The statements the workload makes today for a fixture point (built on the CPU: the statement
    depends on the parameters and the data, not the device)."""
    from wlprof import workloads
    from wlprof.workloads.base import Point

    built = workloads.get(workload).build(Point("x", params), torch.device("cpu"), torch.float32)
    return built.stated


def test_moe_grouped_statement_lands_on_the_grouped_gemms_of_a_real_trace():
    from wlprof.workloads.moe.costs import grouped_expert_cost

    m, p, raw = _point("moe", "dispersed / grouped")
    # the dispersed routing sends the 16 tokens to all 8 experts; bf16 (the fixture's dtype), fused path
    st = [type(s)(s.region, grouped_expert_cost(16, 8, 8, 512, 1024, "swiglu", 2, "bfloat16"), s.ops)
          for s in _stated("moe", p["params"])]
    assert [(s.region, s.ops) for s in st] == [("moe/expert", ("aten::_grouped_mm",))]
    k = pipeline.costed(read_trace(raw), Ceilings.from_dict(m["ceilings"]), stated=st).kernels
    e = k[(k.region == "moe/expert") & (k.step >= 0)]
    gmm = e[e.op_name == "aten::_grouped_mm"]
    assert (gmm.flops_source == "workload").all()
    # three equal calls: 2*16*512*1024 = 16,777,216 FLOPs each, as the formula counts them; bytes per
    # call 2*(16*512 + 8*512*1024 + 16*1024) + 4*8 = 8,437,792
    per_call = gmm.groupby(["step", "_op_pos"])[["flops", "bytes"]].sum()
    assert per_call.flops.round(3).unique().tolist() == [16_777_216.0]
    assert per_call["bytes"].round(3).unique().tolist() == [8_437_792.0]
    # silu and the gating mul keep their formulas: 5*16*1024 = 81,920 and 16*1024 = 16,384 FLOPs
    for op, flops in (("aten::silu", 81_920), ("aten::mul", 16_384)):
        r = e[e.op_name == op]
        assert (r.flops_source == "formula").all() and r.groupby("step").flops.sum().tolist() == [flops] * 2
    assert e.groupby("step").flops.sum().round(3).tolist() == [50_429_952.0] * 2  # the useful FLOPs again


@pytest.mark.parametrize("variant", ["karate F16 / scatter / sum", "karate F16 / csr / sum",
                                     "karate F16 / pyg:gcn / sum"])
def test_gnn_statement_lands_on_the_aggregating_op_of_a_real_trace(variant):
    from wlprof.workloads.gnn.steps import aggregating_ops

    m, p, raw = _point("gnn", variant)
    st = _stated("gnn", p["params"])
    k = pipeline.costed(read_trace(raw), Ceilings.from_dict(m["ceilings"]), stated=st).kernels
    agg = k[(k.region == "gnn/aggregate") & (k.step >= 0)]
    named = agg.op_name.isin(aggregating_ops(p["params"]["backend"]))
    assert (agg[named].flops_source == "workload").all()
    # 156 edges (+ 34 self-loops for GCN) x 16 features adds; bytes M*16*4 + M*8 + 34*16*4
    msgs = 156 + (34 if "gcn" in variant else 0)
    per_step = agg[named].groupby("step")[["flops", "bytes"]].sum().round(6)
    assert per_step.flops.tolist() == [msgs * 16.0] * 2
    assert per_step["bytes"].tolist() == [msgs * 16 * 4 + msgs * 8 + 34 * 16 * 4.0] * 2
    # the output's zero fill is its own: 0 FLOPs, 34*16*4 = 2,176 bytes written (fp32)
    fill = agg[agg.op_name == "aten::fill_"]
    assert len(fill) == 2 and (fill.flops_source == "formula").all()
    assert fill.flops.tolist() == [0.0, 0.0] and fill["bytes"].tolist() == [2_176.0, 2_176.0]
    assert set(agg[~named].op_name) == {"aten::fill_"}

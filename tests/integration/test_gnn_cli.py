"""The GNN workload end to end through the CLI on the CPU: regions, the workload's aggregate cost
(E*F adds; bytes E*F*4 + E*8 + N*F*4 in fp32, derived in tests/unit/test_gnn.py), bad input."""

from __future__ import annotations

import pandas as pd
import pytest

from wlprof.workloads.gnn.steps import aggregating_ops

FAST = ["--quiet", "--steps", "2", "--warmup", "1", "--reps", "3"]


def _per_step(k: pd.DataFrame, variant: str) -> pd.DataFrame:
    return k[(k.variant == variant) & (k.step >= 0)]


@pytest.mark.slow
def test_cli_raw_backends_end_to_end(tmp_path, cli, cpu_ceilings):
    res = cli("run", "gnn", "--graph", "uniform,rmat", "--scale", "6", "--features", "8",
                "--backend", "scatter,index_add,segment,csr", "--traces", tmp_path / "traces", *FAST)
    assert res.exit_code == 0, res.output
    k = pd.read_parquet(tmp_path / "traces")
    assert set(k.backend) == {"scatter", "index_add", "segment", "csr"}
    for variant, g in k.groupby("variant"):
        e, n, f = int(g.edges.iloc[0]), int(g.nodes.iloc[0]), 8
        assert n == 64 and g.edge_factor.iloc[0] == 16 and not g.feature_transform.iloc[0]
        g = _per_step(k, variant)
        agg = g[g.region == "gnn/aggregate"]
        named = agg.op_name.isin(aggregating_ops(g.backend.iloc[0]))
        # the statement is on the aggregating op(s) only; the rest of the region keeps its formulas
        assert named.any() and (agg[named].flops_source == "workload").all()
        assert (agg[~named].flops_source == "formula").all()
        assert set(agg[~named].op_name) <= {"aten::fill_", "aten::copy_"}
        for _, s in g.groupby("step"):
            a = s[s.region == "gnn/aggregate"]
            stated = a[a.op_name.isin(aggregating_ops(g.backend.iloc[0]))]
            assert stated.flops.sum() == pytest.approx(e * f)  # E*F adds
            assert stated["bytes"].sum() == pytest.approx(e * f * 4 + e * 8 + n * f * 4)
            # the output's zero fill writes N*F*4 bytes; the CPU SpMM's copy of its result reads and
            # writes N*F*4; neither computes
            for _, r in a[~a.index.isin(stated.index)].iterrows():
                assert (r.flops, r["bytes"]) == (0, n * f * 4 * (1 if r.op_name == "aten::fill_" else 2))
            # nothing else computes: the whole step is E*F (the gather moves bytes only)
            assert s.flops.sum() == pytest.approx(e * f)
            assert set(s.region) <= {"gnn/gather", "gnn/aggregate"}
        if g.backend.iloc[0] == "csr":
            # the nested sparse addmm is inside the region: never a dense-equivalent 2*n*n*F formula
            assert (g[g.op_name.str.contains("mm")].flops_source == "workload").all()
            assert not (g.region == "gnn/gather").any()
            addmm = g[g.op_name == "aten::addmm"]
            assert len(addmm) and (addmm.flops_source == "workload").all()
            # what the profiler's dense sizes would claim: 2*n*n*F = 2*64*64*8 = 65536, not E*F
            assert g.flops.sum() / g.step.nunique() == pytest.approx(e * f) != 2 * n * n * f
        else:
            gather = g[g.region == "gnn/gather"]
            assert set(gather.op_name) == {"aten::index_select"}
            assert (gather.flops == 0).all() and (gather.flops_source == "formula").all()


@pytest.mark.slow
def test_cli_pyg_regions_nest(tmp_path, cli, cpu_ceilings):
    res = cli("run", "gnn", "--graph", "karate", "--features", "4", "--backend", "pyg:gcn,pyg:sage-csr,pyg:gat", "--traces", tmp_path / "traces", *FAST)
    assert res.exit_code == 0, res.output
    k = pd.read_parquet(tmp_path / "traces")
    n, e, f = 34, 156, 4
    gcn = _per_step(k, "karate F4 / pyg:gcn / sum")
    assert set(gcn.region) == {"gnn/transform", "gnn/gather", "gnn/message", "gnn/aggregate", "gnn/layer"}
    assert "aten::index_select" in set(gcn[gcn.region == "gnn/gather"].op_name)
    assert "aten::scatter_add_" in set(gcn[gcn.region == "gnn/aggregate"].op_name)
    assert "aten::mul" in set(gcn[gcn.region == "gnn/message"].op_name)
    assert set(gcn[gcn.region == "gnn/transform"].op_name) <= {"aten::mm", "aten::addmm", "aten::copy_"}
    for _, s in gcn.groupby("step"):
        assert s[s.region == "gnn/aggregate"].flops.sum() == pytest.approx((e + n) * f)  # self-loops added
    sage = _per_step(k, "karate F4 / pyg:sage-csr / sum")
    assert "gnn/gather" not in set(sage.region)  # fused: torch.sparse.mm reads rows in place
    agg = sage[sage.region == "gnn/aggregate"]
    spmm = agg.op_name.isin(aggregating_ops("pyg:sage-csr"))
    assert spmm.any() and (agg[spmm].flops_source == "workload").all()
    assert (agg[~spmm].flops_source == "formula").all()
    for _, s in agg.groupby("step"):  # the workload's E*F adds (sum: no divides)
        assert s[s.op_name.isin(aggregating_ops("pyg:sage-csr"))].flops.sum() == pytest.approx(e * f)
    gat = _per_step(k, "karate F4 / pyg:gat / sum")
    assert {"gnn/attention", "gnn/gather", "gnn/message", "gnn/aggregate"} <= set(gat.region)
    att = gat[gat.region == "gnn/attention"]
    assert {"aten::exp", "aten::scatter_add_"} <= set(att.op_name)  # the softmax, costed by formula
    assert (att.flops_source != "workload").all()


@pytest.mark.slow
def test_cli_transform_region(tmp_path, cli, cpu_ceilings):
    res = cli("run", "gnn", "--graph", "karate", "--features", "4", "--backend", "scatter", "--transform", "--traces", tmp_path / "traces", *FAST)
    assert res.exit_code == 0, res.output
    k = pd.read_parquet(tmp_path / "traces")
    assert k.variant.iloc[0] == "karate F4 / scatter / sum +linear" and k.feature_transform.all()
    s = k[(k.step == k.step.max()) & (k.region == "gnn/transform")]
    # Linear(4, 4) on 34 rows: 2*34*4*4 = 1088 FLOPs, by the addmm formula
    assert s.flops.sum() == pytest.approx(1088)


@pytest.mark.parametrize("args, needle", [
    (["--graph", "erdos"], "--graph must be one of"),
    (["--backend", "cusparse"], "--backend must be one of"),
    (["--features", "0"], "--features must be a positive integer (got '0')"),
    (["--backend", "csr", "--reduction", "max"], "--reduction must be a reduction backend csr supports"),
    (["--scale", "40"], "--scale must fit in host memory: point 'rmat s40 F32 / scatter / sum' needs about 3,149,824.0 GiB"),
])
def test_cli_bad_input_writes_nothing(args, needle, tmp_path, cli):
    res = cli("run", "gnn", *args, "--traces", tmp_path / "traces", *FAST)
    assert res.exit_code == 2
    assert needle in res.output
    out = tmp_path / "traces"
    assert not out.exists() or not any(out.iterdir())

"""The GNN aggregation workload: parsing, the useful cost by hand, backends agreeing (the CLI: integration/test_gnn_cli.py).

The cost of gnn/aggregate is the workload's (shapes cannot tell a sparse matrix's
nnz): worked out by hand below for a 4-node graph, fp32 = 4 bytes, bf16 = 2,
int64 indices = 8.
"""

from __future__ import annotations

import pytest
import torch

from wlprof.cli.options import spell_cli, spell_study
from wlprof.cost import VECTOR
from wlprof.errors import InputError
from wlprof.workloads import gnn
from wlprof.workloads.gnn import costs as gnn_costs
from wlprof.workloads.gnn import graphs
from wlprof.workloads.gnn import steps as gnn_steps

CPU = torch.device("cpu")
F32 = torch.float32

# The hand graph: 4 nodes, 5 edges (src -> dst) 0->1, 0->2, 1->2, 3->2, 2->0, in PyG's
# coalesced order (by source, then destination). In-degrees: [1, 1, 3, 0]; node 3 receives nothing.
HAND = torch.tensor([[0, 0, 1, 2, 3], [1, 2, 2, 0, 2]])
HAND_N = 4


def _parse(**params):
    return gnn.Gnn().parse(params, CPU, F32)


def _reference(edge_index: torch.Tensor, n: int, x: torch.Tensor, reduction: str) -> torch.Tensor:
    """Dense aggregate: A[dst, src] counts edges; max by a loop. Empty neighbourhoods give 0."""
    a = torch.zeros(n, n, dtype=torch.float64)
    a.index_put_((edge_index[1], edge_index[0]), torch.ones(edge_index.size(1), dtype=torch.float64),
                 accumulate=True)
    xd = x.double()
    if reduction == "sum":
        return a @ xd
    if reduction == "mean":
        return (a @ xd) / a.sum(1, keepdim=True).clamp(min=1)
    out = torch.zeros_like(xd)
    for v in range(n):
        srcs = edge_index[0][edge_index[1] == v]
        if len(srcs):
            out[v] = xd[srcs].max(0).values
    return out


# ---------------------------------------------------------------- parsing


def test_cpu_defaults():
    parsed = _parse()
    s = parsed.spec
    assert s.graphs == ("rmat",) and s.scales == (12,) and s.features == (32,)
    assert s.backends == ("scatter", "index_add", "segment", "csr") and s.reductions == ("sum",)
    assert s.edge_factor == 16 and s.transform is False
    assert any("CPU" in n for n in parsed.notes)


def test_points_cross_product_and_labels():
    wl = gnn.Gnn()
    spec = wl.parse({"graph": "uniform,zipf:1.50,karate", "scale": "6,8", "features": "4,8",
                     "backend": "scatter,pyg:sage", "reduction": "sum,mean"}, CPU, F32).spec
    pts = wl.points(spec)
    # uniform and zipf: 2 scales each; karate ignores scale: (2 + 2 + 1) * 2 features * 2 backends * 2 reductions
    assert len(pts) == 5 * 2 * 2 * 2 == 40
    labels = [p.variant for p in pts]
    assert len(set(labels)) == len(labels)
    assert "zipf:1.5 s8 F4 / scatter / mean" in labels
    assert "karate F8 / pyg:sage / sum" in labels
    k = next(p for p in pts if p.variant == "karate F8 / pyg:sage / sum")
    assert k.params["scale"] is None and k.params["edge_factor"] is None
    assert k.params["feature_transform"] is True  # a PyG layer always runs its Linear
    u = next(p for p in pts if p.variant == "uniform s6 F4 / scatter / sum")
    assert u.params == {"graph": "uniform", "scale": 6, "edge_factor": 16, "features": 4, "backend": "scatter",
                        "reduction": "sum", "feature_transform": False, "seed": 0}


def test_each_reduction_runs_where_the_backend_supports_it():
    # the help says "each where the backend supports it": max over the default backends (scatter, index_add,
    # segment, csr) runs on scatter and segment only; was refused ("--reduction must be a reduction backend
    # index_add supports")
    wl = gnn.Gnn()
    parsed = wl.parse({"graph": "karate", "features": "4", "reduction": "sum,max"}, CPU, F32)
    labels = [p.variant for p in wl.points(parsed.spec)]
    # 4 backends x sum + 2 backends x max = 6 points
    assert labels == ["karate F4 / scatter / sum", "karate F4 / scatter / max", "karate F4 / index_add / sum",
                      "karate F4 / segment / sum", "karate F4 / segment / max", "karate F4 / csr / sum"]
    assert "reduction max: left out for index_add, csr, which lack it" in parsed.notes
    # a reduction none of the named backends supports is still refused, naming them
    with pytest.raises(InputError) as exc:
        _parse(backend="index_add,csr", reduction="max")
    assert "any of index_add, csr supports (sum, mean)" in str(exc.value)
    # a backend the user named explicitly that would run nothing is refused
    with pytest.raises(InputError) as exc:
        _parse(backend="scatter,pyg:gcn", reduction="mean")
    assert "must list a reduction backend pyg:gcn supports (sum)" in str(exc.value)


@pytest.mark.parametrize("params, arg, value", [
    ({"graph": "erdos"}, "--graph", "erdos"),
    ({"graph": "zipf"}, "--graph", "zipf"),
    ({"graph": "zipf:-1"}, "--graph", "zipf:-1"),
    ({"graph": "zipf:abc"}, "--graph", "zipf:abc"),
    ({"backend": "cusparse"}, "--backend", "cusparse"),
    ({"backend": "pyg:gin"}, "--backend", "pyg:gin"),
    ({"features": "0"}, "--features", "0"),
    ({"features": "-8"}, "--features", "-8"),
    ({"features": "32,x"}, "--features", "x"),
    ({"scale": "41"}, "--scale", "41"),
    ({"edge_factor": 0}, "--edge-factor", 0),
    ({"reduction": "prod"}, "--reduction", "prod"),
    ({"backend": "csr", "reduction": "max"}, "--reduction", "max"),
    ({"backend": "index_add", "reduction": "max"}, "--reduction", "max"),
    ({"backend": "pyg:gcn", "reduction": "mean"}, "--reduction", "mean"),
    ({"backend": "pyg:sage-csr", "reduction": "max"}, "--reduction", "max"),
    ({"transform": "yes"}, "--transform", "yes"),
    ({"heads": 4}, "--heads", 4),
])
def test_bad_input_names_the_argument(params, arg, value):
    with pytest.raises(InputError) as exc:
        _parse(**params)
    assert spell_cli(exc.value.arg) == arg
    assert exc.value.value == value


def test_parse_warns_when_e_times_f_passes_2_pow_31():
    # 16 * 2^20 edges drawn * 128 = 2^31: not past it; * 256 = 2^32: past it
    notes = _parse(scale="20", features="128,256").notes
    assert any("2^31" in n and "s20 F256" in n and "F128" not in n for n in notes)
    assert not any("2^31" in n for n in _parse(scale="12", features="256").notes)


def test_csr_refuses_a_dtype_sparse_mm_lacks():
    # the CPU's MKL SpMM has no bfloat16; the gather/scatter backends run in it
    with pytest.raises(InputError) as exc:
        gnn.Gnn().parse({"backend": "scatter,csr"}, CPU, torch.bfloat16)
    assert spell_cli(exc.value.arg) == "--dtype" and exc.value.value == "bfloat16"
    gnn.Gnn().parse({"backend": "scatter,segment"}, CPU, torch.bfloat16)


def test_study_file_prefix():
    with pytest.raises(InputError) as exc:
        gnn.Gnn().parse({"features": 0}, CPU, F32)
    assert spell_study(exc.value.arg) == "params.features"
    assert exc.value.message(spell_study).startswith("params.features must be a positive integer")


# ---------------------------------------------------------------- cost by hand


def test_aggregate_cost_by_hand():
    # 4 nodes, 5 edges, F = 3, fp32:
    # sum: flops = E*F = 5*3 = 15
    #      bytes = E*F*4 (a source row per message) + E*8 (an index per message) + N*F*4 (output)
    #            = 60 + 40 + 48 = 148
    c = gnn_costs.aggregate_cost(5, 4, 3, "sum", 4, "float32")
    assert (c.flops, c.bytes, c.unit, c.dtype) == (15, 148, VECTOR, "float32")
    # mean: + N*F = 4*3 = 12 divides: 27; bytes unchanged
    assert gnn_costs.aggregate_cost(5, 4, 3, "mean", 4, "float32").flops == 27
    assert gnn_costs.aggregate_cost(5, 4, 3, "mean", 4, "float32").bytes == 148
    # max: one compare per message element: 15
    assert gnn_costs.aggregate_cost(5, 4, 3, "max", 4, "float32").flops == 15
    # bf16: bytes = 5*3*2 + 5*8 + 4*3*2 = 30 + 40 + 24 = 94
    assert gnn_costs.aggregate_cost(5, 4, 3, "sum", 2, "bfloat16").bytes == 94
    # GCN through a CSR adjacency: M = E + N = 9 messages (a self-loop per node), the edge-weight
    # multiply fused in: flops = 9*3 + 9*3 = 54; bytes = 9*3*4 + 9*8 + 4*3*4 + 9*4 = 108+72+48+36 = 264
    w = gnn_costs.aggregate_cost(9, 4, 3, "sum", 4, "float32", weighted=True)
    assert (w.flops, w.bytes) == (54, 264)


@pytest.mark.parametrize("backend", ["scatter", "index_add", "segment", "csr"])
def test_built_region_cost_on_the_hand_graph(backend):
    built = gnn_steps.build_step(HAND, HAND_N, {"features": 3, "backend": backend, "reduction": "sum"}, CPU, F32)
    assert [s.region for s in built.stated] == ["gnn/aggregate"]
    c = built.stated[0].cost
    assert (c.flops, c.bytes) == (15, 148)  # as derived in test_aggregate_cost_by_hand


@pytest.mark.parametrize("backend, messages", [
    ("pyg:gcn", 5 + 4), ("pyg:gcn-csr", 5 + 4),  # GCN adds a self-loop per node
    ("pyg:gat", 5 + 4), ("pyg:gat-csr", 5 + 4),  # so does GAT
    ("pyg:sage", 5), ("pyg:sage-csr", 5),
])
def test_pyg_layers_count_their_messages(backend, messages):
    built = gnn_steps.build_step(HAND, HAND_N, {"features": 3, "backend": backend, "reduction": "sum"}, CPU, F32)
    c = built.stated[0].cost
    weighted = backend == "pyg:gcn-csr"  # GCN's edge-weight multiply inside the fused SpMM
    assert c.flops == messages * 3 * (2 if weighted else 1)
    assert c.bytes == messages * 3 * 4 + messages * 8 + HAND_N * 3 * 4 + (messages * 4 if weighted else 0)


def test_split_warning_past_2_pow_31(monkeypatch):
    p = {"features": 3, "backend": "scatter", "reduction": "sum"}
    assert gnn_steps.build_step(HAND, HAND_N, p, CPU, F32).note is None  # 5*3 = 15 elements
    # the threshold lowered below E*F = 15: the point carries the warning
    monkeypatch.setattr(gnn_steps, "SPLIT_ELEMENTS", 14)
    note = gnn_steps.build_step(HAND, HAND_N, p, CPU, F32).note
    assert note is not None and "E*F = 15" in note


# ---------------------------------------------------------------- every backend, one aggregate


def _graphs():
    out = [("hand", HAND, HAND_N)]
    for name, raw, n in [
        ("uniform", graphs.uniform(64, 16 * 64, CPU), 64),
        ("rmat", graphs.rmat(6, 16 * 64, CPU), 64),
        ("zipf", graphs.zipf(64, 16 * 64, 1.5, CPU), 64),
    ]:
        out.append((name, graphs.simplify(raw, n), n))
    ei, n = graphs.karate(CPU)
    out.append(("karate", ei, n))
    return out


GRAPHS = _graphs()


@pytest.mark.parametrize("name, ei, n", GRAPHS, ids=[g[0] for g in GRAPHS])
@pytest.mark.parametrize("backend, reduction", [(b, r) for b in gnn_steps.RAW_BACKENDS for r in gnn.BACKENDS[b]])
def test_raw_backends_agree_with_a_dense_reference(name, ei, n, backend, reduction):
    f = 5
    built = gnn_steps.build_step(ei, n, {"features": f, "backend": backend, "reduction": reduction}, CPU, F32)
    with torch.inference_mode():
        out = built.step()
    ref = _reference(ei, n, gnn_steps.node_features(n, f, CPU, F32), reduction)
    torch.testing.assert_close(out.double(), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend, reduction", [(b, r) for b in gnn_steps.RAW_BACKENDS for r in gnn.BACKENDS[b]])
def test_hand_graph_aggregate_values(backend, reduction):
    # one feature, x = the step's own seeded input; in-edges 2->0, 0->1, 0->2, 1->2, 3->2, none into 3:
    # sum [x2, x0, x0 + x1 + x3, 0]; mean [x2, x0, (x0 + x1 + x3) / 3, 0]; max [x2, x0, max(x0, x1, x3), 0]
    x0, x1, x2, x3 = gnn_steps.node_features(HAND_N, 1, CPU, F32).squeeze(1).tolist()
    want = {"sum": [x2, x0, x0 + x1 + x3, 0.0], "mean": [x2, x0, (x0 + x1 + x3) / 3, 0.0],
            "max": [x2, x0, max(x0, x1, x3), 0.0]}[reduction]
    built = gnn_steps.build_step(HAND, HAND_N, {"features": 1, "backend": backend, "reduction": reduction}, CPU, F32)
    with torch.inference_mode():
        got = built.step().squeeze(1).tolist()
    assert got == pytest.approx(want, abs=1e-6)
    # the dense reference the other tests compare against agrees on node ids: sum at node 2 = 0 + 1 + 3
    ids = torch.arange(4.0).unsqueeze(1)
    assert _reference(HAND, 4, ids, "sum").squeeze(1).tolist() == [2, 0, 4, 0]


@pytest.mark.parametrize("kind", ["gcn", "sage", "gat"])
def test_pyg_edge_index_and_csr_agree(kind):
    _, ei, n = GRAPHS[2]  # rmat
    outs = []
    for backend in (f"pyg:{kind}", f"pyg:{kind}-csr"):
        built = gnn_steps.build_step(ei, n, {"features": 6, "backend": backend, "reduction": "sum"}, CPU, F32)
        with torch.inference_mode():
            outs.append(built.step())
    torch.testing.assert_close(outs[0], outs[1], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("reduction", ["sum", "mean", "max"])
def test_pyg_sage_aggregates_like_the_raw_backends(reduction):
    # SAGEConv: lin_l(aggregate(x)) + lin_r(x), with the same seeded layer and features
    _, ei, n = GRAPHS[1]
    f = 6
    built = gnn_steps.build_step(ei, n, {"features": f, "backend": "pyg:sage", "reduction": reduction}, CPU, F32)
    conv = gnn_steps.make_conv("pyg:sage", reduction, f, CPU, F32)
    x = gnn_steps.node_features(n, f, CPU, F32)
    with torch.inference_mode():
        out = built.step()
        expected = conv.lin_l(_reference(ei, n, x, reduction).float()) + conv.lin_r(x)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)


def test_pyg_gcn_is_the_normalized_propagation():
    # GCN: D^-1/2 (A + I) D^-1/2 (x W^T) + b, with D the in-degree counting the self-loop
    _, ei, n = GRAPHS[1]
    f = 6
    built = gnn_steps.build_step(ei, n, {"features": f, "backend": "pyg:gcn", "reduction": "sum"}, CPU, F32)
    conv = gnn_steps.make_conv("pyg:gcn", "sum", f, CPU, F32)
    x = gnn_steps.node_features(n, f, CPU, F32).double()
    a = torch.zeros(n, n, dtype=torch.float64)
    a[ei[1], ei[0]] = 1.0
    a += torch.eye(n, dtype=torch.float64)
    d = a.sum(1).pow(-0.5)
    expected = (d[:, None] * a * d[None, :]) @ (x @ conv.lin.weight.double().T) + conv.bias.double()
    with torch.inference_mode():
        out = built.step()
    torch.testing.assert_close(out.double(), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", gnn_steps.RAW_BACKENDS)
def test_transform_applies_the_seeded_linear_to_the_aggregate(backend):
    base = {"features": 3, "backend": backend, "reduction": "sum"}
    plain = gnn_steps.build_step(HAND, HAND_N, base, CPU, F32)
    transformed = gnn_steps.build_step(HAND, HAND_N, {**base, "feature_transform": True}, CPU, F32)
    torch.manual_seed(gnn_steps.SEED)  # the layer's weights: Linear(F, F) drawn from seed 0
    lin = torch.nn.Linear(3, 3)
    with torch.inference_mode():
        agg = plain.step()
        out = transformed.step()
        torch.testing.assert_close(out, lin(agg), rtol=1e-6, atol=1e-6)
    assert out.shape == (4, 3) and not torch.allclose(out, agg)
    assert transformed.stated == plain.stated  # the stated cost is the aggregate's; the Linear has a formula


# ---------------------------------------------------------------- memory estimate


def test_memory_estimate_counts_messages_and_graph():
    wl = gnn.Gnn()
    dt = torch.bfloat16
    pts = {p.params["backend"]: p for p in wl.points(wl.parse(
        {"scale": "20", "features": "256", "backend": "scatter,csr"}, CPU, F32).spec)}
    n, e, f = 1 << 20, 16 << 20, 256
    scatter, csr = wl.estimate_bytes(pts["scatter"], dt), wl.estimate_bytes(pts["csr"], dt)
    # at least edge_index (2*E*8) + x and output (2*N*F*2); scatter adds the [E, F] messages
    assert csr >= 2 * e * 8 + 2 * n * f * 2
    assert scatter >= csr - (n + 1) * 4 - e * 4 - e * 2 + e * f * 2
    assert scatter > 8 * 2**30  # E*F*2 = 2^24 * 256 * 2 = 8 GiB of messages alone

"""The GNN step of each backend: the raw aggregations and PyG's layers."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from wlprof.workloads.base import Built, Stated
from wlprof.workloads.gnn.costs import aggregate_cost

KARATE_NODES, KARATE_EDGES = 34, 156  # PyG's KarateClub
RAW_BACKENDS = ("scatter", "index_add", "segment", "csr")
SPLIT_ELEMENTS = 2**31  # CUDA kernels index with 32 bits: larger ops are split into several launches
# The ops that aggregate, whose cost the workload states (shapes cannot tell a sparse matrix's nnz,
# and the statement is the one useful cost every backend is compared on); every other op of
# gnn/aggregate (the output's zero fill, the mean's divide) keeps its own formula.
SPMM_OPS = ("aten::addmm", "aten::mm", "aten::_sparse_addmm", "aten::_sparse_mm", "aten::_sparse_csr_mm",
            "aten::_sparse_mm_reduce_impl", "aten::sparse_mm")
SCATTER_OPS = ("aten::scatter_add_", "aten::scatter_add", "aten::scatter_reduce_", "aten::scatter_reduce",
               "aten::index_add_", "aten::index_add")  # on the CPU index_add_ runs a nested scatter_add_
SEGMENT_OPS = ("aten::segment_reduce",)
SEED = 0  # default seed: graphs and features are fixed per (graph, scale, edge factor, seed), so every
# backend of a sweep sees the same graph

def data_seed(params: Mapping[str, Any]) -> int:
    """The point's seed (runs recorded before the `seed` parameter existed used SEED)."""
    v = params.get("seed")
    return SEED if v is None or (isinstance(v, float) and math.isnan(v)) else int(v)


def node_features(num_nodes: int, features: int, device, dtype, seed: int = SEED):
    """The step's input x [nodes, features]: seeded, the same for every backend of a graph."""
    import torch

    gen = torch.Generator(device=device).manual_seed(seed + 1)
    return torch.randn(num_nodes, features, generator=gen, device=device, dtype=torch.float32).to(dtype)


def build_step(edge_index, num_nodes: int, params: Mapping[str, Any], device, dtype) -> Built:
    """A point's step over a simple graph (`edge_index` [2, E], sorted by source), with its region cost."""
    import warnings

    from wlprof.device import dtype_name

    f, backend, reduction = params["features"], params["backend"], params["reduction"]
    x = node_features(num_nodes, f, device, dtype, data_seed(params))
    with warnings.catch_warnings():
        # torch warns that sparse CSR support is in beta on every CSR tensor it builds
        warnings.filterwarnings("ignore", message=".*[Ss]parse CSR tensor support is in beta.*")
        # ... and that it skips invariant checks on PyG's CSR (ours is checked at construction)
        warnings.filterwarnings("ignore", message=".*[Ss]parse invariant checks are implicitly disabled.*")
        if backend in RAW_BACKENDS:
            step, messages, weighted, graph_safe = _raw_step(backend, reduction, edge_index, num_nodes, x,
                                                             bool(params.get("feature_transform", False)))
        else:
            step, messages, weighted, graph_safe = _pyg_step(backend, reduction, edge_index, num_nodes, x)
    ops = aggregating_ops(backend)
    # a scatter's mean is a sum and then a divide of its own; segment_reduce and the SpMM divide inside
    cost = aggregate_cost(messages, num_nodes, f, reduction, dtype.itemsize, dtype_name(dtype), weighted,
                          divides=ops != SCATTER_OPS)
    notes = []
    if messages * f > SPLIT_ELEMENTS:
        notes.append(f"E*F = {messages * f:,} > 2^31: CUDA splits an op over more than 2^31 elements "
                     "(the gather and scatter of materialized messages) into several kernels")
    if backend == "pyg:gat-csr":
        notes.append("GATConv has no fused message_and_aggregate: PyG converts the CSR adjacency back "
                     "to edge indices on every call")
    return Built(step=step, graph_safe=graph_safe, stated=[Stated("gnn/aggregate", cost, ops=ops)],
                 note="; ".join(notes) or None)


def aggregating_ops(backend: str) -> tuple[str, ...]:
    """The ops of gnn/aggregate that aggregate, for `backend` (GAT with a CSR adjacency converts it
    back to edge indices and scatters)."""
    if backend in ("csr", "pyg:gcn-csr", "pyg:sage-csr"):
        return SPMM_OPS
    return SEGMENT_OPS if backend == "segment" else SCATTER_OPS


def _sizes(p: Mapping[str, Any]) -> tuple[int, int]:
    """(nodes, edges drawn): the edges before duplicates and self-loops are removed, an upper bound."""
    if p["graph"] == "karate":
        return KARATE_NODES, KARATE_EDGES
    n = 1 << p["scale"]
    return n, p["edge_factor"] * n


# ---------------------------------------------------------------------- raw backends


def _by_destination(edge_index, deg, n: int):
    """Edges sorted by (destination, source): (sources in that order, CSR row offsets [n + 1])."""
    import torch

    src, dst = edge_index[0], edge_index[1]
    order = torch.argsort(dst * n + src)
    offsets = torch.zeros(n + 1, dtype=torch.int64, device=edge_index.device)
    torch.cumsum(deg, 0, out=offsets[1:])
    return src[order], offsets


def _raw_step(backend: str, reduction: str, edge_index, n: int, x, transform: bool):
    """(step, messages, weighted, graph_safe) of a raw backend; everything but the aggregation built here."""
    import torch
    from torch.profiler import record_function

    f = x.size(1)
    e = int(edge_index.size(1))
    src, dst = edge_index[0].contiguous(), edge_index[1].contiguous()
    deg = torch.bincount(dst, minlength=n)
    # mean: sum / max(in-degree, 1), so a node that receives nothing stays 0; float32, since
    # bf16 holds integers exactly only up to 256 (the in-place divide still writes x's dtype)
    deg_div = deg.clamp(min=1).to(torch.float32).unsqueeze(1)
    lin = None
    if transform:
        torch.manual_seed(SEED)
        lin = torch.nn.Linear(f, f, device=x.device, dtype=x.dtype)

    if backend == "scatter":
        dst_b = dst.view(-1, 1).expand(-1, f)  # PyG's broadcast index: a view, no copy

        def aggregate():
            with record_function("gnn/gather"):
                msg = x.index_select(0, src)
            with record_function("gnn/aggregate"):
                out = x.new_zeros(n, f)
                if reduction == "max":
                    return out.scatter_reduce_(0, dst_b, msg, "amax", include_self=False)
                out.scatter_add_(0, dst_b, msg)
                return out.div_(deg_div) if reduction == "mean" else out

    elif backend == "index_add":
        def aggregate():
            with record_function("gnn/gather"):
                msg = x.index_select(0, src)
            with record_function("gnn/aggregate"):
                out = x.new_zeros(n, f).index_add_(0, dst, msg)
                return out.div_(deg_div) if reduction == "mean" else out

    elif backend == "segment":
        src_sorted, offsets = _by_destination(edge_index, deg, n)
        receives_none = (deg == 0).unsqueeze(1)
        # mean's `initial` only fills empty segments (0 instead of nan); max keeps no initial
        # (it would enter every segment's max) and zeroes empty segments' -inf afterwards
        kwargs = {"initial": 0.0} if reduction == "mean" else {}

        def aggregate():
            with record_function("gnn/gather"):
                msg = x.index_select(0, src_sorted)
            with record_function("gnn/aggregate"):
                out = torch.segment_reduce(msg, reduction, offsets=offsets, axis=0, unsafe=True, **kwargs)
                return out.masked_fill_(receives_none, 0) if reduction == "max" else out

    else:  # csr
        src_sorted, offsets = _by_destination(edge_index, deg, n)
        index_dtype = torch.int32 if max(e, n) < 2**31 - 1 else torch.int64
        if reduction == "mean":
            rows = torch.repeat_interleave(torch.arange(n, device=x.device), deg)
            values = (1.0 / deg_div.squeeze(1))[rows].to(x.dtype)
        else:
            values = torch.ones(e, dtype=x.dtype, device=x.device)
        adj = torch.sparse_csr_tensor(offsets.to(index_dtype), src_sorted.to(index_dtype), values, (n, n),
                                      check_invariants=True)

        def aggregate():
            with record_function("gnn/aggregate"):
                return torch.sparse.mm(adj, x)

    if lin is None:
        return aggregate, e, False, True

    def step():
        out = aggregate()
        with record_function("gnn/transform"):
            return lin(out)

    return step, e, False, True


# ---------------------------------------------------------------------- PyG layers


class _Regions:
    """record_function regions opened and closed from PyG hooks (a stack: nested regions allowed)."""

    def __init__(self) -> None:
        self._open: list = []

    def push(self, name: str) -> None:
        from torch.profiler import record_function

        rf = record_function(name)
        rf.__enter__()
        self._open.append(rf)

    def pop(self) -> None:
        if self._open:
            self._open.pop().__exit__(None, None, None)

    def depth(self) -> int:
        return len(self._open)

    def close_to(self, depth: int) -> None:
        while len(self._open) > depth:
            self.pop()


def instrument(conv, regions: _Regions | None = None) -> _Regions:
    """Open gnn/* regions inside a PyG MessagePassing layer with its hooks (module doc)."""
    import torch

    regions = regions or _Regions()
    marks: list[int] = []

    def propagate_pre(module, inputs):
        marks.append(regions.depth())
        regions.push("gnn/gather")

    def propagate_post(module, inputs, out):
        regions.close_to(marks.pop() if marks else 0)

    def message_pre(module, inputs):
        regions.pop()  # gnn/gather ends where message() starts
        regions.push("gnn/message")

    def fused_pre(module, inputs):
        regions.pop()  # gnn/gather (empty on the fused path)
        regions.push("gnn/aggregate")

    def push(name):
        return lambda *args: regions.push(name)

    def pop(*args):
        regions.pop()

    conv.register_propagate_forward_pre_hook(propagate_pre)
    conv.register_propagate_forward_hook(propagate_post)
    conv.register_message_forward_pre_hook(message_pre)
    conv.register_message_forward_hook(pop)
    conv.register_aggregate_forward_pre_hook(push("gnn/aggregate"))
    conv.register_aggregate_forward_hook(pop)
    conv.register_message_and_aggregate_forward_pre_hook(fused_pre)
    conv.register_message_and_aggregate_forward_hook(pop)
    for module in conv.modules():
        if module is not conv and _is_linear(module):
            module.register_forward_pre_hook(push("gnn/transform"))
            module.register_forward_hook(pop)
    if type(conv).__name__ == "GATConv":
        # the edge_updater's hooks run after it has gathered the per-node logits: wrap the
        # whole call instead (an instance attribute shadows the generated method)
        inner = conv.edge_updater

        def edge_updater(*args, **kwargs):
            with torch.profiler.record_function("gnn/attention"):
                return inner(*args, **kwargs)

        conv.edge_updater = edge_updater
    return regions


def _is_linear(module) -> bool:
    import torch
    from torch_geometric.nn.dense.linear import Linear

    return isinstance(module, (torch.nn.Linear, Linear))


def make_conv(backend: str, reduction: str, features: int, device, dtype):
    """The PyG layer of a `pyg:*` backend, F -> F channels, seeded, in eval mode."""
    import torch
    from torch_geometric.nn import GATConv, GCNConv, SAGEConv

    kind = backend.removeprefix("pyg:").removesuffix("-csr")
    torch.manual_seed(SEED)
    if kind == "gcn":
        conv = GCNConv(features, features, cached=True)
    elif kind == "sage":
        conv = SAGEConv(features, features, aggr=reduction)
    else:
        conv = GATConv(features, features, heads=1)
    return conv.to(device=device, dtype=dtype).eval()


def pyg_adjacency(backend: str, edge_index, n: int, dtype):
    """What the layer is called with: edge_index, or the CSR adjacency (rows = destinations)."""
    if not backend.endswith("-csr"):
        return edge_index
    from torch_geometric.utils import to_torch_csr_tensor

    return to_torch_csr_tensor(edge_index.flip(0), size=(n, n)).to(dtype)


def _pyg_step(backend: str, reduction: str, edge_index, n: int, x):
    import torch
    from torch.profiler import record_function

    conv = make_conv(backend, reduction, x.size(1), x.device, x.dtype)
    adj = pyg_adjacency(backend, edge_index, n, x.dtype)
    # count the messages the layer actually sends (GCN and GAT add self-loops) with a dry
    # call, which also fills GCN's cache before any timed step
    seen: list[int] = []
    h1 = conv.register_message_forward_hook(lambda m, inputs, out: seen.append(int(out.size(0))))
    h2 = conv.register_message_and_aggregate_forward_pre_hook(
        lambda m, inputs: seen.append(int(inputs[0].values().numel())))
    with torch.no_grad():
        conv(x, adj)
    h1.remove()
    h2.remove()
    messages = seen[-1]
    instrument(conv)
    fused = backend in ("pyg:gcn-csr", "pyg:sage-csr")

    def step():
        with record_function("gnn/layer"):
            return conv(x, adj)

    # GAT removes and re-adds self-loops every call (boolean masks: host syncs)
    graph_safe = not backend.startswith("pyg:gat")
    return step, messages, fused and backend.startswith("pyg:gcn"), graph_safe


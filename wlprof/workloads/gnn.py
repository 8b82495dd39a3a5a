"""GNN neighbourhood aggregation: tiny FLOPs, irregular memory access, atomics, kernel by kernel.

One step aggregates node features over a graph's edges: for every edge
src -> dst, out[dst] = reduce(out[dst], x[src]), x: [nodes, features], with
sum, mean (sum / in-degree; 0 for a node that receives nothing) or max (0 for a
node that receives nothing, PyG's convention). The same aggregate is computed
by several backends, so their kernels can be set side by side on one useful cost.

Graphs (`wlprof.workloads.graphs`, generated on the device in O(E), seeded):
`uniform` G(n, m), `rmat` (Graph500 Kronecker, the default skewed graph),
`zipf:S` (destination hubs), `karate` (PyG's KarateClub). `scale` = log2(nodes),
edges = edge_factor * nodes (Graph500's edge factor 16) drawn, then duplicates
and self-loops removed (`graphs.simplify`), so every backend aggregates the same
simple graph and the CSR adjacency is valid for cuSPARSE (each (row, column)
pair once). `edges` records what is left (RMAT keeps about 96 % at scale 20,
zipf:1.5 about half: its hub cannot have more than nodes - 1 distinct sources).
The edge list is in PyG's coalesced order (sorted by source, then destination).

Backends (what each step launches):
- `scatter`: PyG's default path without torch_scatter: `index_select` of the
  source rows into [E, F] messages (gnn/gather), then a zeroed output and
  `scatter_add_` (sum, mean) or `scatter_reduce_(amax, include_self=False)` (max)
  (gnn/aggregate); mean divides by the in-degree (counted at build time).
- `index_add`: the same gather, then `index_add_` (another CUDA kernel; sum, mean).
- `segment`: edges sorted by destination at build time; gather in that order, then
  `torch.segment_reduce` with CSR offsets (sum, mean, max; `unsafe=True` skips its
  host-syncing checks of the offsets, which build() guarantees).
- `csr`: `torch.sparse.mm(A, x)` with A the [dst, src] adjacency in CSR, built
  once outside the step (int32 indices while they fit: the CPU converts int64
  ones to int32 on every call); mean uses A's values 1/in-degree. No gather: the
  SpMM reads source rows in place (cuSPARSE on the GPU). Sum, mean. A dtype
  torch.sparse.mm lacks on the device (bfloat16 on the CPU) is refused at parse.
- `pyg:gcn`, `pyg:sage`, `pyg:gat`: real PyG layers (F -> F channels) called with
  `edge_index`: gather (`index_select`) and scatter inside MessagePassing.
  `pyg:gcn-csr`, `pyg:sage-csr`, `pyg:gat-csr`: the same layers called with a
  CSR adjacency (`torch_geometric.utils.to_torch_csr_tensor`, rows = destinations):
  GCN and SAGE take their fused `message_and_aggregate` (`torch.sparse.mm`);
  GATConv has none, so PyG rebuilds its self-loops on the sparse tensor and converts
  the CSR back to edge indices every call (visible in gnn/layer and gnn/gather), then
  runs the gather/scatter path. GCN is built with
  `cached=True`: its normalized adjacency (self-loops added) is computed once, as
  the CSR is. GCN and GAT are weighted sums (reduction sum); SAGE takes sum,
  mean and max with edge_index, sum and mean with CSR (PyG's `spmm` has no max
  for CUDA sparse tensors).

Regions (`record_function`):
- gnn/gather: materializing the source rows of every edge (index_select).
- gnn/aggregate: the reduction, zero-filling its output and mean's divide included.
- gnn/transform: a Linear layer (raw backends with `--transform` after the
  aggregation; PyG layers' own Linear submodules, by forward hooks).
- PyG layers only: gnn/message (`message()`: GCN's edge-weight multiply, GAT's
  attention multiply), gnn/attention (GAT's `edge_updater`: per-edge logits,
  leaky ReLU and the softmax over each destination's edges), and gnn/layer around
  the whole call (self-loop handling, attention logits, bias, update). PyG's
  hooks open and close the regions (propagate/message/aggregate/
  message_and_aggregate hooks; GAT's edge_updater is wrapped, since its hooks run
  after the gather of the per-node logits).

Cost. Kernels in gnn/aggregate get the workload's cost (`aggregate_cost`,
flops_source = workload), the same for every backend, so achieved rates compare
one useful work: the profiler records a sparse matrix with its dense sizes and
credits `torch.sparse.mm` (and its nested `addmm`) with 2*n*n*F, shapes tell
nothing about nnz, and the region override counts nothing twice. With M the
messages (edges, plus the self-loops GCN and GAT add), F features, N nodes,
s bytes per feature element:
- FLOPs: M*F (one add, or for max one compare, per message element); mean adds
  N*F divides. GCN with a CSR adjacency also multiplies each message by its edge
  weight inside the fused SpMM: + M*F (with edge_index that multiply is
  gnn/message's own `mul`, costed by formula).
- bytes: M*F*s (a source row per message, whether gathered into messages or read
  in place) + M*8 (an int64 index per message) + N*F*s (the output written once)
  [+ M*s for GCN-CSR's edge weights]. Like the registry's gather formulas, it
  counts a row per index (no cache reuse): measured DRAM traffic can be lower for
  hub rows that stay in L2 and higher for atomics' read-modify-writes.
Other regions are costed by the registry's formulas (index_select, mul, addmm,
softmax pieces): shapes tell there. gnn/gather in particular is the index_select
formula, 0 FLOPs and 2*M*F*s + M*8 bytes, so a gathering backend's step costs
that much more traffic than the SpMM's for the same aggregate.

Defaults: rmat, the four raw backends, sum, no transform; scale 20 and 128
features on a GPU (E*F = 2^31 at edge factor 16: F = 256 passes it and is warned
about), scale 12 and 32 features on the CPU. Graphs and features are seeded (`seed`,
default 0: another seed draws another graph of the same generator and sizes), but
CPU and CUDA draw different streams: the same point is not the same graph on both.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from wlprof.cost.registry import VECTOR, Cost
from wlprof.errors import InputError
from wlprof.workloads.base import (
    Built,
    Parsed,
    Point,
    Workload,
    argname,
    int_list,
    positive_int,
    register,
    reject_unknown,
    seed_param,
    str_list,
)

GRAPHS = ["uniform", "rmat", "zipf:S", "karate"]
KARATE_NODES, KARATE_EDGES = 34, 156  # PyG's KarateClub
REDUCTIONS = ["sum", "mean", "max"]
# backend -> reductions it supports
BACKENDS: dict[str, tuple[str, ...]] = {
    "scatter": ("sum", "mean", "max"),
    "index_add": ("sum", "mean"),
    "segment": ("sum", "mean", "max"),
    "csr": ("sum", "mean"),
    "pyg:gcn": ("sum",),
    "pyg:gcn-csr": ("sum",),
    "pyg:sage": ("sum", "mean", "max"),
    "pyg:sage-csr": ("sum", "mean"),
    "pyg:gat": ("sum",),
    "pyg:gat-csr": ("sum",),
}
RAW_BACKENDS = ("scatter", "index_add", "segment", "csr")
INDEX_BYTES = 8  # int64 indices: PyG's edge_index dtype
MAX_SCALE = 40
SPLIT_ELEMENTS = 2**31  # CUDA kernels index with 32 bits: larger ops are split into several launches
SEED = 0  # default seed: graphs and features are fixed per (graph, scale, edge factor, seed), so every
# backend of a sweep sees the same graph


@dataclass(frozen=True)
class GnnSpec:
    graphs: tuple[str, ...]
    scales: tuple[int, ...]
    edge_factor: int
    features: tuple[int, ...]
    backends: tuple[str, ...]
    reductions: tuple[str, ...]
    transform: bool
    seed: int = SEED


def parse_graph(value: str, arg: str) -> str:
    """'rmat' -> 'rmat', 'zipf:1.50' -> 'zipf:1.5'; anything else is refused naming the argument."""
    v = str(value).strip().lower()
    if v in ("uniform", "rmat", "karate"):
        return v
    if v.startswith("zipf:"):
        try:
            s = float(v.split(":", 1)[1])
        except ValueError:
            s = math.nan
        if not math.isfinite(s) or s < 0:
            raise InputError(arg, "must give zipf a finite exponent S >= 0 (zipf:S, e.g. zipf:1.5)", value)
        return f"zipf:{s:g}"
    raise InputError(arg, f"must be one of {', '.join(GRAPHS)}", value)


def zipf_exponent(graph: str) -> float | None:
    return float(graph.split(":", 1)[1]) if graph.startswith("zipf:") else None


def messages_per_layer(backend: str, nodes: int, edges: int) -> int:
    """Messages one aggregation sends: GCN and GAT add a self-loop per node to a graph that has none."""
    return edges + nodes if backend.split("-")[0] in ("pyg:gcn", "pyg:gat") else edges


def aggregate_cost(messages: int, nodes: int, features: int, reduction: str, itemsize: int,
                   dtype: str | None, weighted: bool = False) -> Cost:
    """The useful cost of one aggregation over `messages` edges, whatever the backend (module doc).

    FLOPs: messages*features adds (max: compares) [+ nodes*features divides for mean]
    [+ messages*features weight multiplies when `weighted`]. Bytes: a source row and an
    int64 index per message, the output written once [+ one weight per message].
    """
    flops = messages * features
    if reduction == "mean":
        flops += nodes * features
    nbytes = messages * features * itemsize + messages * INDEX_BYTES + nodes * features * itemsize
    if weighted:
        flops += messages * features
        nbytes += messages * itemsize
    return Cost(float(flops), float(nbytes), VECTOR, dtype)


def _bool(value: Any, arg: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise InputError(arg, "must be true or false", value)


def _probe_sparse_mm(device, dtype, backends: list[str], arg: str) -> None:
    """Refuse a dtype torch.sparse.mm lacks on this device (the CPU's MKL path has no bfloat16)."""
    import warnings

    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        adj = torch.sparse_csr_tensor(torch.tensor([0, 1], dtype=torch.int32, device=device),
                                      torch.tensor([0], dtype=torch.int32, device=device),
                                      torch.ones(1, dtype=dtype, device=device), (1, 1))
        try:
            torch.sparse.mm(adj, torch.ones(1, 1, dtype=dtype, device=device))
        except (RuntimeError, NotImplementedError) as exc:
            raise InputError(arg, f"must be a dtype torch.sparse.mm supports on {device.type} for "
                             f"{', '.join(backends)} ({str(exc).splitlines()[0]})",
                             str(dtype).removeprefix("torch.")) from None


@register
class Gnn(Workload):
    name = "gnn"
    summary = "GNN aggregation (scatter, index_add, segment, CSR SpMM, PyG layers) over generated graphs"

    def __init__(self) -> None:
        self._graph_key: tuple | None = None
        self._graph: Any = None  # (edge_index, nodes, DegreeStats) of the last point: backends share it

    # ------------------------------------------------------------------ parse

    def parse(self, params: Mapping[str, Any], device, dtype, prefix: str = "--") -> Parsed:
        known = {"graph", "scale", "edge_factor", "features", "backend", "reduction", "transform", "seed"}
        reject_unknown(params, known, prefix)
        gpu = device.type == "cuda"
        notes = []
        from wlprof.workloads import graphs

        graph_arg = argname("graph", prefix)
        names = [parse_graph(g, graph_arg) for g in str_list(params.get("graph") or "rmat", graph_arg)]
        if params.get("scale") is None and any(g != "karate" for g in names):
            notes.append(f"scale {20 if gpu else 12} (2^{20 if gpu else 12} nodes; "
                         f"{'CPU default, GPU 20' if not gpu else 'GPU default'})")
        scales = int_list(params.get("scale") if params.get("scale") is not None else (20 if gpu else 12),
                          argname("scale", prefix))
        for s in scales:
            if s > MAX_SCALE:
                raise InputError(argname("scale", prefix), f"must be at most {MAX_SCALE}", s)
        ef = params.get("edge_factor")
        edge_factor = positive_int(ef if ef is not None else graphs.GRAPH500_EDGE_FACTOR,
                                   argname("edge_factor", prefix))
        feats = params.get("features")
        if feats is None:
            notes.append(f"features {128 if gpu else 32} ({'GPU default' if gpu else 'CPU default, GPU 128'})")
        features = int_list(feats if feats is not None else (128 if gpu else 32), argname("features", prefix))
        backends = str_list(params.get("backend") or ",".join(RAW_BACKENDS), argname("backend", prefix),
                            list(BACKENDS))
        reductions = str_list(params.get("reduction") or "sum", argname("reduction", prefix), REDUCTIONS)
        for b in backends:
            for r in reductions:
                if r not in BACKENDS[b]:
                    raise InputError(argname("reduction", prefix),
                                     f"must be one backend {b} supports ({', '.join(BACKENDS[b])})", r)
        spmm = [b for b in backends if b in ("csr", "pyg:gcn-csr", "pyg:sage-csr")]
        if spmm:
            _probe_sparse_mm(device, dtype, spmm, "--dtype" if prefix == "--" else "study.dtype")
        transform = _bool(params.get("transform", False), argname("transform", prefix))
        if transform and any(b.startswith("pyg:") for b in backends):
            notes.append("--transform applies to the raw backends; PyG layers always run their own Linear")
        big = sorted({(s, f) for s in scales for f in features
                      if any(g != "karate" for g in names) and edge_factor * (1 << s) * f > SPLIT_ELEMENTS})
        if big:
            # printed with the run; each point's steps row says it again with its exact E*F
            notes.append("E*F can exceed 2^31 (" + ", ".join(f"s{s} F{f}" for s, f in big) + "): CUDA splits "
                         "an op over more than 2^31 elements into several kernels")
        spec = GnnSpec(tuple(dict.fromkeys(names)), tuple(dict.fromkeys(scales)), edge_factor,
                       tuple(dict.fromkeys(features)), tuple(dict.fromkeys(backends)),
                       tuple(dict.fromkeys(reductions)), transform,
                       seed_param(params.get("seed"), argname("seed", prefix), SEED))
        return Parsed(spec, tuple(notes))

    def points(self, spec: GnnSpec) -> list[Point]:
        out = []
        for graph in spec.graphs:
            for scale in ((None,) if graph == "karate" else spec.scales):
                where = "karate" if scale is None else f"{graph} s{scale}"
                for f in spec.features:
                    for backend in spec.backends:
                        raw = backend in RAW_BACKENDS
                        for reduction in spec.reductions:
                            label = f"{where} F{f} / {backend} / {reduction}"
                            if raw and spec.transform:
                                label += " +linear"
                            out.append(Point(label, {
                                "graph": graph, "scale": scale,
                                "edge_factor": None if scale is None else spec.edge_factor,
                                "features": f, "backend": backend, "reduction": reduction,
                                "feature_transform": (not raw) or spec.transform,
                                "seed": spec.seed,
                            }))
        return out

    # ------------------------------------------------------------------ memory

    def estimate_bytes(self, point: Point, dtype) -> int:
        """Peak device memory of a point: graph generation and the step's tensors, summed (an upper bound)."""
        p = point.params
        n, e = _sizes(p)
        f, s = p["features"], dtype.itemsize
        b = p["backend"]
        graph = 2 * e * INDEX_BYTES  # edge_index, kept for the step
        build_tmp = 4 * e * INDEX_BYTES  # RMAT bit levels, relabelled copies, dedup keys and sort
        nodes = 2 * n * f * s  # features x and the output
        m = messages_per_layer(b, n, e)
        if b in ("scatter", "index_add"):
            extra = e * f * s + n * s  # messages [E, F]; in-degree for mean
        elif b == "segment":
            extra = e * f * s + e * INDEX_BYTES + (n + 1) * INDEX_BYTES + n
        elif b == "csr":
            extra = (n + 1) * 4 + e * 4 + e * s
        elif b in ("pyg:gcn-csr", "pyg:sage-csr"):
            extra = 2 * ((n + 1) * INDEX_BYTES + m * (INDEX_BYTES + s)) + 2 * n * f * s + f * f * 2 * s
        else:  # PyG gather/scatter path (gat-csr converts back to it): x_j and the messages
            extra = 2 * m * f * s + 4 * m * INDEX_BYTES + 4 * m * s + 2 * n * f * s + f * f * 2 * s
        if b in RAW_BACKENDS and p.get("feature_transform"):
            extra += f * f * s + n * f * s
        return int(graph + build_tmp + nodes + extra)

    # ------------------------------------------------------------------ build

    def _graph_for(self, p: Mapping[str, Any], device):
        import torch

        from wlprof.workloads import graphs

        seed = data_seed(p)
        key = (p["graph"], p["scale"], p["edge_factor"], seed, str(device))
        if self._graph_key == key:
            return self._graph
        self._graph_key, self._graph = None, None  # free the previous graph before drawing the next
        graph = p["graph"]
        if graph == "karate":
            raw, n = graphs.karate(device)
        else:
            n = 1 << p["scale"]
            m = p["edge_factor"] * n
            if graph == "uniform":
                raw = graphs.uniform(n, m, device, seed)
            elif graph == "rmat":
                raw = graphs.rmat(p["scale"], m, device, seed)
            else:
                raw = graphs.zipf(n, m, zipf_exponent(graph), device, seed)
        edge_index = graphs.simplify(raw, n)
        del raw
        if device.type == "cuda":
            torch.cuda.empty_cache()
        stats = graphs.degree_stats(edge_index, n)
        self._graph_key, self._graph = key, (edge_index, n, stats)
        return self._graph

    def build(self, point: Point, device, dtype) -> Built:
        edge_index, n, stats = self._graph_for(point.params, device)
        built = build_step(edge_index, n, point.params, device, dtype)
        built.facts = stats.facts()
        return built


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
    cost = aggregate_cost(messages, num_nodes, f, reduction, dtype.itemsize, dtype_name(dtype), weighted)
    notes = []
    if messages * f > SPLIT_ELEMENTS:
        notes.append(f"E*F = {messages * f:,} > 2^31: CUDA splits an op over more than 2^31 elements "
                     "(the gather and scatter of materialized messages) into several kernels")
    if backend == "pyg:gat-csr":
        notes.append("GATConv has no fused message_and_aggregate: PyG converts the CSR adjacency back "
                     "to edge indices on every call")
    return Built(step=step, graph_safe=graph_safe, region_costs={"gnn/aggregate": cost},
                 note="; ".join(notes) or None)


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

"""GNN neighbourhood aggregation: tiny FLOPs, irregular memory access, atomics, kernel by kernel.

One step aggregates node features over a graph's edges: for every edge
src -> dst, out[dst] = reduce(out[dst], x[src]), x: [nodes, features], with
sum, mean (sum / in-degree; 0 for a node that receives nothing) or max (0 for a
node that receives nothing, PyG's convention). The same aggregate is computed
by several backends, so their kernels can be set side by side on one useful cost.

Graphs (`wlprof.workloads.gnn.graphs`, generated on the device in O(E), seeded):
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
from wlprof.workloads.gnn.costs import INDEX_BYTES, messages_per_layer
from wlprof.workloads.gnn.steps import (
    RAW_BACKENDS,
    SEED,
    SPLIT_ELEMENTS,
    _sizes,
    build_step,
    data_seed,
)

GRAPHS = ["uniform", "rmat", "zipf:S", "karate"]
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
MAX_SCALE = 40


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
        from wlprof.workloads.gnn import graphs

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

        from wlprof.workloads.gnn import graphs

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



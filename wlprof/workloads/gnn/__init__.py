"""GNN neighbourhood aggregation over generated graphs, backend by backend, on one useful cost.

For every edge src -> dst, out[dst] = reduce(out[dst], x[src]) with sum, mean or max,
computed by raw backends (scatter, index_add, segment reduce, CSR SpMM) and PyG layers.
`docs/gnn.md` describes the graphs, the backends, the regions and the cost.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from wlprof.errors import InputError, Key, did_you_mean
from wlprof.params import Param, PerDevice, Values
from wlprof.schema import F64, I64, B, Column, S
from wlprof.workloads.base import Built, Parsed, Point, Workload, column
from wlprof.workloads.gnn import graphs
from wlprof.workloads.gnn.costs import INDEX_BYTES, messages_per_layer
from wlprof.workloads.gnn.steps import RAW_BACKENDS, SEED, SPLIT_ELEMENTS, _sizes, build_step, data_seed

GRAPHS = ("uniform", "rmat", "zipf:S", "karate")
REDUCTIONS = ("sum", "mean", "max")
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
# backends whose aggregation reads the edges in destination order (a CSR's rows, segment offsets)
DST_SORTED = ("segment", "csr", "pyg:gcn-csr", "pyg:sage-csr")


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


def parse_graph(value: Any, key: Key | str) -> str:
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
            raise InputError(key, "must give zipf a finite exponent S >= 0 (zipf:S, e.g. zipf:1.5)", value)
        return f"zipf:{s:g}"
    raise InputError(key, f"must be one of {', '.join(GRAPHS)}", value,
                     hint=did_you_mean(v, ("uniform", "rmat", "karate", "zipf:1.5")))


def zipf_exponent(graph: str) -> float | None:
    return float(graph.split(":", 1)[1]) if graph.startswith("zipf:") else None


def _probe_sparse_mm(device, dtype, backends: list[str]) -> None:
    """Refuse a dtype torch.sparse.mm lacks on this device (the CPU's MKL path has no bfloat16)."""
    import warnings

    from wlprof.workloads.base import listing_only

    if listing_only():
        return

    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        adj = torch.sparse_csr_tensor(torch.tensor([0, 1], dtype=torch.int32, device=device),
                                      torch.tensor([0], dtype=torch.int32, device=device),
                                      torch.ones(1, dtype=dtype, device=device), (1, 1))
        try:
            torch.sparse.mm(adj, torch.ones(1, 1, dtype=dtype, device=device))
        except (RuntimeError, NotImplementedError) as exc:
            raise InputError(Key("dtype", "study"), f"must be a dtype torch.sparse.mm supports on {device.type} "
                             f"for {', '.join(backends)} ({str(exc).splitlines()[0]})",
                             str(dtype).removeprefix("torch.")) from None


class Gnn(Workload):
    name = "gnn"
    summary = "GNN aggregation (scatter, index_add, segment, CSR SpMM, PyG layers) over generated graphs"
    label = "GNN"
    phases = True
    figure = "backends"
    params = (
        Param("graph", "str", "Graph generators: uniform, rmat (Graph500 Kronecker), zipf:S (destination hubs), "
              "karate", many=True, item=parse_graph, default=["rmat"], metavar="GRAPH,..."),
        Param("scale", "int", "log2 of the node count (karate ignores it)", many=True, maximum=MAX_SCALE,
              default=PerDevice([20], [12])),
        Param("edge_factor", "int", "Edges drawn per node (Graph500: 16), before duplicates and self-loops go",
              default=graphs.GRAPH500_EDGE_FACTOR),
        Param("features", "int", "Feature widths", many=True, default=PerDevice([128], [32])),
        Param("backend", "str", "Aggregation backends; pyg:* with a -csr suffix call the layer with a CSR "
              "adjacency", many=True, choices=tuple(BACKENDS), default=list(RAW_BACKENDS)),
        Param("reduction", "str", "sum, mean or max, each where the backend supports it (max: "
              + ", ".join(k for k, v in BACKENDS.items() if "max" in v) + "; mean: every backend but "
              + ", ".join(k for k, v in BACKENDS.items() if "mean" not in v) + ")", many=True, choices=REDUCTIONS,
              default=["sum"]),
        Param("transform", "bool", "Raw backends: a Linear(F, F) after the aggregation (gnn/transform); PyG "
              "layers always run theirs", default=False),
        Param("seed", "int", "Seed of the graph draw and node features (layer weights keep seed 0)", minimum=0,
              default=SEED),
    )
    columns = (
        Column("graph", S, "", "GNN: graph generator (uniform, rmat, zipf:s, karate)", data=True, distribution=True),
        Column("scale", I64, "", "GNN: log2 of the node count", data=True, distribution=True),
        Column("nodes", I64, "", "GNN: nodes"),
        Column("edges", I64, "", "GNN: edges"),
        Column("features", I64, "", "GNN: feature width"),
        Column("backend", S, "", "GNN: aggregation backend", data=True, distribution=True),
        Column("reduction", S, "", "GNN: sum, mean or max"),
        Column("max_in_degree", I64, "", "GNN: largest in-degree", data=True, feature=True),
        Column("mean_in_degree", F64, "", "GNN: mean in-degree", feature=True),
        Column("isolated_share", F64, "fraction", "GNN: share of nodes with no edges"),
        Column("max_out_degree", I64, "", "GNN: largest out-degree (the gather index's most repeated source)"),
        Column("in_degree_cv", F64, "", "GNN: standard deviation of the in-degrees over their mean (0: regular)"),
        Column("unique_destinations", I64, "", "GNN: nodes that receive at least one message (distinct indices "
               "of the scatter)"),
        Column("duplicate_share", F64, "fraction", "GNN: share of edges whose destination an earlier edge "
               "already has (1 - unique_destinations / edges)"),
        Column("dst_sorted", B, "", "GNN: the aggregation runs over edges sorted by destination (segment, csr and "
               "the -csr layers) rather than by source"),
        Column("edge_factor", I64, "", "GNN: edges drawn per node before duplicates and self-loops are removed",
               data=True, distribution=True),
        Column("feature_transform", B, "", "GNN: whether the step runs a Linear feature transform (always for "
               "PyG layers)"),
        Column("seed", I64, "", "MoE/GNN: seed of the generated data (routing draw, graph draw, inputs)", data=True),
    )
    examples = (
        "wlprof run gnn --graph rmat --features 64,128,256",
        "wlprof run gnn --graph uniform,rmat,zipf:1.5 --backend scatter,index_add,segment,csr",
        "wlprof run gnn --graph rmat --backend pyg:gcn,pyg:sage,pyg:gat",
    )

    def __init__(self) -> None:
        self._graph_key: tuple | None = None
        self._graph: Any = None  # (edge_index, nodes, DegreeStats) of the last point: backends share it

    def spec(self, values: Values, device, dtype) -> Parsed:
        gpu = device.type == "cuda"
        notes = []
        names = list(dict.fromkeys(values["graph"]))
        scales, features = list(dict.fromkeys(values["scale"])), list(dict.fromkeys(values["features"]))
        backends, reductions = list(dict.fromkeys(values["backend"])), list(dict.fromkeys(values["reduction"]))
        edge_factor = values["edge_factor"]
        if "scale" not in values.given and any(g != "karate" for g in names):
            notes.append(f"scale {scales[0]} (2^{scales[0]} nodes; {'GPU default' if gpu else 'CPU default, GPU 20'})")
        if "features" not in values.given:
            notes.append(f"features {features[0]} ({'GPU default' if gpu else 'CPU default, GPU 128'})")
        # each reduction runs where the backend supports it; a pair it lacks is left out, said in a note.
        # Refused: a reduction no chosen backend supports, or a backend the user named left with nothing to run.
        for r in reductions:
            if not any(r in BACKENDS[b] for b in backends):
                only = backends[0] if len(backends) == 1 else "any of " + ", ".join(backends)
                raise InputError(Key("reduction"), f"must be a reduction backend {only} supports "
                                 f"({', '.join(sorted({x for b in backends for x in BACKENDS[b]}, key=REDUCTIONS.index))})",
                                 r)
        for b in backends:
            if "backend" in values.given and not any(r in BACKENDS[b] for r in reductions):
                raise InputError(Key("reduction"), f"must list a reduction backend {b} supports "
                                 f"({', '.join(BACKENDS[b])})", ",".join(reductions))
        lacking = {r: [b for b in backends if r not in BACKENDS[b]] for r in reductions}
        for r, bs in lacking.items():
            if bs:
                notes.append(f"reduction {r}: left out for {', '.join(bs)}, which {'lack' if len(bs) > 1 else 'lacks'} it")
        spmm = [b for b in backends if b in ("csr", "pyg:gcn-csr", "pyg:sage-csr")]
        if spmm:
            _probe_sparse_mm(device, dtype, spmm)
        transform = values["transform"]
        if transform and any(b.startswith("pyg:") for b in backends):
            notes.append("--transform applies to the raw backends; PyG layers always run their own Linear")
        big = sorted({(s, f) for s in scales for f in features
                      if any(g != "karate" for g in names) and edge_factor * (1 << s) * f > SPLIT_ELEMENTS})
        if big:
            # printed with the run; each point's steps row says it again with its exact E*F
            notes.append("E*F can exceed 2^31 (" + ", ".join(f"s{s} F{f}" for s, f in big) + "): CUDA splits "
                         "an op over more than 2^31 elements into several kernels")
        spec = GnnSpec(tuple(names), tuple(scales), edge_factor, tuple(features), tuple(backends),
                       tuple(reductions), transform, values["seed"])
        return Parsed(spec, tuple(notes))

    def family(self, rows) -> list[str]:
        return [f"GNN ({b})" for b in column(rows, "backend")]

    def size_params(self) -> tuple[str, ...]:
        return ("scale", "edge_factor", "features")

    def points(self, spec: GnnSpec) -> list[Point]:
        out = []
        for graph in spec.graphs:
            for scale in ((None,) if graph == "karate" else spec.scales):
                where = "karate" if scale is None else f"{graph} s{scale}"
                for f in spec.features:
                    for backend in spec.backends:
                        raw = backend in RAW_BACKENDS
                        for reduction in spec.reductions:
                            if reduction not in BACKENDS[backend]:
                                continue  # said in spec()'s note
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

    def prepare_bytes(self, point: Point) -> int:
        """The graph's index data while it is drawn: edge_index and the generator's temporaries."""
        _, e = _sizes(point.params)
        return 6 * e * INDEX_BYTES

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

    def prepare(self, point: Point, device) -> None:
        self._graph_for(point.params, device)  # drawn once and kept for `build`

    def build(self, point: Point, device, dtype) -> Built:
        edge_index, n, stats = self._graph_for(point.params, device)
        built = build_step(edge_index, n, point.params, device, dtype)
        built.facts = {**stats.facts(), "dst_sorted": point.params["backend"] in DST_SORTED}
        return built


WORKLOAD = Gnn()

"""The GNN aggregation's cost, the same for every backend (its messages, features and reduction)."""

from __future__ import annotations

from wlprof.cost.registry import VECTOR, Cost

INDEX_BYTES = 8  # int64 indices: PyG's edge_index dtype


def messages_per_layer(backend: str, nodes: int, edges: int) -> int:
    """Messages one aggregation sends: GCN and GAT add a self-loop per node to a graph that has none."""
    return edges + nodes if backend.split("-")[0] in ("pyg:gcn", "pyg:gat") else edges


def aggregate_cost(messages: int, nodes: int, features: int, reduction: str, itemsize: int,
                   dtype: str | None, weighted: bool = False, divides: bool = True) -> Cost:
    """The useful cost of one aggregation over `messages` edges, whatever the backend (module doc).

    FLOPs: messages*features adds (max: compares) [+ nodes*features divides for mean, unless
    `divides` is False: a separate op divides, costed by its own formula] [+ messages*features
    weight multiplies when `weighted`]. Bytes: a source row and an int64 index per message, the
    output written once [+ one weight per message].
    """
    flops = messages * features
    if reduction == "mean" and divides:
        flops += nodes * features
    nbytes = messages * features * itemsize + messages * INDEX_BYTES + nodes * features * itemsize
    if weighted:
        flops += messages * features
        nbytes += messages * itemsize
    return Cost(float(flops), float(nbytes), VECTOR, dtype, written=float(nodes * features * itemsize))



"""Graph generators for the GNN workload: vectorized, O(E), on the device, from a seeded generator.

Each returns an edge list [2, E] (int64, PyG's `edge_index`) with exactly the requested
number of edges, a multigraph that `simplify` turns simple. The generators: `docs/gnn.md`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch is imported by the functions that use it: `wlprof --help` stays fast
    import torch

# Graph500 specification, Kronecker generator initiator: A, B, C (D = 1 - A - B - C).
GRAPH500_A, GRAPH500_B, GRAPH500_C = 0.57, 0.19, 0.19
GRAPH500_EDGE_FACTOR = 16  # Graph500: edges = edge factor * 2^scale


def _generator(device, seed: int):
    import torch

    return torch.Generator(device=device).manual_seed(seed)


def uniform(num_nodes: int, num_edges: int, device: torch.device, seed: int = 0) -> torch.Tensor:
    """G(n, m): both endpoints of every edge uniform over the nodes (drawn with replacement)."""
    import torch

    g = _generator(device, seed)
    src = torch.randint(0, num_nodes, (num_edges,), generator=g, device=device)
    dst = torch.randint(0, num_nodes, (num_edges,), generator=g, device=device)
    return torch.stack([src, dst])


def rmat(scale: int, num_edges: int, device: torch.device, seed: int = 0, a: float = GRAPH500_A,
         b: float = GRAPH500_B, c: float = GRAPH500_C, permute: bool = True) -> torch.Tensor:
    """RMAT / Kronecker edges over 2^scale nodes, as the Graph500 reference generator draws them.

    Per bit level, per edge: the row (source) bit is 1 with probability C + D; the
    column (destination) bit is then 0 with probability A / (A + B) after a 0 row
    bit and C / (C + D) after a 1. Two uniforms per edge per level: O(E * scale)
    work, O(E) memory. Vertex labels are permuted at the end, as the reference does
    (`permute=False` keeps the Kronecker labels, whose bits show the initiator).
    """
    import torch

    if not (a > 0 and b >= 0 and c >= 0 and a + b + c < 1):
        raise ValueError(f"RMAT initiator must have a > 0, b, c >= 0 and a + b + c < 1 (got {a}, {b}, {c})")
    g = _generator(device, seed)
    ab = a + b
    a_norm, c_norm = a / ab, c / (1.0 - ab)
    src = torch.zeros(num_edges, dtype=torch.int64, device=device)
    dst = torch.zeros(num_edges, dtype=torch.int64, device=device)
    for level in range(scale):
        row_bit = torch.rand(num_edges, generator=g, device=device) > ab
        # threshold for the column bit: a_norm after a 0 row bit, c_norm after a 1
        thresh = row_bit.to(torch.float32).mul_(c_norm - a_norm).add_(a_norm)
        col_bit = torch.rand(num_edges, generator=g, device=device) > thresh
        del thresh
        src.add_(row_bit.to(torch.int64).mul_(1 << level))
        dst.add_(col_bit.to(torch.int64).mul_(1 << level))
        del row_bit, col_bit
    if not permute:
        return torch.stack([src, dst])
    perm = torch.randperm(1 << scale, generator=g, device=device)
    return torch.stack([perm[src], perm[dst]])


def zipf(num_nodes: int, num_edges: int, s: float, device: torch.device, seed: int = 0) -> torch.Tensor:
    """Uniform sources; destinations Zipf(s) over the nodes: P(rank k) proportional to k^-s.

    Inverse-CDF sampling: the CDF over n ranks (float64, O(n)) and one binary search
    per edge (O(E log n)); no n^2 and no categorical sampler limits (CUDA's
    multinomial takes at most 2^24 categories).
    """
    import torch

    if s < 0 or not math.isfinite(s):
        raise ValueError(f"zipf exponent must be a finite number >= 0 (got {s})")
    g = _generator(device, seed)
    src = torch.randint(0, num_nodes, (num_edges,), generator=g, device=device)
    weights = torch.arange(1, num_nodes + 1, dtype=torch.float64, device=device).pow_(-s)
    cdf = weights.cumsum_(0)
    cdf.div_(cdf[-1].clone())
    u = torch.rand(num_edges, dtype=torch.float64, generator=g, device=device)
    rank = torch.searchsorted(cdf, u, right=True).clamp_(max=num_nodes - 1)
    del cdf, u
    perm = torch.randperm(num_nodes, generator=g, device=device)
    return torch.stack([src, perm[rank]])


def karate(device: torch.device) -> tuple[torch.Tensor, int]:
    """PyG's KarateClub (built in, no download): its edge_index and node count."""
    from torch_geometric.datasets import KarateClub

    data = KarateClub()[0]
    return data.edge_index.to(device), int(data.num_nodes)


def simplify(edge_index: torch.Tensor, num_nodes: int) -> torch.Tensor:
    """The edge list without self-loops and duplicate edges, sorted by (source, destination).

    One sort of the edge keys source * n + destination (PyG's coalesced order).
    Syncs with the host (the number of distinct edges): a build-time step.
    """
    import torch

    src, dst = edge_index[0], edge_index[1]
    keep = src != dst
    key = (src * num_nodes + dst)[keep]
    key = torch.unique(key, sorted=True)  # sort-based on every device
    return torch.stack([torch.div(key, num_nodes, rounding_mode="floor"), key % num_nodes])


@dataclass(frozen=True)
class DegreeStats:
    nodes: int
    edges: int
    max_in_degree: int
    mean_in_degree: float
    isolated_share: float  # nodes with no edge at all (neither in nor out)
    zero_in_share: float  # nodes that receive no message (their aggregate is 0)
    max_out_degree: int = 0
    in_degree_cv: float = 0.0  # standard deviation of the in-degrees over their mean
    unique_destinations: int = 0  # nodes that receive at least one message

    @property
    def duplicate_share(self) -> float:
        """Share of the edges whose destination an earlier edge already has: the scatter index's repeats."""
        return 1.0 - self.unique_destinations / self.edges if self.edges else 0.0

    def facts(self) -> dict:
        return {"nodes": self.nodes, "edges": self.edges, "max_in_degree": self.max_in_degree,
                "mean_in_degree": self.mean_in_degree, "isolated_share": self.isolated_share,
                "max_out_degree": self.max_out_degree, "in_degree_cv": self.in_degree_cv,
                "unique_destinations": self.unique_destinations, "duplicate_share": self.duplicate_share}


def in_degree(edge_index: torch.Tensor, num_nodes: int) -> torch.Tensor:
    import torch

    return torch.bincount(edge_index[1], minlength=num_nodes)


def degree_stats(edge_index: torch.Tensor, num_nodes: int) -> DegreeStats:
    import torch

    e = int(edge_index.size(1))
    deg_in = in_degree(edge_index, num_nodes)
    deg_out = torch.bincount(edge_index[0], minlength=num_nodes)
    isolated = int(((deg_in == 0) & (deg_out == 0)).sum())
    zero_in = int((deg_in == 0).sum())
    mean = e / num_nodes if num_nodes else 0.0
    std = float(deg_in.to(torch.float64).std(unbiased=False)) if num_nodes else 0.0
    return DegreeStats(
        nodes=num_nodes, edges=e, max_in_degree=int(deg_in.max()) if num_nodes else 0,
        mean_in_degree=mean,
        isolated_share=isolated / num_nodes if num_nodes else 0.0,
        zero_in_share=zero_in / num_nodes if num_nodes else 0.0,
        max_out_degree=int(deg_out.max()) if num_nodes else 0,
        in_degree_cv=std / mean if mean else 0.0,
        unique_destinations=num_nodes - zero_in,
    )

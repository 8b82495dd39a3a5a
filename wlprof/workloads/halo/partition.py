"""The halo workload's graph, its partitions and one rank's exchange plan (numpy, built once).

Nodes are split into P contiguous id ranges (a 2-D grid's row strips); rank r of W holds
partitions [r*P/W, (r+1)*P/W). A partition reads a node another partition owns only
through its own halo copy of it, refreshed by the exchange every step; the nodes another
partition needs are the owner's boundary, the others its inner nodes. The rank's feature
buffer is its own nodes, then its halo rows ordered by (owner rank, destination partition,
owner partition, node): the rows one peer rank sends are contiguous (one irecv), and so
are the rows this rank copies between its own partitions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

MAX_RUNS = 64  # more contiguous runs than this among the local copies: pack them into one buffer first


def grid_edges(nodes: int) -> np.ndarray:
    """A side x side 4-neighbour grid (row-major ids), both directions of every edge: [2, E]."""
    side = math.isqrt(nodes)
    ids = np.arange(side * side, dtype=np.int64).reshape(side, side)
    right = np.stack([ids[:, :-1].ravel(), ids[:, 1:].ravel()])
    down = np.stack([ids[:-1, :].ravel(), ids[1:, :].ravel()])
    one = np.concatenate([right, down], axis=1)
    return np.concatenate([one, one[::-1]], axis=1)


def random_edges(kind: str, nodes: int, edge_factor: int, seed: int) -> np.ndarray:
    """uniform or rmat edges (the GNN workload's generators, on the CPU), simple: [2, E]."""
    import torch

    from wlprof.workloads.gnn import graphs

    cpu = torch.device("cpu")
    m = edge_factor * nodes
    if kind == "rmat":
        raw = graphs.rmat(int(round(math.log2(nodes))), m, cpu, seed)
    else:
        raw = graphs.uniform(nodes, m, cpu, seed)
    return graphs.simplify(raw, nodes).numpy()


def bounds(n: int, parts: int) -> np.ndarray:
    return np.array([n * p // parts for p in range(parts + 1)], dtype=np.int64)


@dataclass
class Plan:
    """One rank's part of a partitioned graph and what its exchange moves."""

    nodes: int
    partitions: int
    world: int
    rank: int
    lo: int  # the rank's nodes are [lo, hi)
    hi: int
    halo: int  # halo rows after the rank's own rows
    self_rows: dict  # "boundary"/"inner": own-row indices computed in that phase
    edge_src: dict  # per phase: feature-buffer row of each message's source
    edge_dst: dict  # per phase: position (in the phase's rows) of each message's destination
    inv_deg: dict  # per phase: 1 / (in-degree + 1) of its rows
    local_src: np.ndarray  # own rows copied into the local halo block, in halo order
    local_at: int  # the local halo block: halo rows [local_at, local_at + len(local_src))
    recv: dict  # peer rank -> (first halo row, rows) it sends this rank
    send: dict  # peer rank -> own rows this rank sends it, in its halo order
    cut_edges: int  # in-edges of this rank's partitions whose source another partition owns

    @property
    def own(self) -> int:
        return self.hi - self.lo

    def runs(self) -> list[tuple[int, int, int]]:
        """The local copies as contiguous runs (source row, halo row, rows)."""
        src = self.local_src
        if not len(src):
            return []
        cut = np.flatnonzero(np.diff(src) != 1) + 1
        starts = np.concatenate([[0], cut])
        ends = np.concatenate([cut, [len(src)]])
        return [(int(src[a]), self.local_at + int(a), int(b - a)) for a, b in zip(starts, ends, strict=True)]

    def exchange_rows(self) -> int:
        """Rows this rank moves per step: its local copies and what it sends its peers."""
        return int(len(self.local_src) + sum(len(v) for v in self.send.values()))


def plan(edges: np.ndarray, nodes: int, partitions: int, world: int, rank: int) -> Plan:
    """Rank `rank`'s plan for `edges` ([2, E], src -> dst) over `partitions` contiguous parts."""
    src, dst = edges[0].astype(np.int64), edges[1].astype(np.int64)
    pb = bounds(nodes, partitions)
    per_rank = partitions // world
    part_of = np.searchsorted(pb, np.arange(nodes), side="right") - 1
    rank_of_part = np.arange(partitions) // per_rank
    lo, hi = int(pb[rank * per_rank]), int(pb[(rank + 1) * per_rank])
    ps, pd_ = part_of[src], part_of[dst]
    cut = ps != pd_
    # every halo entry of the whole graph: (destination partition, source node), once each
    keys = np.unique(pd_[cut] * nodes + src[cut])
    h_part, h_node = keys // nodes, keys % nodes
    h_owner_part = part_of[h_node]
    h_dst_rank, h_src_rank = rank_of_part[h_part], rank_of_part[h_owner_part]
    order = np.lexsort((h_node, h_owner_part, h_part, h_src_rank))  # the receiving rank's halo order
    h_part, h_node, h_owner_part = h_part[order], h_node[order], h_owner_part[order]
    h_dst_rank, h_src_rank = h_dst_rank[order], h_src_rank[order]
    mine = h_dst_rank == rank
    my_keys = h_part[mine] * nodes + h_node[mine]
    key_order = np.argsort(my_keys, kind="stable")
    sorted_keys = my_keys[key_order]
    my_src_rank = h_src_rank[mine]
    recv = {}
    for peer in range(world):
        at = np.flatnonzero(my_src_rank == peer)
        if len(at) and peer != rank:
            recv[peer] = (int(at[0]), int(len(at)))
    local = np.flatnonzero(my_src_rank == rank)
    local_src = h_node[mine][local] - lo
    local_at = int(local[0]) if len(local) else 0
    send = {}
    for peer in range(world):
        if peer == rank:
            continue
        sel = (h_dst_rank == peer) & (h_src_rank == rank)
        if sel.any():
            send[peer] = h_node[sel] - lo  # already in the peer's halo order
    # boundary: own nodes some other partition holds a halo copy of
    needed = np.zeros(hi - lo, dtype=bool)
    owned_needed = h_node[(h_src_rank == rank)]
    needed[owned_needed - lo] = True
    rows = {"boundary": np.flatnonzero(needed), "inner": np.flatnonzero(~needed)}
    # messages into this rank's nodes, by phase
    into = (dst >= lo) & (dst < hi)
    e_src, e_dst = src[into], dst[into]
    e_cut = ps[into] != pd_[into]
    feat_row = e_src - lo
    if e_cut.any():
        q = pd_[into][e_cut] * nodes + e_src[e_cut]
        feat_row = feat_row.copy()
        feat_row[e_cut] = (hi - lo) + key_order[np.searchsorted(sorted_keys, q)]
    deg = np.bincount(e_dst - lo, minlength=hi - lo)
    edge_src, edge_dst, inv_deg = {}, {}, {}
    for phase, r in rows.items():
        pos = np.full(hi - lo, -1, dtype=np.int64)
        pos[r] = np.arange(len(r))
        sel = pos[e_dst - lo] >= 0
        edge_src[phase] = feat_row[sel]
        edge_dst[phase] = pos[e_dst - lo][sel]
        inv_deg[phase] = 1.0 / (deg[r] + 1.0)
    return Plan(nodes, partitions, world, rank, lo, hi, int(mine.sum()), rows, edge_src, edge_dst, inv_deg,
                local_src.astype(np.int64), local_at, recv, send, int(e_cut.sum()))

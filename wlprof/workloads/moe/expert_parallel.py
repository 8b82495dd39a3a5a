"""Expert parallelism: experts sharded over ranks, tokens moved to their experts with all-to-all.

Each rank holds `tokens` tokens routed by its own draw of the routing (seed + rank) and
the experts [E*r/W, E*(r+1)/W). A step: the router (moe/router); tokens sorted by expert,
per-expert counts exchanged with `all_to_all_single`, the split sizes read on the host
(a sync, as in every all_to_all_single dispatch), the rows sent to their experts' ranks
and regrouped by local expert (moe/dispatch-a2a); the local experts on the grouped path
(moe/expert); the rows sent back with the reversed splits and summed with their gates
(moe/combine-a2a). Every rank's routing is a deterministic function of the seed, so every
rank knows every rank's counts at build time (`plan`): the loads per rank are facts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from wlprof.errors import InputError, Key


def shards(experts: int, world: int) -> list[tuple[int, int]]:
    """Rank r holds experts [E*r//W, E*(r+1)//W): contiguous, sizes differing by at most one."""
    return [(experts * r // world, experts * (r + 1) // world) for r in range(world)]


def check(experts: int, world: int) -> None:
    if world > experts:
        raise InputError(Key("experts"), ("must be at least the world size for --dispatch alltoall (",
                         Key("world_size", "store"), f" {world}): every rank holds at least one expert"), experts)


@dataclass(frozen=True)
class Plan:
    rank: int
    world: int
    bounds: tuple[tuple[int, int], ...]
    counts: np.ndarray  # [world, experts]: assignments rank s routes to expert e

    @property
    def lo(self) -> int:
        return self.bounds[self.rank][0]

    @property
    def hi(self) -> int:
        return self.bounds[self.rank][1]

    def send_rows(self) -> list[int]:
        """Rows this rank sends to each rank (its own included)."""
        return [int(self.counts[self.rank, lo:hi].sum()) for lo, hi in self.bounds]

    def recv_rows(self) -> list[int]:
        """Rows this rank receives from each rank (its own included)."""
        return [int(self.counts[s, self.lo:self.hi].sum()) for s in range(self.world)]

    def rows_by_rank(self) -> list[int]:
        """Rows each rank's experts compute."""
        return [int(self.counts[:, lo:hi].sum()) for lo, hi in self.bounds]

    def local_groups(self) -> list[int]:
        """Rows per local expert."""
        return [int(v) for v in self.counts[:, self.lo:self.hi].sum(axis=0)]


def rank_params(p: dict, rank: int) -> dict:
    """A point's parameters as rank `rank` draws its tokens and routing: the seed moved by the rank."""
    from wlprof.workloads.moe.tensors import data_seed

    return {**p, "seed": data_seed(p) + rank}


def plan(p: dict, rank: int, world: int) -> Plan:
    from wlprof.workloads.moe.tensors import routing_for

    counts = np.stack([routing_for(rank_params(p, r)).counts() for r in range(world)])
    return Plan(rank, world, tuple(shards(p["experts"], world)), counts)


def local_weights(p: dict, device, dtype, lo: int, hi: int):
    """Weights of experts lo..hi-1 ([n, d_ff, d_model], [n, d_ff, d_model] or None, [n, d_model, d_ff]),
    expert e's drawn from its own seed: the same on every world size."""
    import torch

    from wlprof.workloads.moe.tensors import data_seed

    d, f = p["d_model"], p["d_ff"]
    n = hi - lo
    swiglu = p["activation"] == "swiglu"
    w1 = torch.empty(n, f, d, device=device, dtype=dtype)
    w3 = torch.empty(n, f, d, device=device, dtype=dtype) if swiglu else None
    w2 = torch.empty(n, d, f, device=device, dtype=dtype)
    for j, e in enumerate(range(lo, hi)):
        gen = torch.Generator(device=device).manual_seed(data_seed(p) * 1_000_003 + 17 + e)
        w1[j].normal_(0.0, d ** -0.5, generator=gen)
        if w3 is not None:
            w3[j].normal_(0.0, d ** -0.5, generator=gen)
        w2[j].normal_(0.0, f ** -0.5, generator=gen)
    return w1, w3, w2


def alltoall_step(x, w_router, ids, gates, w1, w3, w2, p: dict, pl: Plan, path: str, group):
    """The expert-parallel step of one rank (its tensors on its device)."""
    import torch
    import torch.distributed as dist
    from torch.profiler import record_function

    from wlprof.workloads.moe import grouped
    from wlprof.workloads.moe.dispatch import _router
    from wlprof.workloads.moe.tensors import MoeTensors

    experts, top_k, ffn = p["experts"], p["top_k"], p["activation"]
    world, lo, hi = pl.world, pl.lo, pl.hi
    n_local = hi - lo
    dev = x.device
    ones = torch.ones(ids.numel(), dtype=torch.int64, device=dev)
    expert_splits = [b - a for a, b in pl.bounds]  # counts sent to each rank: one per expert it holds
    experts_grouped = grouped.grouped_ffn(w1, w3, w2, ffn, path, pl.local_groups(), p["d_model"])
    router_tensors = MoeTensors(x, w_router, None, None, None)
    local_ids = torch.arange(n_local, device=dev).repeat(world)

    def step():
        with record_function("moe/router"):
            _router(router_tensors, top_k, x.dtype)
        with record_function("moe/dispatch-a2a"):
            flat = ids.reshape(-1)
            order = torch.argsort(flat, stable=True)  # by expert: rows for rank 0's experts first
            tok = order // top_k
            xs = x.index_select(0, tok)
            counts = torch.zeros(experts, dtype=torch.int64, device=dev).index_add_(0, flat, ones)
            recv_counts = torch.empty(world * n_local, dtype=torch.int64, device=dev)
            dist.all_to_all_single(recv_counts, counts, [n_local] * world, expert_splits, group=group)
            host = torch.cat([counts, recv_counts]).tolist()  # the split sizes, on the host
            send = [sum(host[a:b]) for a, b in pl.bounds]
            rc = host[experts:]
            recv_split = [sum(rc[s * n_local:(s + 1) * n_local]) for s in range(world)]
            rows = sum(recv_split)
            recv = x.new_empty(rows, x.shape[1])
            dist.all_to_all_single(recv, xs, recv_split, send, group=group)
            rc_t = recv_counts.view(world, n_local)
            local_e = torch.repeat_interleave(local_ids, rc_t.reshape(-1), output_size=rows)
            perm = torch.argsort(local_e, stable=True)  # rows by (source rank, expert) -> by expert
            xr = recv.index_select(0, perm)
            offs = rc_t.sum(0).cumsum(0).to(torch.int32)
        with record_function("moe/expert"):
            yr = experts_grouped(xr, offs) if rows else xr  # no token routed to this rank's experts
        with record_function("moe/combine-a2a"):
            back = torch.empty_like(yr).index_copy_(0, perm, yr)  # by (source rank, expert) again
            out_rows = x.new_empty(flat.numel(), x.shape[1])
            dist.all_to_all_single(out_rows, back, send, recv_split, group=group)
            g = gates.reshape(-1).index_select(0, order)
            out = torch.zeros_like(x).index_add_(0, tok, out_rows * g[:, None])
        return out

    return step

"""The halo step of one rank: boundary, exchange, inner, wait, as `serial` or `overlap` schedules.

One step is one mean-aggregation layer (h' = D^-1 (A + I) h W) over the rank's nodes,
reading its own rows and its halo rows of the current feature buffer and writing its own
rows of the next one (two buffers, swapped every step: a Jacobi iteration). The exchange
then refreshes the next buffer's halo rows from the new boundary rows:
- between partitions of this rank: copies, on the copy engine on a GPU (device to device,
  or through pinned host memory), split over two side streams;
- from other ranks: `torch.distributed` isend/irecv of one packed buffer per peer.
`serial`: boundary, inner, then the exchange, then wait. `overlap`: boundary, the exchange
started (its streams wait on an event after the boundary), inner meanwhile, then wait. No
step reads a tensor's value on the host. On the CPU streams and events are no-ops: the
copies run inline and only gloo's sends run beside the compute.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

from wlprof.workloads.halo.partition import MAX_RUNS, Plan

SCHEDULES = ("serial", "overlap")
EXCHANGES = ("d2d", "host")


@dataclass
class HaloState:
    bufs: list  # two [own + halo, F] feature buffers
    weight: Any
    phase: dict  # phase -> (rows, edge_src, edge_dst, inv_deg) tensors
    cur: int = 0


def _nullctx():
    return contextlib.nullcontext()


def build(pl: Plan, features: int, device, dtype, exchange: str, group, seed: int):
    """The step functions of one rank: {"serial", "overlap", "compute", "exchange"} -> callable."""
    import torch
    import torch.distributed as dist
    from torch.profiler import record_function

    gen = torch.Generator().manual_seed(seed + 7 * pl.rank)
    rows_total = pl.own + pl.halo
    x0 = torch.randn(rows_total, features, generator=gen).to(device=device, dtype=dtype)
    bufs = [x0, x0.clone()]
    weight = (torch.randn(features, features, generator=gen) / features ** 0.5).to(device=device, dtype=dtype)

    def t(a, dt=torch.int64):
        return torch.as_tensor(a, dtype=dt).to(device)

    phase = {ph: (t(pl.self_rows[ph]), t(pl.edge_src[ph]), t(pl.edge_dst[ph]),
                  t(pl.inv_deg[ph], torch.float32).to(dtype)[:, None]) for ph in ("boundary", "inner")}
    st = HaloState(bufs, weight, phase)
    cuda = device.type == "cuda"
    copy_streams = [torch.cuda.Stream(device), torch.cuda.Stream(device)] if cuda else [None, None]

    def stream_ctx(s):
        return torch.cuda.stream(s) if s is not None else _nullctx()

    # local copies: direct runs, or one packed buffer when the runs are many (a random graph's halo)
    runs = pl.runs()
    packed = len(runs) > MAX_RUNS
    n_local = len(pl.local_src)
    pack_idx = t(pl.local_src) if packed else None
    pack_buf = torch.empty(n_local, features, device=device, dtype=dtype) if packed else None
    if packed:  # the packed block is contiguous: split it in two for the two streams
        half = n_local // 2
        copies = [(0, pl.local_at, half), (half, pl.local_at + half, n_local - half)]
        copies = [c for c in copies if c[2] > 0]
    else:
        copies = runs
    host = None
    if exchange == "host" and n_local:
        host = torch.empty(n_local, features, dtype=dtype, pin_memory=cuda)
    send_idx = {peer: t(rows) for peer, rows in pl.send.items()}
    send_buf = {peer: torch.empty(len(rows), features, device=device, dtype=dtype) for peer, rows in pl.send.items()}
    events = [torch.cuda.Event() for _ in copies] if cuda and host is not None else [None] * len(copies)

    def compute(which: str, cur, nxt):
        rows, esrc, edst, inv = st.phase[which]
        if not len(rows):
            return
        agg = cur.index_select(0, rows)
        agg.index_add_(0, edst, cur.index_select(0, esrc))
        nxt.index_copy_(0, rows, (agg * inv) @ st.weight)

    def pack(nxt):
        if packed:
            torch.index_select(nxt, 0, pack_idx, out=pack_buf)
        for peer, idx in send_idx.items():
            torch.index_select(nxt, 0, idx, out=send_buf[peer])

    def start_exchange(nxt, after):
        """Enqueue the local copies on the side streams (after `after`, an event on the compute stream) and
        post the P2P ops; returns the P2P works."""
        own = pl.own
        offset = 0
        for i, (src_row, halo_row, n) in enumerate(copies):
            s = copy_streams[i % 2]
            src = (pack_buf[src_row:src_row + n] if packed else nxt[src_row:src_row + n])
            dst = nxt[own + halo_row:own + halo_row + n]
            if host is None:
                with stream_ctx(s):
                    if s is not None:
                        s.wait_event(after)
                    dst.copy_(src, non_blocking=True)
            else:  # device -> pinned host on one stream, host -> device on the other
                stage = host[offset:offset + n]
                up, down = copy_streams[0], copy_streams[1]
                with stream_ctx(up):
                    if up is not None:
                        up.wait_event(after)
                    stage.copy_(src, non_blocking=True)
                    if events[i] is not None:
                        events[i].record(up)
                with stream_ctx(down):
                    if down is not None:
                        down.wait_event(events[i])
                    dst.copy_(stage, non_blocking=True)
            offset += n
        ops = []
        for peer, (first, n) in pl.recv.items():
            ops.append(dist.P2POp(dist.irecv, nxt[own + first:own + first + n], peer, group))
        for peer, buf in send_buf.items():
            ops.append(dist.P2POp(dist.isend, buf, peer, group))
        return dist.batch_isend_irecv(ops) if ops else []

    def finish(works):
        for w in works:
            w.wait()
        if cuda:
            cur_stream = torch.cuda.current_stream(device)
            for s in copy_streams:
                cur_stream.wait_stream(s)

    def record():
        if not cuda:
            return None
        ev = torch.cuda.Event()
        ev.record(torch.cuda.current_stream(device))
        return ev

    def serial():
        cur, nxt = st.bufs[st.cur], st.bufs[1 - st.cur]
        with record_function("halo/boundary"):
            compute("boundary", cur, nxt)
            pack(nxt)
        with record_function("halo/inner"):
            compute("inner", cur, nxt)
        with record_function("halo/exchange"):
            works = start_exchange(nxt, record())
        with record_function("halo/wait"):
            finish(works)
        st.cur = 1 - st.cur
        return nxt

    def overlap():
        cur, nxt = st.bufs[st.cur], st.bufs[1 - st.cur]
        with record_function("halo/boundary"):
            compute("boundary", cur, nxt)
            pack(nxt)
        with record_function("halo/exchange"):
            works = start_exchange(nxt, record())
        with record_function("halo/inner"):
            compute("inner", cur, nxt)
        with record_function("halo/wait"):
            finish(works)
        st.cur = 1 - st.cur
        return nxt

    def compute_only():
        cur, nxt = st.bufs[st.cur], st.bufs[1 - st.cur]
        compute("boundary", cur, nxt)
        pack(nxt)
        compute("inner", cur, nxt)
        st.cur = 1 - st.cur
        return nxt

    def exchange_only():
        nxt = st.bufs[1 - st.cur]
        finish(start_exchange(nxt, record()))
        return nxt

    return {"serial": serial, "overlap": overlap, "compute": compute_only, "exchange": exchange_only}

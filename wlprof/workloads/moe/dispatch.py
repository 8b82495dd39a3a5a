"""The MoE step of each dispatch implementation: loop, padded, grouped."""

from __future__ import annotations

import numpy as np

from wlprof.workloads.moe import grouped
from wlprof.workloads.moe.tensors import MoeTensors, _act, expert_ffn


def _router(tensors: MoeTensors, top_k: int, dtype):
    """The router as a layer runs it (Mixtral): its result is not used, its cost is measured."""
    import torch
    import torch.nn.functional as F

    logits = F.linear(tensors.x, tensors.w_router)
    probs = torch.softmax(logits, dim=-1, dtype=torch.float32)
    top_v, top_i = torch.topk(probs, top_k, dim=-1)
    top_v = top_v / top_v.sum(dim=-1, keepdim=True)
    return top_v.to(dtype), top_i


def loop_step(tensors: MoeTensors, ids, gates, p):
    import torch
    from torch.profiler import record_function

    x, w1, w3, w2 = tensors.x, tensors.w1, tensors.w3, tensors.w2
    experts, top_k, ffn = p["experts"], p["top_k"], p["activation"]

    def step():
        with record_function("moe/router"):
            _router(tensors, top_k, x.dtype)
        with record_function("moe/combine"):
            out = torch.zeros_like(x)
        with record_function("moe/dispatch"):
            # transformers' MixtralSparseMoeBlock: mask [experts, top_k, tokens], then the hit experts
            mask = torch.nn.functional.one_hot(ids, num_classes=experts).permute(2, 1, 0)
            hit = torch.greater(mask.sum(dim=(-1, -2)), 0).nonzero().flatten().tolist()  # host sync
        for e in hit:
            with record_function("moe/dispatch"):
                idx, top_x = torch.where(mask[e])  # host sync: the row count is data
                rows = x[top_x]
            with record_function("moe/expert"):
                y = expert_ffn(rows, w1[e], w3[e] if w3 is not None else None, w2[e], ffn)
            with record_function("moe/combine"):
                out.index_add_(0, top_x, y * gates[top_x, idx, None])
        return out

    return step


def padded_step(tensors: MoeTensors, ids, gates, p, cap: int):
    import torch
    from torch.profiler import record_function

    x, w1, w3, w2 = tensors.x, tensors.w1, tensors.w3, tensors.w2
    t, experts, top_k, ffn = p["tokens"], p["experts"], p["top_k"], p["activation"]
    d = p["d_model"]
    n = t * top_k
    rows = experts * cap
    act = _act(ffn)
    # token of each choice-major assignment (choice j of token i at j*t + i): shape-only, a constant
    tok = torch.arange(t, device=x.device).repeat(top_k)
    w1t, w2t = w1.transpose(1, 2), w2.transpose(1, 2)  # [E, d, f], [E, f, d]: views, no copy
    w3t = w3.transpose(1, 2) if w3 is not None else None

    def step():
        with record_function("moe/router"):
            _router(tensors, top_k, x.dtype)
        with record_function("moe/dispatch"):
            flat = ids.t().reshape(-1)  # choice-major: first choices take capacity first (GShard)
            onehot = torch.zeros(n, experts, dtype=torch.int32, device=x.device).scatter_(1, flat[:, None], 1)
            pos = onehot.cumsum(0).gather(1, flat[:, None]).squeeze(1) - 1
            # dropped assignments go to a spare last row that is never read back as a result
            dest = torch.where(pos < cap, flat * cap + pos, rows)
            buf = x.new_zeros(rows + 1, d)
            buf.index_copy_(0, dest, x.index_select(0, tok))
            xe = buf[:rows].view(experts, cap, d)
        with record_function("moe/expert"):
            if w3t is not None:
                h = act(torch.bmm(xe, w1t)) * torch.bmm(xe, w3t)
            else:
                h = act(torch.bmm(xe, w1t))
            y = torch.bmm(h, w2t)  # [E, cap, d]
        with record_function("moe/combine"):
            y_rows = torch.cat([y.view(rows, d), y.new_zeros(1, d)])  # the spare row reads as zero
            g = gates.t().reshape(-1)
            out = torch.zeros_like(x).index_add_(0, tok, y_rows.index_select(0, dest) * g[:, None])
        return out

    return step


def grouped_step(tensors: MoeTensors, ids, gates, p, path: str, counts: np.ndarray):
    import torch
    from torch.profiler import record_function

    x, w1, w3, w2 = tensors.x, tensors.w1, tensors.w3, tensors.w2
    experts, top_k, ffn = p["experts"], p["top_k"], p["activation"]
    ones = torch.ones(ids.numel(), dtype=torch.int64, device=x.device)
    # the fallback's group sizes come from the build-time routing
    expert_grouped = grouped.grouped_ffn(w1, w3, w2, ffn, path, counts.tolist(), x.size(1))

    def step():
        with record_function("moe/router"):
            _router(tensors, top_k, x.dtype)
        with record_function("moe/dispatch"):
            flat = ids.reshape(-1)  # token-major: assignment i*top_k + j is token i's choice j
            order = torch.argsort(flat, stable=True)
            tok = order // top_k
            xs = x.index_select(0, tok)
            group = torch.zeros(experts, dtype=torch.int64, device=x.device).index_add_(0, flat, ones)
            offs = group.cumsum(0).to(torch.int32)
        with record_function("moe/expert"):
            ys = expert_grouped(xs, offs)
        with record_function("moe/combine"):
            g = gates.reshape(-1).index_select(0, order)
            out = torch.zeros_like(x).index_add_(0, tok, ys * g[:, None])
        return out

    return step


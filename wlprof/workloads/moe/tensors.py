"""The MoE layer's tensors and routing, deterministic for the sizes and the seed."""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from wlprof.workloads.moe import routing as rt

SEED = 0  # default seed of routing, gates, input and weights: runs and dispatches of one seed compare



@dataclass
class MoeTensors:
    x: Any  # [tokens, d_model] on the device, in the dtype
    w_router: Any  # [experts, d_model]
    w1: Any  # [experts, d_ff, d_model]
    w3: Any  # [experts, d_ff, d_model] (swiglu) or None
    w2: Any  # [experts, d_model, d_ff]


def router_inputs(tokens: int, experts: int, d_model: int, seed: int = SEED):
    """The layer's input [tokens, d_model] and router weight [experts, d_model], float32 on the CPU.

    Drawn on the CPU with a seeded generator, so the `router` routing is the same on
    every device and for every dispatch.
    """
    import torch

    cpu = torch.Generator().manual_seed(seed)
    x = torch.randn(tokens, d_model, generator=cpu)
    w_router = torch.randn(experts, d_model, generator=cpu) / math.sqrt(d_model)
    return x, w_router


def make_tensors(params: Mapping[str, Any], device, dtype) -> MoeTensors:
    """The layer's input and weights, deterministic for the sizes (seeded generators)."""
    import torch

    e, d, f = params["experts"], params["d_model"], params["d_ff"]
    seed = data_seed(params)
    x_cpu, wr_cpu = router_inputs(params["tokens"], e, d, seed)
    # The expert weights (22.5 GB at the GPU defaults) are drawn in place on the device,
    # N(0, 1/fan_in) so that activations stay O(1) in every dtype.
    gen = torch.Generator(device=device).manual_seed(seed + 1)

    def weight(*shape, fan_in):
        return torch.empty(*shape, device=device, dtype=dtype).normal_(0.0, fan_in ** -0.5, generator=gen)

    w1 = weight(e, f, d, fan_in=d)
    w3 = weight(e, f, d, fan_in=d) if params["activation"] == "swiglu" else None
    w2 = weight(e, d, f, fan_in=f)
    return MoeTensors(x_cpu.to(device=device, dtype=dtype), wr_cpu.to(device=device, dtype=dtype), w1, w3, w2)


def routing_for(params: Mapping[str, Any]) -> rt.Routing:
    """The point's routing: synthetic from its spec, or the router's choice on the layer's input.

    Depends on the routing spec and sizes only (never on the dispatch or device), so every
    dispatch of a sweep sees the same assignments.
    """
    return _routing(params["routing"], params["tokens"], params["experts"], params["top_k"], params["d_model"],
                    data_seed(params))


def data_seed(params: Mapping[str, Any]) -> int:
    """The point's seed (runs recorded before the `seed` parameter existed used SEED)."""
    v = params.get("seed")
    return SEED if v is None or (isinstance(v, float) and math.isnan(v)) else int(v)


@functools.lru_cache(maxsize=16)
def _routing(label: str, tokens: int, experts: int, top_k: int, d_model: int, seed: int = SEED) -> rt.Routing:
    spec = rt.parse_spec(label, "routing")
    if spec.kind == "router":
        x, w_router = router_inputs(tokens, experts, d_model, seed)
        return rt.route_by_router(x, w_router, top_k)
    return rt.generate(spec, tokens, experts, top_k, seed)


def _act(ffn: str):
    import torch.nn.functional as F

    return F.silu if ffn == "swiglu" else F.gelu


def expert_ffn(x, w1, w3, w2, ffn: str):
    """One expert's FFN on rows x [n, d_model]: weights as nn.Linear stores them ([out, in])."""
    import torch.nn.functional as F

    if ffn == "swiglu":
        return F.linear(F.silu(F.linear(x, w1)) * F.linear(x, w3), w2)
    return F.linear(F.gelu(F.linear(x, w1)), w2)


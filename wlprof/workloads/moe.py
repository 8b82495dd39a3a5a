"""A mixture-of-experts layer: same FLOPs, different routing and dispatch, very different latency.

One layer, in inference: a router (linear -> softmax -> top-k, gates renormalized as
in Mixtral), an expert FFN per expert (`swiglu`: W2(silu(W1 x) * W3 x), Mixtral's; or
`gelu`: W2(gelu(W1 x))), no biases), and a combine that sums each token's expert
outputs weighted by its gates. Expert weights are stored as nn.Linear stores them,
[experts, out, in], and every dispatch reads the same tensors.

Routing is fixed at build time (`wlprof.workloads.routing`): every dispatch of a
sweep sees identical assignments for a routing spec, token count and `seed` (default
0; another seed redraws dispersed counts, the token order, gates, input and weights,
while the other synthetic routings keep their exact counts). The router
still runs in every step (region `moe/router`) so its cost is measured, but the
dispatch uses the precomputed assignment.

Dispatch implementations (each launches different kernels):
- `loop`: the eager Hugging Face style (Mixtral's `MixtralSparseMoeBlock`): a one-hot
  expert mask, `nonzero` over the hit experts, then per hit expert `torch.where`
  (a device-to-host sync each), a gather, the expert FFN, the gate multiply and an
  `index_add_`. Not graph-capturable.
- `padded`: GShard/Switch style. Positions inside each expert come from a cumsum over
  the one-hot assignment mask (all first choices before any second choice: GShard's
  priority); the tokens are scattered into an [experts, capacity, d_model] buffer,
  one `bmm` per FFN weight, and gathered back. capacity = ceil(capacity_factor *
  tokens * top_k / experts) (GShard's definition); `--capacity-factor 0` is dropless:
  capacity = the largest expert load, known here from the build-time routing. An
  assignment past its expert's capacity is dropped (contributes nothing; a real layer
  passes the token through its residual); `dropped_tokens` counts them.
- `grouped`: a stable argsort by expert, one permuted gather, `torch._grouped_mm`
  (int32 cumulative `offs`) per FFN weight, and an `index_add_` back. Counts and offs
  are computed on the device (`index_add_` + `cumsum`, no sync). Which path ran is
  observed once at build (`grouped_path`): `torch._grouped_mm` (one grouped kernel:
  CUTLASS for bf16 on sm90/sm100), `torch._grouped_mm: per-group mm` (torch runs one
  mm per group after a host sync: the CPU, and other dtypes or GPUs), or
  `fallback: per-group mm` (this torch has no `_grouped_mm`: one mm per non-empty
  group, sizes taken from the build-time counts, so no sync).

Regions: `moe/router`, `moe/dispatch`, `moe/expert`, `moe/combine` (the loop
interleaves the last three once per expert; a groupby over `region` sums them).

FLOPs (the repo's convention: multiply = add = 1, wlprof.cost):
- per computed token-expert row, `swiglu`: three GEMMs 3 * 2 * d_model * d_ff, plus
  silu (5 per element, wlprof.cost.elementwise) and the gating multiply (1) over
  d_ff: 6*d_model*d_ff + 6*d_ff. `gelu`: 2 * 2 * d_model * d_ff + 20 * d_ff (GELU = 20,
  the seed note's figure).
- `useful_flops` = that per-row figure times the assignments the layer computes (the
  routed ones, less any dropped by capacity); `executed_flops` = the FLOPs of every
  kernel in `moe/expert` (`Built.executed_regions`), so the padded dispatch's empty
  buffer rows count there and not in useful. The router's GEMM/softmax/top-k and the
  combine's gate multiply and index_add are in the run's total `flops`, in neither.

GPU defaults: d_model 4096, d_ff 14336 (Mixtral 8x7B's sizes), 64 experts, top-1,
128 tokens: with `dispersed` every expert gets 1-4 tokens, with `concentrated` 2
experts get 64. The 64 experts' SwiGLU weights are 64*3*4096*14336 bf16 = 22.5 GB.
CPU defaults: d_model 256, d_ff 512, 32 experts, 64 tokens (mean load 2, so
`dispersed` differs from `balanced`).
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from wlprof.errors import InputError
from wlprof.workloads import routing as rt
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

FFNS = ["swiglu", "gelu"]
DISPATCHES = ["loop", "padded", "grouped"]
DEFAULT_ROUTINGS = ("concentrated", "balanced", "dispersed")
SEED = 0  # default seed of routing, gates, input and weights: runs and dispatches of one seed compare

GPU_DEFAULTS = {"tokens": 128, "experts": 64, "top_k": 1, "d_model": 4096, "d_ff": 14336}
CPU_DEFAULTS = {"tokens": 64, "experts": 32, "top_k": 1, "d_model": 256, "d_ff": 512}

PATH_FUSED = "torch._grouped_mm"
PATH_TORCH_LOOP = "torch._grouped_mm: per-group mm"
PATH_FALLBACK = "fallback: per-group mm"

REGIONS = ("moe/router", "moe/dispatch", "moe/expert", "moe/combine")


@dataclass(frozen=True)
class MoeSpec:
    routings: tuple[str, ...]  # canonical routing labels
    dispatches: tuple[str, ...]
    tokens: tuple[int, ...]
    experts: int
    top_k: int
    d_model: int
    d_ff: int
    ffn: str
    capacity_factor: float
    seed: int = SEED


# --------------------------------------------------------------------------- FLOPs


def grouped_expert_cost(rows: int, active: int, experts: int, d_model: int, d_ff: int, ffn: str,
                        itemsize: int, dtype: str | None):
    """The grouped dispatch's moe/expert cost, stated by the workload.

    torch._grouped_mm's shapes say how many experts there are, not which received
    tokens: an expert with an empty group has its weights skipped, so the formula
    (every expert's weights read) overstates the bytes when routing is concentrated.
    Per op, as the formulas count them, with only the `active` experts' weights read:
    SwiGLU: x@W1 and x@W3 (R*d + A*d*f + R*f each), silu (2*R*f), gating mul (3*R*f),
    h@W2 (R*f + A*f*d + R*d), and the int32 offs of each grouped call (4*E each):
    s*(3*R*d + 3*A*d*f + 8*R*f) + 12*E bytes. GELU: s*(2*R*d + 2*A*d*f + 4*R*f) + 8*E.
    FLOPs: rows * flops_per_row (no padding in this dispatch).
    """
    from wlprof.cost.registry import MATRIX, Cost

    r, a, d, f = rows, active, d_model, d_ff
    if ffn == "swiglu":
        nbytes = itemsize * (3 * r * d + 3 * a * d * f + 8 * r * f) + 12 * experts
    else:
        nbytes = itemsize * (2 * r * d + 2 * a * d * f + 4 * r * f) + 8 * experts
    return Cost(float(rows * flops_per_row(d_model, d_ff, ffn)), float(nbytes), MATRIX, dtype)


def flops_per_row(d_model: int, d_ff: int, ffn: str) -> int:
    """Expert FFN FLOPs for one token-expert row, as wlprof's formulas count its kernels."""
    from wlprof.cost.elementwise import BINARY_FLOPS, UNARY_FLOPS

    if ffn == "swiglu":  # W1, W3: 2*d*f each; W2: 2*f*d; silu(h1) * h3 over d_ff
        return 3 * 2 * d_model * d_ff + (UNARY_FLOPS["silu"] + BINARY_FLOPS["mul"]) * d_ff
    if ffn == "gelu":  # W1, W2: 2*d*f each; gelu over d_ff
        return 2 * 2 * d_model * d_ff + UNARY_FLOPS["gelu"] * d_ff
    raise ValueError(f"ffn must be one of {FFNS} (got {ffn!r})")


def capacity(capacity_factor: float, counts: np.ndarray, tokens: int, top_k: int) -> int:
    """Rows per expert buffer: ceil(cf * tokens * top_k / experts) (GShard); cf 0: the largest load."""
    experts = len(counts)
    if capacity_factor == 0:
        return int(max(1, counts.max()))
    return max(1, math.ceil(capacity_factor * tokens * top_k / experts))


def padded_keep(expert_ids: np.ndarray, experts: int, cap: int) -> np.ndarray:
    """[tokens, top_k] bool: the assignments the padded dispatch keeps at capacity `cap`.

    Priority as the dispatch computes it: all first choices in token order, then all
    second choices, ... (GShard); an assignment is kept if fewer than `cap` earlier
    ones went to its expert.
    """
    flat = expert_ids.T.reshape(-1)  # choice-major
    onehot = np.zeros((len(flat), experts), dtype=np.int64)
    onehot[np.arange(len(flat)), flat] = 1
    pos = np.cumsum(onehot, axis=0)[np.arange(len(flat)), flat] - 1
    return (pos < cap).reshape(expert_ids.shape[1], expert_ids.shape[0]).T


# --------------------------------------------------------------------------- tensors


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


# --------------------------------------------------------------------------- grouped GEMM


def _grouped_mm_op():
    """torch._grouped_mm where this torch has it, else None (tests replace this to force the fallback)."""
    import torch

    return getattr(torch, "_grouped_mm", None)


def probe_grouped_dtype(device, dtype) -> str | None:
    """None if torch._grouped_mm takes `dtype` on `device` (or does not exist), else torch's refusal."""
    import torch

    op = _grouped_mm_op()
    if op is None:
        return None
    # 16 x 16 operands: aligned for every dtype (16 * 1 byte), so only the dtype can be refused.
    a = torch.zeros(4, 16, device=device, dtype=dtype)
    b = torch.zeros(2, 16, 16, device=device, dtype=dtype)
    offs = torch.tensor([2, 4], device=device, dtype=torch.int32)
    try:
        op(a, b, offs=offs)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    except RuntimeError as exc:
        return str(exc).splitlines()[0][:200]
    return None


def grouped_path(device, dtype, w1t, offs_len: int) -> tuple[str, str | None]:
    """Which grouped-GEMM path runs for these weights: observed, not assumed.

    One call on the real weights runs under torch.profiler (CPU activity only): a
    nested aten::mm or a host read of `offs` (aten::item) means torch ran it as one
    mm per group; none means one grouped kernel. Returns (path, why the fallback).
    """
    import torch
    from torch.profiler import ProfilerActivity, profile

    op = _grouped_mm_op()
    if op is None:
        return PATH_FALLBACK, "this torch has no torch._grouped_mm"
    a = torch.zeros(8, w1t.shape[1], device=device, dtype=dtype)
    offs = torch.full((offs_len,), 8, device=device, dtype=torch.int32)  # all 8 rows in group 0
    try:
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            op(a, w1t, offs=offs)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
    except RuntimeError as exc:
        return PATH_FALLBACK, f"torch._grouped_mm refused: {str(exc).splitlines()[0][:160]}"
    names = {e.name for e in prof.events()}
    per_group = bool(names & {"aten::mm", "aten::addmm", "aten::bmm", "aten::item", "aten::_local_scalar_dense"})
    return (PATH_TORCH_LOOP if per_group else PATH_FUSED), None


# --------------------------------------------------------------------------- the workload


def _opt(params: Mapping[str, Any], key: str, default):
    v = params.get(key)
    return default if v is None else v


@register
class Moe(Workload):
    name = "moe"
    summary = "an MoE layer: controlled routing x dispatch (loop, padded, grouped) at the same useful FLOPs"

    KNOWN = {"routing", "dispatch", "tokens", "experts", "top_k", "d_model", "d_ff", "ffn", "capacity_factor",
             "seed"}

    def parse(self, params: Mapping[str, Any], device, dtype, prefix: str = "--") -> Parsed:
        reject_unknown(params, self.KNOWN, prefix)
        gpu = device.type == "cuda"
        dflt = GPU_DEFAULTS if gpu else CPU_DEFAULTS
        notes = []
        a = {k: argname(k, prefix) for k in self.KNOWN}

        tokens = int_list(_opt(params, "tokens", dflt["tokens"]), a["tokens"])
        experts = positive_int(_opt(params, "experts", dflt["experts"]), a["experts"])
        top_k = positive_int(_opt(params, "top_k", dflt["top_k"]), a["top_k"])
        d_model = positive_int(_opt(params, "d_model", dflt["d_model"]), a["d_model"])
        d_ff = positive_int(_opt(params, "d_ff", dflt["d_ff"]), a["d_ff"])
        if top_k > experts:
            raise InputError(a["top_k"], f"must be at most {a['experts']} ({experts}): a token picks "
                             "distinct experts", top_k)
        if not gpu and all(params.get(k) is None for k in ("tokens", "experts", "d_model", "d_ff")):
            notes.append("CPU: d_model 256, d_ff 512, 32 experts, 64 tokens (GPU defaults: 4096, 14336, 64, 128)")

        ffn = str_list(_opt(params, "ffn", "swiglu"), a["ffn"], FFNS)
        if len(ffn) != 1:
            raise InputError(a["ffn"], "must name one FFN (swiglu or gelu)", params.get("ffn"))
        cf = self._capacity_factor(params.get("capacity_factor"), a["capacity_factor"])
        seed = seed_param(params.get("seed"), a["seed"], SEED)

        dispatches = str_list(_opt(params, "dispatch", ",".join(DISPATCHES)), a["dispatch"], DISPATCHES)
        if params.get("capacity_factor") is not None and "padded" not in dispatches:
            notes.append(f"{a['capacity_factor']} applies to the padded dispatch only: ignored")

        if params.get("routing") is None:
            specs = [rt.parse_spec(s, a["routing"]) for s in DEFAULT_ROUTINGS]
            feasible = []
            for s in specs:
                try:
                    for t in tokens:
                        rt.check_feasible(s, t, experts, top_k, a["routing"])
                    feasible.append(s)
                except InputError as exc:
                    notes.append(f"{s.label} skipped: {exc.rule}")
            specs = feasible
        else:
            specs = rt.parse_specs(params["routing"], a["routing"])
            for s in specs:
                for t in tokens:
                    rt.check_feasible(s, t, experts, top_k, a["routing"])

        if "grouped" in dispatches:
            self._check_grouped(device, dtype, d_model, d_ff, a, prefix)

        spec = MoeSpec(tuple(s.label for s in specs), tuple(dispatches), tuple(tokens), experts, top_k,
                       d_model, d_ff, ffn[0], cf, seed)
        per_row = flops_per_row(d_model, d_ff, ffn[0])
        notes.append(f"useful_flops: {per_row:,} FLOP per routed token-expert pair ({ffn[0]} expert FFN); "
                     "executed_flops: the moe/expert kernels' FLOPs, padding included")
        return Parsed(spec, tuple(notes))

    @staticmethod
    def _capacity_factor(value, arg: str) -> float:
        if value is None:
            return 0.0
        try:
            cf = float(value)
        except (TypeError, ValueError):
            raise InputError(arg, "must be a number >= 0 (0 = dropless)", value) from None
        if isinstance(value, bool) or not math.isfinite(cf) or cf < 0:
            raise InputError(arg, "must be a finite number >= 0 (0 = dropless)", value)
        return cf

    @staticmethod
    def _check_grouped(device, dtype, d_model: int, d_ff: int, a: dict, prefix: str) -> None:
        from wlprof.device import dtype_name

        if _grouped_mm_op() is None:
            return  # the per-group fallback takes any dtype and size
        refusal = probe_grouped_dtype(device, dtype)
        if refusal is not None:
            dtype_arg = "--dtype" if prefix == "--" else "study.dtype"
            raise InputError(dtype_arg, f"must be a dtype torch._grouped_mm takes for --dispatch grouped "
                             f"on {device.type} (torch: {refusal})", dtype_name(dtype))
        # torch._grouped_mm needs 16-byte aligned row strides (FIELD-NOTES, and torch's
        # "strides should be multiple of 16 bytes"): d_model and d_ff are both strides here.
        align = max(1, 16 // dtype.itemsize)
        for key, v in (("d_model", d_model), ("d_ff", d_ff)):
            if v % align:
                raise InputError(a[key], f"must be a multiple of {align} for --dispatch grouped in "
                                 f"{dtype_name(dtype)} (torch._grouped_mm needs 16-byte aligned rows)", v)

    def points(self, spec: MoeSpec) -> list[Point]:
        out = []
        for t in spec.tokens:
            for r in spec.routings:
                for d in spec.dispatches:
                    label = f"{r} / {d}" + (f" / {t} tok" if len(spec.tokens) > 1 else "")
                    out.append(Point(label, {
                        "tokens": t, "experts": spec.experts, "top_k": spec.top_k, "routing": r, "dispatch": d,
                        "capacity_factor": spec.capacity_factor if d == "padded" else None,
                        "d_model": spec.d_model, "d_ff": spec.d_ff, "activation": spec.ffn,
                        "seed": spec.seed,
                    }))
        return out

    def estimate_bytes(self, point: Point, dtype) -> int:
        p = point.params
        t, e, k, d, f = p["tokens"], p["experts"], p["top_k"], p["d_model"], p["d_ff"]
        n_w = 3 if p["activation"] == "swiglu" else 2
        weights = n_w * e * d * f + e * d
        rows = t * k
        if p["dispatch"] == "padded":  # the buffer: experts x capacity rows, from the real counts
            rows = e * capacity(p["capacity_factor"] or 0.0, routing_for(p).counts(), t, k) + 1
        # gathered input, W1/W3 outputs and their product, the output rows, their gated copy
        acts = 2 * t * d + rows * (3 * d + 3 * f)
        index_bytes = 8 * t * k * (e + 8)  # one-hot mask and int64 indices (padded's is [T*k, E])
        return (weights + acts) * dtype.itemsize + index_bytes

    def build(self, point: Point, device, dtype) -> Built:
        import torch

        from wlprof.device import dtype_name

        p = point.params
        tensors = make_tensors(p, device, dtype)
        routing = routing_for(p)
        counts = routing.counts()
        st = rt.stats(counts)
        per_row = flops_per_row(p["d_model"], p["d_ff"], p["activation"])
        facts: dict[str, Any] = {
            "routing_skew": rt.parse_spec(p["routing"], "routing").s,
            "active_experts": st.active_experts,
            "max_expert_share": st.max_expert_share,
            "imbalance": st.imbalance,
            "expert_counts": json.dumps(counts.tolist(), separators=(",", ":")),
            "dropped_tokens": 0,
        }
        nz = counts[counts > 0]
        note = (f"active {st.active_experts}/{p['experts']} experts, max share {st.max_expert_share:.1%}, "
                f"imbalance {st.imbalance:.2f}, counts: {nz.min()}..{nz.max()} tokens per active expert")
        ids = torch.as_tensor(routing.expert_ids, device=device)
        gates = torch.as_tensor(routing.gates, device=device).to(dtype)
        dispatch = p["dispatch"]
        graph_safe = True
        region_costs = {}
        kept = int(counts.sum())
        if dispatch == "loop":
            step = _loop_step(tensors, ids, gates, p)
            graph_safe = False  # nonzero / where per expert: a host sync each
        elif dispatch == "padded":
            cap = capacity(p["capacity_factor"] or 0.0, counts, p["tokens"], p["top_k"])
            dropped = int(np.maximum(counts - cap, 0).sum())
            kept -= dropped
            facts.update(capacity=cap, dropped_tokens=dropped)
            executed_rows = p["experts"] * cap
            note += (f"; capacity {cap}/expert: {executed_rows} rows computed for {kept} kept "
                     f"({executed_rows / max(kept, 1):.2f}x), {dropped} dropped")
            step = _padded_step(tensors, ids, gates, p, cap)
        elif dispatch == "grouped":
            path, why = grouped_path(device, dtype, tensors.w1.transpose(1, 2), p["experts"])
            facts["grouped_path"] = path
            note += f"; grouped path: {path}" + (f" ({why})" if why else "")
            graph_safe = path != PATH_TORCH_LOOP  # torch's per-group path reads offs on the host
            step = _grouped_step(tensors, ids, gates, p, path, counts)
            region_costs["moe/expert"] = grouped_expert_cost(
                kept, st.active_experts, p["experts"], p["d_model"], p["d_ff"], p["activation"],
                dtype.itemsize, dtype_name(dtype))
        else:
            raise ValueError(f"dispatch must be one of {DISPATCHES} (got {dispatch!r})")
        return Built(step=step, graph_safe=graph_safe, facts=facts, useful_flops=float(kept * per_row),
                     executed_regions=("moe/expert",), region_costs=region_costs, note=note)


# --------------------------------------------------------------------------- steps


def _router(tensors: MoeTensors, top_k: int, dtype):
    """The router as a layer runs it (Mixtral): its result is not used, its cost is measured."""
    import torch
    import torch.nn.functional as F

    logits = F.linear(tensors.x, tensors.w_router)
    probs = torch.softmax(logits, dim=-1, dtype=torch.float32)
    top_v, top_i = torch.topk(probs, top_k, dim=-1)
    top_v = top_v / top_v.sum(dim=-1, keepdim=True)
    return top_v.to(dtype), top_i


def _loop_step(tensors: MoeTensors, ids, gates, p):
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


def _padded_step(tensors: MoeTensors, ids, gates, p, cap: int):
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


def _grouped_step(tensors: MoeTensors, ids, gates, p, path: str, counts: np.ndarray):
    import torch
    from torch.profiler import record_function

    x, w1, w3, w2 = tensors.x, tensors.w1, tensors.w3, tensors.w2
    experts, top_k, ffn = p["experts"], p["top_k"], p["activation"]
    act = _act(ffn)
    ones = torch.ones(ids.numel(), dtype=torch.int64, device=x.device)
    w1t, w2t = w1.transpose(1, 2), w2.transpose(1, 2)  # [E, d, f], [E, f, d]: column-major B
    w3t = w3.transpose(1, 2) if w3 is not None else None
    gmm = _grouped_mm_op()
    sizes = counts.tolist()  # the fallback's group sizes, from the build-time routing

    def expert_grouped(xs, offs):
        if path == PATH_FALLBACK:
            parts = [expert_ffn(part, w1[e], w3[e] if w3 is not None else None, w2[e], ffn)
                     for e, part in enumerate(xs.split(sizes)) if sizes[e] > 0]
            return torch.cat(parts)
        if w3t is not None:
            h = act(gmm(xs, w1t, offs=offs)) * gmm(xs, w3t, offs=offs)
        else:
            h = act(gmm(xs, w1t, offs=offs))
        return gmm(h, w2t, offs=offs)

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

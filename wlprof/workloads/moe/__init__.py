"""A mixture-of-experts layer: same FLOPs, different routing and dispatch, very different latency.

One layer, in inference: a router (linear -> softmax -> top-k, gates renormalized as
in Mixtral), an expert FFN per expert (`swiglu`: W2(silu(W1 x) * W3 x), Mixtral's; or
`gelu`: W2(gelu(W1 x))), no biases), and a combine that sums each token's expert
outputs weighted by its gates. Expert weights are stored as nn.Linear stores them,
[experts, out, in], and every dispatch reads the same tensors.

Routing is fixed at build time (`wlprof.workloads.moe.routing`): every dispatch of a
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

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

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
from wlprof.workloads.moe import grouped
from wlprof.workloads.moe import routing as rt
from wlprof.workloads.moe.costs import FFNS, capacity, flops_per_row, grouped_expert_cost
from wlprof.workloads.moe.dispatch import _grouped_step, _loop_step, _padded_step
from wlprof.workloads.moe.grouped import PATH_TORCH_LOOP, grouped_path, probe_grouped_dtype
from wlprof.workloads.moe.tensors import SEED, make_tensors, routing_for

DISPATCHES = ["loop", "padded", "grouped"]
DEFAULT_ROUTINGS = ("concentrated", "balanced", "dispersed")

GPU_DEFAULTS = {"tokens": 128, "experts": 64, "top_k": 1, "d_model": 4096, "d_ff": 14336}
CPU_DEFAULTS = {"tokens": 64, "experts": 32, "top_k": 1, "d_model": 256, "d_ff": 512}

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

        if grouped._grouped_mm_op() is None:
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



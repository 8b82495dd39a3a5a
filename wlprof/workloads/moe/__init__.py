"""An MoE layer: the same useful FLOPs under controlled routing and three dispatch implementations.

A router (linear, softmax, top-k, renormalized gates), SwiGLU or GELU experts and a gated
combine, in inference. Routing is fixed at build time (`routing`), so every dispatch of a
sweep sees the same assignments; `docs/moe.md` describes the dispatches, the regions and
how FLOPs and bytes are counted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from wlprof.errors import InputError, Key
from wlprof.params import Param, PerDevice, Values
from wlprof.schema import F64, I64, LIST_I64, Column, S
from wlprof.workloads.base import Built, Parsed, Point, Stated, Workload, column, listing_only
from wlprof.workloads.moe import grouped
from wlprof.workloads.moe import routing as rt
from wlprof.workloads.moe.costs import FFNS, GROUPED_OPS, capacity, flops_per_row, grouped_expert_cost
from wlprof.workloads.moe.dispatch import grouped_step, loop_step, padded_step
from wlprof.workloads.moe.grouped import PATH_TORCH_LOOP, grouped_path, probe_grouped_dtype
from wlprof.workloads.moe.tensors import SEED, make_tensors, routing_for

DISPATCHES = ("loop", "padded", "grouped", "alltoall")
DEFAULT_DISPATCHES = ("loop", "padded", "grouped")  # alltoall: expert parallelism, asked for by name
# Counting a dropless padded point's loads for its memory estimate draws its routing (tokens x
# top_k expert ids, a router's tokens x d_model input, per-expert weights): past this many
# elements the largest load possible stands in, so an absurd size is refused, not drawn.
ROUTING_ESTIMATE_LIMIT = 1 << 27
DEFAULT_ROUTINGS = ("concentrated", "balanced", "dispersed")
REGIONS = ("moe/router", "moe/dispatch", "moe/expert", "moe/combine")
A2A_REGIONS = ("moe/router", "moe/dispatch-a2a", "moe/expert", "moe/combine-a2a")


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


def _routings(items: list, key: Key) -> list[str]:
    return [s.label for s in rt.parse_specs(items, key)]


class Moe(Workload):
    name = "moe"
    summary = "an MoE layer: controlled routing x dispatch (loop, padded, grouped) at the same useful FLOPs"
    label = "MoE"
    phases = True
    params = (
        Param("routing", "str", f"Routings to sweep: {rt.SPEC_HELP}; a bare number continues the kind before "
              f"it (zipf:0,0.5,1.2). {rt.DISPERSED_HELP}; balanced: an even share each; concentrated: "
              "max(2, top-k) hot experts share everything. Default: concentrated, balanced and dispersed where "
              "the sizes allow",
              many=True, items=_routings, metavar="SPEC,..."),
        Param("dispatch", "str", "loop (Hugging Face eager), padded (capacity buffers + bmm), grouped "
              "(torch._grouped_mm), alltoall (expert parallelism: experts sharded over the ranks, tokens moved "
              "with all_to_all_single; --tokens per rank)", many=True, choices=DISPATCHES,
              default=list(DEFAULT_DISPATCHES)),
        Param("tokens", "int", "Tokens per step", many=True, default=PerDevice([128], [32])),
        Param("experts", "int", "Experts", default=PerDevice(64, 16)),
        Param("top_k", "int", "Experts per token", default=1),
        Param("d_model", "int", "Model width", default=PerDevice(4096, 256)),
        Param("d_ff", "int", "Expert hidden width", default=PerDevice(14336, 512)),
        Param("ffn", "str", "Expert FFN", choices=tuple(FFNS), default="swiglu"),
        Param("capacity_factor", "float", "padded: capacity = ceil(cf x tokens x top_k / experts); 0 = dropless",
              minimum=0.0, default=0.0),
        Param("seed", "int", "Seed of the routing draw (dispersed counts, token order, gates), input and "
              "weights", minimum=0, default=SEED),
    )
    columns = (
        Column("tokens", I64, "", "MoE: tokens per step", distribution=True),
        Column("experts", I64, "", "MoE: number of experts", distribution=True),
        Column("top_k", I64, "", "MoE: experts per token", distribution=True),
        Column("routing", S, "", "MoE: routing spec (concentrated, balanced, dispersed, zipf:s, explicit:AxM, "
               "router)", distribution=True),
        Column("routing_skew", F64, "", "MoE: the zipf exponent s where the routing has one"),
        Column("dispatch", S, "", "MoE: dispatch implementation (loop, padded, grouped)", data=True,
               distribution=True),
        Column("capacity_factor", F64, "", "MoE: capacity factor of the padded dispatch (0 = dropless)"),
        Column("active_experts", I64, "", "MoE: experts that received at least one token"),
        Column("max_expert_share", F64, "fraction", "MoE: share of assignments the hottest expert got"),
        Column("imbalance", F64, "", "MoE: max expert load / mean expert load", feature=True),
        Column("max_expert_load", I64, "rows", "MoE: token-expert assignments of the hottest expert (its GEMM's rows)"),
        Column("load_cv", F64, "", "MoE: standard deviation of the expert loads over their mean (0: balanced)"),
        Column("dropped_tokens", I64, "", "MoE: token-expert assignments dropped by capacity"),
        Column("grouped_path", S, "", "MoE: which grouped-GEMM path ran (torch._grouped_mm, fallback)"),
        Column("expert_counts", LIST_I64, "", "MoE: token-expert assignments per expert, in expert order",
               data=True),
        Column("capacity", I64, "rows", "MoE: rows per expert buffer of the padded dispatch (dropless: the "
               "largest load)"),
        Column("d_model", I64, "", "MLP/MoE: model width"),
        Column("d_ff", I64, "", "MLP/MoE: hidden width of the feed-forward layer"),
        Column("activation", S, "", "MLP/MoE: activation (gelu, relu, silu, swiglu)"),
        Column("seed", I64, "", "MoE/GNN: seed of the generated data (routing draw, graph draw, inputs)", data=True),
        Column("ep_world_size", I64, "ranks", "MoE alltoall: ranks the experts are sharded over"),
        Column("ep_local_experts", I64, "", "MoE alltoall: experts this rank holds"),
        Column("ep_send_rows", LIST_I64, "rows", "MoE alltoall: token-expert rows this rank sends to each rank "
               "(its own included), in rank order"),
        Column("ep_recv_rows", I64, "rows", "MoE alltoall: rows this rank's experts compute"),
        Column("ep_rows_by_rank", LIST_I64, "rows", "MoE alltoall: rows each rank's experts compute, in rank order"),
        Column("ep_rank_imbalance", F64, "", "MoE alltoall: max / mean of ep_rows_by_rank (1: balanced ranks)"),
    )
    examples = (
        "wlprof run moe --routing dispersed",
        "wlprof run moe --routing concentrated,balanced,dispersed --dispatch loop,padded,grouped",
        "wlprof run moe --routing zipf:0,0.5,1.2,2 --top-k 2 --dispatch grouped,loop",
        "wlprof run moe --dispatch alltoall --world-size 4 --routing balanced,zipf:1.2",
        "torchrun --nproc-per-node 4 -m wlprof run moe --dispatch alltoall",
    )

    def spec(self, values: Values, device, dtype) -> Parsed:
        notes = []
        tokens, experts, top_k = values["tokens"], values["experts"], values["top_k"]
        d_model, d_ff, ffn = values["d_model"], values["d_ff"], values["ffn"]
        if top_k > experts:
            raise InputError(Key("top_k"), ("must be at most ", Key("experts"), f" ({experts}): a token picks "
                             "distinct experts"), top_k)
        if device.type != "cuda" and not {"tokens", "experts", "d_model", "d_ff"} & values.given:
            notes.append("CPU: d_model 256, d_ff 512, 16 experts, 32 tokens (GPU defaults: 4096, 14336, 64, 128)")
        dispatches = values["dispatch"]
        if "capacity_factor" in values.given and "padded" not in dispatches:
            notes.append("--capacity-factor applies to the padded dispatch only: ignored")
        key = Key("routing")
        if values["routing"] is None:
            specs = []
            for s in (rt.parse_spec(x, key) for x in DEFAULT_ROUTINGS):
                try:
                    for t in tokens:
                        rt.check_feasible(s, t, experts, top_k, key)
                    specs.append(s)
                except InputError as exc:
                    notes.append(f"{s.label} skipped: {exc.rule_text()}")
        else:
            specs = [rt.parse_spec(x, key) for x in values["routing"]]
            hots = {s.label: s.hot if s.hot is not None else rt.default_hot(top_k, experts)
                    for s in specs if s.kind == "concentrated"}
            if len(set(hots.values())) < len(hots):  # `concentrated` is concentrated:N at these sizes
                same = sorted(hots, key=lambda lab: (hots[lab], lab))
                dup = [lab for lab in same if list(hots.values()).count(hots[lab]) > 1]
                raise InputError(key, f"must not repeat a sweep point: {' and '.join(dup)} are the same routing "
                                 f"({hots[dup[0]]} hot experts at top-k {top_k}, {experts} experts)",
                                 ",".join(values["routing"]) if isinstance(values["routing"], list)
                                 else values["routing"])
            for s in specs:
                for t in tokens:
                    rt.check_feasible(s, t, experts, top_k, key)
        skewed = [s.label for s in specs if s.kind in ("concentrated", "zipf", "dispersed")]
        if top_k == experts and skewed:
            notes.append(rt.every_expert_note(experts, top_k, skewed))
        elif any(s.kind == "dispersed" for s in specs):
            notes += [n for n in (rt.dispersed_note(t, experts, top_k) for t in tokens) if n]
        if "grouped" in dispatches or "alltoall" in dispatches:
            try:
                self._check_grouped(device, dtype, d_model, d_ff)
            except InputError as exc:
                if "dispatch" in values.given:
                    raise
                # grouped came with the default dispatches, not from the user: say how to leave it out
                rest = [d for d in dispatches if d not in ("grouped", "alltoall")]
                raise InputError(exc.arg, exc.rule, exc.value, hint=(
                    ("grouped is one of the default dispatches; set ", Key("dispatch"), f" to {','.join(rest)} "
                     "to leave it out") if rest else exc.hint)) from None
        if "alltoall" in dispatches and listing_only():
            raise InputError(Key("dispatch"), "must not be alltoall for a step listed on the meta device: it reads "
                             "the split sizes its ranks exchange on the host; predict a trace of it with --trace",
                             ",".join(dispatches))
        if "alltoall" in dispatches:
            from wlprof.distributed.world import current
            from wlprof.workloads.moe.expert_parallel import check

            check(experts, current().size)
            notes.append(f"alltoall: experts sharded over {current().size} rank(s), --tokens {tokens[0]} per rank, "
                         "each rank's routing drawn with seed + rank")
        spec = MoeSpec(tuple(s.label for s in specs), tuple(dispatches), tuple(tokens), experts, top_k,
                       d_model, d_ff, ffn, values["capacity_factor"], values["seed"])
        per_row = flops_per_row(d_model, d_ff, ffn)
        notes.append(f"useful_flops: {per_row:,} FLOP per routed token-expert pair ({ffn} expert FFN); "
                     "executed_flops: the moe/expert kernels' FLOPs, padding included")
        return Parsed(spec, tuple(notes))

    @staticmethod
    def _check_grouped(device, dtype, d_model: int, d_ff: int) -> None:
        from wlprof.device import dtype_name

        if grouped._grouped_mm_op() is None:
            return  # the per-group fallback takes any dtype and size
        refusal = probe_grouped_dtype(device, dtype)
        if refusal is not None:
            raise InputError(Key("dtype", "study"), f"must be a dtype torch._grouped_mm takes for --dispatch "
                             f"grouped on {device.type} (torch: {refusal})", dtype_name(dtype))
        # torch._grouped_mm needs 16-byte aligned row strides ("strides should be multiple of
        # 16 bytes"): d_model and d_ff are both strides here.
        align = max(1, 16 // dtype.itemsize)
        for name, v in (("d_model", d_model), ("d_ff", d_ff)):
            if v % align:
                raise InputError(Key(name), (f"must be a multiple of {align} for ", Key("dispatch"), " grouped in "
                                 f"{dtype_name(dtype)} (torch._grouped_mm needs 16-byte aligned rows)"), v)

    def family(self, rows) -> list[str]:
        return [f"MoE ({str(r).split(':')[0]})" for r in column(rows, "routing")]

    def size_params(self) -> tuple[str, ...]:
        # the capacity factor sizes padded's buffers (experts x capacity rows): a point too big for memory
        # because of it names it
        return ("tokens", "experts", "top_k", "d_model", "d_ff", "capacity_factor")

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

    def prepare(self, point: Point, device) -> None:
        """Draw the point's routing ahead of `build` (cached): the `router` routing runs the router on
        real tensors, which `predict --spec` would otherwise hold on the meta device."""
        if point.params["dispatch"] == "alltoall":
            from wlprof.distributed.world import current
            from wlprof.workloads.moe import expert_parallel as ep

            for r in range(current().size):  # the plan reads every rank's routing
                routing_for(ep.rank_params(dict(point.params), r))
        else:
            routing_for(point.params)

    def prepare_bytes(self, point: Point) -> int:
        """Host memory of drawing the routing (`prepare`): the int64 assignments and their shuffled copies and
        the gates' float64 temporaries, about six [tokens, top_k] arrays of 8 bytes; the `router` routing
        also holds the float32 input and the router's logits and probabilities."""
        p = point.params
        t, e, k = p["tokens"], p["experts"], p["top_k"]
        router = 4 * t * (p["d_model"] + 2 * e) if str(p["routing"]).startswith("router") else 0
        return 8 * t * (6 * k + 1) + router

    def estimate_bytes(self, point: Point, dtype) -> int:
        p = point.params
        t, e, k, d, f = p["tokens"], p["experts"], p["top_k"], p["d_model"], p["d_ff"]
        n_w = 3 if p["activation"] == "swiglu" else 2
        if p["dispatch"] == "alltoall":  # this rank's experts only
            from wlprof.distributed.world import current

            e = -(-e // max(1, current().size))
        weights = n_w * e * d * f + e * d
        rows = t * k
        if p["dispatch"] == "padded":  # the buffer: experts x capacity rows, from the real counts
            rows = e * _padded_capacity(p) + 1
        # gathered input, W1/W3 outputs and their product, the output rows, their gated copy
        acts = 2 * t * d + rows * (3 * d + 3 * f)
        index_bytes = 8 * t * k * (e + 8)  # one-hot mask and int64 indices (padded's is [T*k, E])
        return (weights + acts) * dtype.itemsize + index_bytes

    def build(self, point: Point, device, dtype) -> Built:
        import torch

        from wlprof.device import dtype_name

        p = point.params
        if p["dispatch"] == "alltoall":
            return self._build_alltoall(point, device, dtype)
        tensors = make_tensors(p, device, dtype)
        routing = routing_for(p)
        counts = routing.counts()
        st = rt.stats(counts)
        per_row = flops_per_row(p["d_model"], p["d_ff"], p["activation"])
        facts: dict[str, Any] = {
            "routing_skew": rt.parse_spec(p["routing"], Key("routing")).s,
            "active_experts": st.active_experts,
            "max_expert_share": st.max_expert_share,
            "imbalance": st.imbalance,
            "expert_counts": counts.tolist(),
            "dropped_tokens": 0,
            "max_expert_load": int(counts.max()),
            "load_cv": float(counts.std() / counts.mean()) if counts.mean() > 0 else 0.0,
        }
        nz = counts[counts > 0]
        note = (f"active {st.active_experts}/{p['experts']} experts, max share {st.max_expert_share:.1%}, "
                f"imbalance {st.imbalance:.2f}, counts: {nz.min()}..{nz.max()} tokens per active expert")
        ids = torch.as_tensor(routing.expert_ids, device=device)
        gates = torch.as_tensor(routing.gates, device=device).to(dtype)
        dispatch = p["dispatch"]
        graph_safe = True
        stated = []
        kept = int(counts.sum())
        if dispatch == "loop":
            step = loop_step(tensors, ids, gates, p)
            graph_safe = False  # nonzero / where per expert: a host sync each
        elif dispatch == "padded":
            cap = capacity(p["capacity_factor"] or 0.0, counts, p["tokens"], p["top_k"])
            dropped = int(np.maximum(counts - cap, 0).sum())
            kept -= dropped
            facts.update(capacity=cap, dropped_tokens=dropped)
            executed_rows = p["experts"] * cap
            note += (f"; capacity {cap}/expert: {executed_rows} rows computed for {kept} kept "
                     f"({executed_rows / max(kept, 1):.2f}x), {dropped} dropped")
            step = padded_step(tensors, ids, gates, p, cap)
        elif dispatch == "grouped":
            path, why = grouped_path(device, dtype, tensors.w1.transpose(1, 2), p["experts"])
            facts["grouped_path"] = path
            note += f"; grouped path: {path}" + (f" ({why})" if why else "")
            graph_safe = path != PATH_TORCH_LOOP  # torch's per-group path reads offs on the host
            step = grouped_step(tensors, ids, gates, p, path, counts)
            stated.append(Stated("moe/expert", grouped_expert_cost(
                kept, st.active_experts, p["experts"], p["d_model"], p["d_ff"], p["activation"],
                dtype.itemsize, dtype_name(dtype)), ops=GROUPED_OPS))
        else:
            raise ValueError(f"dispatch must be one of {DISPATCHES} (got {dispatch!r})")
        return Built(step=step, graph_safe=graph_safe, facts=facts, useful_flops=float(kept * per_row),
                     executed_regions=("moe/expert",), stated=stated, note=note)

    def _build_alltoall(self, point: Point, device, dtype) -> Built:
        import torch

        from wlprof.device import dtype_name
        from wlprof.distributed.world import ensure_group
        from wlprof.workloads.moe import expert_parallel as ep
        from wlprof.workloads.moe.tensors import router_inputs

        world = ensure_group(device)
        p = dict(point.params)
        ep.check(p["experts"], world.size)
        pl = ep.plan(p, world.rank, world.size)
        mine = ep.rank_params(p, world.rank)
        routing = routing_for(mine)
        st = rt.stats(routing.counts())
        x_cpu, wr_cpu = router_inputs(p["tokens"], p["experts"], p["d_model"], mine["seed"])
        x, w_router = x_cpu.to(device=device, dtype=dtype), wr_cpu.to(device=device, dtype=dtype)
        w1, w3, w2 = ep.local_weights(p, device, dtype, pl.lo, pl.hi)
        path, why = grouped_path(device, dtype, w1.transpose(1, 2), pl.hi - pl.lo)
        ids = torch.as_tensor(routing.expert_ids, device=device)
        gates = torch.as_tensor(routing.gates, device=device).to(dtype)
        step = ep.alltoall_step(x, w_router, ids, gates, w1, w3, w2, p, pl, path, world.group)
        by_rank = pl.rows_by_rank()
        rows = by_rank[world.rank]
        groups = pl.local_groups()
        mean = sum(by_rank) / len(by_rank)
        facts: dict[str, Any] = {}
        facts.update(routing_skew=rt.parse_spec(p["routing"], Key("routing")).s, active_experts=st.active_experts,
                     max_expert_share=st.max_expert_share, imbalance=st.imbalance,
                     expert_counts=routing.counts().tolist(), grouped_path=path, ep_world_size=world.size,
                     ep_local_experts=pl.hi - pl.lo, ep_send_rows=pl.send_rows(), ep_recv_rows=rows,
                     ep_rows_by_rank=by_rank, ep_rank_imbalance=max(by_rank) / mean if mean else float("nan"))
        per_row = flops_per_row(p["d_model"], p["d_ff"], p["activation"])
        note = (f"rank {world.rank}/{world.size}: experts {pl.lo}..{pl.hi - 1}, computes {rows} rows (per rank: "
                f"{', '.join(map(str, by_rank))}; imbalance {facts['ep_rank_imbalance']:.2f}); sends "
                f"{', '.join(map(str, pl.send_rows()))} rows to ranks 0..{world.size - 1}; "
                f"grouped path: {path}" + (f" ({why})" if why else ""))
        stated = [Stated("moe/expert", grouped_expert_cost(
            rows, sum(1 for g in groups if g > 0), pl.hi - pl.lo, p["d_model"], p["d_ff"], p["activation"],
            dtype.itemsize, dtype_name(dtype)), ops=GROUPED_OPS)] if rows else []
        return Built(step=step, graph_safe=False, facts=facts, useful_flops=float(rows * per_row),
                     executed_regions=("moe/expert",), stated=stated, note=note)


WORKLOAD = Moe()


def _padded_capacity(p) -> int:
    """Rows per expert buffer of a padded point, for the memory check: costs.capacity of its real
    loads, without drawing a routing too large to draw (then every expert may take every token)."""
    t, e, k = p["tokens"], p["experts"], p["top_k"]
    cf = p["capacity_factor"] or 0.0
    if cf > 0:  # a capacity factor fixes the buffer: ceil(cf * tokens * top_k / experts), loads aside
        return max(1, math.ceil(cf * t * k / e))
    if max(t * k, t * p["d_model"], e) > ROUTING_ESTIMATE_LIMIT:
        return t  # a dropless buffer holds the largest load, and no expert takes a token twice
    return capacity(0.0, routing_for(p).counts(), t, k)

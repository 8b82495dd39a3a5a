"""MoE routings you control: per-token expert assignments with exact per-expert counts.

A routing is decided once, at build time, so every dispatch of a sweep sees the same
assignments for a spec, token count and seed. The specs: `docs/moe.md`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from wlprof.errors import InputError, did_you_mean

KINDS = ("concentrated", "balanced", "dispersed", "zipf", "explicit", "router")
SPEC_HELP = "concentrated[:N], balanced, dispersed, zipf:s, explicit:AxM[+AxM...] or router"
DISPERSED_MAX = 4  # `dispersed`: an expert gets at most max(this, twice the mean load) assignments
DISPERSED_HELP = ("dispersed: every expert active with uneven random counts, each expert 1 to max(4, 2x the "
                  "mean load) assignments (at most the tokens); fewer assignments than experts: one each to "
                  "as many random experts")


@dataclass(frozen=True)
class RoutingSpec:
    kind: str
    label: str  # canonical text: the `routing` column and the variant label
    s: float | None = None  # zipf exponent
    hot: int | None = None  # concentrated:N (None: the default for the sizes)
    groups: tuple[tuple[int, int], ...] = ()  # explicit: (experts, assignments each)


@dataclass(frozen=True)
class Routing:
    expert_ids: np.ndarray  # [tokens, top_k] int64: each token's experts, distinct per row
    gates: np.ndarray  # [tokens, top_k] float32: combine weights, each row sums to 1
    experts: int

    @property
    def tokens(self) -> int:
        return int(self.expert_ids.shape[0])

    @property
    def top_k(self) -> int:
        return int(self.expert_ids.shape[1])

    def counts(self) -> np.ndarray:
        """Assignments per expert, in expert order."""
        return np.bincount(self.expert_ids.ravel(), minlength=self.experts).astype(np.int64)


@dataclass(frozen=True)
class RoutingStats:
    active_experts: int  # experts with at least one assignment
    max_expert_share: float  # the hottest expert's share of all assignments
    imbalance: float  # max load / mean load (mean over every expert, idle ones included)


def stats(counts: np.ndarray) -> RoutingStats:
    counts = np.asarray(counts)
    total = int(counts.sum())
    mean = total / len(counts)
    return RoutingStats(int((counts > 0).sum()), float(counts.max() / total), float(counts.max() / mean))


# --------------------------------------------------------------------------- parsing


_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")
_TERM = re.compile(r"^(\d+)[xX](\d+)$")


def _fmt(s: float) -> str:
    return f"{s:g}"


def parse_spec(text: str, arg: str) -> RoutingSpec:
    """One routing spec, validated on its own (sizes are checked by `check_feasible`)."""
    raw = str(text).strip()
    kind, _, rest = raw.partition(":")
    kind = kind.strip().lower()
    rest = rest.strip()
    if kind in ("balanced", "dispersed", "router"):
        if rest:
            raise InputError(arg, f"'{kind}' takes no argument (specs: {SPEC_HELP})", raw)
        return RoutingSpec(kind, kind)
    if kind == "concentrated":
        if not rest:
            return RoutingSpec(kind, kind)
        if not rest.isdigit() or int(rest) < 1:
            raise InputError(arg, "concentrated:N needs N, the number of hot experts, a positive integer", raw)
        return RoutingSpec(kind, f"concentrated:{int(rest)}", hot=int(rest))
    if kind == "zipf":
        if not _NUMBER.match(rest):
            raise InputError(arg, "zipf:s needs a finite number s >= 0 (the skew exponent)", raw)
        s = float(rest)
        if not math.isfinite(s) or s < 0:
            raise InputError(arg, "zipf:s needs a finite s >= 0 (the skew exponent)", raw)
        return RoutingSpec(kind, f"zipf:{_fmt(s)}", s=s)
    if kind == "explicit":
        groups = []
        for term in rest.split("+"):
            m = _TERM.match(term.strip())
            if not m or int(m.group(1)) < 1 or int(m.group(2)) < 1:
                raise InputError(arg, "explicit needs AxM[+BxN...]: A experts with M assignments each, "
                                 "A and M positive integers", raw)
            groups.append((int(m.group(1)), int(m.group(2))))
        label = "explicit:" + "+".join(f"{a}x{m}" for a, m in groups)
        return RoutingSpec(kind, label, groups=tuple(groups))
    raise InputError(arg, f"must be one of {SPEC_HELP}", raw, hint=did_you_mean(kind, KINDS))


def parse_specs(value, arg: str) -> list[RoutingSpec]:
    """'zipf:0,0.5,1.2,balanced' -> zipf:0, zipf:0.5, zipf:1.2, balanced.

    A bare item continues the spec kind before it (`zipf:0,0.5` is two zipf specs;
    `explicit:2x64,4x32` two explicit ones), so a sweep over one knob is one flag.
    """
    if isinstance(value, str):
        items = [x.strip() for x in value.split(",")]
    elif isinstance(value, (list, tuple)):
        items = [str(x).strip() for x in value]
    else:
        raise InputError(arg, f"must be a comma-separated list of {SPEC_HELP}", value)
    items = [x for x in items if x]
    if not items:
        raise InputError(arg, f"must list at least one of {SPEC_HELP}", value)
    specs: list[RoutingSpec] = []
    prev_kind = None
    for item in items:
        head = item.partition(":")[0].strip().lower()
        if ":" not in item and head not in KINDS and prev_kind in ("zipf", "concentrated", "explicit"):
            item = f"{prev_kind}:{item}"
        spec = parse_spec(item, arg)
        specs.append(spec)
        prev_kind = spec.kind
    return specs


def default_hot(top_k: int, experts: int) -> int:
    """`concentrated` without N: 2 hot experts (top_k of them when top_k > 2), never more than exist."""
    return min(max(2, top_k), experts)


def dispersed_cap(tokens: int, experts: int, top_k: int) -> int:
    """The most assignments an expert gets under `dispersed`: max(4, twice the mean load), at most the
    tokens (a token picks an expert once). Where the mean load is at most 2 (128 tokens, top-1, 64
    experts) this is 4: every expert gets 1 to 4."""
    return min(tokens, max(DISPERSED_MAX, math.ceil(2 * tokens * top_k / experts)))


def dispersed_note(tokens: int, experts: int, top_k: int) -> str | None:
    """What `dispersed` becomes at sizes where it cannot be uneven, or None."""
    total = tokens * top_k
    if total < experts:
        return (f"dispersed at {tokens} tokens x top-{top_k} = {total} assignments over {experts} experts: "
                f"{total} random experts get one each (not every expert can be active)")
    if dispersed_cap(tokens, experts, top_k) * experts == total or total == experts:
        return (f"dispersed at {tokens} tokens x top-{top_k} over {experts} experts: every expert gets "
                f"{total // experts} (the sizes leave no room for uneven counts: the same as balanced)")
    return None


def every_expert_note(experts: int, top_k: int, labels: list[str]) -> str | None:
    """What skewed routings become when top-k is the expert count (every token picks every expert), or None."""
    if top_k != experts or not labels:
        return None
    return (f"top-{top_k} over {experts} experts: every token goes to every expert, so {', '.join(labels)} "
            "give every expert every token (the same counts as balanced)")


def check_feasible(spec: RoutingSpec, tokens: int, experts: int, top_k: int, arg: str) -> None:
    """Refuse a spec these sizes cannot realize with exact counts (InputError naming `arg`)."""
    total = tokens * top_k
    sizes = f"{tokens} tokens x top-{top_k} = {total} assignments over {experts} experts"
    if spec.kind == "concentrated":
        hot = spec.hot if spec.hot is not None else default_hot(top_k, experts)
        if hot > experts:
            raise InputError(arg, f"concentrated:N needs N <= the expert count ({experts})", spec.label)
        if hot < top_k:
            raise InputError(arg, f"concentrated:N needs N >= top-k ({top_k}): a token picks {top_k} "
                             "distinct experts", spec.label)
    elif spec.kind == "explicit":
        used = sum(a for a, _ in spec.groups)
        got = sum(a * m for a, m in spec.groups)
        if used > experts:
            raise InputError(arg, f"names {used} experts; there are {experts}", spec.label)
        if max(m for _, m in spec.groups) > tokens:
            raise InputError(arg, f"gives an expert more assignments than there are tokens ({tokens}): "
                             "a token picks an expert at most once", spec.label)
        if got != total:
            raise InputError(arg, f"assigns {got} token-expert pairs; {sizes}", spec.label)


# --------------------------------------------------------------------------- counts


def _apportion(weights: np.ndarray, total: int, cap: int) -> np.ndarray:
    """Integer counts summing to `total`, proportional to `weights`, none above `cap`.

    Water-filling: an expert whose quota exceeds the cap is fixed at the cap and the
    rest is re-shared among the others; quotas are rounded by largest remainder,
    ties to the lower index (so uniform weights give the remainder to the first
    experts). A quota <= cap never rounds above it: a fraction is only rounded up
    when positive, and floor(q) < q <= cap.
    """
    w = np.asarray(weights, dtype=np.float64)
    if total > cap * int((w > 0).sum()):
        raise ValueError(f"{total} assignments cannot fit under a cap of {cap} on {(w > 0).sum()} experts")
    counts = np.zeros(len(w), dtype=np.int64)
    free = w > 0
    while True:
        remaining = total - int(counts[~free].sum())
        if not free.any():  # every expert is at the cap: nothing is left to share
            quota = np.zeros(len(w))
            break
        quota = np.where(free, remaining * w / w[free].sum(), 0.0)
        over = free & (quota > cap)
        if not over.any():
            break
        counts[over] = cap
        free &= ~over
    base = np.floor(quota).astype(np.int64)
    extra = remaining - int(base[free].sum())
    frac = np.where(free, quota - base, -1.0)
    order = np.argsort(-frac, kind="stable")
    base[order[:extra]] += 1
    counts[free] = base[free]
    return counts


def expert_counts(spec: RoutingSpec, tokens: int, experts: int, top_k: int, seed: int = 0) -> np.ndarray:
    """Exact assignments per expert for a synthetic spec (not `router`)."""
    total = tokens * top_k
    if spec.kind == "balanced":
        return _apportion(np.ones(experts), total, tokens)
    if spec.kind == "zipf":
        ranks = np.arange(1, experts + 1, dtype=np.float64)
        # A steep s underflows the tail to 0; the smallest positive weight keeps every expert
        # eligible, so what the capped head cannot take goes to the next experts in rank order.
        return _apportion(np.maximum(ranks ** -spec.s, np.finfo(np.float64).tiny), total, tokens)
    if spec.kind == "concentrated":
        hot = spec.hot if spec.hot is not None else default_hot(top_k, experts)
        w = np.zeros(experts)
        w[:hot] = 1.0
        return _apportion(w, total, tokens)
    if spec.kind == "dispersed":
        rng = np.random.default_rng([seed, 1])
        if total < experts:  # not every expert can be active: the widest spread there is
            counts = np.zeros(experts, dtype=np.int64)
            counts[rng.choice(experts, size=total, replace=False)] = 1
            return counts
        cap = dispersed_cap(tokens, experts, top_k)
        counts = np.ones(experts, dtype=np.int64)
        if cap > 1 and total > experts:
            # every expert has cap-1 free slots; the rest of the assignments take distinct ones at random
            slots = rng.choice(experts * (cap - 1), size=total - experts, replace=False)
            counts += np.bincount(slots // (cap - 1), minlength=experts)
        return counts
    if spec.kind == "explicit":
        counts = np.zeros(experts, dtype=np.int64)
        i = 0
        for a, m in spec.groups:
            counts[i:i + a] = m
            i += a
        if counts.sum() != total or i > experts:
            raise ValueError(f"{spec.label} does not assign {total} pairs over {experts} experts")
        return counts
    raise ValueError(f"{spec.kind} routing has no counts of its own")


def assign(counts: np.ndarray, tokens: int, top_k: int, seed: int = 0) -> np.ndarray:
    """[tokens, top_k] expert ids realizing `counts` exactly, distinct within each token."""
    counts = np.asarray(counts, dtype=np.int64)
    if counts.sum() != tokens * top_k:
        raise ValueError(f"counts sum to {counts.sum()}, not tokens*top_k = {tokens * top_k}")
    if counts.max(initial=0) > tokens:
        raise ValueError("an expert cannot take a token twice: every count must be <= tokens")
    flat = np.repeat(np.arange(len(counts), dtype=np.int64), counts)  # sorted by expert
    ids = flat.reshape(top_k, tokens).T.copy()  # assignment j -> token j % tokens, slot j // tokens
    rng = np.random.default_rng([seed, 2])
    ids = ids[rng.permutation(tokens)]
    return rng.permuted(ids, axis=1)


def random_gates(tokens: int, top_k: int, seed: int = 0) -> np.ndarray:
    if top_k == 1:
        return np.ones((tokens, 1), dtype=np.float32)
    z = np.random.default_rng([seed, 3]).standard_normal((tokens, top_k))
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).astype(np.float32)


def generate(spec: RoutingSpec, tokens: int, experts: int, top_k: int, seed: int = 0) -> Routing:
    """The routing of a synthetic spec: exact counts, deterministic for (spec, sizes, seed)."""
    counts = expert_counts(spec, tokens, experts, top_k, seed)
    return Routing(assign(counts, tokens, top_k, seed), random_gates(tokens, top_k, seed), experts)


def route_by_router(x, w_router, top_k: int) -> Routing:
    """The router's own choice: softmax(x @ w_router.T) -> top-k, gates renormalized (Mixtral).

    `x` [tokens, d_model] and `w_router` [experts, d_model] are torch tensors; the
    choice is made in float32 on their device.
    """
    import torch

    probs = torch.softmax(x.float() @ w_router.float().T, dim=-1)
    top_v, top_i = torch.topk(probs, top_k, dim=-1)
    gates = top_v / top_v.sum(dim=-1, keepdim=True)
    return Routing(top_i.cpu().numpy().astype(np.int64), gates.cpu().numpy().astype(np.float32),
                   int(w_router.shape[0]))

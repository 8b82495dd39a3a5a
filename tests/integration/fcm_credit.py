"""wlprof's matrix FLOPs credited to the op FlopCounterMode saw, for the parity tests.

FlopCounterMode counts at the dispatch level the model calls (aten.convolution,
aten._scaled_dot_product_flash_attention); the profiler records that op with the
implementation op that launched the kernels nested inside, which carries wlprof's cost. Each
costed matrix op's FLOPs go to its outermost enclosing op (itself included) that
FlopCounterMode counts.
"""

from __future__ import annotations

from collections import defaultdict


def flop_counter_ops() -> set[str]:
    """The aten ops FlopCounterMode has a formula for, named as the profiler names them."""
    from torch.utils.flop_counter import flop_registry

    return {"aten::" + str(k).split(".", 1)[1] for k in flop_registry if str(k).startswith("aten.")}


def flops_by_counted_op(c, counted: set[str] | None = None) -> dict[str, float]:
    """Matrix FLOPs of the costed trace `c`, each op's rounded (an integer split over its kernels by
    duration), credited to its outermost enclosing op in `counted` (default: FlopCounterMode's
    registry), else to itself."""
    return flops_by_counted_op_per_step(c, counted, by_step=False).get(0, defaultdict(float))


def flops_by_counted_op_per_step(c, counted: set[str] | None = None,
                                 by_step: bool = True) -> dict[int, dict[str, float]]:
    """`flops_by_counted_op` of each profiler step (`by_step=False`: of the whole trace, as step 0)."""
    counted = flop_counter_ops() if counted is None else counted
    ops = c.joined.ops
    names, parent = ops.name.to_numpy(dtype=object), ops.parent.to_numpy()
    k = c.kernels
    k = k[(k._op_pos >= 0) & (k.cost_unit == "matrix") & k.flops.notna()]
    out: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    steps = k.step if by_step else k.step * 0
    for (step, pos), f in k.groupby([steps, "_op_pos"]).flops.sum().items():
        key, p = names[pos], pos
        while p >= 0:
            if names[p] in counted:
                key = names[p]
            p = parent[p]
        out[int(step)][key] += float(round(f))
    return out


class Zoo:
    """A folder of fixtures NAME.json.gz, each with FlopCounterMode's counts of its step beside it
    (NAME.flops.json): their names, counts and costed traces (each costed once)."""

    def __init__(self, folder):
        from pathlib import Path

        self.folder = Path(folder)
        self.names = sorted(p.name.removesuffix(".json.gz") for p in self.folder.glob("*.json.gz"))
        self._costed: dict = {}

    def reference(self, name: str) -> dict:
        import json

        return json.loads((self.folder / f"{name}.flops.json").read_text())

    def costed(self, name: str):
        from wlprof.pipeline import costed, read

        if name not in self._costed:
            self._costed[name] = costed(read(self.folder / f"{name}.json.gz"))
        return self._costed[name]

    def assert_captured_on_cpu(self, count: int):
        """The folder holds `count` fixtures, each captured on the CPU with torch 2.13 and FlopCounterMode's counts."""
        assert len(self.names) == count
        for n in self.names:
            meta = self.reference(n)
            assert meta["device"] == "cpu" and meta["torch"].startswith("2.13") and meta["flop_counter_error"] is None

    def working_rows(self, name: str):
        """The costed rows of `name`, asserted to be working ops: more than 20, each with its op, and no autograd
        bookkeeping or composite among them."""
        k = self.costed(name).kernels
        assert len(k) > 20 and k.has_op.all()
        assert not k.name.str.contains(r"Backward[0-9]|^autograd::engine|^torch::autograd::").any()
        return k

    def assert_flops_equal_flop_counter(self, name: str, same_total: str | None = None, extra=frozenset()):
        """wlprof's FLOPs per op FlopCounterMode counts equal its counts; `same_total`: only the totals do,
        wlprof's over "every" op or over the ops of FlopCounterMode's "registry"; `extra`: ops of its registry
        that wlprof counts where FlopCounterMode's dispatch never reaches them."""
        ref = {op: v for op, v in self.reference(name)["flops"].items() if v}
        every = flops_by_counted_op(self.costed(name))
        registry = flop_counter_ops()
        ours = {op: v for op, v in every.items() if op in registry and v}
        if same_total:
            assert sum((every if same_total == "every" else ours).values()) == sum(ref.values()) > 0
        else:
            assert {op: ours.get(op) for op in ref} == ref
            assert set(ours) - set(ref) == set(extra)

"""wlprof's FLOPs equal FlopCounterMode's for every op in `torch.utils.flop_counter.flop_registry`.

The registry is iterated: each op FlopCounterMode has a formula for needs a recorded call,
from the real H200 traces (tests/fixtures/h200_training) where one is recorded there,
else from a CPU capture made here with the profiler and FlopCounterMode side by side;
an op no CPU or CUDA trace can record is listed with the reason (a new registry entry
fails `test_every_registry_op_is_covered` until it is handled).

For each recorded call, FlopCounterMode's count is taken by re-running the call on meta
tensors of the recorded shapes, strides, dtypes and scalars (`flop_counter_meta`), and
wlprof's is the matrix FLOPs of the costed ops in the call's subtree (the call itself, or
the implementation op nested inside that launched the kernels). Two exceptions, both
where FlopCounterMode in eager counts the enclosing op and never the inner one:
- `aten::cudnn_convolution` has no meta kernel, and FlopCounterMode's formula fails on a
  direct `aten::_slow_conv2d_forward` call (its convolution formula takes the arguments
  of `aten::convolution`, which that op does not have): their reference is the count of
  the `aten::_convolution` they were dispatched from.
- `aten::_flash_attention_*` and `aten::_efficient_attention_*` take [B, S, H, D]
  tensors, which FlopCounterMode's formula, called on them directly, reads as [B, H, S, D]
  (a count of 2*B*S*H^2*D per product instead of 2*B*H*S^2*D). The reference is the
  enclosing `_scaled_dot_product_*` op's count, and the test pins down that misreading.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from flop_counter_meta import flop_counter_count, registry_ops
from torch.profiler import ProfilerActivity, profile
from torch.utils.flop_counter import FlopCounterMode, flop_registry, sdpa_backward_flop_count, sdpa_flop_count

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "h200_training"

REGISTRY = sorted(registry_ops())
OTHER_KEYS = sorted(str(k) for k in flop_registry if not str(k).startswith("aten."))
NOT_RECORDED = {
    "aten::convolution_overrideable": "the convolution entry point of out-of-tree backends (PrivateUse1 and "
                                      "the like): CPU and CUDA never dispatch to it",
    "flex_attention": "a higher-order op, not an aten op: FlexAttention runs compiled, as an Inductor Triton "
                      "template whose kernel_flop Inductor counts with this formula (and wlprof takes); "
                      "no op of this name is ever recorded",
    "flex_attention_backward": "as flex_attention: compiled into a Triton template, never recorded as an op",
}
NO_META = {"aten::cudnn_convolution", "aten::_slow_conv2d_forward"}
MISREAD = {"aten::_flash_attention_forward", "aten::_efficient_attention_forward",
           "aten::_flash_attention_backward", "aten::_efficient_attention_backward"}


def _r(*shape, dtype=torch.float32):
    return torch.randn(*shape, dtype=dtype)


def _scaled_mm():
    a = _r(16, 32).to(torch.float8_e4m3fn)
    b = _r(16, 32).to(torch.float8_e4m3fn).t()
    one = torch.tensor(1.0)
    return torch._scaled_mm(a, b, one, one, out_dtype=torch.bfloat16)


torch.manual_seed(0)
_X, _W = _r(2, 4, 9, 9).requires_grad_(), _r(6, 4, 3, 3).requires_grad_()
# CPU captures: (the call, the op FlopCounterMode counts in it); most call the registry op itself
CPU_CASES = {
    "aten::baddbmm": (lambda: torch.ops.aten.baddbmm(_r(3, 4, 2), _r(3, 4, 5), _r(3, 5, 2), beta=0.5, alpha=2),
                      "aten::baddbmm"),
    # a float64 convolution runs aten::_slow_conv2d_forward under aten::convolution -> _convolution
    "aten::_slow_conv2d_forward": (lambda: F.conv2d(_r(2, 4, 9, 9, dtype=torch.float64),
                                                    _r(6, 4, 3, 3, dtype=torch.float64), _r(6, dtype=torch.float64),
                                                    stride=2, padding=1), "aten::convolution"),
    "aten::_scaled_mm": (_scaled_mm, "aten::_scaled_mm"),
    # also on the CPU: the ops the H200 traces record, in CPU forms
    "aten::mm": (lambda: torch.mm(_r(4, 5), _r(5, 6)), "aten::mm"),
    "aten::addmm": (lambda: torch.addmm(_r(6), _r(4, 5), _r(5, 6)), "aten::addmm"),
    "aten::bmm": (lambda: torch.bmm(_r(3, 4, 5), _r(3, 5, 2)), "aten::bmm"),
    "aten::convolution": (lambda: F.conv2d(_r(2, 4, 9, 9), _r(6, 2, 3, 3), stride=2, padding=1, groups=2),
                          "aten::convolution"),
    "aten::_convolution": (lambda: torch.ops.aten._convolution(
        _r(2, 4, 5, 5), _r(4, 3, 3, 3), None, [2, 2], [1, 1], [1, 1], True, [1, 1], 1, False, False, True, True),
        "aten::_convolution"),
    "aten::convolution_backward": (lambda: torch.autograd.grad(
        F.conv2d(_X, _W, stride=2, padding=1), (_X, _W), torch.ones(2, 6, 5, 5)), "aten::convolution_backward"),
}


def _subtree_flops(c) -> tuple[dict[int, float], dict]:
    """Matrix FLOPs per op position summed over its subtree, and the op table's parent/name arrays."""
    ops = c.joined.ops
    names, parent = ops.name.to_numpy(dtype=object), ops.parent.to_numpy()
    k = c.kernels
    k = k[(k._op_pos >= 0) & (k.cost_unit == "matrix") & k.flops.notna()]
    # an op's FLOPs are an integer split over its kernels by duration: the split's rounding undone
    own = {p: float(round(f)) for p, f in k.groupby("_op_pos").flops.sum().items()}
    total: dict[int, float] = defaultdict(float)
    for pos, f in own.items():
        p = pos
        while p >= 0:
            total[p] += f
            p = parent[p]
    return total, {"names": names, "parent": parent}


def _calls_of(trace, source: str) -> dict[str, list[dict]]:
    """Every recorded call of a registry op: its args, wlprof's subtree FLOPs, its enclosing registry op."""
    from wlprof.pipeline import costed

    c = costed(trace)
    flops, tree = _subtree_flops(c)
    names, parent = tree["names"], tree["parent"]
    args_id = c.joined.ops.args_id.to_numpy()
    reg = set(REGISTRY)
    out: dict[str, list[dict]] = defaultdict(list)
    seen = set()
    for pos in range(len(names)):
        if names[pos] not in reg:
            continue
        p = parent[pos]
        while p >= 0 and names[p] not in reg:
            p = parent[p]
        enclosing = (names[p], trace.args_table[args_id[p]]) if p >= 0 else None
        key = (names[pos], args_id[pos], flops.get(pos, 0.0), enclosing and json.dumps(enclosing, sort_keys=True))
        if key in seen:
            continue
        seen.add(key)
        out[names[pos]].append({"source": source, "args": trace.args_table[args_id[pos]], "ours": flops.get(pos, 0.0),
                                "enclosing": enclosing})
    return out


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    from wlprof.pipeline import read

    calls: dict[str, list[dict]] = defaultdict(list)
    live: dict[str, tuple[int, float]] = {}
    for path in sorted(FIXTURES.glob("*.pt.trace.json.gz")):
        for name, cs in _calls_of(read(path), path.name).items():
            calls[name] += cs
    tmp = tmp_path_factory.mktemp("flop-registry")
    for name, (fn, key) in CPU_CASES.items():
        try:
            fn()
        except (RuntimeError, NotImplementedError) as exc:  # e.g. a CPU build without an fp8 GEMM
            live[name] = (None, str(exc))
            continue
        with FlopCounterMode(display=False) as fc:
            fn()
        counted = {f"aten::{str(k).split('.', 1)[1]}": v for k, v in fc.get_flop_counts().get("Global", {}).items()}
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
            fn()
        path = tmp / f"{name.split('::')[1]}.json"
        prof.export_chrome_trace(str(path))
        cs = _calls_of(read(path), f"cpu:{name}")
        # side by side: FlopCounterMode's count of the function for the op it counts, and wlprof's over
        # that op's outermost calls (the ones FlopCounterMode saw)
        outer = sum(c["ours"] for c in cs.get(key, []) if c["enclosing"] is None)
        live[name] = (counted.get(key, 0), outer)
        for n, more in cs.items():
            calls[n] += more
    return calls, live


def test_every_registry_op_is_covered(recorded):
    calls, live = recorded
    for name in REGISTRY + OTHER_KEYS:
        if name in NOT_RECORDED:
            assert name not in calls, f"{name} is recorded after all: test it"
            continue
        if name in live and live[name][0] is None and not calls.get(name):
            pytest.skip(f"{name}: unavailable on this CPU build ({live[name][1][:100]})")
        assert calls.get(name), f"no recorded call of {name}: add a CPU case or a trace"


@pytest.mark.parametrize("name", sorted(CPU_CASES))
def test_cpu_capture_side_by_side(name, recorded):
    _, live = recorded
    counted, ours = live[name]
    if counted is None:
        pytest.skip(f"{name} unavailable on this CPU build: {ours[:100]}")
    assert counted > 0 and ours == counted


def _bshd_to_bhsd(shape):
    b, s, h, d = shape
    return (b, h, s, d)


@pytest.mark.parametrize("name", [n for n in REGISTRY if n not in NOT_RECORDED])
def test_flops_equal_flop_counter(name, recorded):
    calls, _ = recorded
    if not calls.get(name):
        pytest.skip(f"no recorded call of {name} (see test_every_registry_op_is_covered)")
    for c in calls[name]:
        where = f"{name} in {c['source']}"
        if name in NO_META or name in MISREAD:
            assert c["enclosing"] is not None, f"{where}: no enclosing op to compare with"
            ref = flop_counter_count(*c["enclosing"])
        else:
            ref = flop_counter_count(name, c["args"])
        assert c["ours"] == ref, f"{where}: wlprof {c['ours']} != FlopCounterMode {ref}"
        if name == "aten::_slow_conv2d_forward":  # FlopCounterMode's formula cannot take this op's arguments
            with pytest.raises(TypeError, match="transposed"):
                flop_counter_count(name, c["args"], device="cpu")
        if name in MISREAD:  # FlopCounterMode called directly reads [B, S, H, D] as [B, H, S, D]
            direct = flop_counter_count(name, c["args"])
            dims = c["args"]["Input Dims"]
            fwd = name.endswith("_forward")
            q, k, v = (dims[i] for i in ((0, 1, 2) if fwd else (1, 2, 3)))
            misread = sdpa_flop_count(q, k, v) if fwd else sdpa_backward_flop_count(dims[0], q, k, v)
            assert direct in (misread, c["ours"]), f"{where}: FlopCounterMode's direct count {direct}"
            layout = [_bshd_to_bhsd(s) for s in (q, k, v)]
            right = sdpa_flop_count(*layout) if fwd else sdpa_backward_flop_count(_bshd_to_bhsd(dims[0]), *layout)
            assert c["ours"] == right

"""NumPy-style aliases captured on the CPU: each runs its canonical op nested inside.

torch.greater records `aten::greater` with `aten::gt` nested, torch.clip `aten::clip` with
`aten::clamp`: the alias is a wrapper (no row of its own), the nested op carries the cost. The MoE
loop dispatch picks its hit experts with torch.greater; none of its rows is left unknown.
"""

from __future__ import annotations

import torch
from torch.profiler import ProfilerActivity, profile

from wlprof.pipeline import costed, read


def _costed(tmp_path, fn, stated=()):
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        fn()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    return costed(read(path), stated=stated)


def test_aliases_are_wrappers_of_their_canonical_op(tmp_path):
    x, y = torch.rand(3, 4) + 0.5, torch.rand(3, 4) + 0.5
    h, x1 = x * 0.5, x + 1  # in (0.25, 0.75) and (1.5, 2.5): inside the inverse functions' domains

    def fn():
        torch.greater(x, y), torch.greater_equal(x, y), torch.less(x, y)
        torch.less_equal(x, y), torch.not_equal(x, y)
        torch.multiply(x, y), torch.divide(x, y), torch.subtract(x, y)
        torch.clip(x, 0, 1), torch.absolute(x), torch.negative(x), torch.fix(x)
        torch.arcsin(h), torch.arccos(h), torch.arctan(x), torch.arcsinh(x)
        torch.arccosh(x1), torch.arctanh(h)
        torch.special.expit(x), torch.special.erf(x)
        torch.concat([x, y]), torch.outer(x[0], y[0]), torch.moveaxis(x, 0, 1)
        x.clone().greater_(y), x.clone().multiply_(y), x.clone().clip_(0, 1)

    k = _costed(tmp_path, fn).kernels
    assert not set(k[k.flops_source == "unknown"].op_name), k[k.flops_source == "unknown"].op_name.tolist()
    by_op = k.groupby("op_name")[["flops", "bytes"]].sum()
    # 12 elements, float32: one comparison each (12 FLOPs), both operands read (2 x 48 bytes), a bool
    # written per element (12): 108 bytes
    assert by_op.loc["aten::gt"].tolist() == [12, 108]
    for op in ("aten::ge", "aten::lt", "aten::le", "aten::ne"):
        assert by_op.loc[op].tolist() == [12, 108]
    # acos, asin, atan, asinh, acosh, atanh: one transcendental per element; 48 read, 48 written
    for op in ("aten::acos", "aten::asin", "aten::atan", "aten::asinh", "aten::acosh", "aten::atanh"):
        assert by_op.loc[op].tolist() == [12, 96]
    # outer of two 4-vectors is a broadcast mul: 16 products, 2 x 16 bytes read, 64 written
    assert by_op.loc["aten::mul"].tolist() == [12 + 16, 144 + 32 + 64]  # multiply (96 read, 48 written), outer
    for alias in ("aten::greater", "aten::clip", "aten::outer", "aten::concat", "aten::moveaxis"):
        assert alias not in by_op.index


def test_moe_loop_dispatch_leaves_no_op_unknown(tmp_path):
    from wlprof.workloads import get

    w, dev = get("moe"), torch.device("cpu")
    spec = w.parse({"routing": "balanced", "dispatch": "loop", "tokens": "7", "experts": 5, "top_k": 2,
                    "d_model": 5, "d_ff": 7}, dev, torch.float32).spec
    (point,) = w.points(spec)
    built = w.build(point, dev, torch.float32)
    with torch.inference_mode():
        built.step()
        k = _costed(tmp_path, built.step, built.stated).kernels
    assert not set(k[k.flops_source == "unknown"].op_name)

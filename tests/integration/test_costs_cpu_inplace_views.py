"""In-place views on the CPU (`squeeze_`, `t_`, `swapaxes`, ...): metadata only, so no kernel row
and no time counted as FLOPs unknown."""

from __future__ import annotations

import torch
from torch.profiler import ProfilerActivity, profile

from wlprof.cost import is_view

INPLACE_VIEWS = ("aten::squeeze_", "aten::unsqueeze_", "aten::t_", "aten::transpose_", "aten::swapaxes",
                 "aten::swapaxes_", "aten::swapdims", "aten::swapdims_")


def test_inplace_views_are_views():
    for name in INPLACE_VIEWS:
        assert is_view(name), name


def test_cpu_inplace_views_leave_nothing_unknown(tmp_path):
    from wlprof.pipeline import costed, read

    a, b = torch.zeros(3, 1), torch.zeros(2, 3)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        a.squeeze_()
        a.unsqueeze_(0)
        b.t_()
        b.transpose_(0, 1)
        b.swapdims_(0, 1)
        b.swapaxes_(0, 1)
        torch.swapaxes(b, 0, 1)
        c = b + b
    path = tmp_path / "inplace_views.json"
    prof.export_chrome_trace(str(path))
    k = costed(read(path)).kernels
    assert not set(k.op_name) & set(INPLACE_VIEWS)
    # the one working op: add of two [2, 3] float32 tensors, 6 FLOPs, 2 * 6 * 4 read + 6 * 4 written = 72
    assert k.op_name.tolist() == ["aten::add"]
    assert k.flops.sum() == 6.0 and k["bytes"].sum() == 72.0
    assert (k.flops_source != "unknown").all(), k[k.flops_source == "unknown"].op_name.tolist()
    assert c.shape == (2, 3)

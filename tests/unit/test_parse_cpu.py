"""The parser, join and cost annotation on small CPU traces profiled here: working ops counted once,
unknown ops kept."""

from __future__ import annotations

import numpy as np
import torch
from torch.profiler import ProfilerActivity, profile, record_function

from wlprof import pipeline
from wlprof.trace.parse import read_trace


def _cpu_trace(tmp_path, fn):
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        with record_function("wlprof/step#0"), record_function("test/region"):
            fn()
    path = tmp_path / "cpu.json"
    prof.export_chrome_trace(str(path))
    c = pipeline.costed(read_trace(path), None)
    return c.kernels, c.ops


def test_cpu_rows_are_working_ops_counted_once(tmp_path):
    x = torch.randn(64, 128)
    lin = torch.nn.Linear(128, 256)
    kernels, ops = _cpu_trace(tmp_path, lambda: torch.relu(lin(x)).sum())
    names = list(kernels.name)
    # linear -> addmm (+ the bias copy_), relu -> clamp_min, sum -> sum.dim_IntList (inner only)
    assert "aten::linear" not in names and "aten::relu" not in names
    assert names.count("aten::addmm") == 1 and names.count("aten::clamp_min") == 1
    assert names.count("aten::sum") == 1
    flops = kernels.set_index("name").flops
    assert flops["aten::addmm"] == 2 * 64 * 128 * 256  # 4,194,304
    assert flops["aten::clamp_min"] == 64 * 256  # one compare per element: 16,384
    assert flops["aten::sum"] == 64 * 256
    assert set(kernels.region) == {"test/region"} and set(kernels.step) == {0}
    assert kernels.dur_us.ge(0).all()


def test_cpu_unknown_ops_are_kept_not_dropped(tmp_path):
    from wlprof.cost import has_formula

    x = torch.randn(1000)
    assert not has_formula("aten::kthvalue")
    kernels, _ = _cpu_trace(tmp_path, lambda: torch.kthvalue(x, 10))
    row = kernels[kernels.name == "aten::kthvalue"]
    assert len(row) == 1 and row.flops_source.iloc[0] == "unknown" and np.isnan(row.flops.iloc[0])

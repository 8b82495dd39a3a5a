"""A function profiled once on the CPU (record_shapes) and its trace costed, for the cost tests."""

from __future__ import annotations


def costed_cpu(tmp_path, fn, stated=()):
    """`fn()` run under torch.profiler on the CPU, its trace written under `tmp_path` and costed
    (`pipeline.costed`, with the workload's `stated` costs)."""
    from torch.profiler import ProfilerActivity, profile

    from wlprof.pipeline import costed, read

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        fn()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    return costed(read(path), stated=stated)

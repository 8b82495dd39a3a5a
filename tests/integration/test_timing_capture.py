"""Unprofiled timing of real steps (CPU here; the CUDA paths are marked gpu). The statistics by hand,
with a fake clock: tests/unit/test_timing.py."""

from __future__ import annotations

import pytest
import torch

from wlprof.timing import time_step


def test_time_step_cpu_keeps_samples_and_says_why_no_graph():
    x = torch.randn(256, 256)
    t = time_step(lambda: x @ x, torch.device("cpu"), latency_reps=4, batches=2, min_batch_ms=1.0)
    assert len(t.latency_us) == 4 and len(t.back_to_back_us) == 2
    assert all(v > 0 for v in t.latency_us + t.back_to_back_us)
    assert t.calls_per_batch >= 3
    assert t.graph_us is None and "CUDA" in t.graph_error
    # four samples: the median is the mean of the middle two; p0 and p100 the extremes
    s = sorted(t.latency_us)
    assert t.latency_median_us == (s[1] + s[2]) / 2 and (t.percentile(0.0), t.percentile(1.0)) == (s[0], s[3])
    b = sorted(t.back_to_back_us)
    assert t.back_to_back_median_us == (b[0] + b[1]) / 2


@pytest.mark.gpu
@pytest.mark.calibrates  # the GPU's ceilings, in the session's cache
def test_cuda_capture_records_kernels_with_ops_and_three_timings(tmp_path):
    from wlprof.study import Study, run_study

    res = run_study(Study("gemm", {"shapes": "256x256x256"}), traces=tmp_path)
    row = res.steps.iloc[0]
    assert row.kernel_us > 0 and row.latency_us > 0 and row.graph_us > 0 and row.graph_error is None
    import wlprof

    k = wlprof.load(tmp_path)
    assert (k.kind == "kernel").any() and k[k.kind == "kernel"].has_op.all()
    assert k.groupby("step").flops.sum().iloc[0] == 2 * 256**3

"""Unprofiled timing and op replay (CPU here; the CUDA paths are marked gpu)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from wlprof.timing import time_step

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from replay import ReplayError, replay_op  # noqa: E402  (a benchmark's helper)


def test_time_step_cpu_keeps_samples_and_says_why_no_graph():
    x = torch.randn(256, 256)
    t = time_step(lambda: x @ x, torch.device("cpu"), latency_reps=4, batches=2, min_batch_ms=1.0)
    assert len(t.latency_us) == 4 and len(t.back_to_back_us) == 2
    assert all(v > 0 for v in t.latency_us + t.back_to_back_us)
    assert t.calls_per_batch >= 3
    assert t.graph_us is None and "CUDA" in t.graph_error
    assert t.percentile(0.0) <= t.latency_median_us <= t.percentile(1.0)


def test_replay_addmm_with_keyword_only_scalars_and_transposed_weight():
    # as recorded for nn.Linear(512, 1024) on a [64, 512] input: weight.t() has strides [1, 512]
    fn = replay_op("aten::addmm", "[[1024],[64,512],[512,1024],[],[]]",
                   '["float","float","float","Scalar","Scalar"]', "[[1],[512,1],[1,512],[],[]]",
                   '["","","","1","1"]', torch.device("cpu"))
    out = fn()
    assert out.shape == (64, 1024) and out.abs().sum() > 0  # random inputs, never zeros


def test_replay_refuses_what_it_cannot_rebuild():
    with pytest.raises(ReplayError, match="tensor-list"):
        replay_op("aten::cat", "[[[2,2],[2,2]],[]]", '["TensorList","Scalar"]', "[[],[]]", '["","0"]',
                  torch.device("cpu"))
    with pytest.raises(ReplayError, match="only aten ops"):
        replay_op("custom::op", "[]", "[]", "[]", "[]", torch.device("cpu"))
    with pytest.raises(ReplayError, match="no overload"):
        replay_op("aten::mm", "[[2,3],[4,5]]", '["float","float"]', "[[3,1],[5,1]]", '["",""]', torch.device("cpu"))


@pytest.mark.gpu
def test_cuda_capture_records_kernels_with_ops_and_three_timings(tmp_path):
    from wlprof.study import Study, run_study

    res = run_study(Study("gemm", {"shapes": "256x256x256"}), traces=tmp_path)
    row = res.steps.iloc[0]
    assert row.kernel_us > 0 and row.latency_us >= row.kernel_us and row.graph_us > 0
    import wlprof

    k = wlprof.load(tmp_path)
    assert (k.kind == "kernel").any() and k[k.kind == "kernel"].has_op.all()
    assert k.groupby("step").flops.sum().iloc[0] == 2 * 256**3

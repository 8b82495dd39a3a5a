"""The op replay helper of benchmarks/replay.py: rebuilds a recorded call from its profiler arguments."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from replay import ReplayError, replay_op  # noqa: E402  (a benchmark's helper)


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

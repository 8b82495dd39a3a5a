"""Expert parallelism: the experts each rank holds and the rows the routing sends between ranks."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from wlprof import workloads
from wlprof.distributed.world import mismatch, planned
from wlprof.errors import InputError
from wlprof.workloads.moe.expert_parallel import Plan, shards


def test_shards_are_contiguous_and_even():
    assert shards(8, 4) == [(0, 2), (2, 4), (4, 6), (6, 8)]
    assert shards(5, 2) == [(0, 2), (2, 5)]


def test_rows_between_ranks():
    # 2 ranks, 4 experts (0-1 on rank 0, 2-3 on rank 1); rank 0 routes 3,1,0,4 rows, rank 1 1,1,2,2
    pl = Plan(0, 2, ((0, 2), (2, 4)), np.array([[3, 1, 0, 4], [1, 1, 2, 2]]))
    assert pl.send_rows() == [4, 4] and pl.recv_rows() == [4, 2]
    assert pl.rows_by_rank() == [6, 8] and pl.local_groups() == [4, 2]


def test_world_larger_than_experts_is_refused():
    wl = workloads.get("moe")
    with planned(8), pytest.raises(InputError, match="experts must be at least the world size"):
        wl.parse({"dispatch": "alltoall", "experts": 4, "routing": "balanced", "tokens": 16},
                 torch.device("cpu"), torch.float32)


def test_version_mismatch_names_the_rank():
    same = {"wlprof": "0.1.0", "schema": "2.3", "torch": "2.13.0", "python": "3.11.2"}
    assert mismatch({0: same, 1: dict(same)}) is None
    text = mismatch({0: same, 1: {**same, "torch": "2.12.0"}})
    assert text.startswith("rank 1 runs torch 2.12.0, rank 0 runs 2.13.0")

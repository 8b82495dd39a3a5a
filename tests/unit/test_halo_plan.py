"""The halo workload's partitions and exchange plan, on graphs small enough to check by hand."""

from __future__ import annotations

import math

import pytest
import torch

from wlprof import workloads
from wlprof.distributed.world import planned
from wlprof.errors import InputError
from wlprof.workloads.halo.partition import grid_edges, plan


def test_grid_of_four_by_four():
    e = grid_edges(16)
    assert e.shape == (2, 2 * 2 * 4 * 3)  # 12 right + 12 down edges, both directions


def test_two_strips_in_one_process():
    # rows 0-1 (nodes 0-7) and rows 2-3 (nodes 8-15): each strip's row next to the other is its boundary
    pl = plan(grid_edges(16), 16, 2, world=1, rank=0)
    assert pl.self_rows["boundary"].tolist() == [4, 5, 6, 7, 8, 9, 10, 11]
    assert pl.self_rows["inner"].tolist() == [0, 1, 2, 3, 12, 13, 14, 15]
    assert pl.halo == 8 and pl.cut_edges == 8
    # partition 0's halo (nodes 8-11) first, then partition 1's (nodes 4-7): two contiguous copies
    assert pl.runs() == [(8, 0, 4), (4, 4, 4)]
    assert pl.exchange_rows() == 8 and not pl.send and not pl.recv


def test_two_ranks_exchange_one_row_each():
    p0 = plan(grid_edges(16), 16, 2, world=2, rank=0)
    p1 = plan(grid_edges(16), 16, 2, world=2, rank=1)
    assert (p0.lo, p0.hi, p1.lo, p1.hi) == (0, 8, 8, 16)
    assert p0.send[1].tolist() == [4, 5, 6, 7] and p0.recv == {1: (0, 4)}
    assert p1.send[0].tolist() == [0, 1, 2, 3]  # nodes 8-11, as rank 1's own rows 0-3
    assert p0.runs() == [] and p0.exchange_rows() == 4


def _parse(**raw):
    wl = workloads.get("halo")
    return wl.parse(raw, torch.device("cpu"), torch.float32)


def test_bad_input_is_refused():
    with pytest.raises(InputError, match="partitions must be at most nodes \\(4\\)"):
        _parse(nodes="4", partitions=8, graph="uniform")
    with pytest.raises(InputError, match="must be a square number"):
        _parse(nodes="1000")
    with pytest.raises(InputError, match="at least 2"):
        _parse(partitions=1)
    with planned(3), pytest.raises(InputError, match="multiple of world_size"):
        _parse(partitions=4)
    with planned(2):
        assert _parse().spec.partitions == 2  # one partition per rank by default


def test_the_position_in_words():
    from wlprof.workloads.halo import position_phrase

    # compute 1000, exchange 400: max 1000, sum 1400; a step of 1200 is (1200 - 1000) / 400 = 50% of the way
    assert position_phrase(1000.0, 400.0, 1200.0) == "50% of the way from max to sum"
    assert position_phrase(1000.0, 400.0, 1010.0) == "at max: the exchange hid completely"  # 0.025
    assert position_phrase(1000.0, 400.0, 1390.0) == "at sum: nothing overlapped"  # 0.975
    assert position_phrase(1000.0, 400.0, 1500.0) == "1.25: above the sum"
    # an exchange of 30 against 1000 (3% < 5%): said to be too small to tell
    assert position_phrase(1000.0, 30.0, 1015.0) == ("50% of the way from max to sum (the exchange is 3.0% of the "
                                                     "compute: too small for the position to say much)")


def test_the_halo_position_is_left_out_where_the_smaller_part_is_noise():
    from wlprof.workloads.halo import halo_position

    # compute 100, exchange 40: max 100, sum 140; a step of 110 is a quarter of the way
    assert halo_position(100.0, 40.0, 110.0) == pytest.approx(0.25)
    # an exchange of 0.023 against 184: (142 - 184) / 0.023 would be -1,826
    assert math.isnan(halo_position(184.0, 0.023, 142.0))
    assert math.isnan(halo_position(0.0, 0.0, 1.0))

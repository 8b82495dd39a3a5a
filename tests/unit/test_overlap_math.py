"""Overlap of intervals built by hand: unions, intersections, the per-rank and per-stream rows."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from wlprof.analysis.overlap import intersection_length, length, overlap_table, union


def test_union_merges_overlapping_and_touching_intervals():
    s, e = union([50, 0, 70, 10, 200], [80, 30, 120, 20, 240])
    # [0,30) holds [10,20); [50,80) and [70,120) overlap; [200,240) stands alone
    assert list(zip(s, e, strict=True)) == [(0, 30), (50, 120), (200, 240)]
    assert length((s, e)) == 30 + 70 + 40
    s, e = union([0, 10], [10, 20])  # touching: one interval
    assert list(zip(s, e, strict=True)) == [(0, 20)]
    assert length(union([], [])) == 0.0


def test_intersection_of_two_unions():
    a = union([0, 50], [30, 120])
    b = union([20, 200], [100, 240])
    # [20,30) + [50,100) = 10 + 50
    assert intersection_length(a, b) == 60.0
    assert intersection_length(a, union([], [])) == 0.0


def _rows(spec):
    return pd.DataFrame([{"ts_us": float(s), "dur_us": float(e - s), "stream": st, "comm_class": c, "step": 0}
                         for s, e, st, c in spec])


# HTA's own check of get_comm_comp_overlap (tools NOTES 1.1): compute [0,30), [50,80), [70,120) on stream 7,
# NCCL [20,100) on stream 9 and [200,240) on stream 13, a memcpy [0,100) on stream 11. HTA: 60 / 120 = 50%.
HTA_SYNTHETIC = [(0, 30, 7, None), (50, 80, 7, None), (70, 120, 7, None), (20, 100, 9, "collective"),
                 (0, 100, 11, "memcpy"), (200, 240, 13, "collective")]


def test_rank_row_by_hand():
    t = overlap_table(_rows(HTA_SYNTHETIC))
    r = t[t.scope == "rank"].iloc[0]
    assert r.compute_us == 100  # [0,30) + [50,120)
    assert r.collective_us == 120  # [20,100) + [200,240)
    assert r.collective_overlap_us == 60 and r.collective_overlap_share == pytest.approx(0.5)  # HTA's 50.0%
    assert r.copy_us == 100 and r.copy_overlap_us == 80  # [0,30) + [50,100)
    assert r.comm_us == 140  # [0,100) + [200,240): the memcpy counts as communication
    assert r.overlap_us == 80 and r.exposed_comm_us == 60
    assert r.overlap_share == pytest.approx(80 / 140)
    assert r.compute_overlapped_us == 80
    assert r.busy_us == 160 and r.span_us == 240 and r.idle_us == 80


def test_stream_rows_by_hand():
    t = overlap_table(_rows(HTA_SYNTHETIC)).set_index("stream")
    assert t.loc[9, "comm_us"] == 80 and t.loc[9, "overlap_us"] == 60  # [20,30) + [50,100) under compute
    assert t.loc[13, "overlap_us"] == 0 and t.loc[13, "exposed_comm_us"] == 40
    assert t.loc[11, "copy_overlap_share"] == pytest.approx(0.8)
    assert t.loc[7, "compute_us"] == 100 and t.loc[7, "compute_overlapped_us"] == 80
    assert math.isnan(t.loc[7, "overlap_share"])  # no communication on the compute stream


def test_no_communication_gives_nan_shares():
    r = overlap_table(_rows([(0, 10, 7, None)])).iloc[0]
    assert r.comm_us == 0 and math.isnan(r.overlap_share) and r.compute_us == 10

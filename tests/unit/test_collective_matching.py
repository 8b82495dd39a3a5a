"""Collectives matched across ranks: clock offsets, arrival skew and the wait it caused, by hand."""

from __future__ import annotations

import pandas as pd
import pytest

from wlprof.analysis.collectives import match, per_rank


def _rows(spec):
    return pd.DataFrame([{"rank": r, "ts_us": float(ts), "dur_us": float(d), "process_group": "0",
                          "collective": c, "comm_class": "collective", "comm_bytes": 1024.0, "busbw_gbps": 1.0,
                          "kind": "kernel"} for r, ts, d, c in spec])


def test_skew_and_wait_on_one_clock():
    # rank 0 arrives at 0 and waits for rank 1 (at 4); both end at 10. Then rank 0 is late by 3.
    t = match(_rows([(0, 0, 10, "all_reduce"), (1, 4, 6, "all_reduce"), (0, 20, 5, "all_gather"),
                     (1, 17, 8, "all_gather")]), hosts={0: "a", 1: "a"})
    t = t.set_index(["rank", "seq"])
    assert (t.clock_method == "same host").all() and (t.clock_offset_us == 0).all()
    assert t.loc[(0, 0), "skew_wait_us"] == 4 and t.loc[(1, 0), "skew_wait_us"] == 0
    assert t.loc[(1, 0), "arrival_skew_us"] == 4 and t.loc[(0, 0), "straggler_rank"] == 1
    assert t.loc[(0, 1), "arrival_skew_us"] == 3 and t.loc[(1, 1), "skew_wait_us"] == 3
    assert (t.ranks_matched == 2).all()
    pr = per_rank(t.reset_index()).set_index("rank")
    assert pr.loc[0, "skew_wait_us"] == 4 and pr.loc[1, "skew_wait_us"] == 3
    assert pr.loc[0, "straggler_of"] == 1 and pr.loc[1, "straggler_of"] == 1


def test_clocks_aligned_by_collective_ends():
    # rank 1's clock runs 100 µs ahead: its collectives end at 110 and 125 where rank 0's end at 10 and 25
    t = match(_rows([(0, 0, 10, "all_reduce"), (1, 104, 6, "all_reduce"), (0, 20, 5, "all_reduce"),
                     (1, 117, 8, "all_reduce")]), hosts=None)
    t = t.set_index(["rank", "seq"])
    assert (t.clock_method == "collective ends").all()
    assert t.loc[(1, 0), "clock_offset_us"] == pytest.approx(100)
    assert t.loc[(1, 0), "start_us"] == pytest.approx(4) and t.loc[(0, 0), "skew_wait_us"] == pytest.approx(4)


def test_a_single_rank_is_not_matched():
    t = match(_rows([(0, 0, 10, "all_reduce")]))
    assert t.clock_method.iloc[0] == "single rank" and t.ranks_matched.iloc[0] == 1
    assert t.skew_wait_us.isna().all()


def test_the_collectives_table_of_p2p_sends_and_a_matched_all_reduce():
    from wlprof.cli.overlap import collectives_table

    # rank 0: an all_reduce matched with rank 1's (rank 1 arrives 4 µs later) and a P2P send of 8,192 bytes in
    # 2,000 µs (busbw 8192 / 2000 µs = 0.0041 GB/s), never matched; rank 1: its all_reduce only
    rows = _rows([(0, 0, 10, "all_reduce"), (1, 4, 6, "all_reduce"), (0, 30, 2000, "send")])
    p2p = rows.collective == "send"
    rows.loc[p2p, ["comm_class", "comm_bytes", "busbw_gbps"]] = ["p2p", 8192.0, 8192 / 2000e3]
    pr = per_rank(match(rows, hosts={0: "a", 1: "a"}))
    assert pr.set_index("rank").matched.to_dict() == {0: 1, 1: 1}
    cells = [list(c.cells) for c in collectives_table(pr, "t").columns]
    # rank 0's median busbw over its two: (1.0 + 0.0041) / 2 = 0.502; rank 1's 1.0
    assert cells[4] == ["0.5", "1.0"]
    assert cells[5] == ["4.0", "0.0"] and cells[6] == ["0 times", "1 times"]
    # P2P only: the median busbw keeps two significant digits, and nothing was matched to be waited for
    alone = per_rank(match(rows[p2p], hosts={0: "a"}))
    cells = [list(c.cells) for c in collectives_table(alone, "t").columns]
    assert cells[2] == ["8,192"] and cells[4] == ["0.0041"] and cells[5] == ["-"] and cells[6] == ["-"]

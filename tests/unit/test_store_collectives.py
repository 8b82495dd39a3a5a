"""The collectives table of a run folder (wlprof.store.collectives.write_collectives): which kernels
files and rows it reads, which points, the matching it hands `hosts` to, and the file it writes."""

from __future__ import annotations

import pandas as pd
import pyarrow.parquet as pq

from wlprof import schema
from wlprof.store.atomic import atomic_write_parquet
from wlprof.store.collectives import write_collectives


def _kernels(point, rank, rows):
    """A kernels table of one rank: rows (ts_us, dur_us, kind, comm_class, collective)."""
    return pd.DataFrame([{"run_id": "r", "point": point, "rank": rank, "ts_us": float(ts), "dur_us": float(d),
                          "kind": kind, "comm_class": cls, "collective": coll, "process_group": "0",
                          "name": f"k{i}"} for i, (ts, d, kind, cls, coll) in enumerate(rows)])


def _run(tmp_path):
    """Points 0 and 1 are ranks 0 and 1 of one capture. Each has two all_reduce kernels, a p2p send, a
    compute kernel and a host op of a collective (kind cpu_op, not the transfer). Rank 1 starts its
    first all_reduce 4 us after rank 0 and its clock runs 100 us ahead. Point 2 (rank 2) is another
    capture; a hidden and an underscore file beside them hold a collective that must not be read."""
    run = tmp_path / "run"
    run.mkdir()
    for point, rank, shift in ((0, 0, 0.0), (1, 1, 100.0)):
        late = 4.0 if rank else 0.0
        rows = [(shift + late, 10 - late, "kernel", "collective", "all_reduce"),
                (shift + 20, 5, "kernel", "collective", "all_reduce"),
                (shift + 30, 2, "kernel", "p2p", "send"),
                (shift + 40, 3, "kernel", None, None),
                (shift + 50, 1, "cpu_op", "collective", "all_reduce")]
        atomic_write_parquet(run / f"p00{point}-v.parquet", _kernels(point, rank, rows), "kernels")
    other = _kernels(2, 2, [(0, 10, "comm", "collective", "all_reduce")])
    atomic_write_parquet(run / "p002-v.parquet", other, "kernels")
    for hidden in (".p003-v.parquet", "_p004-v.parquet"):
        atomic_write_parquet(run / hidden, _kernels(3, 3, [(0, 10, "kernel", "collective", "all_reduce")]),
                             "kernels")
    return run


def test_collectives_of_the_given_points_are_matched_and_written(tmp_path):
    run = _run(tmp_path)
    # of points 0 and 1: 2 all_reduce + 1 send per rank = 6 rows (no compute kernel, no cpu_op)
    assert write_collectives(run, [0, 1], None, "collectives") == 6
    path = run / "_collectives" / "collectives.parquet"
    assert sorted(p.name for p in (run / "_collectives").iterdir()) == ["collectives.parquet"]
    t = pq.read_table(path)
    assert t.schema.names == [c.name for c in schema.columns("collectives")]
    df = t.to_pandas().sort_values(["rank", "seq"]).reset_index(drop=True)
    assert df["rank"].tolist() == [0, 0, 0, 1, 1, 1] and df.point.tolist() == [0, 0, 0, 1, 1, 1]
    assert df.collective.tolist() == ["all_reduce", "all_reduce", "send"] * 2
    assert df.comm_class.tolist() == ["collective", "collective", "p2p"] * 2
    # no hosts: the clocks are aligned by the all_reduce ends (rank 1: 110 - 10 and 125 - 25 -> 100 us)
    assert (df.clock_method == "collective ends").all()
    assert df.clock_offset_us.tolist() == [0.0, 0.0, 0.0, 100.0, 100.0, 100.0]
    r1 = df[df["rank"] == 1].set_index("seq")
    assert r1.loc[0, "start_us"] == 4.0 and r1.loc[0, "arrival_skew_us"] == 4.0
    r0 = df[df["rank"] == 0].set_index("seq")
    assert r0.loc[0, "skew_wait_us"] == 4.0 and r0.loc[0, "straggler_rank"] == 1
    assert r0.loc[0, "ranks_matched"] == 2 and pd.isna(r0.loc[2, "skew_wait_us"])  # a p2p row is not matched


def test_hosts_are_handed_to_the_matching_and_the_stem_names_the_file(tmp_path):
    run = _run(tmp_path)
    (run / "_collectives").mkdir()  # already there (a run folder has it): written into it
    assert write_collectives(run, [0, 1], {0: "a", 1: "a"}, "p001-v") == 6
    df = pd.read_parquet(run / "_collectives" / "p001-v.parquet")
    assert (df.clock_method == "same host").all() and (df.clock_offset_us == 0).all()


def test_one_point_or_every_point(tmp_path):
    run = _run(tmp_path)
    assert write_collectives(run, [2], None, "two") == 1
    df = pd.read_parquet(run / "_collectives" / "two.parquet")
    assert df["rank"].tolist() == [2]  # gloo's work (kind comm) is a transfer too
    assert df.clock_method.tolist() == ["single rank"]
    # None: every point of the folder (the hidden and underscore files still skipped): 6 + 1 rows
    assert write_collectives(run, None, None, "all") == 7
    df = pd.read_parquet(run / "_collectives" / "all.parquet")
    assert sorted(df["rank"].unique().tolist()) == [0, 1, 2]


def test_nothing_to_match_writes_no_file(tmp_path):
    run = _run(tmp_path)
    assert write_collectives(run, [7], None, "none") == 0  # no row of point 7
    assert not (run / "_collectives").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    assert write_collectives(empty, None, None, "x") == 0 and list(empty.iterdir()) == []
    only = tmp_path / "only"
    only.mkdir()
    atomic_write_parquet(only / "p000-v.parquet", _kernels(0, 0, [(0, 1, "kernel", None, None),
                                                                 (1, 1, "cpu_op", "collective", "all_reduce")]),
                         "kernels")
    assert write_collectives(only, None, None, "x") == 0 and not (only / "_collectives").exists()

"""The overlap table of public NCCL traces against HTA's get_comm_comp_overlap (run side by side, with
HTA_DISABLE_NS_ROUNDING=1 and include_last_profiler_step=True; docs/overlap.md), their nccl-tests costs,
the collectives of a rank folder, and the store read by DuckDB."""

from __future__ import annotations

from pathlib import Path

import pytest

import wlprof
from wlprof.ingest import ingest

PUBLIC = Path(__file__).parent.parent / "fixtures" / "public"


@pytest.fixture(scope="module")
def store(tmp_path_factory, cpu_ceilings):
    root = tmp_path_factory.mktemp("traces")
    for name in ("hta_2024_nccl.json.gz", "hta_2023_two_ranks", "tracelens_b200_eager_indent4.json.gz"):
        ingest(PUBLIC / name, root, name=name.split(".")[0].replace("_", "-"), jobs=1)
    return root


def _rank_rows(store, prefix):
    t = wlprof.load(store, table="overlap")
    t = t[t.run_id.str.startswith(prefix) & (t.scope == "rank")]
    return t.sort_values("rank")


def test_overlap_equals_hta(store):
    # HTA 0.5.0 gives 15.61% (rank 0) on the 2024 trace and 14.95% / 19.93% on the 2-rank folder
    assert _rank_rows(store, "hta-2024").collective_overlap_share.round(4).tolist() == [0.1561]
    assert _rank_rows(store, "hta-2023").collective_overlap_share.round(4).tolist() == [0.1495, 0.1993]
    assert _rank_rows(store, "tracelens-b200").collective_overlap_share.tolist() == [0.0]
    r = _rank_rows(store, "hta-2024").iloc[0]
    assert r.overlap_us == pytest.approx(r.collective_overlap_us + r.copy_overlap_us, rel=1e-6) or \
        r.overlap_us <= r.collective_overlap_us + r.copy_overlap_us  # unions can share time
    assert r.exposed_comm_us == pytest.approx(r.comm_us - r.overlap_us)


def test_nccl_kernels_costed(store):
    k = wlprof.load(store, run_id=[m for m in wlprof.load(store, table="steps").run_id.unique()
                                   if m.startswith("tracelens-b200")])
    ag = k[k.comm_class == "collective"].iloc[0]
    # _allgather_base of 25,136 bf16 per rank over 8 ranks: S = the output, 201,088 x 2 bytes
    assert ag.collective == "all_gather" and ag.group_size == 8 and ag.comm_bytes == 201088 * 2
    assert ag.busbw_gbps == pytest.approx(ag.comm_bytes / ag.dur_us / 1e3 * 7 / 8)
    assert ag.flops == 0 and ag.flops_source == "formula"


def test_rank_folder_collectives(store):
    c = wlprof.load(store, table="collectives")
    c = c[c.run_id.str.startswith("hta-2023")]
    assert sorted(c["rank"].unique()) == [0, 1] and (c.ranks_matched == 2).any()
    assert c.clock_method.iloc[0] == "collective ends"


def test_integer_columns_read_back_as_integers(store):
    """Every column declared integer reads back as an integer dtype, however many of its rows are null:
    group_size is null on the compute rows beside the collectives' sizes, straggler_rank on the
    collectives no other rank matched (a float64 column would give 8.0 ranks)."""
    import pandas as pd
    import pyarrow as pa

    from wlprof import schema

    for table in schema.TABLE_NAMES:
        df = pd.read_parquet(store) if table == "kernels" else wlprof.load(store, table=table)
        for c in schema.columns(table):
            if pa.types.is_integer(c.type):
                assert pd.api.types.is_integer_dtype(df[c.name].dtype), (table, c.name, df[c.name].dtype)
    k = pd.read_parquet(store)
    assert k.group_size.isna().any() and {2, 8} <= set(k.group_size.dropna())  # the 2-rank folder, the b200's 8
    c = wlprof.load(store, table="collectives")
    assert c.straggler_rank.isna().any() and set(c.straggler_rank.dropna()) <= {0, 1}


def test_duckdb_reads_the_store(store):
    duckdb = pytest.importorskip("duckdb")
    got = duckdb.sql(f"SELECT rank, collective_overlap_share FROM '{store}/*/_overlap/*.parquet' "
                     "WHERE scope = 'rank' AND run_id LIKE 'hta-2023%' ORDER BY rank").fetchall()
    assert [(r, round(s, 4)) for r, s in got] == [(0, 0.1495), (1, 0.1993)]
    n = duckdb.sql(f"SELECT count(*) FROM '{store}/*/*.parquet' WHERE comm_class = 'collective'").fetchall()[0][0]
    assert n == len(wlprof.load(store, comm_class="collective"))


def _union(intervals):
    """Merged [start, end) intervals."""
    out = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def _intersection_us(a, b):
    i = j = 0
    total = 0.0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        total += max(0.0, hi - lo)
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def test_a_single_process_trace_with_copies_on_side_streams(tmp_path, cpu_ceilings):
    # The H200 halo step (host exchange, overlapped): compute kernels on stream 7, device-to-host copies
    # on one side stream and host-to-device on another (memsets count as copies, as in docs/overlap.md).
    # The overlap share is computed here straight from the trace's events (copy time inside the union of
    # kernel time, over the copy time) and must equal
    # the copies row wlprof writes; the trace names no rank, and `wlprof overlap` shows it as rank 0.
    import gzip
    import json

    from typer.testing import CliRunner

    from wlprof.cli.main import app

    path = Path(__file__).parent.parent / "fixtures" / "h200_halo" / "halo_host_overlap.pt.trace.json.gz"
    ev = [e for e in json.load(gzip.open(path))["traceEvents"] if e.get("ph") == "X"]
    kernels = _union([(e["ts"], e["ts"] + e["dur"]) for e in ev if e.get("cat") == "kernel"])
    copies = _union([(e["ts"], e["ts"] + e["dur"]) for e in ev if e.get("cat") in ("gpu_memcpy", "gpu_memset")])
    expected = _intersection_us(copies, kernels) / sum(e - s for s, e in copies)
    assert expected > 0.9  # the exchange hid under the compute
    run = ingest(path, tmp_path, name="halo-host", jobs=1)
    t = wlprof.load(tmp_path, table="overlap")
    row = t[t.scope == "rank"].iloc[0]
    assert row.copy_overlap_share == pytest.approx(expected, abs=1e-3)
    res = CliRunner().invoke(app, ["overlap", run.run_id, "--traces", str(tmp_path)], env={"COLUMNS": "120"})
    assert res.exit_code == 0, res.output
    assert f"{100 * row.overlap_share:.1f}%" in res.output and "│ 0    │ all" in res.output

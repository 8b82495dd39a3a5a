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


def test_duckdb_reads_the_store(store):
    duckdb = pytest.importorskip("duckdb")
    got = duckdb.sql(f"SELECT rank, collective_overlap_share FROM '{store}/*/_overlap/*.parquet' "
                     "WHERE scope = 'rank' AND run_id LIKE 'hta-2023%' ORDER BY rank").fetchall()
    assert [(r, round(s, 4)) for r, s in got] == [(0, 0.1495), (1, 0.1993)]
    n = duckdb.sql(f"SELECT count(*) FROM '{store}/*/*.parquet' WHERE comm_class = 'collective'").fetchall()[0][0]
    assert n == len(wlprof.load(store, comm_class="collective"))

"""The trace store: atomic files, run folders, loading with filters and schema versions."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import wlprof
from wlprof import schema
from wlprof.errors import InputError, SchemaVersionError, StoreError
from wlprof.store.atomic import atomic_write_bytes
from wlprof.store.runs import RunWriter, list_runs, run_dir
from wlprof.store.tables import load_table


def _kernels(run_id, workload, variant, rows, **params):
    return pd.DataFrame({"run_id": run_id, "workload": workload, "variant": variant, "point": 0,
                         "step": list(range(rows)), "dur_us": [1.0] * rows, "flops": [10.0] * rows, **params})


def _write_run(root, workload, variant, rows, **params):
    w = RunWriter(root, workload, {"points": [{"index": 0, "variant": variant}]})
    w.write_point(0, variant, {"kernels": _kernels(w.run_id, workload, variant, rows, **params)}, None)
    w.finish("complete")
    return w


def test_mixed_workloads_load_with_every_parameter_column(tmp_path):
    _write_run(tmp_path, "gemm", "a", 2, m=2, k=3, n=4)
    _write_run(tmp_path, "mlp", "b", 3, batch=8)
    direct = pd.read_parquet(tmp_path)  # the contract: one plain read over the folder
    assert len(direct) == 5 and {"m", "batch", "routing"} <= set(direct.columns)
    assert direct.groupby("workload").batch.max().to_dict()["mlp"] == 8
    gemm = wlprof.load(tmp_path, workload="gemm")
    assert len(gemm) == 2 and set(gemm.m) == {2}
    both = load_table(tmp_path, workload=["gemm", "mlp"], step=[0])
    assert len(both) == 2


def test_unknown_filter_column_and_missing_folder_are_refused(tmp_path):
    with pytest.raises(InputError, match="routingg"):
        wlprof.load(tmp_path, routingg="x")
    with pytest.raises(InputError, match="must be a traces folder"):
        wlprof.load(tmp_path / "nope")
    assert wlprof.load(tmp_path).empty  # an empty folder is an empty table with the declared columns


def test_newer_schema_major_is_refused_older_minor_loads(tmp_path):
    w = _write_run(tmp_path, "gemm", "a", 1, m=1)
    f = next(w.path.glob("p000*.parquet"))
    t = pq.read_table(f)
    newer = t.replace_schema_metadata({schema.METADATA_KEY: b"3.0"})
    pq.write_table(newer, f)
    with pytest.raises(SchemaVersionError, match=r"schema 3\.0, newer than this wlprof's 2\."):
        wlprof.load(tmp_path)
    # an older minor version missing a column still loads, the column comes back null
    older = t.drop(["routing"]).replace_schema_metadata({schema.METADATA_KEY: b"1.0"})
    pq.write_table(older, f)
    df = wlprof.load(tmp_path)
    assert df.routing.isna().all() and len(df) == 1


def test_schema_1_expert_counts_as_json_text_load_as_lists(tmp_path):
    # schema <= 1.3 wrote expert counts as a JSON string; 2.0 as a list column: wlprof.load converts
    w = _write_run(tmp_path, "moe", "a", 2)
    f = next(w.path.glob("p000*.parquet"))
    t = pq.read_table(f).drop(["expert_counts"])
    old = t.append_column("expert_counts", pa.array(["[3,0,1]", "[3,0,1]"]))
    pq.write_table(old.replace_schema_metadata({schema.METADATA_KEY: b"1.3"}), f)
    _write_run(tmp_path, "moe", "b", 1)  # a run of the current schema beside it
    df = wlprof.load(tmp_path).sort_values("variant")
    assert [list(v) if v is not None else None for v in df.expert_counts] == [[3, 0, 1], [3, 0, 1], None]
    one = wlprof.load(tmp_path, variant="a")  # a filter reaches the converted file too
    assert len(one) == 2


def test_zero_byte_parquet_is_a_clear_error(tmp_path):
    w = _write_run(tmp_path, "gemm", "a", 1, m=1)
    (w.path / "p001-empty.parquet").write_bytes(b"")
    with pytest.raises(StoreError, match="empty"):
        wlprof.load(tmp_path)


def test_run_ids_cannot_escape_the_traces_folder(tmp_path):
    for bad in ["..", "../x", "/etc", "a/b", "", ".hidden"]:
        with pytest.raises(InputError, match="RUN_ID"):
            run_dir(tmp_path, bad)
    assert run_dir(tmp_path, "gemm-1").parent == tmp_path.resolve()


def test_atomic_write_leaves_only_the_final_file(tmp_path):
    atomic_write_bytes(tmp_path / "x.bin", b"abc")
    assert [p.name for p in tmp_path.iterdir()] == ["x.bin"]

    with pytest.raises(TypeError):
        atomic_write_bytes(tmp_path / "y.bin", 42)  # type: ignore[arg-type]
    assert [p.name for p in tmp_path.iterdir()] == ["x.bin"]  # the temporary file was removed


def test_concurrent_writers_get_separate_run_folders(tmp_path):
    a = RunWriter(tmp_path, "gemm", {})
    b = RunWriter(tmp_path, "gemm", {})
    assert a.path != b.path and a.path.is_dir() and b.path.is_dir()


def test_a_run_whose_writer_died_reads_as_incomplete(tmp_path):
    w = RunWriter(tmp_path, "gemm", {})
    w.manifest["pid"] = 2**22 + 12345  # no such process
    w.write_manifest()
    (run,) = list_runs(tmp_path)
    assert run["status"] == "incomplete"


def test_conform_declared_types_and_undeclared_columns():
    df = pd.DataFrame({"run_id": ["r"], "m": [3], "dur_us": [1.5]})
    t = schema.conform(df, "kernels")
    assert t.schema.field("m").type == pa.int64() and t.column("batch").null_count == 1
    assert t.schema.metadata[schema.METADATA_KEY] == schema.SCHEMA_VERSION.encode()
    with pytest.raises(ValueError, match="not declared"):
        schema.conform(pd.DataFrame({"surprise": [1]}), "kernels")

"""The trace store: atomic files, run folders, loading with filters and schema versions."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import HUNG_S

import wlprof
from wlprof import schema
from wlprof.errors import InputError, SchemaVersionError, StoreError
from wlprof.store.atomic import atomic_write_bytes, atomic_write_parquet
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


def _spy_replace(monkeypatch, seen, fail=False):
    """os.replace recording, at the moment of the rename, the source's and the final path's contents."""
    real = os.replace

    def replace(src, dst):
        src, dst = Path(src), Path(dst)
        seen.append((src, dst, src.read_bytes(), dst.read_bytes() if dst.exists() else None))
        if fail:
            raise OSError(28, "No space left on device (a test)")
        real(src, dst)

    monkeypatch.setattr(os, "replace", replace)


def test_atomic_write_bytes_renames_a_complete_temporary_file_over_the_old_one(tmp_path, monkeypatch):
    final = tmp_path / "x.bin"
    final.write_bytes(b"old")
    seen = []
    _spy_replace(monkeypatch, seen)
    atomic_write_bytes(final, b"new content")
    (src, dst, src_bytes, dst_bytes), = seen
    # the whole new content sat in a hidden temporary file of the same folder, and the final
    # path still held the old file, until the one rename
    assert dst == final and src.parent == tmp_path and src.name.startswith(".x.bin.") and src.suffix == ".tmp"
    assert src_bytes == b"new content" and dst_bytes == b"old"
    assert final.read_bytes() == b"new content" and [p.name for p in tmp_path.iterdir()] == ["x.bin"]


def test_atomic_write_bytes_that_fails_before_the_rename_leaves_the_old_file_whole(tmp_path, monkeypatch):
    final = tmp_path / "x.bin"
    final.write_bytes(b"old")
    seen = []
    _spy_replace(monkeypatch, seen, fail=True)
    with pytest.raises(OSError, match="No space left"):
        atomic_write_bytes(final, b"new content")
    with pytest.raises(OSError, match="No space left"):
        atomic_write_bytes(tmp_path / "y.bin", b"new content")
    assert len(seen) == 2
    assert final.read_bytes() == b"old"  # never touched
    assert [p.name for p in tmp_path.iterdir()] == ["x.bin"]  # no y.bin, no temporary file left
    monkeypatch.undo()
    with pytest.raises(TypeError):
        atomic_write_bytes(tmp_path / "z.bin", 42)  # type: ignore[arg-type]
    assert [p.name for p in tmp_path.iterdir()] == ["x.bin"]  # the temporary file was removed


def _kernels_df(rows):
    return pd.DataFrame({"run_id": "r", "workload": "gemm", "variant": "v", "point": 0, "step": range(rows),
                         "dur_us": [1.5] * rows, "flops": [10.0] * rows, "m": [2] * rows})


def test_atomic_write_parquet_never_shows_a_partial_file(tmp_path, monkeypatch):
    import pyarrow.parquet as pq

    from wlprof.store import atomic

    final = tmp_path / "p000.parquet"
    atomic_write_parquet(final, _kernels_df(3), "kernels")
    old = final.read_bytes()
    monkeypatch.setattr(atomic, "ROW_GROUP", 4)  # 10 rows: three row groups
    during = []
    real_write = pq.ParquetWriter.write_table

    def write_table(self, table, *args, **kwargs):
        during.append(final.read_bytes())  # what a reader of the final path sees while writing
        return real_write(self, table, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetWriter, "write_table", write_table)
    seen = []
    _spy_replace(monkeypatch, seen)
    atomic_write_parquet(final, _kernels_df(10), "kernels")
    assert during == [old, old, old]  # the old file, whole, through all three row groups
    (src, dst, src_bytes, dst_bytes), = seen
    assert dst == final and src.parent == tmp_path and src.name.startswith(".") and dst_bytes == old
    monkeypatch.undo()
    assert final.read_bytes() == src_bytes
    back = pq.read_table(final)
    assert back.num_rows == 10 and pq.ParquetFile(final).metadata.num_row_groups == 3
    assert back.column("step").to_pylist() == list(range(10))
    assert back.schema.metadata[schema.METADATA_KEY] == schema.SCHEMA_VERSION.encode()
    assert [p.name for p in tmp_path.iterdir()] == ["p000.parquet"]


def test_atomic_write_parquet_that_fails_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    final = tmp_path / "p000.parquet"
    atomic_write_parquet(final, _kernels_df(3), "kernels")
    old = final.read_bytes()
    _spy_replace(monkeypatch, [], fail=True)
    with pytest.raises(OSError, match="No space left"):
        atomic_write_parquet(final, _kernels_df(5), "kernels")
    assert final.read_bytes() == old and [p.name for p in tmp_path.iterdir()] == ["p000.parquet"]
    monkeypatch.undo()
    with pytest.raises(ValueError, match="not declared"):  # a conversion error mid-write: the same
        atomic_write_parquet(final, _kernels_df(5).assign(surprise=1), "kernels")
    assert final.read_bytes() == old and [p.name for p in tmp_path.iterdir()] == ["p000.parquet"]
    assert pd.read_parquet(final).step.tolist() == [0, 1, 2]  # the old table, readable


KILL_SCRIPT = r"""
import os, signal, sys
from pathlib import Path
import pandas as pd
import pyarrow.parquet as pq
from wlprof.store import atomic

final, kind = Path(sys.argv[1]), sys.argv[2]
if kind == "bytes":
    os.fsync = lambda fd: os.kill(os.getpid(), signal.SIGKILL)  # the data is written, not yet renamed
    atomic.atomic_write_bytes(final, b"new" * 1000)
else:
    atomic.ROW_GROUP = 2
    real = pq.ParquetWriter.write_table
    calls = []
    def write_table(self, table, *a, **k):
        calls.append(1)
        if len(calls) == 2:  # one row group written, the second under way
            os.kill(os.getpid(), signal.SIGKILL)
        return real(self, table, *a, **k)
    pq.ParquetWriter.write_table = write_table
    df = pd.DataFrame({"run_id": "r", "workload": "gemm", "variant": "v", "point": 0, "step": range(6),
                       "dur_us": 1.0, "flops": 2.0})
    atomic.atomic_write_parquet(final, df, "kernels")
sys.exit(3)  # not reached
"""


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["bytes", "parquet"])
def test_a_writer_killed_mid_write_leaves_the_final_file_as_it_was(tmp_path, kind):
    import signal
    import subprocess
    import sys

    run = tmp_path / "run"
    run.mkdir()
    final = run / ("x.bin" if kind == "bytes" else "p000.parquet")
    if kind == "bytes":
        final.write_bytes(b"old")
    else:
        atomic_write_parquet(final, _kernels_df(3), "kernels")
    old = final.read_bytes()
    proc = subprocess.run([sys.executable, "-c", KILL_SCRIPT, str(final), kind], capture_output=True, timeout=HUNG_S)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    assert final.read_bytes() == old  # a reader of the final path never sees the half-written file
    # what the killed writer left is a hidden temporary file, which no reader of the store lists
    left = [p.name for p in run.iterdir() if p != final]
    assert len(left) == 1 and left[0].startswith(f".{final.name}.") and left[0].endswith(".tmp")
    if kind == "parquet":
        from wlprof.store.tables import table_files

        assert table_files(tmp_path, "kernels") == [final]


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


def test_slug_is_lowercase_alphanumerics_and_single_dashes():
    from wlprof.store.atomic import slug
    from wlprof.store.runs import point_stem

    assert slug("Xeon CPU: GEMM (bf16)") == "xeon-cpu-gemm-bf16"
    assert slug("--__--") == "x" and slug("") == "x"
    assert slug("a" * 60) == "a" * 48 and slug("abcdef", 3) == "abc"
    assert point_stem(3, "Big GEMM") == "p003-big-gemm"


def test_run_id_errors_name_the_argument_and_the_rule(tmp_path):
    with pytest.raises(InputError) as e:
        run_dir(tmp_path, "a/b")
    assert (e.value.arg, e.value.value) == ("RUN_ID", "a/b")
    assert e.value.rule == "must be a run id made of letters, digits, '.', '_' and '-'"
    # a run id that is a link to a folder elsewhere leaves the traces folder
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "gemm-1").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(InputError) as e:
        run_dir(tmp_path / "root", "gemm-1")
    assert (e.value.arg, e.value.rule, e.value.value) == ("RUN_ID", "must name a run inside the traces folder",
                                                          "gemm-1")


def test_manifests_without_a_schema_version_read_newer_majors_are_refused(tmp_path):
    import json

    from wlprof.store.runs import read_manifest

    run = tmp_path / "old-1"
    run.mkdir()
    (run / "_manifest.json").write_text(json.dumps({"run_id": "old-1"}))
    assert read_manifest(run) == {"run_id": "old-1"}  # before schema versions: version 0
    (run / "_manifest.json").write_text(json.dumps({"run_id": "old-1", "schema_version": "99.0"}))
    with pytest.raises(SchemaVersionError, match="old-1/_manifest.json was written with schema 99.0"):
        read_manifest(run)
    (run / "_manifest.json").write_text("{not json")
    with pytest.raises(StoreError, match="old-1/_manifest.json is not valid JSON"):
        read_manifest(run)
    with pytest.raises(StoreError, match=r"none is not a wlprof run: it has no _manifest.json"):
        read_manifest(tmp_path / "none")


def test_effective_status_of_runs_on_this_host():
    import socket

    from wlprof.store.runs import _pid_alive, effective_status

    host, me, dead = socket.gethostname(), os.getpid(), 2**22 + 12345
    assert effective_status({}) == "unknown"
    # the probe is signal 0, which checks the pid and delivers nothing: a SIGHUP sent to this process
    # would end it (or, here, reach the handler before os.kill returns)
    hups = []
    old = signal.signal(signal.SIGHUP, lambda sig, frame: hups.append(sig))
    try:
        assert effective_status({"status": "running", "host": host, "pid": me}) == "running"  # its writer lives
        assert _pid_alive(me)
    finally:
        signal.signal(signal.SIGHUP, old)
    assert hups == []
    assert effective_status({"status": "running", "host": host, "pid": dead}) == "incomplete"
    assert effective_status({"status": "running", "host": host}) == "running"  # no pid to check
    assert effective_status({"status": "running", "host": "another-host", "pid": dead}) == "running"
    assert effective_status({"status": "complete", "host": host, "pid": dead}) == "complete"
    assert _pid_alive(me) and not _pid_alive(dead)
    assert _pid_alive(1)  # init: alive, whether or not this user may signal it


def test_list_runs_skips_hidden_and_unreadable_folders_and_orders_by_creation(tmp_path):
    import json

    def run(name, **m):
        (tmp_path / name).mkdir()
        (tmp_path / name / "_manifest.json").write_text(json.dumps({"run_id": name, "status": "complete", **m}))

    run(".staging-a-1", created_at="2026-01-01T00:00:00")  # being written
    run("_trash", created_at="2026-01-01T00:00:00")  # not a run
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "_manifest.json").write_text("{")  # unreadable: skipped, the others listed
    run("b-2", created_at="2026-03-01T00:00:00")
    run("a-9", created_at="2026-02-01T00:00:00")
    run("c-1", created_at="2026-02-01T00:00:00")
    run("d-0")  # no creation time: first
    (tmp_path / "notes.txt").write_text("x")
    runs = list_runs(tmp_path)
    assert [m["run_id"] for m in runs] == ["d-0", "a-9", "c-1", "b-2"]
    assert runs[0]["_path"] == str(tmp_path / "d-0")


def test_table_files_of_one_run_folder_and_of_its_tables(tmp_path):
    from wlprof.store.tables import table_files

    w = _write_run(tmp_path, "gemm", "a", 2)
    run = tmp_path / w.run_id
    (run / ".p001-a.parquet.tmp").write_bytes(b"")  # a temporary of a write in progress
    (run / ".p002-a.parquet").write_bytes(b"")  # hidden
    (tmp_path / ".staging-gemm-2").mkdir()  # a run being written
    (tmp_path / ".staging-gemm-2" / "p000-a.parquet").write_bytes(b"")
    (run / "_ops" / "p000-a.parquet").write_bytes(b"")
    (run / "_ops" / "_x.parquet").write_bytes(b"")
    (tmp_path / "_trash").mkdir()
    (tmp_path / "_trash" / "p000-a.parquet").write_bytes(b"")
    assert table_files(run, "kernels") == [run / "p000-a.parquet"]  # a run folder on its own
    assert table_files(tmp_path, "kernels") == [run / "p000-a.parquet"]
    assert table_files(tmp_path, "ops") == [run / "_ops" / "p000-a.parquet"]
    assert len(wlprof.load(run)) == 2
    with pytest.raises(InputError) as e:
        table_files(tmp_path, "kernel")
    assert (e.value.arg, e.value.value) == ("table", "kernel")
    assert e.value.rule == "must be one of ['collectives', 'kernels', 'ops', 'overlap', 'steps']"


def test_a_point_is_written_kernels_last_with_its_file_map_and_the_run_finished(tmp_path, monkeypatch):
    import gzip
    import json

    from wlprof.store import runs

    order = []
    real = runs.atomic_write_parquet
    monkeypatch.setattr(runs, "atomic_write_parquet", lambda path, df, table: (order.append(table),
                                                                              real(path, df, table)))
    w = RunWriter(tmp_path, "gemm", {"points": [{"index": 0, "variant": "Big GEMM"}]})
    k = _kernels(w.run_id, "gemm", "Big GEMM", 2)
    chrome = gzip.compress(b'{"traceEvents": []}')
    files = w.write_point(0, "Big GEMM", {"kernels": k, "ops": pd.DataFrame(), "steps": pd.DataFrame()}, chrome)
    assert order == ["ops", "steps", "kernels"]  # a reader never sees kernels without the point's other tables
    assert files == {"chrome": "_chrome/p000-big-gemm.json.gz", "ops": "_ops/p000-big-gemm.parquet",
                     "steps": "_steps/p000-big-gemm.parquet", "kernels": "p000-big-gemm.parquet"}
    run = tmp_path / w.run_id
    assert (run / files["chrome"]).read_bytes() == chrome and len(pd.read_parquet(run / files["kernels"])) == 2
    w.finish("complete")
    text = (run / "_manifest.json").read_text()
    m = json.loads(text)
    assert m["status"] == "complete" and m["finished_at"].endswith("+00:00") and m["created_at"].endswith("+00:00")
    assert text.startswith("{\n")  # indented, for reading by hand

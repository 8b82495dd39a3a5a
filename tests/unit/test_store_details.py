"""The store's details a mutation run found untested: the run id and manifest a RunWriter makes (its
retry loop and sub-folders), the writable-folder probe, reopening, the temporary file's cleanup,
Parquet compression, load_runs' and load_table's error texts and filters, run_ceilings per run,
and describe's line."""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
import types

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from wlprof import schema
from wlprof.ceilings import Ceilings
from wlprof.errors import InputError, SchemaVersionError, StoreError
from wlprof.store import atomic, runs
from wlprof.store.runs import MANIFEST, RunWriter, check_writable, write_point

# ---------------------------------------------------------------- RunWriter: id, folders, manifest


class _Clock(dt.datetime):
    """2026-01-02 03:04:05 UTC; a local (naive) now is another time, 09:09:09."""

    @classmethod
    def now(cls, tz=None):
        if tz is dt.timezone.utc:
            return dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)
        return dt.datetime(2026, 1, 2, 9, 9, 9)


def _fixed(monkeypatch, tokens):
    """A fixed clock and the given 2-byte tokens, one per call to secrets.token_hex; returns the calls."""
    calls = []
    it = iter(tokens)

    def token_hex(n):
        calls.append(n)
        return next(it) * n  # 'ab' * 2 -> 'abab': n bytes as 2n hex digits

    monkeypatch.setattr(runs, "dt", types.SimpleNamespace(datetime=_Clock, timezone=dt.timezone))
    monkeypatch.setattr(runs.secrets, "token_hex", token_hex)
    return calls


def test_a_run_id_is_the_slug_the_utc_time_and_four_hex_digits(tmp_path, monkeypatch):
    _fixed(monkeypatch, ["ab", "cd"])
    w = RunWriter(tmp_path / "new" / "traces", "gemm", {"sweep": "s"})  # parents created
    assert w.run_id == "gemm-20260102-030405-abab" and w.root == tmp_path / "new" / "traces"
    assert w.path == tmp_path / "new" / "traces" / w.run_id
    # a prefix names the run instead of the workload, slugged and cut to 24 characters
    w2 = RunWriter(tmp_path, "gemm", {}, prefix="Abcdefghijklmnopqrstuvwxyz!")
    assert w2.run_id == "abcdefghijklmnopqrstuvwx-20260102-030405-cdcd"


def test_the_run_folder_has_every_sub_folder_and_a_full_manifest(tmp_path, monkeypatch):
    _fixed(monkeypatch, ["ab"])
    w = RunWriter(tmp_path, "gemm", {"sweep": "s"})
    assert sorted(p.name for p in w.path.iterdir()) == ["_chrome", "_collectives", MANIFEST, "_ops", "_overlap",
                                                       "_steps"]
    m = json.loads((w.path / MANIFEST).read_text())
    assert m == {"sweep": "s", "schema_version": schema.SCHEMA_VERSION, "run_id": w.run_id, "workload": "gemm",
                 "status": "running", "created_at": "2026-01-02T03:04:05+00:00", "finished_at": None,
                 "pid": os.getpid(), "host": socket.gethostname(), "points": []}
    pts = [{"index": 0, "status": "pending"}]
    _fixed(monkeypatch, ["cd"])
    assert RunWriter(tmp_path, "gemm", {"points": pts}).manifest["points"] == pts  # kept when given


def test_a_taken_id_is_retried_and_a_hundred_tries_give_up(tmp_path, monkeypatch):
    _fixed(monkeypatch, ["aa", "aa", "bb", "cc", "dd"])
    first = RunWriter(tmp_path, "gemm", {})
    assert first.run_id.endswith("-aaaa")
    second = RunWriter(tmp_path, "gemm", {})  # aaaa is a published run: the next token
    assert second.run_id.endswith("-bbbb")
    (tmp_path / ".staging-gemm-20260102-030405-cccc").mkdir()  # another writer is staging cccc
    third = RunWriter(tmp_path, "gemm", {})
    assert third.run_id.endswith("-dddd") and list((tmp_path / ".staging-gemm-20260102-030405-cccc").iterdir()) == []
    calls = _fixed(monkeypatch, ["aa"] * 200)
    with pytest.raises(StoreError, match=f"^could not create a new run folder under {tmp_path}$"):
        RunWriter(tmp_path, "gemm", {})
    assert calls == [2] * 100


def test_reopen_marks_the_run_running_by_this_process_on_this_host(tmp_path):
    w = RunWriter(tmp_path, "gemm", {})
    w.manifest.update(status="incomplete", pid=1, host="elsewhere")
    del w.manifest["points"]  # a manifest without points: no point is done
    w.write_manifest()
    again = RunWriter.reopen(tmp_path, w.run_id)
    m = json.loads((again.path / MANIFEST).read_text())
    assert (m["status"], m["pid"], m["host"]) == ("running", os.getpid(), socket.gethostname())
    assert again.point_done(0) is False


# ---------------------------------------------------------------- check_writable


def test_check_writable_probes_the_folder_itself_under_a_hidden_name(tmp_path, monkeypatch):
    made = []
    real = runs.tempfile.mkstemp

    def spy(**kw):
        fd, name = real(**kw)
        made.append(name)
        return fd, name

    monkeypatch.setattr(runs.tempfile, "mkstemp", spy)
    (tmp_path / "t").mkdir()
    assert check_writable(tmp_path / "t") == tmp_path / "t"  # an existing folder
    assert len(made) == 1 and os.path.dirname(made[0]) == str(tmp_path / "t")
    assert os.path.basename(made[0]).startswith(".wlprof-write-probe-")  # hidden: no reader takes it for a run
    assert list((tmp_path / "t").iterdir()) == []


def test_check_writable_names_the_folder_it_refuses(tmp_path):
    (tmp_path / "f").write_text("")
    with pytest.raises(InputError) as err:
        check_writable(tmp_path / "f", "--traces")
    assert (err.value.arg, err.value.value) == ("--traces", str(tmp_path / "f"))
    with pytest.raises(InputError) as err:  # below a file: the folder cannot be made
        check_writable(tmp_path / "f" / "sub", "--traces")
    assert (err.value.arg, err.value.value) == ("--traces", str(tmp_path / "f" / "sub"))
    assert err.value.rule == "must be a folder wlprof can write into (Not a directory)"


# ---------------------------------------------------------------- atomic files


def test_a_temporary_whose_mode_cannot_be_set_is_removed(tmp_path, monkeypatch):
    def refuse(fd, mode):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(atomic.os, "fchmod", refuse)
    with pytest.raises(PermissionError):
        atomic.atomic_write_bytes(tmp_path / "a.json", b"{}")
    assert list(tmp_path.iterdir()) == []


def test_tables_are_written_zstd_compressed_but_the_smallest(tmp_path):
    """A table of more than SMALL_TABLE rows is zstd-compressed, but for the columns its frame lacks
    (all null); one of a few rows (a point's steps row) is not, its file no larger for that, and both
    read back as written."""
    n = atomic.SMALL_TABLE + 1
    for rows, codec in ((n, "ZSTD"), (3, "UNCOMPRESSED")):
        df = pd.DataFrame({"run_id": ["r"] * rows, "point": list(range(rows))})
        atomic.atomic_write_parquet(tmp_path / "k.parquet", df, "kernels")
        md = pq.ParquetFile(tmp_path / "k.parquet").metadata
        codecs = {md.schema.column(i).name: md.row_group(0).column(i).compression for i in range(md.num_columns)}
        assert {codecs["run_id"], codecs["point"]} == {codec}
        assert {c for name, c in codecs.items() if name not in df} == {"UNCOMPRESSED"} and len(codecs) > 100
        back = pd.read_parquet(tmp_path / "k.parquet")
        assert back.run_id.tolist() == ["r"] * rows and back.point.tolist() == list(range(rows))
    plain = (tmp_path / "k.parquet").stat().st_size
    with pq.ParquetWriter(tmp_path / "z.parquet", pq.read_schema(tmp_path / "k.parquet"), compression="zstd") as w:
        w.write_table(pq.read_table(tmp_path / "k.parquet"))
    assert plain <= (tmp_path / "z.parquet").stat().st_size


# ---------------------------------------------------------------- load_table


def _write(run_path, index, table, **cols):
    write_point(run_path, index, "v", {table: pd.DataFrame(cols)}, None)


def test_load_table_reads_traces_by_default_and_names_what_it_refuses(tmp_path, monkeypatch):
    from wlprof.store.tables import load_table

    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError) as err:
        load_table()
    assert (err.value.arg, err.value.rule, err.value.value) == (
        "path", "must be a traces folder or a run folder that exists", "traces")
    w = RunWriter(tmp_path / "traces", "gemm", {})
    _write(w.path, 0, "kernels", run_id=[w.run_id], point=[0])
    assert load_table().run_id.tolist() == [w.run_id]
    with pytest.raises(InputError) as err:
        load_table("traces", "steps", variant_x="a")
    assert (err.value.arg, err.value.rule, err.value.value) == ("variant_x", "is not a column of the steps table", "a")


def test_load_table_reads_files_without_wlprof_metadata_and_names_a_newer_one(tmp_path):
    from wlprof.store.tables import load_table

    w = RunWriter(tmp_path, "gemm", {})
    # a file another tool wrote: two columns, no wlprof schema version (read as "0"), no expert_counts
    pq.write_table(pa.table({"run_id": [w.run_id], "point": pa.array([3], pa.int32())}), w.path / "p003-x.parquet")
    df = load_table(tmp_path)
    assert df.point.tolist() == [3] and df.expert_counts.isna().all() and list(df.columns) == [
        c.name for c in schema.columns("kernels")]
    newer = pa.table({"run_id": ["r"]}).replace_schema_metadata({schema.METADATA_KEY: b"99.0"})
    pq.write_table(newer, w.path / "p004-x.parquet")
    with pytest.raises(SchemaVersionError, match=f"^{w.path / 'p004-x.parquet'} was written with schema 99.0"):
        load_table(tmp_path)


def test_an_old_file_missing_columns_gets_them_as_typed_nulls(tmp_path):
    from wlprof.store.tables import load_table

    w = RunWriter(tmp_path, "moe", {})
    old = pa.table({"run_id": [w.run_id] * 2, "point": pa.array([0, 1], pa.int32()),
                    "expert_counts": ["[2,1]", None]})  # a row without counts: null, not parsed
    pq.write_table(old.replace_schema_metadata({schema.METADATA_KEY: b"1.3"}), w.path / "p000-v.parquet")
    df = load_table(tmp_path)
    assert list(df.expert_counts.iloc[0]) == [2, 1] and pd.isna(df.dur_us.iloc[0])
    assert df.expert_counts.iloc[1] is None
    assert df.dur_us.dtype == "float64" and list(df.columns) == [c.name for c in schema.columns("kernels")]


# ---------------------------------------------------------------- load_runs


def _store(tmp_path):
    """Runs: A (gemm on dev0: steps ok, failed and without a status; kernels of point 0), B (mlp on dev1:
    steps only), C (ingest on dev0), D (no point)."""
    ids = {}
    for key, workload in (("A", "gemm"), ("B", "mlp"), ("C", "ingest"), ("D", "gemm")):
        ids[key] = RunWriter(tmp_path, workload, {}).run_id
    a = tmp_path / ids["A"]
    steps = pd.DataFrame({"run_id": ids["A"], "workload": "gemm", "point": [0, 1, 2], "device_name": "dev0",
                          "status": ["ok", "failed", None]})
    write_point(a, 0, "v", {"steps": steps, "kernels": steps.iloc[:1].drop(columns="status")}, None)
    _write(tmp_path / ids["B"], 0, "steps", run_id=[ids["B"]], workload=["mlp"], point=[0], device_name=["dev1"],
           status=["ok"])
    _write(tmp_path / ids["C"], 0, "steps", run_id=[ids["C"]], workload=["ingest"], point=[0], device_name=["dev0"],
           status=["ok"])
    return ids


def test_load_runs_keeps_finished_points_and_takes_ingest_as_a_workload(tmp_path):
    from wlprof.store.selection import load_runs

    ids = _store(tmp_path)
    assert load_runs(tmp_path, "steps", [ids["A"]]).point.tolist() == [0, 2]  # failed dropped, no status kept
    assert load_runs(tmp_path, "kernels", [ids["A"]]).point.tolist() == [0]  # a table without status
    assert load_runs(tmp_path, "steps", workload="ingest").run_id.tolist() == [ids["C"]]


def test_load_runs_error_texts(tmp_path):
    from wlprof import workloads
    from wlprof.store.selection import load_runs

    ids = _store(tmp_path)

    def err(*a, **kw):
        with pytest.raises(InputError) as e:
            load_runs(tmp_path, *a, **kw)
        return e.value.arg, e.value.rule, e.value.value, e.value.hint

    unknown = ids["A"][:-1] + "x"
    assert err("steps", [unknown]) == ("RUNS", f"must name runs in {tmp_path}/ (see `wlprof ls --traces {tmp_path}`)",
                                       unknown, f"did you mean {ids['A']!r}?")
    names = sorted({*workloads.names(), "ingest"})
    assert err("steps", workload="gemmm") == ("--workload", f"must be one of {', '.join(names)}", "gemmm",
                                              "did you mean 'gemm'?")
    no_rows = ("must select runs with ops rows; these have none (a trace without CPU ops records no op calls, one "
               "without GPU kernels no kernel rows)")
    assert err("ops", [ids["B"]]) == ("RUNS", no_rows, f"runs [{ids['B']!r}]", None)  # B has steps, no ops
    finished = "must select at least one finished sweep point"
    assert err("ops", [ids["D"]]) == ("RUNS", finished, f"runs [{ids['D']!r}]", None)  # D has no steps either
    assert err("steps", [ids["D"]]) == ("RUNS", finished, f"runs [{ids['D']!r}]", None)
    # a run whose only point failed has steps rows but no finished one: the steps table names the point,
    # not missing rows (the rows-of-another-table message is for tables other than steps)
    e = RunWriter(tmp_path, "gemm", {}).run_id
    _write(tmp_path / e, 0, "steps", run_id=[e], workload=["gemm"], point=[0], device_name=["dev0"], status=["failed"])
    assert err("steps", [e]) == ("RUNS", finished, f"runs [{e!r}]", None)
    assert err("steps", [ids["A"]], workload="mlp") == ("RUNS", finished, f"runs [{ids['A']!r}] with workload mlp",
                                                        None)
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError) as e:
        load_runs(tmp_path / "empty", "steps", arg="--runs")
    assert (e.value.arg, e.value.value) == ("--runs", f"the runs in {tmp_path / 'empty'}/")
    assert err("steps", [ids["A"], ids["B"]]) == (
        "RUNS", "must come from one device, or pass --allow-mixed-devices", ["dev0", "dev1"],
        f"to keep to one device, name its runs as RUNS (dev0: {ids['A']}; dev1: {ids['B']})")


# ---------------------------------------------------------------- run_ceilings, describe

GPU = Ceilings("cuda", "GPU Y", {"bfloat16": 790.0, "float32": 50.7, "tf32": 418.0}, 50.7, 4272.0, "measured",
               "2026-12-01T08:00:00+00:00", "", bandwidth_gbps={"hbm_read": 4490.0, "hbm_copy": 4272.0})
CPU_OLD = Ceilings("cpu", "CPU X", {"float32": 1.0}, 0.5, 20.0, "measured", "2026-11-01T00:00:00+00:00", "")
CPU_NEW = Ceilings("cpu", "CPU X", {"float32": 1.0}, 0.5, 40.0, "measured", "2026-12-01T00:00:00+00:00", "")


def test_run_ceilings_per_run_device_host_and_cache(tmp_path, monkeypatch):
    from wlprof import ceilings as C
    from wlprof.store.selection import ceilings_of, run_ceilings

    monkeypatch.setenv("WLPROF_CACHE_DIR", str(tmp_path / "cache"))
    C.save(GPU)
    C.save(CPU_NEW)
    cpu = {"device": {"type": "cpu", "name": "CPU X"}, "ceilings": CPU_OLD.to_dict()}
    manifests = {
        "cpu-here": cpu,
        "cpu-there": {**cpu, "host": "elsewhere"},  # another host's CPU of this name is another machine
        "cuda-there": {"device": {"type": "cuda", "name": "GPU Y"}, "host": "elsewhere"},
        "ceilings-only": {"ceilings": GPU.to_dict()},  # the device read from the ceilings
        "renamed": {"device": {"type": "cuda", "name": "GPU Y (rev 2)"}, "ceilings": GPU.to_dict()},
        "nothing": {},
        "name-only": {"device": {"name": "GPU Y"}},  # no device type: nothing to compare with
        # ceilings that do not parse (no device_name, rates): none, compared with nothing
        "unreadable": {"device": {"type": "cuda", "name": "GPU Y"}, "ceilings": {"device_type": "cuda"}},
    }
    ids = {}
    for k, m in manifests.items():
        w = RunWriter(tmp_path / "t", "gemm", {})
        w.manifest.update(m)
        w.write_manifest()
        ids[k] = w.run_id
    rc = run_ceilings(tmp_path / "t", list(ids.values()))
    got = {k: rc[i] for k, i in ids.items()}
    assert all(got[k].run_id == ids[k] for k in ids)
    here = got["cpu-here"]
    assert (here.device_type, here.device_name, here.ceilings, here.current) == ("cpu", "CPU X", CPU_OLD, CPU_NEW)
    assert here.stale  # the cache's copy roof is twice the run's
    there = got["cpu-there"]
    assert (there.device_type, there.ceilings, there.current, there.stale) == ("cpu", CPU_OLD, None, [])
    cuda = got["cuda-there"]
    assert (cuda.device_type, cuda.device_name, cuda.ceilings, cuda.current, cuda.stale) == (
        "cuda", "GPU Y", None, GPU, [])
    only = got["ceilings-only"]
    assert (only.device_type, only.device_name, only.ceilings, only.current, only.stale) == (
        "cuda", "GPU Y", GPU, GPU, [])
    # the cache is looked up by the ceilings' own device name
    assert (got["renamed"].device_name, got["renamed"].current) == ("GPU Y (rev 2)", GPU)
    nothing = got["nothing"]
    assert (nothing.device_type, nothing.device_name, nothing.ceilings, nothing.current) == (None, None, None, None)
    assert nothing.describe() == "no ceilings (no roofline placement)"
    assert (got["name-only"].device_type, got["name-only"].current) == (None, None)
    bad = got["unreadable"]
    assert (bad.device_type, bad.device_name, bad.ceilings, bad.current, bad.stale) == ("cuda", "GPU Y", None, GPU, [])
    assert bad.describe() == "no ceilings (no roofline placement)"
    assert ceilings_of(tmp_path / "t", ids["nothing"]) == {}


def test_describe_is_one_line_of_roofs_and_rates():
    from wlprof.store.selection import RunCeilings, describe

    line = ("measured 2026-12-01T08:00:00+00:00 (format 2): hbm_read 4,490, hbm_copy 4,272 GB/s; "
            "bfloat16 790.0, float32 50.7, tf32 418.0 TFLOP/s; vector 50.7")
    assert describe(GPU) == line
    assert RunCeilings("r", "cuda", "GPU Y", GPU, None).describe() == line
    migrated = Ceilings.from_dict({k: v for k, v in GPU.to_dict().items() if k not in ("format_version",
                                                                                     "bandwidth_gbps")})
    assert describe(migrated).startswith("measured 2026-12-01T08:00:00+00:00 (format 1, migrated): hbm_copy 4,272 GB/s")

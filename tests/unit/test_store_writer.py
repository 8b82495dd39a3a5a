"""The run writer's lifecycle beyond a plain run: staging and abort, reopening to resume, which
points count as done, the raw trace kept beside the enriched one; and the writable-folder check."""

from __future__ import annotations

import gzip
import json
import os

import pandas as pd
import pytest

from wlprof.errors import InputError
from wlprof.store.runs import MANIFEST, RunWriter, check_writable, list_runs


def _point(writer, i, variant="v"):
    tables = {t: pd.DataFrame({"run_id": [writer.run_id], "point": [i]}) for t in ("kernels", "ops", "steps")}
    return writer.write_point(i, variant, tables, None)


def test_a_staged_run_is_invisible_until_finished_and_abort_leaves_nothing(tmp_path):
    w = RunWriter(tmp_path, "ingest", {"points": []}, staged=True)
    assert w.path.name == f".staging-{w.run_id}" and (w.path / MANIFEST).is_file()
    assert list_runs(tmp_path) == []  # hidden while staged
    w.abort()
    assert not w.path.exists() and list(tmp_path.iterdir()) == []
    w = RunWriter(tmp_path, "ingest", {"points": []}, staged=True)
    w.finish("complete")
    assert w.path == tmp_path / w.run_id and [m["run_id"] for m in list_runs(tmp_path)] == [w.run_id]
    assert json.loads((w.path / MANIFEST).read_text())["status"] == "complete"
    w.abort()  # a published run is never removed by abort
    assert w.path.is_dir()


@pytest.mark.parametrize("staged", [False, True])
def test_a_run_whose_manifest_cannot_be_written_leaves_nothing(tmp_path, staged):
    """A manifest JSON cannot hold (an integer past 64 bits, as a capture setting of 10**23 warm-up calls
    was) fails the writer before it starts: neither the run nor its hidden staging folder is left."""
    with pytest.raises(TypeError):
        RunWriter(tmp_path, "gemm", {"capture": {"warmup": 10**23}, "points": []}, staged=staged)
    assert list(tmp_path.iterdir()) == []


def test_a_reopened_run_knows_which_points_are_done(tmp_path):
    w = RunWriter(tmp_path, "gemm", {"points": [{"index": i, "status": "pending"} for i in range(3)]})
    w.manifest["points"][0].update(status="ok", files=_point(w, 0))
    w.manifest["points"][1].update(status="ok", files=_point(w, 1))
    w.write_manifest()
    os.unlink(w.path / w.manifest["points"][1]["files"]["ops"])  # marked ok, a file gone: not done
    again = RunWriter.reopen(tmp_path, w.run_id)
    assert [again.point_done(i) for i in range(4)] == [True, False, False, False]
    m = json.loads((again.path / MANIFEST).read_text())
    assert m["status"] == "running" and m["pid"] == os.getpid() and m["resumed_at"]
    with pytest.raises(InputError, match="RUN_ID must be a run id"):
        RunWriter.reopen(tmp_path, "../elsewhere")


def test_the_raw_trace_is_kept_gzipped_beside_the_enriched_one(tmp_path):
    w = RunWriter(tmp_path, "gemm", {"points": []})
    raw = tmp_path / "trace.json"
    raw.write_text('{"traceEvents": []}')
    rel = w.write_raw_trace(2, "balanced 8x8x8", raw)
    assert rel == "_chrome/p002-balanced-8x8x8.raw.json.gz"
    assert gzip.decompress((w.path / rel).read_bytes()) == raw.read_bytes()


def test_a_traces_folder_is_created_and_a_file_in_its_place_refused(tmp_path):
    made = check_writable(tmp_path / "a" / "b")
    assert made == tmp_path / "a" / "b" and made.is_dir() and list(made.iterdir()) == []  # no probe left
    (tmp_path / "f").write_text("x")
    with pytest.raises(InputError) as err:
        check_writable(tmp_path / "f", "--out")
    assert "--out must be a folder wlprof can write traces into, not a file" in err.value.message("--")
    with pytest.raises(InputError, match="must be a folder wlprof can write into"):
        check_writable(tmp_path / "f" / "below")  # under a file: mkdir fails

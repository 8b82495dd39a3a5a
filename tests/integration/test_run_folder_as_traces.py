"""A run's own folder given where the traces folder (the folder of runs) is wanted."""

from __future__ import annotations

import shutil

import pytest
from conftest import FIXTURES, files_under

RUN = FIXTURES / "cpu" / "mlp-20261129-101232-e8e6"


@pytest.fixture()
def run_folder(tmp_path):
    traces = tmp_path / "traces"
    traces.mkdir()
    shutil.copytree(RUN, traces / RUN.name)
    return traces / RUN.name


@pytest.mark.parametrize("command", [
    ("ls",), ("show", RUN.name), ("report",), ("compare", RUN.name, RUN.name),
    ("run", "gemm", "--shapes", "8x8x8", "--device", "cpu", "--steps", "1", "--warmup", "1", "--reps", "1"),
    ("ingest", RUN / "_chrome" / "p000-batch-4.raw.json.gz"),
])
def test_a_run_folder_is_refused_as_the_traces_folder_naming_its_parent(run_folder, cli, command):
    before = files_under(run_folder)
    res = cli(*command, "-t", run_folder)
    assert res.exit_code == 2, res.output
    # before: `ls` said "no runs in .../ yet" (exit 0); `run` and `ingest` wrote a run nested inside this
    # one, which `ls` of the real traces folder never listed and pandas.read_parquet read with it
    assert f"--traces must be a traces folder (one sub-folder per run), not the folder of run {RUN.name}" \
        in res.output, res.output
    assert f"pass the folder that holds it: --traces {run_folder.parent}" in res.output, res.output
    assert files_under(run_folder) == before


def test_a_run_folder_given_as_the_run_id_names_its_id_and_traces_folder(run_folder, cli):
    res = cli("show", run_folder, "-t", run_folder.parent)
    assert res.exit_code == 2, res.output
    assert f"its id is {RUN.name}, in the traces folder {run_folder.parent}" in res.output, res.output


def test_ls_names_a_run_whose_manifest_cannot_be_read_instead_of_leaving_it_out_unsaid(tmp_path, cli):
    traces = tmp_path / "traces"
    for name in ("mlp-20261129-101232-e8e6", "mlp-20261129-101232-cut0"):
        shutil.copytree(RUN, traces / name)
    cut = traces / "mlp-20261129-101232-cut0" / "_manifest.json"
    cut.write_bytes(cut.read_bytes()[:100])  # a manifest cut short (a full disk, a hand edit)
    res = cli("ls", "-t", traces, "--wide")
    assert res.exit_code == 0, res.output
    # it listed the other run alone and said nothing of this one, while `report` failed on its manifest
    assert f"not listed: {cut} is not valid JSON" in res.output, res.output
    assert "mlp-20261129-101232-e8e6" in res.output
    only_cut = tmp_path / "only"
    shutil.copytree(traces / "mlp-20261129-101232-cut0", only_cut / "mlp-20261129-101232-cut0")
    res = cli("ls", "-t", only_cut)
    assert res.exit_code == 0 and f"no readable runs in {only_cut}/ yet" in res.output, res.output

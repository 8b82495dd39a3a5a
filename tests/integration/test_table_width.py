"""At 100 columns nothing is cut: every command's tables fit (columns dropped by priority, --wide shows them),
and `show` reads an ingested run (no timings, no ceilings, maybe no kernel rows) without nan or a failure."""

from __future__ import annotations

import re

import pyarrow.parquet as pq
import pytest
from conftest import FIXTURES, copy_h200_runs, h200_run
from typer.testing import CliRunner

from wlprof.cli.main import app

runner = CliRunner()


def invoke(*args, width=100):
    return runner.invoke(app, [str(a) for a in args], env={"COLUMNS": str(width)})


def check_fits(output: str, width: int = 100) -> None:
    lines = output.splitlines()
    assert max(len(line) for line in lines) <= width, max(lines, key=len)
    # no number is cut (the "3,09…"); a long kernel name keeps the shortener's own "…" at 70 characters
    cut = re.compile(r"(?<![\w:])[\d,.]+%?… [│┃]")  # a right-justified number column ends in "… │" when cut
    assert not cut.search(output), [line for line in lines if cut.search(line)]
    assert "nan" not in output.lower().replace("nanoseconds", "")


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    return copy_h200_runs(tmp_path_factory.mktemp("traces"))


@pytest.mark.slow
def test_report_show_compare_predict_ls_fit_100_columns(traces):
    moe, gnn = h200_run("moe").name, h200_run("gnn").name
    for args in (["report"], ["show", moe], ["show", gnn, "--top", "0"], ["ls"],
                 ["compare", f"{moe}:concentrated / grouped", f"{moe}:dispersed / grouped"],
                 ["predict", "--train", f"{h200_run('gemm').name},{h200_run('mlp').name}", "--test", moe]):
        res = invoke(*args, "--traces", traces)
        assert res.exit_code == 0, res.output
        check_fits(res.output)
    narrow, wide = invoke("show", moe, "--traces", traces), invoke("show", moe, "--traces", traces, "--wide")
    assert "more column" in narrow.output and "--wide" in narrow.output
    assert "more column" not in wide.output and "FLOP/B" in wide.output
    assert "TFLOP/s" in narrow.output  # a GPU's rates


def test_a_cpu_run_fits_and_reads_gflops(tmp_path, cpu_ceilings):
    res = invoke("run", "gemm", "--shapes", "64x64x64,8x64x256", "--steps", "1", "--warmup", "1", "--reps", "3",
                 "-q", "--device", "cpu", "--traces", tmp_path)
    assert res.exit_code == 0, res.output
    check_fits(res.output)
    assert "GFLOP/s" in res.output and "TFLOP/s" not in res.output.split("ceilings:")[0]


def test_show_an_ingested_run(tmp_path):
    res = invoke("ingest", FIXTURES / "h200_probe_ops.json.gz", "--traces", tmp_path, "-q")
    assert res.exit_code == 0, res.output
    check_fits(res.output)
    run = next(p for p in tmp_path.iterdir() if p.is_dir())
    res = invoke("show", run.name, "--traces", tmp_path)
    assert res.exit_code == 0, res.output
    check_fits(res.output)
    assert "copy 0 GB/s" not in res.output and "(None)" not in res.output
    assert "no measured ceilings" in res.output
    # the same run with no kernel rows at all: a sentence, not a failure
    for f in run.glob("p*.parquet"):
        t = pq.read_table(f)
        pq.write_table(t.slice(0, 0), f)
    res = invoke("show", run.name, "--traces", tmp_path)
    assert res.exit_code == 0, res.output
    assert "no kernel rows" in res.output


def test_wide_tables_keep_every_column_whole_in_a_narrow_terminal(traces):
    # --wide in an 80-column pipe: the table is wider than 80 characters rather than squeezing the op and
    # kernel columns to nothing; every column the narrow table leaves out is there, names whole
    moe = h200_run("moe").name
    narrow = invoke("show", moe, "--top", "3", "--traces", traces, width=80)
    assert narrow.exit_code == 0, narrow.output
    left_out = re.search(r"more columns? with --wide: (.+)", narrow.output).group(1).split(", ")
    res = invoke("show", moe, "--top", "3", "--wide", "--traces", traces, width=80)
    assert res.exit_code == 0, res.output
    assert "with --wide" not in res.output
    rows = [line for line in res.output.splitlines() if line.startswith("│ aten::")]
    assert rows and max(len(line) for line in res.output.splitlines()) > 80
    header = " ".join(line for line in res.output.splitlines() if line.startswith("┃"))
    for name in left_out:
        assert all(word in header for word in name.split()), name
    assert all("…" not in line.split("│")[1] for line in rows)  # the op names are whole

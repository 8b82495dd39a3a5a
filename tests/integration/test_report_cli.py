"""wlprof report / roofline / compare / predict on committed H200 runs, and their refusals."""

from __future__ import annotations

import shutil

import pytest
from conftest import copy_h200_runs, h200_run


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    """The H200 fixture runs in a traces folder of their own."""
    return copy_h200_runs(tmp_path_factory.mktemp("traces"))


@pytest.mark.slow
def test_report_writes_markdown_and_figures(traces, tmp_path, cli):
    out = tmp_path / "report"
    res = cli("report", "--traces", traces, "--out", out)
    assert res.exit_code == 0, res.output
    text = (out / "report.md").read_text()
    assert "NVIDIA H200" in text and "How well FLOPs explain latency" in text
    for fam in ("GEMM shapes", "MLP (small batch)", "MoE (dispersed)", "GNN (csr)"):
        assert fam in text
    for png in ("roofline.png", "latency_vs_flops.png", "tflops_vs_batch.png", "phases_moe.png", "backends_gnn.png",
                "timings.png"):
        assert (out / png).stat().st_size > 10_000, png
    assert "![roofline.png](roofline.png)" in text


@pytest.mark.slow
def test_roofline_and_compare(traces, tmp_path, cli):
    moe = h200_run("moe").name
    png = tmp_path / "r.png"
    res = cli("roofline", moe, "--traces", traces, "-o", png)
    assert res.exit_code == 0 and png.stat().st_size > 10_000, res.output
    res = cli("compare", f"{moe}:concentrated / grouped", f"{moe}:dispersed / grouped", "--traces", traces)
    assert res.exit_code == 0, res.output
    assert "moe/expert" in res.output and "by op category" in res.output and "latency_us" in res.output
    res = cli("compare", moe, f"{moe}:dispersed / grouped", "--traces", traces)
    assert res.exit_code == 2 and "add ':VARIANT'" in res.output


def test_compare_top_zero_lists_every_kernel_row(traces, cli):
    # --top 0 printed empty tables (pandas' head(0)); it lists every row, as `show --top 0` does
    moe = h200_run("moe").name
    args = ("compare", f"{moe}:concentrated / grouped", f"{moe}:dispersed / grouped", "--traces", traces)
    few, every = cli(*args, "--top", "1"), cli(*args, "--top", "0")
    assert few.exit_code == 0 and every.exit_code == 0, every.output
    assert every.output.count("moe/") > few.output.count("moe/") >= 1
    assert "moe/router" in every.output and "moe/combine" in every.output


def test_compare_says_which_statistic_each_number_is(traces, cli):
    # kernel_us (a median over the profiled steps) stood beside per-category means, neither named
    moe = h200_run("moe").name
    res = cli("compare", f"{moe}:concentrated / grouped", f"{moe}:dispersed / grouped", "--traces", traces, "--wide")
    assert res.exit_code == 0, res.output
    lines = {line.split("│")[1].strip(): line for line in res.output.splitlines() if line.startswith("│")}
    assert "median of single calls" in lines["latency_us"] and "median of profiled steps" in lines["kernel_us"]
    assert "mean of profiled steps" in lines["flops"]
    assert "kernel time below: the mean of profiled steps (their sum can differ from kernel_us, a median)" \
        in res.output
    assert res.output.count("A mean") == 3 * 2  # µs/step and kernels in each of the three tables


@pytest.mark.slow
def test_predict_scores_the_ladder_on_unseen_runs(traces, cli):
    tr = f"{h200_run('gemm').name},{h200_run('mlp').name}"
    res = cli("predict", "--train", tr, "--test", h200_run("moe").name, "--traces", traces)
    assert res.exit_code == 0, res.output
    for model in ("L0 peak", "L0 fitted", "L1 shape", "L2 roofline", "L2 fitted", "L3 profile", "noise floor"):
        assert model in res.output
    # which source answered L3: the three shares are printed and add up to the whole
    import re

    line = next(x for x in res.output.splitlines() if x.startswith("L3 answered from:"))
    shares = dict((k, int(v)) for k, v in re.findall(r"(same point|same call|nearest|regression) (\d+)%", line))
    assert set(shares) == {"same point", "same call", "nearest", "regression"}
    assert 98 <= sum(shares.values()) <= 102  # each rounded to a whole percent
    # no MoE run in --train: said, with the training runs' workloads
    assert "note: --train holds no run of moe (it holds gemm, mlp)" in " ".join(res.output.split())
    res = cli("predict", "--train", tr, "--test", h200_run("gemm").name, "--traces", traces)
    assert res.exit_code == 2 and "--test must not overlap --train" in res.output


@pytest.mark.slow
def test_predict_says_one_run_not_1_runs(traces, cli):
    res = cli("predict", "--train", h200_run("mlp").name, "--test", h200_run("moe").name, "--traces", traces)
    assert res.exit_code == 0, res.output
    # was: 'trained on 12 op calls from 1 runs; ...'
    assert "trained on 12 op calls from 1 run; scored on 320 op calls (" in res.output


@pytest.mark.slow
def test_refusals_name_the_argument(traces, tmp_path, cpu_ceilings, cli):
    res = cli("report", "nosuch-run", "--traces", traces)
    assert res.exit_code == 2 and "RUNS must name runs" in res.output and "nosuch-run" in res.output
    empty = tmp_path / "empty"
    empty.mkdir()
    res = cli("report", "--traces", empty)
    assert res.exit_code == 2 and "RUNS must select at least one finished sweep point" in res.output
    res = cli("report", "--traces", traces, "--out", traces)
    assert res.exit_code == 2 and "--out must not be the traces folder" in res.output
    # a CPU run beside H200 runs: mixing devices needs saying so
    mixed = tmp_path / "mixed"
    shutil.copytree(traces, mixed)
    res = cli("run", "gemm", "--shapes", "8x8x8", "--traces", mixed, "--steps", "1", "--warmup", "1", "--reps", "2", "-q")
    assert res.exit_code == 0, res.output
    res = cli("report", "--traces", mixed)
    assert res.exit_code == 2 and "--allow-mixed-devices" in res.output and "NVIDIA H200" in res.output
    assert cli("report", "--traces", mixed, "--allow-mixed-devices").exit_code == 0


@pytest.mark.slow
def test_predict_fits_on_an_offline_profile_in_its_own_folder(traces, tmp_path, cli):
    offline = tmp_path / "offline"
    offline.mkdir()
    for kind in ("gemm", "mlp"):
        shutil.copytree(traces / h200_run(kind).name, offline / h200_run(kind).name)
    # no --train: every run of --train-traces is the profile
    res = cli("predict", "--train-traces", offline, "--test", h200_run("moe").name, "--traces", traces,
                 "--out", tmp_path / "scores.md")
    assert res.exit_code == 0, res.output
    assert "trained on" in res.output and "from 2 runs" in res.output
    text = (tmp_path / "scores.md").read_text()
    assert h200_run("gemm").name in text and "| L3 profile | all |" in text
    empty = tmp_path / "empty"
    empty.mkdir()
    res = cli("predict", "--train-traces", empty, "--test", h200_run("moe").name, "--traces", traces)
    assert res.exit_code == 2 and "--train-traces must hold at least one run to fit on" in res.output
    # without --train and --train-traces every run of --traces is training, the test runs too
    res = cli("predict", "--test", h200_run("moe").name, "--traces", traces)
    assert res.exit_code == 2 and "--test must not overlap --train" in res.output


@pytest.mark.slow
def test_report_and_roofline_of_an_ingested_trace_without_ceilings(tmp_path, cli):
    # an ingested H200 trace on a machine that never calibrated an H200: the roofline is drawn without roofs
    from conftest import FIXTURES

    from wlprof.ingest import ingest

    run = ingest(FIXTURES / "h200_probe_ops.json.gz", tmp_path / "t", jobs=1)
    res = cli("report", run.run_id, "--traces", tmp_path / "t", "--out", tmp_path / "rep")
    assert res.exit_code == 0, res.output
    assert (tmp_path / "rep" / "roofline.png").stat().st_size > 0
    assert "no ceilings" in (tmp_path / "rep" / "report.md").read_text()
    res = cli("roofline", run.run_id, "--traces", tmp_path / "t", "-o", tmp_path / "r.png")
    assert res.exit_code == 0, res.output
    assert (tmp_path / "r.png").stat().st_size > 0


def test_an_unwritable_out_is_refused_before_any_table(tmp_path, cli):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    res = cli("report", "--traces", tmp_path, "--out", blocker / "sub")
    assert res.exit_code == 2 and res.output.startswith("error: --out must be a folder wlprof can write"), res.output


def test_a_trace_without_cpu_ops_is_refused_by_roofline_for_what_it_lacks(tmp_path, cli):
    # a GPU-only trace (kernels, no cpu_op): it ingests, its kernels are kept, but it has no op calls to place
    import json

    events = [{"ph": "X", "cat": "kernel", "name": "void k<float>()", "pid": 0, "tid": 7, "ts": 10 + 20 * i,
               "dur": 5, "args": {"device": 0, "stream": 7, "correlation": i + 1}} for i in range(3)]
    trace = tmp_path / "gpu_only.json"
    trace.write_text(json.dumps({"traceEvents": events, "deviceProperties": [{"id": 0, "name": "NVIDIA H200"}]}))
    res = cli("ingest", trace, "--traces", tmp_path / "t", "-q")
    assert res.exit_code == 0, res.output
    run = next(p.name for p in (tmp_path / "t").iterdir() if p.is_dir() and not p.name.startswith((".", "_")))
    res = cli("roofline", run, "--traces", tmp_path / "t", "-o", tmp_path / "r.png")
    assert res.exit_code == 2 and "must select runs with ops rows; these have none" in res.output, res.output


def test_report_of_ingested_runs_says_why_the_latency_spectrum_is_empty(tmp_path, cli):
    # an ingested trace has kernel time but no single-call latency: the latency spectrum printed a header
    # with no row; it says why, in the terminal, report.md and index.html, and the kernel spectrum stays
    from conftest import FIXTURES

    from wlprof.analysis.report import EMPTY_SPECTRUM
    from wlprof.ingest import ingest

    run = ingest(FIXTURES / "h200_probe_ops.json.gz", tmp_path / "t", jobs=1)
    res = cli("report", run.run_id, "--traces", tmp_path / "t", "--out", tmp_path / "rep")
    assert res.exit_code == 0, res.output
    flat = " ".join(res.output.split())
    assert f"(one call, as a caller sees it): {EMPTY_SPECTRUM}" in flat, res.output
    assert "... and kernel time per step" in res.output and "ingest" in res.output
    md = (tmp_path / "rep" / "report.md").read_text()
    assert md.count(EMPTY_SPECTRUM) == 1 and "Kernel time per step:" in md
    assert "not one call&#x27;s latency" in (tmp_path / "rep" / "index.html").read_text()


def test_compare_of_cpu_runs_lists_ops_once_not_as_their_own_kernels(cli):
    # on a CPU each row is an op: the table named 'by kernel' repeated it ('aten::addmm │ aten::addmm')
    from conftest import FIXTURES

    run = "mlp-20261129-101232-e8e6"
    res = cli("compare", f"{run}:batch 4", f"{run}:batch 4", "--traces", FIXTURES / "cpu", "--wide")
    assert res.exit_code == 0, res.output
    lines = [line.rstrip() for line in res.output.splitlines()]
    assert "by op" in lines and "by kernel" not in lines
    rows = [[c.strip() for c in line.split("│")[1:-1]] for line in lines[lines.index("by op"):]
            if line.startswith("│")]
    assert [r[0] for r in rows] == ["aten::addmm", "aten::copy_", "aten::gelu"]
    assert all(r[1] == r[2] and r[3] == "0" for r in rows), rows  # A, B, B - A


def test_compare_accepts_a_points_file_name_form(traces, cli):
    # 'dispersed-grouped' (the point's file-name form) names 'dispersed / grouped'
    moe = h200_run("moe").name
    named = cli("compare", f"{moe}:concentrated / grouped", f"{moe}:dispersed / grouped", "--traces", traces)
    slugged = cli("compare", f"{moe}:concentrated-grouped", f"{moe}:dispersed-grouped", "--traces", traces)
    assert named.exit_code == 0 and slugged.exit_code == 0, slugged.output
    assert f"{moe}:dispersed / grouped" in slugged.output
    assert named.output == slugged.output
    bad = cli("compare", f"{moe}:dispersed-groupd", f"{moe}:dispersed-grouped", "--traces", traces)
    assert bad.exit_code == 2 and "dispersed-groupd" in bad.output


def test_a_report_into_an_earlier_reports_folder_removes_only_that_reports_figures(traces, tmp_path, cli):
    out = tmp_path / "report"
    res = cli("report", h200_run("moe").name, "--traces", traces, "--out", out)
    assert res.exit_code == 0, res.output
    assert (out / "phases_moe.png").exists()
    (out / "mine.png").write_bytes(b"a figure of the user's")  # not a report's: kept
    res = cli("report", h200_run("gemm").name, "--traces", traces, "--out", out)
    assert res.exit_code == 0, res.output
    listed = {line[2:].split("]")[0] for line in (out / "report.md").read_text().splitlines() if line.startswith("![")}
    assert "phases_moe.png" not in listed
    # the MoE report's figure is gone (it named it 'wrote ... figures: ... phases_moe.png' though only the
    # gemm report's were written); the user's file stays
    assert sorted(p.name for p in out.glob("*.png")) == sorted(listed | {"mine.png"})
    said = " ".join(res.output.split())
    assert f"and {len(listed)} figures: {', '.join(sorted(listed))}" in said, said

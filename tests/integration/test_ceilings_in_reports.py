"""Ceilings across runs in `wlprof report`, `wlprof roofline` and `wlprof show`: runs placed against different
ceilings are said to be, a run whose ceilings are older and lower than this machine's current calibration is
ceiling_stale, `--ceilings` re-places, and no fraction above 1 is shown without its reason."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from wlprof import ceilings
from wlprof.ceilings import Ceilings, Measurement
from wlprof.cli.main import app

H200 = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "2026-11-29-h200" / "traces"
GEMM, ELEM = "gemm-20261129-093103-9046", "elementwise-20261129-093127-1492"


def _m(v, s=0.01):
    return Measurement(v, "GB/s", "constructed", p10=v * (1 - s), p90=v * (1 + s))


NEW = Ceilings("cuda", "NVIDIA H200", {"bfloat16": 790.0, "float16": 773.0, "float32": 50.7, "tf32": 418.0}, 50.7,
               4272.0, "measured", "2026-12-01T08:00:00+00:00", "",
               bandwidth_gbps={"hbm_read": 4500.0, "hbm_write": 4617.0, "hbm_copy": 4272.0, "l2": 9000.0},
               cache_bytes={"l2": 62914560},
               measurements={"hbm_read": _m(4500.0), "hbm_write": _m(4617.0), "hbm_copy": _m(4272.0), "l2": _m(9000.0),
                             "matrix:bfloat16": _m(790.0, 0.02)})


@pytest.fixture
def traces(tmp_path):
    """Two committed H200 runs (schema 2.0, format-1 ceilings); the second's ceilings edited to differ."""
    root = tmp_path / "traces"
    for run in (GEMM, ELEM):
        shutil.copytree(H200 / run, root / run, ignore=shutil.ignore_patterns("_chrome"))
    m = json.loads((root / ELEM / "_manifest.json").read_text())
    m["ceilings"]["copy_gbps"] = 4000.0
    m["ceilings"]["measured_at"] = "2026-11-29T09:40:00+00:00"
    (root / ELEM / "_manifest.json").write_text(json.dumps(m))
    return root


def _invoke(*args):
    res = CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})  # findings unwrapped
    assert res.exit_code == 0, res.output
    return res.output


@pytest.mark.slow
def test_report_says_the_runs_used_different_ceilings_and_names_every_reason(traces, tmp_path):
    out = _invoke("report", GEMM, ELEM, "--traces", traces, "--out", tmp_path / "rep")
    md = (tmp_path / "rep" / "report.md").read_text()
    for text in (out, md):
        assert "mixed ceilings: these 2 runs were placed against 2 different sets of ceilings" in text
        assert "hbm_copy 4,213 GB/s" in text and "hbm_copy 4,000 GB/s" in text
        assert "placed by an older wlprof that named no roofs" in text
        assert "no reason recorded" not in text
    # the GEMMs above the copy roof: named against their own (format-1, spread-less) ceilings
    assert "above_measured_roof" in md
    assert (tmp_path / "rep" / "roofline.png").stat().st_size > 0


def test_a_later_higher_calibration_here_makes_the_runs_stale(traces, tmp_path, monkeypatch):
    monkeypatch.setenv("WLPROF_CACHE_DIR", str(tmp_path / "cache"))
    ceilings.save(NEW)
    out = _invoke("report", GEMM, "--traces", traces)
    assert f"ceiling_stale: {GEMM}'s ceilings are older than this machine's current ones" in out
    # 806.2 is not below 790 (its bf16 is not), the copy 4,213 is below 4,272 x 0.99 and read, write, l2 are missing
    assert "hbm_copy 4,212.6 < 4,272.0 GB/s now" in out and "lacks hbm_read, hbm_write, l2" in out
    assert "bfloat16 806" not in out.split("ceiling_stale")[1]

    from wlprof.cli.placement import place
    from wlprof.store.selection import load_runs

    kernels = load_runs(traces, "kernels", [GEMM])
    placed = place(traces, "run", None, kernels)
    marked = placed.kernels[placed.kernels.roofline_fraction.notna()]
    assert marked.roof_note.str.contains("ceiling_stale").all()
    shown = _invoke("show", GEMM, "--traces", traces)
    assert "ceiling_stale" in shown and "no reason recorded" not in shown


@pytest.mark.slow
def test_ceilings_current_and_a_file_re_place_the_runs(traces, tmp_path, monkeypatch):
    monkeypatch.setenv("WLPROF_CACHE_DIR", str(tmp_path / "cache"))
    ceilings.save(NEW)
    out = _invoke("report", GEMM, ELEM, "--traces", traces, "--ceilings", "current", "--out", tmp_path / "rep")
    assert "re-placed against measured 2026-12-01T08:00:00+00:00 (format 2)" in out
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "recorded: mixed ceilings" in md and "no reason recorded" not in md

    (tmp_path / "c.json").write_text(json.dumps(NEW.to_dict()))
    out = _invoke("roofline", GEMM, ELEM, "--traces", traces, "--ceilings", tmp_path / "c.json", "-o",
                  tmp_path / "r.png")
    assert "re-placed against" in out and (tmp_path / "r.png").stat().st_size > 0
    # against a read roof of 4.5 TB/s (p90 4.545) the tall-skinny GEMM (4.49-4.50 TB/s) is at its roof,
    # above it only within the measured spread
    from wlprof.analysis.ceilings import replace_all
    from wlprof.cost.roofline import above_roof_unexplained
    from wlprof.store.selection import load_runs, run_ceilings

    k = load_runs(traces, "kernels", [GEMM])
    k2, _, _, _ = replace_all(k, None, None, run_ceilings(traces, [GEMM]), NEW)
    tall = k2[k2.variant.str.startswith("tall-skinny") & (k2.kind == "kernel")]
    assert set(tall.roof) == {"hbm_read"} and tall.roofline_fraction.between(0.98, 1.01).all()
    assert set(tall[tall.roofline_fraction > 1].roof_note) <= {"within_spread"}
    assert above_roof_unexplained(k2).empty

    other = Ceilings.from_dict({**NEW.to_dict(), "device_name": "NVIDIA H100"})
    (tmp_path / "h100.json").write_text(json.dumps(other.to_dict()))
    out = _invoke("roofline", GEMM, "--traces", traces, "--ceilings", tmp_path / "h100.json", "-o", tmp_path / "r.png")
    assert "kept its own ceilings (the ceilings given are of NVIDIA H100, it ran on NVIDIA H200)" in out


def test_a_bad_ceilings_file_is_an_input_error(traces, tmp_path):
    (tmp_path / "bad.json").write_text("{}")
    res = CliRunner().invoke(app, ["roofline", GEMM, "--traces", str(traces), "--ceilings", str(tmp_path / "bad.json"),
                                   "-o", str(tmp_path / "r.png")])
    assert res.exit_code == 2 and "--ceilings" in res.output


@pytest.mark.slow
def test_a_cpu_run_against_low_ceilings_says_so_and_a_later_calibration_makes_it_stale(tmp_path, monkeypatch):
    # The CPU case: a run whose ceilings were measured 3x too low shows its MLP far above its roof.
    # Placed against ceilings with a spread, beyond it: ceiling_stale on the kernels themselves; once this
    # machine's calibration is later and higher, the report says the run's ceilings are stale.
    from wlprof.device import cpu_model

    monkeypatch.setenv("WLPROF_CACHE_DIR", str(tmp_path / "cache"))
    name = cpu_model()
    low = Ceilings("cpu", name, {"float32": 1e-4, "bfloat16": 1e-4}, 1e-4, 0.01, "measured",
                   "2026-11-29T10:00:00+00:00", "", bandwidth_gbps={"dram_read": 0.01, "dram_copy": 0.01,
                                                                    "dram_write": 0.01},
                   measurements={"dram_read": _m(0.01), "dram_copy": _m(0.01), "dram_write": _m(0.01),
                                 "matrix:float32": _m(1e-4), "vector": _m(1e-4)})
    ceilings.save(low)
    traces = tmp_path / "traces"
    _invoke("run", "mlp", "--batch", "4", "--d-model", "32", "--d-ff", "64", "--steps", "2", "--warmup", "1",
            "--reps", "3", "-q", "--device", "cpu", "--traces", traces)
    (run,) = [p.name for p in traces.iterdir()]
    import wlprof

    k = wlprof.load(traces, table="kernels")
    above = k[k.roofline_fraction > 1]
    assert len(above) and above.roof_note.str.contains("ceiling_stale").all()
    high = Ceilings.from_dict({**low.to_dict(), "measured_at": "2026-11-30T10:00:00+00:00", "copy_gbps": 10.0,
                               "matrix_tflops": {"float32": 0.3, "bfloat16": 0.3}, "vector_tflops": 0.3,
                               "bandwidth_gbps": {"dram_read": 12.0, "dram_copy": 10.0, "dram_write": 8.0}})
    ceilings.save(high)
    out = _invoke("report", run, "--traces", traces)
    assert f"ceiling_stale: {run}'s ceilings are older than this machine's current ones" in out
    assert "matrix float32 0.0001 < 0.3 TFLOP/s now" in out

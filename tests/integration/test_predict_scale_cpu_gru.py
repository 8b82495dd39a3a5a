"""`predict --trace CPU_TRACE --scale batch=F` on a GRU: the CPU runs nn.GRU unfused, its time steps on a
sequence-first copy of the input, and records `aten::gru` (the op that states the batch) as no working op."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from wlprof.cli.main import app

PROFILE = Path(__file__).resolve().parents[2] / "benchmarks" / "profiles" / "h200"


def _capture(path: Path, batch_first: bool) -> Path:
    """One CPU forward of nn.GRU(24, 40) over batch 7, sequence 9 (x [7, 9, 24] batch-first, else [9, 7, 24])."""
    import warnings

    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.manual_seed(0)
    gru = torch.nn.GRU(24, 40, batch_first=batch_first)
    x = torch.randn(7, 9, 24) if batch_first else torch.randn(9, 7, 24)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof, torch.no_grad():
            gru(x)
    prof.export_chrome_trace(str(path))
    return path


def _run(trace: Path, out: Path, scale: str):
    return CliRunner().invoke(app, ["predict", "--profile", str(PROFILE), "--trace", str(trace), "--scale", scale,
                                    "-o", str(out)], env={"COLUMNS": "200"})


def test_a_batch_first_gru_scales_its_batch_not_its_sequence(tmp_path):
    res = _run(_capture(tmp_path / "gru_bf.json", True), tmp_path / "p.md", "batch=4")
    assert res.exit_code == 0, res.output
    shown = " ".join(res.output.split())
    # the batch is 7 (hx [1, 7, 40]), not the sequence 9 that leads the step's [9, 7, 120] projections
    assert "--scale batch: the batch, 7, becomes 28 (and its flattenings: 63 -> 252)" in shown, shown


def test_a_sequence_first_gru_is_refused_with_its_batch_named(tmp_path):
    out = tmp_path / "p.md"
    res = _run(_capture(tmp_path / "gru_sf.json", False), out, "batch=4")
    assert res.exit_code == 2, res.output
    shown = " ".join(res.output.split())
    assert "aten::gru runs sequence-first" in shown and "N = 7" in shown and "--scale 7=4" in shown, shown
    assert not out.exists()


@pytest.mark.parametrize("batch_first", [True, False])
def test_scaling_the_batch_by_its_value_grows_every_step(tmp_path, batch_first):
    res = _run(_capture(tmp_path / "gru.json", batch_first), tmp_path / "p.md", "7=4")
    assert res.exit_code == 0, res.output
    assert "every input dimension of 7 becomes 28" in " ".join(res.output.split())

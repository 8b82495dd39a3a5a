"""`predict --profile GPU --trace CPU_TRACE`: ops CUDA launches under the name the CPU recorded (a sqrt, the
single-tensor AdamW's lerp_/addcmul_/addcdiv_) are calls, even where neither the profile nor the fixed list
of launching ops holds them."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from wlprof.cli.main import app

PROFILE = Path(__file__).resolve().parents[2] / "benchmarks" / "profiles" / "h200"


@pytest.fixture(scope="module")
def trace(tmp_path_factory) -> Path:
    """One CPU training step: Linear(8, 6) -> pow(2) -> rsqrt -> sigmoid -> sum, backward, then a
    single-tensor AdamW step (foreach=False: per parameter lerp_, mul_, addcmul_, sqrt, div_, addcdiv_)."""
    import warnings

    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.manual_seed(0)
    lin = torch.nn.Linear(8, 6)
    opt = torch.optim.AdamW(lin.parameters(), lr=1e-3, foreach=False)
    x = torch.randn(5, 8)
    path = tmp_path_factory.mktemp("generic") / "adamw.pt.trace.json"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
            torch.sigmoid(torch.rsqrt(lin(x).pow(2) + 1)).sum().backward()
            opt.step()
    prof.export_chrome_trace(str(path))
    return path


def test_generic_ops_are_calls_not_left_out(trace):
    from wlprof.predict.profile import load_profile
    from wlprof.predict.spec import calls_and_left_out

    predictor, _, _ = load_profile(PROFILE, False)
    calls, left = calls_and_left_out(str(trace), frozenset(predictor.meta.get("op_names", [])))
    assert left.op_name.tolist() == []
    names = calls.op_name.tolist()
    # pow three times (the forward's x^2, RsqrtBackward0's result^3, PowBackward0's x^1), the forward's rsqrt,
    # and per parameter (weight [6, 8], bias [6]) one of each update op
    for op, n in (("aten::pow", 3), ("aten::rsqrt", 1), ("aten::lerp_", 2), ("aten::addcmul_", 2),
                  ("aten::addcdiv_", 2), ("aten::sqrt", 2)):
        assert names.count(op) == n, (op, names)
    lerp = calls[calls.op_name == "aten::lerp_"].op_input_dims.tolist()
    assert sorted(lerp) == ["[[6,8],[6,8],[]]", "[[6],[6],[]]"]


def test_predict_trace_predicts_them_and_leaves_nothing_out(trace, tmp_path):
    res = CliRunner().invoke(app, ["predict", "--profile", str(PROFILE), "--trace", str(trace), "--top", "0",
                                   "-o", str(tmp_path / "p.md")], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    shown = " ".join(res.output.split())
    assert "left out" not in shown
    rows = [line for line in (tmp_path / "p.md").read_text().splitlines() if line.startswith("| aten::sqrt")]
    assert rows, (tmp_path / "p.md").read_text()

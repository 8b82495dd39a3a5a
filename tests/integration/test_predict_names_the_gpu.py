"""`predict --profile P --spec/--trace` says which GPU (and profile) its times are for: two profiles ship
(an H200's and an H100's), and the same configuration's tables look alike for both."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from wlprof.cli.main import app

ROOT = Path(__file__).resolve().parents[2]
TRACE = ROOT / "tests" / "fixtures" / "h200" / "mlp-20261129-093337-6c80" / "_chrome" / "p001-batch-64.raw.json.gz"


@pytest.mark.parametrize("name,gpu", [("h200", "NVIDIA H200"), ("h100", "NVIDIA H100 80GB HBM3")])
def test_spec_names_the_profiles_gpu_on_the_terminal_and_in_the_file(name, gpu, tmp_path):
    out = tmp_path / "p.md"
    profile = f"benchmarks/profiles/{name}"
    res = CliRunner().invoke(app, ["predict", "--profile", str(ROOT / profile), "--spec", "gemm shapes=64x256x512",
                                   "-o", str(out)], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    line = f"predicted for {gpu} from profile {ROOT / profile}; calls listed on the meta device"
    assert res.output.splitlines()[0] == line
    assert f"P{line[1:]}." in " ".join(out.read_text().split())


def test_a_trace_of_the_profiles_own_gpu_names_it_too(tmp_path):
    profile = ROOT / "benchmarks" / "profiles" / "h200"
    res = CliRunner().invoke(app, ["predict", "--profile", str(profile), "--trace", str(TRACE),
                                   "-o", str(tmp_path / "p.md")], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert res.output.splitlines()[0] == f"predicted for NVIDIA H200 from profile {profile}"
    assert (f"Predicted for NVIDIA H200 from profile {profile} beside the trace's measured calls."
            in " ".join((tmp_path / "p.md").read_text().split()))

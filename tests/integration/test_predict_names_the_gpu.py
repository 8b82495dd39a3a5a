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


@pytest.mark.parametrize("text", ['{"traceEvents": [', '{"not": "a trace"}'])
def test_a_file_that_is_no_trace_is_refused_naming_the_trace_option(text, tmp_path):
    bad = tmp_path / "step.json"
    bad.write_text(text)
    out = tmp_path / "p.md"
    res = CliRunner().invoke(app, ["predict", "--profile", str(ROOT / "benchmarks" / "profiles" / "h100"),
                                   "--trace", str(bad), "-o", str(out)], env={"COLUMNS": "300"})
    assert res.exit_code == 2, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --trace must be a torch.profiler trace: "), lines
    assert lines[0].endswith(f"(got '{bad}')") and not out.exists()

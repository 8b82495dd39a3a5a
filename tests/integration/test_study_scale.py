"""Study files at a CPU scale: every committed study runs on a CPU, `sweep` takes several files, a CUDA
study on a machine without one says how to run it here, and --set wins over the [cpu] section."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import torch
from typer.testing import CliRunner

from wlprof import workloads
from wlprof.errors import InputError
from wlprof.study import at_scale, load_study, override_params, prepare

REPO = Path(__file__).resolve().parents[2]
STUDIES = sorted((REPO / "workloads").glob("*.toml"))  # mixes/ (place) and heldout/ (GPU-only) below it
runner = CliRunner()


@pytest.mark.parametrize("path", STUDIES, ids=lambda p: p.stem)
def test_every_study_has_a_cpu_scale_that_fits_a_laptop(path):
    study = load_study(path)
    assert study.cpu is not None, f"{path.name} has no [cpu] section"
    assert study.device is None, f"{path.name} pins a device: `wlprof sweep {path.name}` would fail without it"
    wl, device, dtype, parsed, points, scaled = prepare(study)  # on this machine (CPU only)
    assert device.type == "cpu" and scaled.scale == "cpu" and dtype == torch.float32
    assert parsed.notes[0].startswith("CPU: the study's [cpu] scale")
    assert max(wl.estimate_bytes(p, dtype) for p in points) < 2 * 2**30
    gpu, note = at_scale(study, "cuda")  # on a GPU: the committed sizes, untouched
    assert gpu.params == study.params and note is None and gpu.capture == study.capture


def test_set_wins_over_the_cpu_scale():
    study = override_params(load_study(REPO / "workloads" / "moe_zipf.toml"), ["tokens=[32]", "seed=1"])
    scaled, note = at_scale(study, "cpu")
    assert scaled.params["tokens"] == [32] and scaled.params["seed"] == 1
    assert scaled.params["d_model"] == study.cpu.params["d_model"]
    assert "tokens" not in note


def test_set_dtype_overrides_the_study_and_its_cpu_section():
    study = load_study(REPO / "workloads" / "moe_zipf.toml")  # [study] bfloat16, [cpu] float32
    scaled, note = at_scale(override_params(study, ["dtype=float64"]), "cpu")
    assert scaled.dtype == "float64" and "dtype" not in note  # the [cpu] section's float32 not applied
    assert at_scale(override_params(study, ["dtype=float64"]), "cuda")[0].dtype == "float64"
    assert "dtype" not in scaled.params  # the study's dtype, not a workload parameter
    wl, device, dtype, *_ = prepare(override_params(study, ["dtype='bf16'"]))
    assert dtype == torch.bfloat16
    with pytest.raises(InputError) as exc:
        override_params(study, ["dtype=float17"])
    assert str(exc.value).startswith("--set dtype must be one of bfloat16, float16, float32, float64 "
                                     "(got 'dtype=float17')")


def test_a_cuda_study_without_cuda_says_how_to_run_it(tmp_path):
    f = tmp_path / "s.toml"
    f.write_text('[study]\nworkload = "mlp"\ndevice = "cuda"\n[params]\nbatch = [1]\n'
                 '[cpu.params]\nd_model = 16\nd_ff = 32\n')
    with pytest.raises(InputError) as exc:
        prepare(load_study(f))
    assert "pass --device cpu" in str(exc.value) and "[cpu] scale" in str(exc.value)
    from wlprof.cli.main import app

    res = runner.invoke(app, ["sweep", str(f), "--traces", str(tmp_path / "t")])
    assert res.exit_code == 2 and "study.device names a CUDA device" in res.output
    assert "pass --device cpu" in res.output


def test_cpu_section_keys_are_checked(tmp_path):
    f = tmp_path / "s.toml"
    f.write_text('[study]\nworkload = "mlp"\n[cpu]\ndevice = "cpu"\n')
    with pytest.raises(InputError, match=r"cpu.device is not a key of \[cpu\]"):
        load_study(f)
    f.write_text('[study]\nworkload = "mlp"\n[cpu.capture]\nprofiled_step = 2\n')
    with pytest.raises(InputError) as exc:
        load_study(f)
    assert "cpu.capture.profiled_step" in str(exc.value) and "profiled_steps" in str(exc.value)


def test_sweep_runs_several_files_each_into_its_own_run(tmp_path, cpu_ceilings):
    from wlprof.cli.main import app

    files = []
    for name, params in (("a", "batch = [2]\nd_model = 8\nd_ff = 16"), ("b", 'shapes = ["4x4x4"]')):
        f = tmp_path / f"{name}.toml"
        wl = "mlp" if name == "a" else "gemm"
        f.write_text(f'[study]\nworkload = "{wl}"\n[params]\n{params}\n'
                     '[capture]\nprofiled_steps = 1\nlatency_reps = 2\nwarmup = 1\nbatches = 1\n'
                     '[cpu]\ndtype = "float32"\n')
        files.append(str(f))
    out = tmp_path / "t"
    res = runner.invoke(app, ["sweep", *files, "--traces", str(out), "-q"])
    assert res.exit_code == 0, res.output
    steps = pd.read_parquet(out, columns=["workload"])  # kernels, one folder per run
    assert set(steps.workload) == {"mlp", "gemm"}
    manifests = [json.loads(p.read_text()) for p in out.glob("*/_manifest.json")]
    assert sorted(m["study"]["scale"] for m in manifests) == ["cpu", "cpu"]
    bad = tmp_path / "bad.toml"
    bad.write_text('[study]\nworkload = "nope"\n')
    res = runner.invoke(app, ["sweep", files[0], str(bad), "--traces", str(tmp_path / "t2"), "-q"])
    assert res.exit_code == 2 and "study.workload must be one of" in res.output
    assert not (tmp_path / "t2").exists()  # the first file did not run either
    assert workloads.names()

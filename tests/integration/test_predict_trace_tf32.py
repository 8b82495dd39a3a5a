"""`predict --trace`: a float32 GEMM whose kernel ran in TF32 is predicted at TF32's rate, not the CUDA cores'."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from wlprof.cli.main import app

PROFILE = Path(__file__).resolve().parents[2] / "benchmarks" / "profiles" / "h200"


def _x(cat, name, ts, dur, tid=1, pid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": pid, "tid": tid, "args": args}


def _trace(path: Path, kernel_name: str) -> Path:
    """One step of one float32 mm [2048, 512] x [512, 1536] on an H200, its kernel named `kernel_name`."""
    events = [
        _x("user_annotation", "ProfilerStep#1", 0, 200),
        _x("cpu_op", "aten::mm", 10, 20, **{"External id": 1, "Input Dims": [[2048, 512], [512, 1536]],
                                             "Input type": ["float", "float"], "Input Strides": [[512, 1], [1536, 1]]}),
        _x("cuda_runtime", "cudaLaunchKernel", 11, 1, correlation=1, **{"External id": 1}),
        _x("kernel", kernel_name, 50, 17, tid=7, pid=0, correlation=1, stream=7, device=0,
           grid=[96, 1, 1], block=[384, 1, 1], **{"External id": 1}),
    ]
    meta = {"deviceProperties": [{"id": 0, "name": "NVIDIA H200", "totalGlobalMem": 150_000_000_000,
                                  "computeMajor": 9, "computeMinor": 0, "numSms": 132}]}
    path.write_text(json.dumps({"traceEvents": events, **meta}))
    return path


def _predicted_us(res) -> float:
    text = " ".join(res.output.split())
    return float(text.split("kernel time ")[1].split(" µs")[0].replace(",", ""))


def test_a_tf32_gemm_is_predicted_at_tf32s_rate(tmp_path):
    runner = CliRunner()
    env = {"COLUMNS": "200", "WLPROF_CACHE_DIR": str(tmp_path / "cache")}  # no ceilings of the H200 here
    tf32 = runner.invoke(app, ["predict", "--profile", str(PROFILE), "--trace",
                               str(_trace(tmp_path / "tf32.json", "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_cublas"))],
                         env=env)
    simt = runner.invoke(app, ["predict", "--profile", str(PROFILE), "--trace",
                               str(_trace(tmp_path / "simt.json", "sm90_xmma_gemm_f32f32_f32f32_f32_tn_n_cublas"))],
                         env=env)
    assert tf32.exit_code == 0, tf32.output
    assert simt.exit_code == 0, simt.output
    assert "ran in TF32" in " ".join(tf32.output.split()) and "ran in TF32" not in " ".join(simt.output.split())
    # 2 x 2048 x 512 x 1536 = 3.22 GFLOP: at the profile's float32 peak (about 50 TFLOP/s) at least 64 us; at its
    # TF32 peak (about 350) a seventh of that. The TF32 call must be predicted well below the float32 one.
    t, s = _predicted_us(tf32), _predicted_us(simt)
    assert s > 60.0
    assert t < s / 3


def test_a_tf32_gemm_stays_tf32_when_its_shapes_are_scaled(tmp_path):
    # --scale rewrites the mm's M (2048 -> 4096) and drops its recorded cost; the kernel's TF32 stays with the
    # call: 6.44 GFLOP at the TF32 peak, well below the same call on the CUDA cores
    runner = CliRunner()
    env = {"COLUMNS": "200", "WLPROF_CACHE_DIR": str(tmp_path / "cache")}
    out = {}
    for name, kernel in (("tf32", "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_cublas"),
                         ("simt", "sm90_xmma_gemm_f32f32_f32f32_f32_tn_n_cublas")):
        res = runner.invoke(app, ["predict", "--profile", str(PROFILE), "--trace",
                                  str(_trace(tmp_path / f"{name}.json", kernel)), "--scale", "2048=2"], env=env)
        assert res.exit_code == 0, res.output
        out[name] = res
    assert "ran in TF32" in " ".join(out["tf32"].output.split())
    assert "becomes 4096" in " ".join(out["tf32"].output.split())
    t, s = _predicted_us(out["tf32"]), _predicted_us(out["simt"])
    assert s > 120.0  # 6.44 GFLOP at about 50 TFLOP/s
    assert t < s / 3

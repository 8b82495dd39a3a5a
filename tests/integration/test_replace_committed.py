"""The committed H200 studies (Parquet) re-placed on the CPU against a constructed set of format-2 ceilings,
by the same script the device call runs (benchmarks/h200/ceilings.py): every kernel gets a roof, and no
fraction above 1 is left without a reason."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from wlprof.ceilings import Ceilings, Measurement

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "benchmarks" / "results" / "2026-11-29-h200"
ROOFS = {"hbm_read", "hbm_copy", "hbm_write", "l2", "compute:bfloat16", "compute:float16", "compute:float32",
         "compute:tf32", "compute:vector"}


def _script():
    spec = importlib.util.spec_from_file_location("h200_ceilings", REPO / "benchmarks" / "h200" / "ceilings.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _m(v, s=0.01):
    return Measurement(v, "GB/s", "constructed", p10=v * (1 - s), p90=v * (1 + s))


# what an H200 calibration of format 2 could give (this morning's bandwidth study: read 4336, write 4617,
# copy 4272 GB/s at 4 GiB; gemv read 4.49 TB/s; bf16 GEMM 790 TFLOP/s); the L2 value is made up
H200 = Ceilings("cuda", "NVIDIA H200", {"bfloat16": 790.0, "float16": 773.0, "float32": 50.7, "tf32": 418.0},
                50.7, 4272.0, "measured", "2026-12-01T08:00:00+00:00", "constructed",
                bandwidth_gbps={"hbm_read": 4490.0, "hbm_write": 4617.0, "hbm_copy": 4272.0, "l2": 9000.0},
                cache_bytes={"l2": 62914560},
                measurements={"hbm_read": _m(4490.0), "hbm_write": _m(4617.0), "hbm_copy": _m(4272.0),
                              "l2": _m(9000.0), "matrix:bfloat16": _m(790.0, 0.02)})


@pytest.fixture
def ceilings_file(tmp_path):
    path = tmp_path / "ceilings-h200.json"
    path.write_text(json.dumps(H200.to_dict()))
    return path


def test_two_committed_studies_re_placed_offline(tmp_path, ceilings_file):
    traces = tmp_path / "traces"
    for run in ("gemm-20261129-093103-9046", "elementwise-20261129-093127-1492"):
        shutil.copytree(RESULTS / "traces" / run, traces / run)
    code = _script().main(["--ceilings", str(ceilings_file), "--traces", str(traces), "--out", str(tmp_path / "out")])
    assert code == 0
    md = (tmp_path / "out" / "placement" / "placement.md").read_text()
    assert "above 1 without a reason: 0" in md and "## gemm_same_flops" in md and "## roofline_kernels" in md
    rows = pd.read_csv(tmp_path / "out" / "placement" / "kernels.csv.gz")
    assert len(rows) == 20 + 45 and set(rows.roof.dropna()) <= ROOFS
    # the tall-skinny GEMM writes 0.02% of what it moves: the read roof, 4.49 TB/s at 4.49: on it, not above
    tall = rows[rows.variant.str.startswith("tall-skinny") & (rows.kind == "kernel")]
    assert set(tall.memory_roof) == {"hbm_read"} and tall.roofline_fraction.between(0.98, 1.01).all()
    # every fraction above 1 says why; the recorded ones (one copy roof) did not
    above = rows[rows.roofline_fraction > 1]
    assert above.roof_note.notna().all()
    assert (rows.recorded_fraction > 1).sum() >= len(above)
    assert (tmp_path / "out" / "placement" / "roofline-traces.png").stat().st_size > 0


@pytest.mark.slow
def test_every_study_of_the_offline_folder_re_placed(tmp_path, ceilings_file):
    # the ten runs of every study measured at the offline profile's sizes (the other folder's 11 runs:
    # `python benchmarks/h200/ceilings.py --ceilings FILE` places both; two of them are the test above)
    code = _script().main(["--ceilings", str(ceilings_file), "--traces", str(RESULTS / "offline"),
                           "--out", str(tmp_path)])
    assert code == 0  # no fraction above 1 without a reason
    rows = pd.read_csv(tmp_path / "placement" / "kernels.csv.gz")
    assert set(rows.source) == {"offline"} and rows.run_id.nunique() == 10
    assert set(rows.roof.dropna()) <= ROOFS
    # the mul/add grid (offline): 2M bf16 elements, 12.6 MB per call, once a step: its working set fits the
    # 60 MB L2 and it is placed there; 256M elements (1.6 GB) against HBM
    grid = rows[rows.run_id == "elementwise-20261129-111708-fe5c"]
    assert set(grid[grid.variant == "mul n=2097152"].memory_roof) == {"l2"}
    assert set(grid[grid.variant == "mul n=268435456"].memory_roof) == {"hbm_copy"}
    md = (tmp_path / "placement" / "placement.md").read_text()
    for study in ("gemm_same_flops", "mlp_batch", "roofline_kernels", "moe_routing_128", "gnn_backends"):
        assert f"## {study}" in md

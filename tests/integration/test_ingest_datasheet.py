"""`--ceilings datasheet`: a public trace of a GPU nobody measured placed against its vendor's peaks,
labelled as such; refused for a GPU with no sheet; hinted where no measured ceilings exist; a fraction
above such a peak noted above_datasheet."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import FIXTURES

import wlprof
from wlprof.ceilings import datasheet_ceilings
from wlprof.cost.roofline import above_roof_unexplained, add_roofline

H100 = FIXTURES / "public" / "tracelens_h100_python_function_memory.json.gz"  # "NVIDIA H100 80GB HBM3", bf16 ViT
B300 = FIXTURES / "public" / "tracelens_2026_b300_moe_index_gather.json.gz"  # "NVIDIA B300 SXM6 AC": no sheet


def _manifest(traces):
    from wlprof.store.runs import read_manifest

    (run,) = [p for p in traces.iterdir() if p.is_dir()]
    return read_manifest(run)


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("WLPROF_CACHE_DIR", str(tmp_path / "cache"))  # nothing measured for any device


def test_a_public_h100_trace_is_placed_against_the_h100_sxm5_datasheet(tmp_path, cli, empty_cache):
    plain = cli("ingest", H100, "--traces", tmp_path / "plain", "-q")
    text = " ".join(plain.output.split())
    # no measured ceilings: the summary says the columns are empty and names the option
    assert plain.exit_code == 0 and "no measured ceilings for NVIDIA H100 80GB HBM3" in text
    assert "the roofline columns are empty; `--ceilings datasheet` places them against the H100 SXM5's" in text
    assert wlprof.load(tmp_path / "plain").roofline_fraction.isna().all()

    res = cli("ingest", H100, "--traces", tmp_path / "ds", "-q", "--ceilings", "datasheet")
    text = " ".join(res.output.split())
    assert res.exit_code == 0
    assert "ceilings: datasheet: H100 SXM5 (NVIDIA H100 Tensor Core GPU datasheet, its sparse rates halved): " \
           "vendor peaks, not measured" in text
    k = wlprof.load(tmp_path / "ds")
    assert k.roofline_fraction.notna().all()  # every kernel with FLOPs or bytes is placed (all 156 here)
    assert (k.roof_note == "datasheet").all()  # every placed row says whose ceilings; none above 1
    m = _manifest(tmp_path / "ds")
    assert m["ceilings"]["source"] == "datasheet" and m["ceilings"]["method"]["datasheet"] == "H100 SXM5"
    assert m["device"]["properties"]["totalGlobalMem"] == 85018279936
    # By hand: the longest bf16 addmm, bias [3072], [788, 768] x [768, 3072], ran 14.176 us.
    # FLOPs 2 * 788 * 768 * 3072 = 3,718,250,496 -> at 989.5 TFLOP/s (1,979 with sparsity, halved) 3.7577 us;
    # bytes 2 * (788*768 + 768*3072 + 3072 + 788*3072) = 10,776,576 -> at 3,350 GB/s 3.2169 us: compute-bound,
    # fraction 3.7577 / 14.176 = 0.26508
    row = k[(k.op_name == "aten::addmm") & (k.op_input_dims == "[[3072],[788,768],[768,3072],[],[]]")]
    row = row.loc[row.dur_us.idxmax()]
    assert (row.flops, row.bytes, row.dur_us) == (3_718_250_496, 10_776_576, 14.176)
    assert (row.roof, row.ceiling_tflops, row.ceiling_gbps) == ("compute:bfloat16", 989.5, 3350.0)
    assert row.roofline_fraction == pytest.approx(3_718_250_496 / 989.5e12 / 14.176e-6, rel=1e-9)
    assert row.roofline_fraction == pytest.approx(0.26508, abs=5e-6)


def test_datasheet_is_refused_for_a_gpu_with_no_sheet_and_nothing_is_written(tmp_path, cli, empty_cache):
    res = cli("ingest", B300, "--traces", tmp_path / "t", "--ceilings", "datasheet")
    text = " ".join(res.output.split())
    assert res.exit_code == 2
    assert "--ceilings datasheet needs a GPU with a known datasheet: the trace ran on NVIDIA B300 SXM6 AC (268 GiB), " \
           "which has none; known: V100 SXM2," in text and "MI300X (got 'datasheet')" in text
    assert not (tmp_path / "t").exists()
    # without the option the same trace ingests, with no roofline, and the summary says no sheet exists
    res = cli("ingest", B300, "--traces", tmp_path / "t", "-q")
    assert res.exit_code == 0 and "no datasheet is known for NVIDIA B300 SXM6 AC either" in " ".join(res.output.split())


def test_datasheet_is_refused_naming_why_for_a_trace_without_its_gpus_name_and_for_a_cpu_trace(tmp_path, cli,
                                                                                               empty_cache):
    # a 2021 V100 trace with no deviceProperties: nothing names the GPU; a CPU-only trace: no GPU at all
    unnamed = FIXTURES / "public" / "kineto_2021_v100_cudnn_index_typed_kernels.json.gz"
    cpu = FIXTURES / "public" / "hta_2024_cpu_only_gloo.json.gz"
    for trace, why in ((unnamed, "the trace does not name its GPU (no deviceProperties name or compute capability)"),
                       (cpu, "the trace ran on a CPU (unknown CPU)")):
        res = cli("ingest", trace, "--traces", tmp_path / "t", "--ceilings", "datasheet")
        text = " ".join(res.output.split())
        assert res.exit_code == 2, text
        assert f"--ceilings datasheet needs a GPU with a known datasheet: {why}; known: V100 SXM2," in text, text
        assert "pass ceilings measured on that device (`wlprof calibrate --out FILE` there) instead" in text, text
        assert not (tmp_path / "t").exists()


def test_report_places_an_ingest_against_its_datasheet_and_refuses_an_unknown_gpu(tmp_path, cli, empty_cache):
    assert cli("ingest", H100, "--traces", tmp_path / "h", "-q").exit_code == 0
    res = cli("report", "--traces", tmp_path / "h", "--out", tmp_path / "r", "--ceilings", "datasheet")
    assert res.exit_code == 0
    md = " ".join((tmp_path / "r" / "report.md").read_text().split())
    assert "re-placed against datasheet of the H100 SXM5 (NVIDIA H100 Tensor Core GPU datasheet), not measured" in md
    assert cli("ingest", B300, "--traces", tmp_path / "b", "-q").exit_code == 0
    (run,) = [p.name for p in (tmp_path / "b").iterdir() if p.is_dir()]
    res = cli("roofline", run, "--traces", tmp_path / "b", "-o", tmp_path / "b.png", "--ceilings", "datasheet")
    assert res.exit_code == 2 and not (tmp_path / "b.png").exists()
    assert "--ceilings datasheet needs runs of a GPU with a known datasheet: these ran on NVIDIA B300 SXM6 AC" \
        in " ".join(res.output.split())


def test_a_fraction_above_a_datasheet_peak_is_noted_above_datasheet():
    # A100 40GB sheet: 1,555 GB/s everywhere, 312 TFLOP/s bf16. Rows (flops, bytes, bytes_written, dur_us):
    # a read of 3.11e9 bytes in 1000 us: 3.11e9 / 1555e9 = 2000 us at the roof, fraction 2.0;
    # the same as an embedding lookup (its counted rows are an upper bound): indexed_reuse, not above_datasheet;
    # a bf16 GEMM of 624e9 FLOPs in 1000 us: 624e9 / 312e12 = 2000 us, fraction 2.0; one at 0.5
    c = datasheet_ceilings("NVIDIA A100-SXM4-40GB")
    df = pd.DataFrame({"flops": [0.0, 0.0, 624e9, 156e9], "bytes": [3.11e9, 3.11e9, 1e6, 1e6],
                       "bytes_written": [0.0, 0.0, 0.0, 0.0], "dur_us": [1000.0] * 4,
                       "cost_unit": ["vector", "vector", "matrix", "matrix"],
                       "cost_dtype": ["float32", "float32", "bfloat16", "bfloat16"],
                       "op_name": ["aten::sum", "aten::embedding", "aten::mm", "aten::mm"]})
    add_roofline(df, c)
    assert df.roofline_fraction.tolist() == pytest.approx([2.0, 2.0, 2.0, 0.5])
    assert list(df.roof) == ["hbm_read", "hbm_read", "compute:bfloat16", "compute:bfloat16"]
    assert list(df.roof_note) == ["datasheet,above_datasheet", "datasheet,indexed_reuse", "datasheet,above_datasheet",
                                  "datasheet"]
    assert above_roof_unexplained(df).empty and not np.isin(["ceiling_stale", "above_measured_roof"],
                                                            df.roof_note.str.split(",").sum()).any()

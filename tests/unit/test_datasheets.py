"""Datasheet sheets: every device name torch/Kineto records goes to its own variant's sheet, variants are
never confused, an unknown or ambiguous name gets none, and the ceilings built from a sheet say so."""

import pytest

from wlprof import ceilings, datasheets
from wlprof.datasheets import SHEETS, matching, sheet_for

GiB = 2**30

# (name as torch records it, its deviceProperties entry where the name alone does not tell the variant,
#  the sheet it must get). totalGlobalMem values are those of tests/fixtures/public where one has that GPU.
NAMED = [
    ("Tesla V100-SXM2-16GB", None, "V100 SXM2"),
    ("Tesla V100-SXM2-32GB", {"totalGlobalMem": 34079899648, "numSms": 80}, "V100 SXM2"),  # param_2023
    ("Tesla V100-PCIE-32GB", None, "V100 PCIe"),
    ("Tesla T4", None, "T4"),
    ("NVIDIA A100-SXM4-40GB", None, "A100 40GB"),
    ("NVIDIA A100-PCIE-40GB", None, "A100 40GB"),
    ("NVIDIA A100-PG509-200", {"totalGlobalMem": 42297524224}, "A100 40GB"),  # hta_2023 (Meta's 40 GB board)
    ("NVIDIA A100-SXM4-80GB", None, "A100 SXM4 80GB"),
    ("NVIDIA A100 80GB PCIe", {"totalGlobalMem": 84990623744}, "A100 PCIe 80GB"),  # zoology_2023
    ("NVIDIA A10", None, "A10"),
    ("NVIDIA A40", None, "A40"),
    ("NVIDIA GeForce RTX 3090", None, "GeForce RTX 3090"),
    ("NVIDIA L4", None, "L4"),
    ("NVIDIA L40", None, "L40"),
    ("NVIDIA L40S", None, "L40S"),
    ("NVIDIA GeForce RTX 4090", {"totalGlobalMem": 25393692672}, "GeForce RTX 4090"),  # tokenomics_2024
    ("NVIDIA H100 80GB HBM3", {"totalGlobalMem": 85018279936}, "H100 SXM5"),  # tracelens_h100
    ("NVIDIA H100 PCIe", None, "H100 PCIe"),
    ("NVIDIA H200", {"totalGlobalMem": 150111715328}, "H200 SXM"),  # openpi_2026_h200
    ("NVIDIA B200", {"totalGlobalMem": 191503138816}, "B200 (HGX, 180GB)"),  # tracelens_b200
    ("AMD Instinct MI210", {"totalGlobalMem": 68702699520, "numSms": 104}, "MI210"),  # tracelens_mi210
    ("AMD Instinct MI250X / MI250", {"numSms": 110}, "MI250X (one GCD)"),
    ("AMD Instinct MI250X / MI250", {"numSms": 104}, "MI250 (one GCD)"),
    ("AMD Instinct MI300X", {"totalGlobalMem": 206141652992}, "MI300X"),
    ("AMD Instinct MI300X VF", {"totalGlobalMem": 205571227648}, "MI300X"),  # tracelens_mi300_bert (SR-IOV)
    # ROCm wrote "name": "" (openpi_2026_mi300x): wlprof names it by its properties, and those tell the sheet
    ("AMD GPU (compute 9.4, 304 CUs, 192 GiB)",
     {"computeMajor": 9, "computeMinor": 4, "numSms": 304, "totalGlobalMem": 206141652992}, "MI300X"),
]

# Names that must get no sheet: a variant the table leaves out must not borrow a neighbour's numbers
NONE = [
    ("NVIDIA H100 NVL", None),  # 94 GB, its own lower clocks: not the SXM5 sheet
    ("NVIDIA H100", {"totalGlobalMem": 101997215744}),  # 95 GiB, the name says no form factor
    ("NVIDIA H200 NVL", None),  # not the H200 SXM sheet
    ("NVIDIA GH200 480GB", None),  # not H200, not H100
    ("NVIDIA A100-PG506-210", {"totalGlobalMem": 85e9}),  # an 80 GB A100 whose name gives no form factor
    ("NVIDIA A100-SXM4-80GB", {"totalGlobalMem": 42e9}),  # name and memory disagree: neither sheet
    ("NVIDIA A100-PG509-200", None),  # 40 or 80 GB cannot be told without totalGlobalMem
    ("NVIDIA A10G", None),  # AWS's A10 variant: no vendor sheet
    ("NVIDIA GeForce RTX 3090 Ti", None),
    ("NVIDIA GeForce RTX 4090 D", None),
    ("Tesla V100S-PCIE-32GB", None),
    ("Tesla V100-DGXS-32GB", None),  # kineto_2021_gpu_metrics_col0
    ("NVIDIA B200", {"totalGlobalMem": 206e9}),  # a 192 GB B200 is another variant
    ("NVIDIA GB200", None),
    ("NVIDIA B300 SXM6 AC", None),  # tracelens_2026_b300
    ("AMD Instinct MI250X / MI250", None),  # MI250X or MI250: only the CU count tells
    ("AMD Radeon Graphics", {"numSms": 104, "totalGlobalMem": 68702699520}),  # hta_2024_mi250: MI210 or a GCD
    ("AMD GPU (compute 9.4, 228 CUs, 128 GiB)", {"computeMajor": 9, "computeMinor": 4, "numSms": 228,
                                                 "totalGlobalMem": 128 * GiB}),  # an MI300A
    ("AMD GPU (compute 9.4, 304 CUs, 256 GiB)", {"computeMajor": 9, "computeMinor": 4, "numSms": 304,
                                                 "totalGlobalMem": 256 * GiB}),  # an MI325X
    ("NVIDIA GeForce GTX 1080", None),
    ("unknown GPU", None),
    ("AMD EPYC 7763 64-Core Processor", None),
    ("", None),
]


@pytest.mark.parametrize(("name", "props", "key"), NAMED)
def test_every_listed_name_gets_its_own_sheet_and_no_other(name, props, key):
    assert [s.key for s in matching(name, props)] == [key]
    assert sheet_for(name, props).key == key


@pytest.mark.parametrize(("name", "props"), NONE)
def test_a_name_the_table_cannot_tell_gets_no_sheet(name, props):
    assert sheet_for(name, props) is None
    assert ceilings.datasheet_for(name, props) is None and ceilings.datasheet_ceilings(name, props) is None


def test_variants_are_told_apart_by_the_numbers_that_differ():
    # A100: 40 GB (SXM4 or PCIe) 1,555 GB/s, 80 GB SXM4 2,039, 80 GB PCIe 1,935; the same 312 TFLOP/s bf16
    gbps = {n: sheet_for(n, p).gbps for n, p in [("NVIDIA A100-SXM4-40GB", None), ("NVIDIA A100-SXM4-80GB", None),
                                                 ("NVIDIA A100 80GB PCIe", None)]}
    assert list(gbps.values()) == [1555.0, 2039.0, 1935.0]
    # H100 PCIe (2.0 TB/s, 1,513 TFLOP/s bf16 with sparsity: 756.5 dense) is not the SXM5 (3.35 TB/s, 989.5)
    pcie, sxm = sheet_for("NVIDIA H100 PCIe"), sheet_for("NVIDIA H100 80GB HBM3")
    assert (pcie.gbps, pcie.tflops["bfloat16"]) == (2000.0, 756.5)
    assert (sxm.gbps, sxm.tflops["bfloat16"]) == (3350.0, 989.5)


def test_sheets_list_only_the_dtypes_their_matrix_units_run():
    # Volta and Turing tensor cores have no bf16 and no TF32; CDNA2 has no TF32
    for name in ("Tesla V100-SXM2-32GB", "Tesla T4"):
        assert set(sheet_for(name).tflops) == {"float16", "float32"}
    assert "tf32" not in sheet_for("AMD Instinct MI210").tflops
    assert set(sheet_for("AMD Instinct MI300X").tflops) == {"bfloat16", "float16", "tf32", "float32"}
    for s in SHEETS:  # every rate positive, every sheet sourced
        assert s.source and s.gbps > 0 and s.vector_tflops > 0 and all(v > 0 for v in s.tflops.values())
        assert s.vector_tflops <= s.tflops["float32"]


def test_datasheet_ceilings_are_labelled_and_hold_no_cache_roofs():
    c = ceilings.datasheet_ceilings("NVIDIA A100-SXM4-40GB")
    assert c.source == "datasheet" and c.measured_at == "" and c.measurements == {} and c.cache_bytes == {}
    assert c.bandwidth_gbps == {"hbm_read": 1555.0, "hbm_write": 1555.0, "hbm_copy": 1555.0} and c.copy_gbps == 1555.0
    assert c.matrix_tflops == {"bfloat16": 312.0, "float16": 312.0, "tf32": 156.0, "float32": 19.5}
    assert c.method["datasheet"] == "A100 40GB" and c.datasheet["source"] == datasheets.A100_SHEET
    # it survives a manifest round trip as datasheet ceilings
    assert ceilings.Ceilings.from_dict(c.to_dict()).source == "datasheet"


def test_the_sweep_figure_names_a_datasheet_peak_so():
    import matplotlib

    matplotlib.use("Agg")
    import pandas as pd

    from wlprof.plots import figures

    sheet = ceilings.datasheet_ceilings("NVIDIA A100-SXM4-40GB")
    assert figures.ceilings_kind(sheet) == "datasheet"
    assert figures.ceilings_kind(sheet.to_dict()) == "datasheet"
    assert figures.ceilings_kind({"matrix_tflops": {"bfloat16": 700.0}, "source": "measured"}) == "measured"
    steps = pd.DataFrame({"run_id": "r", "batch": [1, 8], "achieved_tflops": [1.0, 50.0],
                          "achieved_tflops_latency": [0.5, 40.0], "latency_us": [10.0, 12.0],
                          "kernel_us": [8.0, 10.0], "ceiling_tflops": [312.0, 312.0]})
    for kind in ("datasheet", "measured"):
        fig = figures.rate_vs_axis(steps, "batch", "MLP", kind)
        texts = [t.get_text() for ax in fig.axes for t in ax.texts]
        assert f"{kind} peak 312 TFLOP/s" in texts, texts

"""`wlprof calibrate --show`: the ceilings table prints a CPU's small rates, not 0.0."""

from __future__ import annotations

import json
from pathlib import Path

from wlprof.ceilings import Ceilings
from wlprof.cli.calibrate import ceilings_table

FIXTURE = Path(__file__).parents[1] / "fixtures" / "h200_ceilings_2026-12-01.json"


def _cpu_like() -> Ceilings:
    """The H200 fixture with its compute rates scaled to a 2-core CPU's (0.03 TFLOP/s fp32)."""
    d = json.loads(FIXTURE.read_text())
    scale = 0.03 / d["matrix_tflops"]["float32"]
    d["matrix_tflops"] = {k: v * scale for k, v in d["matrix_tflops"].items()}
    d["vector_tflops"] *= scale
    for key, m in d["measurements"].items():
        if key.startswith(("matrix", "vector")):
            for f in ("value", "p10", "p90", "min", "max"):
                if m.get(f) is not None:
                    m[f] *= scale
    return Ceilings.from_dict(d)


def _rows(c: Ceilings) -> dict[str, list[str]]:
    t = ceilings_table(c)
    cells = [list(col.cells) for col in t.columns]
    return {label: [col[i] for col in cells[1:4]] for i, label in enumerate(cells[0])}


def test_a_cpus_tflops_are_not_printed_as_zero():
    rows = _rows(_cpu_like())
    # one decimal printed these '0.0', '0.0-0.0', '0.0-0.0': as if the CPU had no compute roof
    assert rows["matrix float32 TFLOP/s"] == ["0.03", "0.03-0.03", "0.03-0.03"]
    assert rows["vector TFLOP/s (fp32 GEMM, TF32 off)"] == ["0.03", "0.03-0.03", "0.03-0.03"]
    # 711.6 x 0.03 / 50.55 = 0.422: two significant digits, where one decimal read '0.4'
    assert rows["matrix bfloat16 TFLOP/s"][0] == "0.42"


def test_a_rate_under_one_keeps_two_significant_digits():
    from wlprof.store.selection import _rate

    # one decimal rounded a CPU's 0.0548 TFLOP/s to '0.1', 82% above what was measured
    assert [_rate(v, 1) for v in (0.0548, 0.45, 0.97, 1.0, 12.34, 711.57)] == ["0.055", "0.45", "0.97", "1.0", "12.3",
                                                                             "711.6"]
    # GB/s with no decimals: 7.3 read '7', 0.6 read '1'
    assert [_rate(v, 0) for v in (0.6, 7.3, 9.96, 16.8, 4323.4)] == ["0.6", "7.3", "10", "17", "4,323"]
    assert _rate(0.0, 1) == "0.0"


def test_a_gpus_rates_keep_their_decimals():
    rows = _rows(Ceilings.from_dict(json.loads(FIXTURE.read_text())))
    assert rows["matrix bfloat16 TFLOP/s"][0] == "711.6"
    assert rows["HBM read GB/s"] == ["4,323", "4,279-4,351", "4,088-4,367"]


def test_the_other_methods_name_their_rate_with_its_unit():
    rows = ceilings_table(Ceilings.from_dict(json.loads(FIXTURE.read_text())))
    labels, how = list(rows.columns[0].cells), list(rows.columns[5].cells)
    text = how[labels.index("HBM read GB/s")]
    # was '...; also torch.sum over one fp32 buffer 4,309 (buffer_bytes ...': a bare number
    assert "; also torch.sum over one fp32 buffer 4,309 GB/s (" in text
    assert " 699.5 TFLOP/s (" in how[labels.index("matrix bfloat16 TFLOP/s")]


def test_the_value_column_names_the_statistic_the_ceiling_is():
    gpu = Ceilings.from_dict(json.loads(FIXTURE.read_text()))
    assert ceilings_table(gpu).columns[1].header == "median"
    # a CPU's ceiling is the 90th percentile of its repeats (calibrate's method says so): not a median
    cpu = _cpu_like()
    cpu.method["statistic"] = "p90"
    assert ceilings_table(cpu).columns[1].header == "p90"

"""The hierarchical roofline figure: which roof lines it draws, and how points above a roof are marked."""

from __future__ import annotations

import pandas as pd

from wlprof.ceilings import Ceilings
from wlprof.plots import figures

C = Ceilings("cuda", "NVIDIA H200", {"bfloat16": 790.0, "float16": 773.0, "float32": 50.7, "tf32": 418.0}, 50.7,
             4272.0, "measured", "2026-12-01T08:00:00+00:00", "",
             bandwidth_gbps={"hbm_read": 4336.0, "hbm_write": 4617.0, "hbm_copy": 4272.0, "l2": 9000.0},
             cache_bytes={"l2": 62914560})


def _ops(rows):
    cols = ["intensity_flop_per_byte", "achieved_tflops", "dur_us", "family", "cost_unit", "cost_dtype",
            "compute_roof", "roofline_fraction", "roof_note"]
    return pd.DataFrame([dict(zip(cols, r, strict=True)) for r in rows])


OPS = _ops([
    (500.0, 700.0, 30.0, "GEMM", "matrix", "bfloat16", "compute:bfloat16", 0.9, None),
    (1.0, 4.49, 4800.0, "GEMM", "matrix", "bfloat16", "compute:bfloat16", 1.04, "ceiling_stale"),
    (0.25, 1.2, 50.0, "elementwise", "vector", "bfloat16", "compute:vector", 0.6, "l2_resident"),
    (0.1, 0.43, 60.0, "elementwise", "vector", "bfloat16", "compute:vector", 1.005, "within_spread"),
])


def test_lines_are_the_roofs_that_differ_and_the_dtypes_present():
    memory, compute = figures.roofline_lines(OPS, C)
    # read 4336 is within 2% of copy 4272 (1.5%): one line; write 4617 is 8% above: its own line
    assert memory == {"hbm_copy": 4272.0, "hbm_write": 4617.0, "l2": 9000.0}
    # only the compute roofs the op calls are placed under: no fp16, tf32 or fp32 line
    assert compute == {"compute:bfloat16": 790.0, "compute:vector": 50.7}
    # a stored table without compute_roof (an older schema) takes them from cost_unit and cost_dtype
    memory, compute = figures.roofline_lines(OPS.drop(columns=["compute_roof"]), C)
    assert compute == {"compute:bfloat16": 790.0, "compute:vector": 50.7}


def test_a_format_1_manifest_dict_draws_its_copy_roof():
    old = {"copy_gbps": 4200.0, "matrix_tflops": {"bfloat16": 800.0}, "vector_tflops": 50.0}
    memory, compute = figures.roofline_lines(OPS, old)
    assert memory == {"hbm_copy": 4200.0} and compute == {"compute:bfloat16": 800.0, "compute:vector": 50.0}


def test_points_above_their_roof_are_marked_with_their_reason():
    import matplotlib.pyplot as plt

    fig = figures.roofline(OPS, C, "t")
    labels = fig.axes[0].get_legend_handles_labels()[1]
    assert "above its roof: ceiling_stale (1)" in labels and "above its roof: within_spread (1)" in labels
    assert "placed against a cache level (1)" in labels
    assert "hbm_write: 4,617 GB/s (measured)" in labels and "l2: 9,000 GB/s (measured)" in labels
    assert not any("hbm_read" in lab for lab in labels) and not any("no reason" in lab for lab in labels)
    plt.close(fig)
    bare = figures.roofline(OPS.assign(roof_note=None), C, "t")
    assert "above its roof: no reason recorded (2)" in bare.axes[0].get_legend_handles_labels()[1]
    plt.close(bare)


def test_a_cpus_small_roofs_are_labelled_with_their_value_not_zero():
    cpu = Ceilings("cpu", "AMD EPYC", {"bfloat16": 0.0009, "float32": 0.03}, 0.03, 7.0, "measured",
                   "2026-12-01T20:48:34+00:00", "",
                   bandwidth_gbps={"dram_read": 13.0, "dram_copy": 7.0, "dram_write": 6.0, "l1": 225.0},
                   cache_bytes={"l1": 65536})
    ops = _ops([(90.0, 0.02, 15000.0, "GEMM", "matrix", "float32", "compute:float32", 0.75, None),
                (0.1, 0.0004, 900.0, "elementwise", "vector", "float32", "compute:vector", 0.5, None)])
    fig = figures.roofline(ops, cpu, "t")
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    # one decimal labelled the compute roof '0.0 TFLOP/s (measured)'
    assert "compute:float32, compute:vector: 0.03 TFLOP/s (measured)" in labels
    assert "dram_copy: 7 GB/s (measured)" in labels


def test_a_long_title_is_wrapped_to_the_figure():
    import matplotlib.pyplot as plt

    ids = ", ".join(f"moe-20261201-2256{i}2-c5{i}0" for i in range(3))
    fig = figures.roofline(OPS, C, f"Roofline: {ids}")
    title = fig.axes[0].get_title()
    # three run ids and the ceilings' date: 164 characters on one line, cut at both edges of the figure
    assert "\n" in title and max(len(line) for line in title.split("\n")) <= 120
    assert title.replace("\n", " ").startswith(f"Roofline: {ids} (marker area")
    plt.close(fig)


def test_a_title_of_three_run_ids_stays_inside_the_figure():
    import matplotlib.pyplot as plt

    # the README's `wlprof roofline RUN...` of a gemm, an mlp and an elementwise run: at 120 characters a
    # line, the title's first line ran past the figure's right edge (the title is centred over the axes)
    ids = "gemm-20261207-004231-cf15, mlp-20261207-004341-f1a9, elementwise-20261207-004447-47e9"
    import io

    import numpy as np
    from PIL import Image

    fig = figures.roofline(OPS, C, f"Roofline: {ids}")
    assert fig.axes[0].get_title().replace("\n", " ").startswith(f"Roofline: {ids} (marker area")
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    png = np.asarray(Image.open(buf).convert("L"))
    band = png[: int(0.08 * png.shape[0])]  # the title's rows, above the axes
    # no ink in the outermost 3 columns of either edge: nothing of the title is cut there
    assert band[:, :3].min() == 255 and band[:, -3:].min() == 255, (band[:, :3].min(), band[:, -3:].min())


def test_the_command_counts_the_calls_above_their_roof_by_reason():
    from wlprof.cli.roofline import above_roof_counts

    ops = _ops([(1.0, 4.49, 4800.0, "GEMM", "matrix", "bfloat16", "compute:bfloat16", 1.04, "l3_resident,ceiling_stale"),
                (1.0, 4.49, 4800.0, "GEMM", "matrix", "bfloat16", "compute:bfloat16", 1.2, "ceiling_stale"),
                (0.1, 0.43, 60.0, "elementwise", "vector", "bfloat16", "compute:vector", 1.3, "cache_fit"),
                (0.1, 0.43, 60.0, "elementwise", "vector", "bfloat16", "compute:vector", 0.6, "l2_resident")])
    # it printed the notes as a Python dict, placement notes included: {'l3_resident,ceiling_stale': 1, ...}
    assert above_roof_counts(ops) == "2 ceiling_stale, 1 cache_fit"
    assert above_roof_counts(ops[ops.roofline_fraction < 1]) == ""


def test_the_commands_counts_above_the_roof_are_those_the_figure_draws():
    # an ingested CPU step (tests/fixtures/cpu_zoo6/sr-param-train) held a 0-FLOP copy_ above its memory roof:
    # the command said '13 mixed_traffic', the legend (intensity 0 cannot be drawn) 'mixed_traffic (12)'
    from wlprof.cli.roofline import placed_summary

    ops = _ops([(0.1, 0.43, 60.0, "elementwise", "vector", "bfloat16", "compute:vector", 1.3, "cache_fit"),
                (0.2, 0.9, 40.0, "elementwise", "vector", "bfloat16", "compute:vector", 1.1, "mixed_traffic"),
                (0.0, 0.0, 30.0, "copy", "vector", "bfloat16", "compute:vector", 1.2, "mixed_traffic"),
                (0.25, 1.2, 50.0, "elementwise", "vector", "bfloat16", "compute:vector", 0.6, None)])
    ops["flops"], ops["bytes"] = [6.0, 9.0, 0.0, 12.0], [60.0, 45.0, 64.0, 48.0]
    ops["op_input_dims"] = "[[4,4]]"
    assert placed_summary(ops) == ("3 of 4 op calls placed; the others have no FLOPs, bytes or kernel time; "
                                   "above their roof: 1 cache_fit, 1 mixed_traffic")
    fig = figures.roofline(ops, C)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "above its roof: cache_fit (1)" in labels and "above its roof: mixed_traffic (1)" in labels, labels

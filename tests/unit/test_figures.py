"""Each report figure answers its question: the right axes, numeric order, no legend entry without a mark."""

from __future__ import annotations

import numpy as np
import pandas as pd

from wlprof.plots import figures


def _steps():
    rows = []
    for i, (m, lat) in enumerate(((2048, 42.0), (32, 176.0), (1, 4825.0))):  # three GEMMs of equal FLOPs
        rows.append({"workload": "gemm", "family": "GEMM shapes", "family_label": "GEMM shapes", "run_id": "g",
                     "point": i, "variant": f"m{m}", "dtype": "bfloat16", "flops": 21.47e9, "useful_flops": 21.47e9,
                     "latency_us": lat, "kernel_us": lat * 0.7, "back_to_back_us": lat * 0.8, "peak_tflops": 806.0})
    for i, b in enumerate((1, 8, 64, 512, 4096)):
        fl = 2 * 2 * b * 4096 * 16384
        rows.append({"workload": "mlp", "family": "MLP", "family_label": "MLP", "run_id": "m", "point": i,
                     "variant": f"batch {b}", "dtype": "bfloat16", "batch": b, "flops": fl, "useful_flops": fl,
                     "latency_us": 130.0 + fl / 6e8, "kernel_us": 70.0 + fl / 6.7e8, "back_to_back_us": 80.0,
                     "peak_tflops": 806.0, "achieved_tflops": fl / (70.0 + fl / 6.7e8) / 1e6,
                     "achieved_tflops_latency": fl / (130.0 + fl / 6e8) / 1e6, "ceiling_tflops": 806.0,
                     "bound": "compute" if b >= 512 else "memory"})
    return pd.DataFrame(rows)


def test_same_flops_marks_the_spread_and_draws_the_peak_of_the_runs_dtype():
    fig = figures.latency_vs_flops(_steps())
    gemm = fig.axes[0]
    assert gemm.get_xscale() == gemm.get_yscale() == "log"
    assert "115x apart" in gemm.get_title()  # 4825 / 42
    labels = [t.get_text() for t in gemm.get_legend().get_texts()]
    assert any("bfloat16 peak (806 TFLOP/s)" in t for t in labels)
    assert any("115x" == t.get_text() for t in gemm.texts)


def test_rate_figure_marks_where_memory_bound_turns_compute_bound():
    d = _steps()
    fig = figures.rate_vs_axis(d[d.workload == "mlp"], "batch", "MLP")
    top, bottom = fig.axes
    assert any("compute-bound from batch 512" in t.get_text() for t in top.texts)
    assert bottom.get_yscale() == "log" and bottom.get_xscale() == "log"


def test_phases_shares_log_time_and_padding():
    idx = pd.MultiIndex.from_tuples([("128 tok", "concentrated / padded"), ("128 tok", "concentrated / grouped"),
                                     ("8192 tok", "balanced / grouped")], names=["context", "variant"])
    t = pd.DataFrame({"moe/expert": [6000.0, 270.0, 7000.0], "moe/router": [21.0, 21.0, 60.0],
                      "moe/unused": [0.0, 0.0, 0.0]}, index=idx)
    useful = pd.Series([4.5e10, 4.5e10, 2.9e12], index=idx)
    fig = figures.phase_breakdown(t, "MoE", useful, useful * np.array([32.0, 1.0, 1.0]))
    shares, absolute, padding = fig.axes
    assert absolute.get_xscale() == "log"
    legend = [x.get_text() for x in shares.get_legend().get_texts()]
    assert legend == ["expert", "router"]  # no entry for a phase no bar shows
    assert any(x.get_text() == "32.0x" for x in padding.texts)
    assert [x.get_text() for x in shares.get_yticklabels()][0] == "concentrated / padded"


def test_backends_sort_sizes_as_numbers_and_draw_the_copy_ceiling():
    rows = [{"graph": "rmat", "scale": 20, "features": f, "backend": b, "kernel_us": 1000.0 * f / 64,
             "achieved_gbps": 1000.0 + f, "ceiling_gbps": 4154.0}
            for f in (256, 64, 128) for b in ("csr", "scatter")]
    fig = figures.backends(pd.DataFrame(rows), "GNN", 4154.0)
    ax_time, ax_bw = fig.axes[0], fig.axes[1]
    assert [t.get_text() for t in ax_time.get_xticklabels()] == ["64", "128", "256"]
    assert any("copy 4,154 GB/s" in t.get_text() for t in ax_bw.texts)


def test_timings_show_the_host_overhead_gap():
    fig = figures.timings(_steps())
    absolute, ratio = fig.axes
    assert ratio.get_yscale() == "log"
    assert any("one call: median" in t.get_text() for t in ratio.texts)


def test_numbers_in_figures():
    assert figures.num(805.9) == "806" and figures.num(0.3) == "0.300" and figures.num(12345.6) == "12,346"
    assert figures.rate(0.3) == "300 GFLOP/s" and figures.rate(806.2) == "806 TFLOP/s"
    assert figures.tick(1000.0) == "1,000" and figures.tick(0.01) == "0.01" and figures.si_tick(1e9) == "1 G"

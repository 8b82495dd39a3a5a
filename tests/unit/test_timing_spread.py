"""A point's repeated timing samples: how far they spread, and when that makes its medians `noisy`."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from wlprof.steps import NOISY_SPREAD, spread, summarize, timing_spread
from wlprof.study import PHASE_WEIGHTS, phase_fraction
from wlprof.timing import Timings


def test_spread_uses_percentiles_from_ten_samples_and_the_range_below():
    xs = [100.0] * 8 + [50.0, 1000.0]  # ten samples: p10/p90 ignore part of the two outliers
    assert spread(xs) == pytest.approx((np.percentile(xs, 90) - np.percentile(xs, 10)) / 100)
    assert spread([100, 110, 90]) == pytest.approx(0.2)  # (110 - 90) / 100
    assert math.isnan(spread([5.0])) and math.isnan(spread([])) and math.isnan(spread(None))


def test_spread_by_hand():
    # 2 samples (NaN dropped): the range over the median, (110 - 90) / 100
    assert spread([90.0, math.nan, 110.0]) == pytest.approx(0.2, rel=1e-12)
    assert spread([0.5, 1.0, 1.5]) == 1.0  # (1.5 - 0.5) / 1: a median of 1 is a median like another
    # a median of 0 or below has nothing to scale by
    assert math.isnan(spread([0.0, 0.0, 5.0])) and math.isnan(spread([-1.0, -2.0, -3.0]))
    # 10 samples 1..10: linear percentiles at positions 0.1 * 9 = 0.9 and 0.9 * 9 = 8.1 of the sorted
    # samples, p10 = 1.9 and p90 = 9.1; median 5.5: (9.1 - 1.9) / 5.5 = 7.2 / 5.5 (the range would give 9 / 5.5)
    assert spread([float(x) for x in range(10, 0, -1)]) == pytest.approx(7.2 / 5.5, rel=1e-12)


def test_the_largest_spread_names_its_samples():
    s, which = timing_spread([100] * 30, [10, 30, 20], None, [1.0, 1.0])
    assert which == "back_to_back" and s == pytest.approx(1.0)
    assert timing_spread(None, None, None, None)[1] is None
    # each set in turn the widest: (110 - 90) / 100, (120 - 80) / 100, (50 - 30) / 40
    assert timing_spread([90, 110, 100], [100] * 3, [100] * 3, [1.0, 1.0]) == (pytest.approx(0.2), "latency")
    assert timing_spread([100] * 3, [100] * 3, [80, 120, 100], [1.0, 1.0]) == (pytest.approx(0.4), "graph")
    assert timing_spread([100] * 3, [100] * 3, None, [30.0, 50.0, 40.0]) == (0.5, "kernel")
    # a tie keeps the first set: latency and back-to-back both (110 - 90) / 100
    assert timing_spread([90.0, 110.0], [90.0, 100.0, 110.0], None, None) == (pytest.approx(0.2), "latency")


def _kernels(durs):
    rows = [{"step": i, "ts_us": 10.0 * i, "dur_us": d, "flops": 1e6, "bytes": 1e3, "flops_source": "formula",
             "roofline_us": np.nan, "bound": None, "ceiling_tflops": np.nan, "ceiling_gbps": np.nan,
             "ridge_flop_per_byte": np.nan, "region": None} for i, d in enumerate(durs)]
    return pd.DataFrame(rows)


def test_summarize_flags_a_point_whose_samples_spread_past_the_threshold():
    steady = Timings(latency_us=[100.0] * 30, back_to_back_us=[50.0] * 5, calls_per_batch=10)
    row = summarize(_kernels([40.0, 41.0, 40.5]), steady, 3, None)
    assert row["noisy"] is False and row["timing_spread"] < NOISY_SPREAD
    # the case: one point's back-to-back batches 30x apart
    swinging = Timings(latency_us=[100.0] * 30, back_to_back_us=[85_447.0, 2_739_117.0, 90_000.0],
                       calls_per_batch=3)
    row = summarize(_kernels([40.0, 41.0, 40.5]), swinging, 3, None)
    assert row["noisy"] is True and row["timing_spread_of"] == "back_to_back" and row["timing_spread"] > 10
    ingested = summarize(_kernels([40.0]), None, 1, None)
    assert ingested["noisy"] is None and math.isnan(ingested["timing_spread"])


def test_an_ingested_trace_s_profiled_steps_spread_like_a_run_s():
    # an ingest has no unprofiled timings, only its steps' kernel times: 185, 211 and 2,184 ms (a loaded CPU's
    # third step) spread (2184 - 185) / 211 = 9.47 of the median step
    row = summarize(_kernels([185.0, 211.0, 2184.0]), None, 3, None)
    assert row["timing_spread_of"] == "kernel" and row["timing_spread"] == pytest.approx(1999 / 211)
    assert row["noisy"] is True and row["kernel_us"] == 211.0
    steady = summarize(_kernels([40.0, 41.0, 42.0]), None, 3, None)  # (42 - 40) / 41 = 0.049
    assert steady["noisy"] is False and steady["timing_spread"] == pytest.approx(2 / 41)


@pytest.mark.parametrize(("lat", "b2b", "graph", "durs", "which", "value"), [
    ([90.0, 110.0, 100.0], [100.0] * 3, [100.0] * 3, [40.0] * 3, "latency", 0.2),  # (110 - 90) / 100
    ([100.0] * 3, [100.0] * 3, [80.0, 120.0, 100.0], [40.0] * 3, "graph", 0.4),  # (120 - 80) / 100
    ([100.0] * 3, [100.0] * 3, None, [30.0, 50.0, 40.0], "kernel", 0.5),  # per-step kernel time (50 - 30) / 40
    ([100.0] * 3, [100.0, 125.0, 100.0], None, [40.0] * 3, "back_to_back", 0.25),  # exactly the threshold
])
def test_summarize_names_the_widest_of_its_four_sample_sets(lat, b2b, graph, durs, which, value):
    t = Timings(latency_us=lat, back_to_back_us=b2b, calls_per_batch=3, graph_us=graph)
    row = summarize(_kernels(durs), t, 3, None)
    assert row["timing_spread_of"] == which and row["timing_spread"] == pytest.approx(value, rel=1e-12)
    assert row["noisy"] is (value > NOISY_SPREAD)  # 0.25 itself is not noisy: the spread must exceed it


def test_phases_move_forward_inside_a_point():
    order = list(PHASE_WEIGHTS)
    fractions = [phase_fraction(p, 0, 1) for p in order]
    assert fractions == sorted(fractions) and fractions[0] == 0 and fractions[-1] < 1
    assert phase_fraction("one call", 15, 30) > phase_fraction("one call", 0, 30)
    assert phase_fraction("nonsense", 1, 2) == 0.0

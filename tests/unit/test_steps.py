"""The steps row (wlprof.steps.summarize) of constructed kernels and timings, every value by hand."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from wlprof.steps import _busy_sorted_array, _busy_us, summarize
from wlprof.timing import Timings

NAN = math.nan
EXACT = 1e-12  # relative: the rates divide by exactly 1e6 and 1e3
COLS = ["step", "ts_us", "dur_us", "flops", "bytes", "flops_source", "roofline_us", "bound", "ceiling_tflops",
        "ceiling_gbps", "ridge_flop_per_byte", "region"]
ROWS = [
    (-1, -50.0, 1000.0, 9e9, 9e9, "formula", 1.0, "compute", 1.0, 1.0, 1.0, "a"),  # outside the steps: ignored
    (0, 0.0, 10.0, 100.0, 50.0, "formula", 5.0, "compute", 7.0, 70.0, 0.1, "a"),
    (0, 5.0, 10.0, NAN, NAN, "unknown", NAN, None, NAN, NAN, NAN, "b"),  # overlaps the one before
    (1, 100.0, 30.0, 300.0, 100.0, "formula", 12.0, "memory", 8.0, 80.0, 0.2, "a"),  # the longest
    (2, 200.0, 4.0, 40.0, 20.0, "workload", 2.0, "compute", 9.0, 90.0, 0.3, "b"),
    (2, 210.0, 10.0, 60.0, NAN, "formula", NAN, None, NAN, NAN, NAN, "a"),
]
# per step: summed durations 20, 30, 14 (median 20; the mean would be 21.33);
#           busy (union of intervals) [0, 15] = 15, 30, 4 + 10 = 14 (median 15)
TIMINGS = Timings(latency_us=[50.0, 10.0, 30.0, 20.0], back_to_back_us=[25.0, 27.0, 26.0], calls_per_batch=7,
                  graph_us=[18.0, 22.0, 19.0], graph_error=None)


def _kernels():
    return pd.DataFrame({c: pd.Series([r[i] for r in ROWS], dtype=object if c in ("flops_source", "bound", "region")
                                      else float) for i, c in enumerate(COLS)})


def test_summarize_by_hand():
    row = summarize(_kernels(), TIMINGS, profiled_steps=3, useful_flops=None, executed_regions=("a",))
    assert row["kernel_us"] == 20.0 and row["dur_us"] == 20.0  # median of 20, 30, 14
    assert row["kernel_busy_us"] == 15.0  # median of 15, 30, 14
    assert row["kernels_per_step"] == pytest.approx(5 / 3)
    assert row["profiled_steps"] == 3 and row["status"] == "ok"
    # FLOPs per step: the known rows 100 + 300 + 40 + 60 = 500 over 3 steps
    assert row["flops"] == pytest.approx(500 / 3)
    # bytes per step: rows with both FLOPs and bytes, 50 + 100 + 20 = 170 over 3 steps
    assert row["bytes"] == pytest.approx(170 / 3)
    # intensity over the rows whose FLOPs and bytes are both known: (100 + 300 + 40) / 170, not the 60 FLOPs
    # of the row without bytes over the others' bytes
    assert row["intensity_flop_per_byte"] == pytest.approx(440 / 170)
    # executed: region a's known FLOPs 100 + 300 + 60 = 460 over 3; useful defaults to executed
    assert row["executed_flops"] == pytest.approx(460 / 3) and row["useful_flops"] == pytest.approx(460 / 3)
    assert row["flops_source"] == "formula,unknown,workload"
    # the unknown row's 10 us of the 10 + 10 + 30 + 4 + 10 = 64 us in steps
    assert row["unknown_time_share"] == pytest.approx(10 / 64)
    # bytes unknown: step 0's unknown row and step 2's second row, 10 + 10 = 20 of the 64 us
    assert row["bytes_unknown_time_share"] == pytest.approx(20 / 64)
    # roofline: rows with a roof 5 + 12 + 2 = 19 us over 3 steps; 19 us of their 10 + 30 + 4 = 44 us
    assert row["roofline_us"] == pytest.approx(19 / 3) and row["roofline_fraction"] == pytest.approx(19 / 44)
    # bound: the bound holding the most time among roofed rows: memory 30 us against compute 10 + 4 = 14
    assert row["bound"] == "memory"
    # ceilings: those of the longest row (step 1, 30 us)
    assert (row["ceiling_tflops"], row["ceiling_gbps"], row["ridge_flop_per_byte"]) == (8.0, 80.0, 0.2)
    # rates: FLOPs / us / 1e6 = TFLOP/s, bytes / us / 1e3 = GB/s, over the kernel time of 20 us
    assert row["achieved_tflops"] == pytest.approx(500 / 3 / 20 / 1e6, rel=EXACT)
    assert row["achieved_gbps"] == pytest.approx(170 / 3 / 20 / 1e3, rel=EXACT)
    assert row["achieved_tflops_executed"] == pytest.approx(460 / 3 / 20 / 1e6, rel=EXACT)
    assert row["achieved_tflops_useful"] == pytest.approx(460 / 3 / 20 / 1e6, rel=EXACT)
    # the timings beside them: latency median (20 + 30) / 2 = 25; p10 10, p90 50 (see test_timing.py)
    assert row["latency_us"] == 25.0 and (row["latency_p10_us"], row["latency_p90_us"]) == (10.0, 50.0)
    assert row["latency_samples_us"] == [50.0, 10.0, 30.0, 20.0]
    assert row["back_to_back_us"] == 26.0 and row["back_to_back_samples_us"] == [25.0, 27.0, 26.0]
    assert row["calls_per_batch"] == 7 and row["graph_us"] == 19.0 and row["graph_error"] is None
    assert row["achieved_tflops_latency"] == pytest.approx(500 / 3 / 25 / 1e6, rel=EXACT)
    assert row["host_overhead_us"] == 5.0  # 25 - 20


def test_useful_flops_given_and_every_region_executed():
    row = summarize(_kernels(), TIMINGS, profiled_steps=3, useful_flops=90.0)
    assert row["executed_flops"] == pytest.approx(500 / 3)  # no executed regions: every kernel
    assert row["useful_flops"] == 90.0
    assert row["achieved_tflops_useful"] == pytest.approx(90 / 20 / 1e6, rel=EXACT)
    assert row["achieved_tflops_executed"] == pytest.approx(500 / 3 / 20 / 1e6, rel=EXACT)


def test_an_ingested_trace_has_no_timings():
    row = summarize(_kernels(), None, profiled_steps=3, useful_flops=None)
    assert math.isnan(row["latency_us"]) and math.isnan(row["back_to_back_us"]) and math.isnan(row["latency_p10_us"])
    assert row["latency_samples_us"] is None and row["calls_per_batch"] is None and row["graph_us"] is None
    assert row["graph_error"] == "an ingested trace: no unprofiled timings"
    assert math.isnan(row["achieved_tflops_latency"]) and math.isnan(row["host_overhead_us"])
    assert row["kernel_us"] == 20.0


def test_no_kernels_in_any_step():
    k = _kernels()
    k = k[k.step < 0]
    row = summarize(k, TIMINGS, profiled_steps=2, useful_flops=None)
    assert math.isnan(row["kernel_us"]) and math.isnan(row["kernel_busy_us"]) and math.isnan(row["flops"])
    assert math.isnan(row["bytes"]) and math.isnan(row["roofline_us"]) and row["bound"] is None
    assert row["kernels_per_step"] == 0 and row["flops_source"] is None
    assert math.isnan(row["ceiling_tflops"]) and math.isnan(row["achieved_tflops"])


def test_a_step_of_unknown_costs_only():
    k = _kernels()
    k = k[k.flops_source == "unknown"]  # step 0's unknown row alone
    row = summarize(k, None, profiled_steps=1, useful_flops=None)
    assert row["kernel_us"] == 10.0 and math.isnan(row["flops"]) and math.isnan(row["bytes"])
    assert row["unknown_time_share"] == 1.0 and math.isnan(row["roofline_us"]) and row["bound"] is None
    assert math.isnan(row["intensity_flop_per_byte"])
    assert row["kernels_per_step"] == 1.0  # one kernel in one step


@pytest.mark.parametrize(("starts", "ends", "busy"), [
    ([], [], 0.0),
    ([0.0], [3.0], 3.0),
    ([0.0, 5.0], [10.0, 15.0], 15.0),  # overlapping: [0, 15]
    ([5.0, 0.0], [15.0, 10.0], 15.0),  # the same, out of order
    ([0.0, 2.0], [10.0, 4.0], 10.0),  # nested
    ([0.0, 20.0], [10.0, 25.0], 15.0),  # apart: 10 + 5
    ([0.0, 10.0], [10.0, 12.0], 12.0),  # touching: one interval
    ([0.0, 3.0, 20.0, 22.0], [5.0, 8.0, 21.0, 30.0], 17.0),  # [0, 8] + [20, 21] + [22, 30] = 8 + 1 + 8
])
def test_busy_time_counts_overlap_once(starts, ends, busy):
    assert _busy_us(np.array(starts), np.array(ends)) == busy


def _sweep_busy(starts, ends) -> float:
    """The union's length by a sweep over the intervals by start, the pieces summed one by one in order."""
    order = np.argsort(starts)
    total, cur_s, cur_e = 0.0, starts[order[0]], ends[order[0]]
    for a, b in zip(starts[order[1:]], ends[order[1:]], strict=True):
        if a > cur_e:
            total, cur_s, cur_e = total + (cur_e - cur_s), a, b
        else:
            cur_e = max(cur_e, b)
    return float(total + cur_e - cur_s)


def test_busy_time_is_the_sweep_s_to_the_last_bit():
    """On microsecond timestamps from 0 and of the epoch (1.7e12 us), with ties, nesting, zero and negative
    durations, the busy time equals a sweep's, float for float (the pieces summed in the sweep's order):
    the steps table is the same."""
    rng = np.random.default_rng(7)
    for trial in range(300):
        n = int(rng.integers(1, 300))
        origin = 1.7e12 if trial % 3 == 0 else 0.0  # an epoch's microseconds, or a trace's own clock
        starts = np.round(origin + rng.uniform(0, 2e3 * n if trial % 2 else 1e3, n), 3)  # apart, or crowded
        starts[rng.uniform(size=n) < 0.2] = starts[0]  # equal starts
        ends = starts + np.round(rng.exponential(50, n), 3) * (rng.uniform(size=n) > 0.1)
        if trial % 5 == 0:
            ends[-1] = starts[-1] - 1.0  # a negative duration (a foreign trace)
        assert _busy_us(starts, ends) == _sweep_busy(starts, ends)


def _sweep_pieces(s, e) -> tuple[list[float], float, float]:
    """The union's pieces met one by one over intervals sorted by start: the finished lengths, and the last
    piece's start and end."""
    done, cur_s, cur_e = [], s[0], e[0]
    for a, b in zip(s[1:], e[1:], strict=True):
        if a > cur_e:
            done.append(cur_e - cur_s)
            cur_s, cur_e = a, b
        else:
            cur_e = max(cur_e, b)
    return done, cur_s, cur_e


def test_the_array_path_sums_the_pieces_exactly_as_a_one_by_one_sweep():
    """The array path alone, on intervals where the order of the additions decides the last bits: starts
    spread from 1e-6 to 1e4 us (each piece's length carries bits far below the later pieces' resolution),
    each interval busy almost up to the next start, equal starts, nesting and zero lengths mixed in. Its
    busy time equals the sweep's running sum float for float, and the trials include sets whose pieces sum
    to another float in numpy's pairwise order or exactly (fsum), so a change of summation order fails."""
    rng = np.random.default_rng(7)
    other_order = 0
    for _ in range(400):
        n = int(rng.integers(2, 400))
        s = np.sort(10 ** rng.uniform(-6, 4, n))
        gap_to_next = np.r_[s[1:], s[-1] * 1.5] - s
        e = s + gap_to_next * rng.uniform(0.5, 1.0, n)
        tie = rng.uniform(size=n) < 0.05  # an interval that starts with the one before and ends inside it
        tie[0] = False
        s[tie] = s[np.flatnonzero(tie) - 1]
        e[tie] = np.minimum(e[tie], e[np.flatnonzero(tie) - 1])
        zero = rng.uniform(size=n) < 0.05  # a zero-length interval
        e[zero] = s[zero]
        done, last_s, last_e = _sweep_pieces(s, e)
        running = 0.0
        for length in done:
            running += length
        sweep = running + last_e - last_s
        assert _busy_sorted_array(s, e) == sweep
        pieces = np.asarray(done)
        if len(pieces) and (float(np.sum(pieces)) + last_e - last_s != sweep
                            or math.fsum(pieces) + last_e - last_s != sweep):
            other_order += 1
    assert other_order >= 20, other_order


def test_sub_microsecond_steps_keep_their_rates():
    # two steps of one 0.5 us kernel each (100 FLOPs, 40 bytes, roof 0.25 us): every ratio is defined
    k = pd.DataFrame({"step": [0.0, 1.0], "ts_us": [0.0, 10.0], "dur_us": [0.5, 0.5], "flops": [100.0, 100.0],
                      "bytes": [0.5, 0.5], "flops_source": pd.Series(["formula"] * 2, dtype=object),
                      "roofline_us": [0.25, 0.25], "bound": pd.Series(["compute"] * 2, dtype=object),
                      "ceiling_tflops": [1.0, 1.0], "ceiling_gbps": [1.0, 1.0], "ridge_flop_per_byte": [1.0, 1.0],
                      "region": pd.Series(["a", "a"], dtype=object)})
    t = Timings(latency_us=[0.8], back_to_back_us=[0.6], calls_per_batch=3)
    row = summarize(k, t, profiled_steps=2, useful_flops=None)
    assert row["kernel_us"] == 0.5 and row["kernel_busy_us"] == 0.5
    assert row["intensity_flop_per_byte"] == 200.0  # 100 FLOPs over 0.5 bytes per step
    assert row["achieved_tflops"] == pytest.approx(100 / 0.5 / 1e6, rel=EXACT)
    assert row["achieved_gbps"] == pytest.approx(0.5 / 0.5 / 1e3, rel=EXACT)
    assert row["achieved_tflops_latency"] == pytest.approx(100 / 0.8 / 1e6, rel=EXACT)
    assert row["achieved_tflops_useful"] == row["achieved_tflops_executed"] == row["achieved_tflops"]
    assert row["roofline_fraction"] == 0.5 and row["unknown_time_share"] == 0.0
    # every row has bytes: 0 of the 0.5 + 0.5 = 1 us in steps (a share, defined for any time above 0)
    assert row["bytes_unknown_time_share"] == 0.0


def test_zero_time_steps_have_no_rates():
    k = pd.DataFrame({"step": [0.0], "ts_us": [0.0], "dur_us": [0.0], "flops": [10.0], "bytes": [0.0],
                      "flops_source": pd.Series(["formula"], dtype=object), "roofline_us": [0.0],
                      "bound": pd.Series(["memory"], dtype=object), "ceiling_tflops": [1.0], "ceiling_gbps": [1.0],
                      "ridge_flop_per_byte": [1.0], "region": pd.Series(["a"], dtype=object)})
    row = summarize(k, Timings([0.0], [0.0], 3), profiled_steps=1, useful_flops=None)
    for key in ("intensity_flop_per_byte", "achieved_tflops", "achieved_gbps", "achieved_tflops_latency",
                "achieved_tflops_useful", "achieved_tflops_executed", "unknown_time_share", "roofline_fraction"):
        assert math.isnan(row[key]), key
    assert row["kernel_us"] == 0.0 and row["bound"] == "memory"


@pytest.mark.filterwarnings("error")
def test_no_time_in_steps_divides_nothing():
    # no kernel in a step, then one kernel of 0 us: every share and median is NaN, taken without
    # dividing 0 by 0 or taking the median of nothing (either would warn, an error here)
    k = _kernels()
    row = summarize(k[k.step < 0], TIMINGS, profiled_steps=2, useful_flops=None)
    for key in ("unknown_time_share", "bytes_unknown_time_share", "kernel_busy_us", "roofline_fraction"):
        assert math.isnan(row[key]), key
    zero = k[k.step == 1].assign(dur_us=0.0, roofline_us=0.0)
    row = summarize(zero, TIMINGS, profiled_steps=1, useful_flops=None)
    for key in ("unknown_time_share", "bytes_unknown_time_share", "roofline_fraction"):
        assert math.isnan(row[key]), key
    assert row["kernel_busy_us"] == 0.0 and row["kernels_per_step"] == 1.0


def test_latency_percentiles_of_eleven_samples():
    # n = 11, sorted 0..10: p10 at index round(0.1 * 10) = 1, p90 at round(0.9 * 10) = 9 (not the max, 10)
    t = Timings(latency_us=[5.0, 10.0, 0.0, 9.0, 1.0, 2.0, 8.0, 3.0, 7.0, 4.0, 6.0], back_to_back_us=[5.0],
                calls_per_batch=3)
    row = summarize(_kernels(), t, profiled_steps=3, useful_flops=None)
    assert (row["latency_p10_us"], row["latency_us"], row["latency_p90_us"]) == (1.0, 5.0, 9.0)


def test_roof_notes_of_the_steps_kernels():
    k = _kernels().assign(roof_note=pd.Series(["ceiling_stale", "within_spread,l2_resident", None, "l2_resident",
                                               None, None], dtype=object))
    row = summarize(k, TIMINGS, profiled_steps=3, useful_flops=None)
    # the step kernels' notes once each, in the roofline's order (l2_resident before within_spread);
    # ceiling_stale is the note of the row outside the steps
    assert row["roof_note"] == "l2_resident,within_spread"
    assert summarize(_kernels(), TIMINGS, profiled_steps=3, useful_flops=None)["roof_note"] is None  # no column

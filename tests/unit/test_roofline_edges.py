"""Roof placement (cost.roofline) at its edges, every value by hand: zero and sub-microsecond durations,
zero, one and unknown bytes, boundaries met exactly, ceilings that lack a roof, the working set of
calls that repeat within a step or across runs, and stored tables placed again.

Units of the columns: t_compute = FLOPs / (TFLOP/s x 1e6) us, t_memory = bytes / (GB/s x 1e3) us,
roofline_us = max(t_compute, t_memory), roofline_fraction = roofline_us / dur_us. Spreads are 25%
(p90 = 1.25 x the median) unless said, so that every boundary below is met exactly in floating point.
"""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pandas as pd
import pytest

from wlprof.ceilings import Ceilings, Measurement
from wlprof.cost.roofline import (
    _key_ids,
    above_roof_unexplained,
    add_roofline,
    replace_roofline,
    traffic,
    working_set_bytes,
)

NAN = math.nan
MAIN = {"hbm_read": 4000.0, "hbm_copy": 3000.0, "hbm_write": 3500.0}


def _m(v, p90, unit="GB/s"):
    return Measurement(v, unit, "constructed", p10=v, p90=p90)


def _gpu(l2_gbps=10000.0, l2_p90=None, extra=None):
    """read 4 TB/s, copy 3 TB/s, write 3.5 TB/s (p90 5000, 3750, 4375), an L2 of 60 MB at `l2_gbps`;
    bf16 matrix 800 TFLOP/s (p90 1000), fp32 50, vector 50 (no spread)."""
    meas = {k: _m(v, 1.25 * v) for k, v in MAIN.items()}
    meas["l2"] = _m(l2_gbps, l2_p90 if l2_p90 is not None else 1.25 * l2_gbps)
    meas["matrix:bfloat16"] = _m(800.0, 1000.0, "TFLOP/s")
    meas.update(extra or {})
    return Ceilings("cuda", "constructed", {"bfloat16": 800.0, "float32": 50.0, "tf32": 400.0}, 50.0, 3000.0,
                    "measured", "", "", bandwidth_gbps={**MAIN, "l2": l2_gbps}, cache_bytes={"l2": 60_000_000},
                    measurements=meas)


GPU = _gpu()


def _rows(rows, index=None, **extra):
    cols = ["flops", "bytes", "bytes_written", "dur_us", "cost_unit", "cost_dtype"]
    df = pd.DataFrame({c: pd.Series([r[i] for r in rows], dtype=object if i >= 4 else float)
                       for i, c in enumerate(cols)})
    if index is not None:
        df.index = index
    for k, v in extra.items():
        df[k] = v
    return df


def _vec(*rows):
    """Vector bf16 rows of (flops, bytes, bytes_written, dur_us)."""
    return _rows([(*r, "vector", "bfloat16") for r in rows])


def _calls(steps, seq, first_step=1, dur=1.0, **cols):
    """A run of `steps` steps, each calling `seq` [(name, bytes)] in order, one microsecond apart.
    Every call records the same op inputs; `cols` adds a column (a value, or a function of the step)."""
    rows, ts = [], 0.0
    for s in range(first_step, first_step + steps):
        for name, b in seq:
            row = {"step": s, "ts_us": ts, "name": name, "op_name": f"aten::{name}",
                   "op_input_dims": "[[1024]]", "op_input_types": "['float']", "op_input_strides": "[[1]]",
                   "flops": 0.0, "bytes": b, "bytes_written": b / 3, "dur_us": dur,
                   "cost_unit": "vector", "cost_dtype": "bfloat16"}
            row.update({k: (v(s) if callable(v) else v) for k, v in cols.items()})
            rows.append(row)
            ts += 1.0
    return pd.DataFrame(rows)


def test_zero_and_sub_microsecond_durations():
    df = _vec(
        # a kernel recorded with 0 us (rounded down): 4 MB read at 4000 GB/s = 1 us of roof, no rate, no fraction
        (1e6, 4e6, 0.0, 0.0),
        # 0.5 us: 1e6 B / 0.5 us / 1e3 = 2000 GB/s, 5e5 / 0.5 / 1e6 = 1 TFLOP/s; 1e6 / 4e6 = 0.25 us of roof: 0.5
        (5e5, 1e6, 0.0, 0.5),
    )
    add_roofline(df, GPU)
    assert df.roofline_us.tolist() == [1.0, 0.25] and list(df.bound) == ["memory", "memory"]
    assert np.isnan([df.achieved_gbps[0], df.achieved_tflops[0], df.roofline_fraction[0]]).all()
    assert (df.achieved_gbps[1], df.achieved_tflops[1], df.roofline_fraction[1]) == (2000.0, 1.0, 0.5)
    assert list(df.roof_note) == [None, None]  # no fraction, nothing above the roof


def test_zero_one_and_unknown_bytes():
    df = _vec(
        (0.0, 1.0, 1.0, 1.0),  # one byte, written: intensity 0 / 1 = 0, write-dominated
        (0.0, 1.0, NAN, 1.0),  # one byte, written unknown: against the copy roof, said so
        (0.0, 0.0, NAN, 0.0),  # nothing moved: the copy roof, no note (no byte of unknown traffic)
        (NAN, NAN, NAN, 3.0),  # no cost: no memory roof
        (1e6, 0.0, 0.0, 1.0),  # FLOPs without bytes: no intensity (not infinite)
    )
    add_roofline(df, GPU)
    assert df.intensity_flop_per_byte[0] == 0.0 and np.isnan(df.intensity_flop_per_byte[[2, 4]]).all()
    assert list(df.memory_roof) == ["hbm_write", "hbm_copy", "hbm_copy", None, "hbm_copy"]
    assert list(df.roof_note) == [None, "written_unknown", None, None, None]
    # nothing moved: 0 us of roof against 0 us of compute, compute-bound (0 >= 0)
    assert df.roofline_us[2] == 0.0 and df.bound[2] == "compute"
    # no bytes: no written share, whatever is said written; one byte written of one: 'write'
    assert list(traffic(np.array([0.0, 0.0, 1.0]), np.array([0.0, 5.0, 1.0]))) == [None, None, "write"]


def test_zero_bytes_or_durations_raise_no_floating_point_warning():
    df = _vec((1e6, 4e6, 0.0, 0.0), (0.0, 0.0, NAN, 0.0), (1e6, 0.0, 0.0, 1.0), (0.0, 0.0, 0.0, 0.0))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # x / 0 ('divide') and 0 / 0 ('invalid') would raise
        add_roofline(df, GPU)
        assert list(traffic(np.array([0.0, 0.0]), np.array([0.0, 5.0]))) == [None, None]
    # fractions: no time, no time, 1e6 / 50e6 = 0.02 us in 1 us, no time; intensity 1e6 / 4e6, then no bytes
    np.testing.assert_array_equal(df.roofline_fraction, [NAN, NAN, 0.02, NAN])
    np.testing.assert_array_equal(df.intensity_flop_per_byte, [0.25, NAN, NAN, NAN])


def test_without_ceilings_every_placement_column_is_there_and_empty():
    df = _vec((1e9, 1e6, 1e5, 10.0), (0.0, 1e6, 0.0, 1.0))
    df.index = [10, 5]  # a slice of a stored table keeps its row labels
    add_roofline(df, None)
    for c in ("ceiling_tflops", "ceiling_gbps", "ridge_flop_per_byte", "roofline_us", "roofline_fraction",
              "working_set_bytes"):
        assert c in df and df[c].isna().all(), c
    for c in ("bound", "roof", "compute_roof", "memory_roof", "roof_note"):
        assert c in df and all(v is None for v in df[c]), c
    assert df.achieved_gbps.tolist() == [100.0, 1000.0]  # 1e6 / 10 / 1e3, 1e6 / 1 / 1e3


def test_a_table_slice_keeps_its_memory_roof_and_note_with_its_rows():
    df = _vec((0.0, 1.001e9, 1e6, 500.0), (0.0, 1e9, NAN, 500.0))
    df.index = [10, 5]
    add_roofline(df, GPU)
    assert list(df.memory_roof) == ["hbm_read", "hbm_copy"] and list(df.roof_note) == [None, "written_unknown"]


def test_missing_cost_text_read_back_as_nan_or_na_gets_no_compute_roof():
    # a matrix op of unknown dtype, and a row with no cost at all, their text columns holding NaN (a table
    # read back) or pandas' NA (a nullable string column): no compute roof, so no roof
    for missing, dtype in ((NAN, object), (pd.NA, "string")):
        df = _rows([(1e9, 1e6, 1e5, 10.0, "matrix", missing), (NAN, NAN, NAN, 3.0, missing, missing)])
        df["cost_unit"] = df.cost_unit.astype(dtype)
        df["cost_dtype"] = df.cost_dtype.astype(dtype)
        add_roofline(df, GPU)
        assert list(df.compute_roof) == [None, None] and list(df.roof) == [None, None], dtype
        assert np.isnan(df.ceiling_tflops).all() and list(df.bound) == [None, None]


def test_an_unmeasured_write_roof_moves_only_the_write_rows_to_the_copy_roof():
    c = Ceilings("cuda", "constructed", {"bfloat16": 800.0}, 50.0, 3000.0, "measured", "", "",
                 bandwidth_gbps={"hbm_read": 4000.0, "hbm_copy": 3000.0})
    df = _vec((0.0, 1.001e9, 1e6, 500.0), (0.0, 1e9, 1e9, 500.0))
    add_roofline(df, c)
    # read: 1.001e9 / 4e6 = 250.25 us; write, unmeasured: against copy, 1e9 / 3e6 = 333.3 us
    assert list(df.memory_roof) == ["hbm_read", "hbm_copy"] and list(df.roof_note) == [None, "roof_unmeasured"]
    assert df.roofline_us.tolist() == pytest.approx([250.25, 1e9 / 3e6])


def test_without_a_measured_copy_roof_copy_gbps_stands_in():
    # read measured (4000), copy and write not: copy-like and write rows go against copy_gbps (2000)
    c = Ceilings("cuda", "constructed", {"bfloat16": 800.0}, 50.0, 2000.0, "measured", "", "",
                 bandwidth_gbps={"hbm_read": 4000.0})
    df = _vec((0.0, 4e9, 4e6, 2000.0), (0.0, 4e9, 2e9, 4000.0), (0.0, 4e9, 4e9, 4000.0))
    add_roofline(df, c)
    # 4e9 / 4e6 = 1000 us; 4e9 / 2e6 = 2000 us twice
    assert df.roofline_us.tolist() == [1000.0, 2000.0, 2000.0]
    assert df.ceiling_gbps.tolist() == [4000.0, 2000.0, 2000.0]
    assert list(df.memory_roof) == ["hbm_read", "hbm_copy", "hbm_copy"]
    assert list(df.roof_note) == [None, None, "roof_unmeasured"]
    # no main-memory roof measured at all, only a cache level: copy_gbps for every row
    c = Ceilings("cuda", "constructed", {"bfloat16": 800.0}, 50.0, 2000.0, "measured", "", "",
                 bandwidth_gbps={"l2": 10000.0}, cache_bytes={"l2": 60_000_000})
    df = _vec((0.0, 4e9, 4e6, 1000.0))
    add_roofline(df, c)
    # 4e9 / 2e6 = 2000 us in 1000 us: twice the roof, against a ceiling without a spread
    assert (df.memory_roof[0], df.roofline_us[0], df.roofline_fraction[0]) == ("hbm_copy", 2000.0, 2.0)
    assert df.roof_note[0] == "roof_unmeasured,above_measured_roof"


def test_unknown_bytes_count_in_the_working_set_at_the_copy_rate():
    # each step: k (1 MB, 1 us), then a kernel of unknown bytes for 10 us: 10 us x 3000 GB/s = 30 MB.
    # Working set of every call: 1 MB + 30 MB = 31 MB (<= 60 MB: the L2)
    df = _calls(3, [("k", 1e6), ("opaque", NAN)], dur=1.0)
    df.loc[df.name == "opaque", "dur_us"] = 10.0
    add_roofline(df, GPU)
    assert df.working_set_bytes.tolist() == [31e6] * 6
    assert list(df.memory_roof[df.name == "k"]) == ["l2"] * 3


def test_a_working_set_of_exactly_the_cache_capacity_fits():
    df = _calls(2, [("k", 60e6)], dur=10.0)  # 60 MB once a step: a working set of the L2's 60 MB; 6 us of 10
    add_roofline(df, GPU)
    assert df.working_set_bytes.tolist() == [60e6, 60e6]
    assert list(df.memory_roof) == ["l2", "l2"] and list(df.roof_note) == ["l2_resident"] * 2


def test_a_cache_level_as_fast_as_the_main_roof_is_still_its_roof():
    df = _calls(2, [("k", 3e6)])  # copy-like (1/3 written): hbm_copy 3000 GB/s, an L2 of 3000 GB/s too
    add_roofline(df, _gpu(l2_gbps=3000.0))
    assert list(df.memory_roof) == ["l2", "l2"] and list(df.roof_note) == ["l2_resident"] * 2
    assert df.roofline_us.tolist() == [1.0, 1.0]  # 3e6 / 3e6


def test_only_the_smallest_level_a_working_set_fits_is_tried():
    # 50 kB copy-like, once a step: it fits the L1 (96 KiB), which at 15 GB/s is slower than DRAM copy (20):
    # no cache roof, though the larger L2 (100 GB/s) and L3 (60 GB/s) would hold it too
    cpu = Ceilings("cpu", "cpu Y", {"float32": 1.0}, 1.0, 20.0, "measured", "", "",
                   bandwidth_gbps={"dram_read": 25.0, "dram_copy": 20.0, "dram_write": 15.0, "l1": 15.0, "l2": 100.0,
                                   "l3": 60.0},
                   cache_bytes={"l1": 98304, "l2": 4 << 20, "l3": 32 << 20})
    df = _calls(2, [("k", 50e3)], dur=10.0)
    add_roofline(df, cpu)
    assert df.working_set_bytes.tolist() == [50e3, 50e3]
    assert list(df.memory_roof) == ["dram_copy"] * 2 and list(df.roof_note) == [None, None]


def test_a_fraction_of_exactly_one_is_not_above_the_roof():
    df = _vec((0.0, 4e9, 0.0, 1000.0))  # read 4e9 B / 4e6 = 1000 us in 1000 us
    add_roofline(df, GPU)
    assert df.roofline_fraction[0] == 1.0 and df.roof_note[0] is None
    assert above_roof_unexplained(df.assign(roof_note=None)).empty


def test_a_fraction_at_exactly_the_p90_is_within_the_spread():
    df = _vec((0.0, 5e9, 0.0, 1000.0))  # 5e9 / 4e6 = 1250 us in 1000 us: 1.25 = 5000 / 4000, the read p90
    add_roofline(df, GPU)
    assert df.roofline_fraction[0] == 1.25 and df.roof_note[0] == "within_spread"


def test_a_copy_like_kernel_is_judged_against_the_best_main_roof_within_its_spread():
    # 3 GB copy-like (1/3 written) against hbm_copy 3000 (p90 3750): 1000 us of roof. The best main roof is
    # read, 4000 GB/s, p90 5000 (25%, the largest spread of the main roofs; the L2's 100% does not count).
    # 3 GB does not fit the L2 (at best 6 us + 2.94e9 / 3e6 = 986 us, longer than any of these took).
    c = _gpu(l2_p90=20000.0)
    df = _vec((0.0, 3e9, 1e9, 3e9 / 4500e3),  # 4500 GB/s: within read's p90: mixed_traffic
              (0.0, 3e9, 1e9, 600.0),  # 5000 GB/s, exactly read's p90: mixed_traffic
              (0.0, 3e9, 1e9, 500.0),  # 6000 GB/s: above every main roof's spread
              (0.0, 3e9, NAN, 500.0))  # the same, written unknown: the unknown mix does not explain it
    add_roofline(df, c)
    assert df.achieved_gbps.tolist() == pytest.approx([4500.0, 5000.0, 6000.0, 6000.0])
    assert df.achieved_gbps[1] == 5000.0
    assert df.roofline_fraction.tolist() == pytest.approx([1.5, 1000 / 600, 2.0, 2.0])
    assert list(df.roof_note) == ["mixed_traffic", "mixed_traffic", "ceiling_stale",
                                  "written_unknown,ceiling_stale"]


def test_cache_fit_takes_exactly_the_best_split_and_any_level():
    # reads 72 MB (4 MB written: 5.6%, hbm_read 4000 GB/s). At best 60 MB from the L2 and 12 MB from HBM:
    # 60e6 / 10e12 + 12e6 / 4e12 = 6 + 3 = 9 us: in exactly 9 us it is explained (fraction 18 / 9 = 2).
    # 71.4 MB (4.2 MB written): 6 + 11.4e6 / 4e12 = 8.85 us; in 8.848 us it is not.
    df = _vec((0.0, 72e6, 4e6, 9.0), (0.0, 71.4e6, 4.2e6, 8.848))
    add_roofline(df, GPU)
    assert df.roofline_fraction[0] == 2.0 and list(df.memory_roof) == ["hbm_read", "hbm_read"]
    assert list(df.roof_note) == ["cache_fit", "ceiling_stale"]
    # a CPU with three levels: 90 kB read in 1 us (dram_read 25 GB/s: 3.6 us of roof). The L1 (96 KiB, 400 GB/s)
    # holds it all: 90e3 / 400e3 = 0.225 us <= 1; the L3 (60 GB/s) would need 1.5 us; the L2 is slower than DRAM
    dram = {"dram_read": 25.0, "dram_copy": 20.0, "dram_write": 15.0}
    cpu = Ceilings("cpu", "cpu X", {"float32": 1.0}, 1.0, 20.0, "measured", "", "",
                   bandwidth_gbps={**dram, "l1": 400.0, "l2": 10.0, "l3": 60.0},
                   cache_bytes={"l1": 98304, "l2": 4 << 20, "l3": 32 << 20},
                   measurements={k: _m(v, 1.25 * v) for k, v in dram.items()})
    df = _vec((0.0, 90e3, 1e3, 1.0))
    add_roofline(df, cpu)
    assert (df.memory_roof[0], df.roof_note[0]) == ("dram_read", "cache_fit")


def test_a_gemm_within_the_zero_data_rate_of_its_own_dtype():
    # randn roofs: bf16 800 TFLOP/s (p90 808), fp32 50 (p90 50.5); the bf16 GEMM on zeros 900 (p90 1125)
    c = _gpu(extra={"matrix:bfloat16": _m(800.0, 808.0, "TFLOP/s"), "matrix:float32": _m(50.0, 50.5, "TFLOP/s"),
                    "matrix_zeros:bfloat16": _m(900.0, 1125.0, "TFLOP/s")})
    df = _rows([(0.0, 1e9, 0.0, 500.0, "vector", "bfloat16"),  # memory-bound, below its roof: placed first
                (7e10, 1e6, 1e5, 1000.0, "matrix", "float32"),  # fp32 at 70 TFLOP/s: no zero-data rate for fp32
                (1.125e12, 1e6, 1e5, 1000.0, "matrix", "bfloat16"),  # 1125 TFLOP/s: exactly the zeros' p90
                (9.5e11, 1e6, 1e5, 1000.0, "matrix", "bfloat16")])  # 950: above the zeros' median, within p90
    add_roofline(df, c)
    # fractions: 0.5; 7e10 / 50e6 / 1000 = 1.4; 1.125e12 / 800e6 / 1000 = 1.40625; 950 / 800 = 1.1875
    assert df.roofline_fraction.tolist() == pytest.approx([0.5, 1.4, 1.40625, 1.1875])
    assert list(df.roof_note) == [None, "ceiling_stale", "data_dependent", "data_dependent"]
    # a zero-data rate without a spread is judged by its median alone: 1200 > 900
    c.measurements["matrix_zeros:bfloat16"] = Measurement(900.0, "TFLOP/s", "constructed")
    df = _rows([(1.2e12, 1e6, 1e5, 1000.0, "matrix", "bfloat16")])
    add_roofline(df, c)
    assert df.roof_note[0] == "ceiling_stale"


def test_a_vector_op_is_judged_by_the_vector_rate_spread():
    c = _gpu(extra={"vector": _m(50.0, 62.5, "TFLOP/s")})
    df = _rows([(5.5e10, 1e3, 0.0, 1000.0, "vector", "float32")])  # 55 TFLOP/s: 1.1 of 50, p90 1.25
    add_roofline(df, c)
    assert df.roofline_fraction[0] == pytest.approx(1.1) and df.roof_note[0] == "within_spread"


def test_a_note_not_first_in_a_joined_note_still_explains():
    df = pd.DataFrame({"roofline_fraction": [1.2, 1.2, 0.5], "roof_note": ["l2_resident,within_spread",
                                                                       "l2_resident", None]})
    assert above_roof_unexplained(df).index.tolist() == [1]  # l2_resident alone explains nothing


def test_above_roof_unexplained_without_its_columns():
    no_frac = pd.DataFrame({"roof_note": [None, None], "x": [1, 2]})
    assert above_roof_unexplained(no_frac).empty
    # no roof_note column: every row above 1 is unexplained, by its own label
    no_note = pd.DataFrame({"roofline_fraction": [1.5, 0.5, 2.0]}, index=[7, 3, 9])
    assert above_roof_unexplained(no_note).index.tolist() == [7, 9]


def test_working_set_needs_steps_and_times():
    df = _calls(2, [("k", 1e6)])
    assert working_set_bytes(df, 3000.0).tolist() == [1e6, 1e6]
    assert np.isnan(working_set_bytes(df.drop(columns="ts_us"), 3000.0)).all()
    assert np.isnan(working_set_bytes(df.drop(columns="step"), 3000.0)).all()


def test_unknown_bytes_without_a_duration_count_nothing():
    df = _calls(2, [("k", 1e6), ("opaque", NAN)]).drop(columns="dur_us")
    # no duration to price the unknown kernel at 3000 GB/s: it counts nothing, k's working set is its own 1 MB
    # (and the unknown kernel's, k's 1 MB between its calls)
    assert working_set_bytes(df, 3000.0).tolist() == [1e6] * 4


@pytest.mark.parametrize("col", ["run_id", "point", "rank", "device_index"])
def test_the_same_call_in_another_run_point_rank_or_device_is_not_a_repeat(col):
    # k in step 1 on one run (point, rank, device), in step 2 on another: neither repeats
    apart = _calls(2, [("k", 1e6)], **{col: lambda s: s})
    assert np.isnan(working_set_bytes(apart, 3000.0)).all()
    together = _calls(2, [("k", 1e6)], **{col: 0})
    assert working_set_bytes(together, 3000.0).tolist() == [1e6, 1e6]


@pytest.mark.parametrize("col", ["name", "op_name", "op_input_dims", "op_input_types", "op_input_strides"])
def test_a_call_differing_in_its_kernel_op_or_any_recorded_input_is_not_a_repeat(col):
    apart = _calls(2, [("k", 1e6)], **{col: lambda s: f"v{s}"})
    assert np.isnan(working_set_bytes(apart, 3000.0)).all()
    together = _calls(2, [("k", 1e6)], **{col: "v"})
    assert working_set_bytes(together, 3000.0).tolist() == [1e6, 1e6]


def test_working_set_of_rows_in_any_order():
    # step 1: k (1 MB), z (20 MB), x (5 MB); step 2: k, x. k: 1 + 20 + 5 = 26 MB between its calls;
    # x: its 5 MB + step 2's k = 6 MB; z runs once: NaN
    df = pd.concat([_calls(1, [("k", 1e6), ("z", 20e6), ("x", 5e6)]),
                    _calls(1, [("k", 1e6), ("x", 5e6)], first_step=2).assign(ts_us=lambda d: d.ts_us + 3)],
                   ignore_index=True)
    want = [26e6, NAN, 6e6, 26e6, 6e6]
    np.testing.assert_array_equal(working_set_bytes(df, 3000.0), want)
    # the same rows stored last first
    np.testing.assert_array_equal(working_set_bytes(df.iloc[::-1].reset_index(drop=True), 3000.0), want[::-1])


def test_step_zero_is_a_step():
    df = _calls(2, [("k", 1e6), ("x", 2e6)], first_step=0)  # ProfilerStep#0, #1
    assert working_set_bytes(df, 3000.0).tolist() == [3e6] * 4


def test_a_call_repeated_within_a_step_is_matched_occurrence_by_occurrence():
    # two runs, three steps each of k (1000 B), x (10), k, y (100), y: every call repeats once a step, so each
    # occurrence's working set is the bytes of one step around it: 1000 + 10 + 1000 + 100 + 100 = 2210.
    # Matching the second k with the first (a call with itself in the same step) would give 1000 + 10 = 1010.
    seq = [("k", 1000.0), ("x", 10.0), ("k", 1000.0), ("y", 100.0), ("y", 100.0)]
    df = pd.concat([_calls(3, seq, run_id="a"), _calls(3, seq, run_id="b")], ignore_index=True)
    assert working_set_bytes(df, 3000.0).tolist() == [2210.0] * 30


def test_key_ids_are_one_per_distinct_combination():
    # 4 values in the first column, 2 in the second: (3, 'x') and (0, 'y') must not share an id
    df = pd.DataFrame({"a": [0, 1, 2, 3, 0, 0], "b": ["x", "x", "x", "x", "y", "x"],
                       "c": [None, NAN, None, None, NAN, None]})
    ids = _key_ids(df, ["a", "b", "c"])  # None and NaN: one value
    assert len(set(ids[:5].tolist())) == 5 and ids[5] == ids[0]


def _mm_table():
    """Two stored fp32 GEMM rows, [64,128] x [128,256], of a table written before formulas stated their writes:
    bytes 4 * (64*128 + 128*256 + 64*256) = 229376, FLOPs 2 * 64 * 128 * 256 = 4194304; the first with
    bytes_written null, the second with 229376 written (not this formula's 65536: it is kept)."""
    dims, types = json.dumps([[64, 128], [128, 256]]), json.dumps(["float", "float"])
    df = _rows([(4194304.0, 229376.0, NAN, 10.0, "matrix", "float32"),
                (4194304.0, 229376.0, 229376.0, 10.0, "matrix", "float32")],
               kind="kernel", name="gemm", op_name="aten::mm", op_input_dims=dims, op_input_types=types,
               flops_source="formula")
    return df


def test_replace_roofline_restates_only_the_null_bytes_written():
    df = _mm_table()
    new = replace_roofline(df, GPU)  # no compute_roof (an older table): no TF32
    # 65536 / 229376 = 29% written: copy-like; 229376 of 229376: write
    assert new.bytes_written.tolist() == [65536.0, 229376.0] and np.isnan(df.bytes_written[0])
    assert list(new.memory_roof) == ["hbm_copy", "hbm_write"] and list(new.roof_note) == [None, None]
    assert list(new.compute_roof) == ["compute:float32"] * 2
    # a table without the column at all: both restated
    assert replace_roofline(df.drop(columns="bytes_written"), GPU).bytes_written.tolist() == [65536.0] * 2
    # not asked to: the null stays null and is said so
    kept = replace_roofline(df, GPU, written_from_shapes=False)
    assert np.isnan(kept.bytes_written[0]) and list(kept.roof_note) == ["written_unknown", None]


def test_replace_roofline_reads_tf32_from_a_nullable_compute_roof():
    df = _mm_table().assign(compute_roof=pd.array(["compute:tf32", pd.NA], dtype="string"))
    new = replace_roofline(df, GPU)
    # 4194304 / 400e6 = 0.0105 us at TF32 (400 TFLOP/s); the NA row: fp32, 4194304 / 50e6 = 0.0839 us
    assert list(new.compute_roof) == ["compute:tf32", "compute:float32"]
    assert new.ceiling_tflops.tolist() == [400.0, 50.0]


def test_numbers_in_object_columns_are_placed_as_floats():
    # a table whose numeric columns are object dtype (None for unknown) is placed as its float twin
    df = _calls(2, [("k", 1e6), ("opaque", NAN)])
    df.loc[df.name == "opaque", ["flops", "bytes_written"]] = NAN
    obj = df.astype({c: object for c in ("flops", "bytes", "bytes_written", "dur_us", "ts_us")})
    for c in ("flops", "bytes", "bytes_written"):
        obj[c] = pd.Series([None if pd.isna(v) else v for v in obj[c]], dtype=object)
    assert obj.bytes.dtype == object and obj.bytes[1] is None
    a, b = replace_roofline(df, GPU), replace_roofline(obj, GPU)
    placed = obj.copy()
    add_roofline(placed, GPU)  # bytes_written as it is (replace_roofline restates it into a float column)
    assert list(placed.roof_note) == list(a.roof_note)
    for c in ("roofline_us", "working_set_bytes", "achieved_gbps", "intensity_flop_per_byte", "bytes_written"):
        np.testing.assert_array_equal(b[c].to_numpy(dtype=float), a[c].to_numpy(dtype=float), err_msg=c)
    assert list(b.roof_note) == list(a.roof_note) and list(b.memory_roof) == list(a.memory_roof)
    # k: 1 MB + the unknown kernel's 1 us x 3000 GB/s = 4 MB
    assert a.working_set_bytes.tolist() == [4e6] * 4


def _link_gpu(h2d=55.0, d2h=50.0):
    """GPU's ceilings with the host links measured (None: that link not measured)."""
    bw = {**GPU.bandwidth_gbps, **({"host_to_device": h2d} if h2d else {}), **({"device_to_host": d2h} if d2h else {})}
    meas = {**GPU.measurements, **({"host_to_device": _m(h2d, 1.25 * h2d)} if h2d else {}),
            **({"device_to_host": _m(d2h, 1.25 * d2h)} if d2h else {})}
    return Ceilings(**{**GPU.to_dict(), "bandwidth_gbps": bw, "measurements": meas})


@pytest.mark.parametrize("ceilings", [_link_gpu(h2d=None), _link_gpu()], ids=["no HtoD link", "no HtoD copy"])
def test_a_copy_to_the_host_meets_its_link_whether_or_not_the_other_link_has_rows(ceilings):
    # one copy to the host of 1 MB in 100 us: 1e6 B / 50e3 B/us = 20 us at the device-to-host roof
    df = _rows([(0.0, 1e6, 0.0, 100.0, "vector", "float32")], kind=["memcpy"],
               name=["Memcpy DtoH (Device -> Pinned)"])
    add_roofline(df, ceilings)
    assert df.roof.tolist() == ["device_to_host"] and df.ceiling_gbps.tolist() == [50.0]
    assert df.roofline_us.tolist() == pytest.approx([20.0])


def test_a_link_copy_crossing_one_byte_or_none():
    # to the device: 2 B counted, 1 B written (crossing the link): the ceiling in the row's bytes is
    # 55 x 2 / 1 = 110 GB/s, so its time at the roof is the crossing byte's, 1 / 55e3 us;
    # 1 MB counted and nothing written: nothing crosses, the ceiling stays the link's 55 GB/s
    df = _rows([(0.0, 2.0, 1.0, 1.0, "vector", "float32"), (0.0, 1e6, 0.0, 100.0, "vector", "float32")],
               kind=["memcpy"] * 2, name=["Memcpy HtoD (Pinned -> Device)"] * 2)
    add_roofline(df, _link_gpu())
    assert df.roof.tolist() == ["host_to_device"] * 2
    assert df.ceiling_gbps.tolist() == pytest.approx([110.0, 55.0])
    assert df.roofline_us.tolist() == pytest.approx([1 / 55e3, 1e6 / 55e3])


def test_memcpy_rows_without_names_keep_the_device_roofs():
    # a table with kinds but no kernel names (an ops-like table): no link can be told, HBM copy it is
    df = _rows([(0.0, 3e6, 1.5e6, 100.0, "vector", "float32")], kind=["memcpy"])
    add_roofline(df, _link_gpu())
    assert df.roof.tolist() == ["hbm_copy"] and df.ceiling_gbps.tolist() == [3000.0]

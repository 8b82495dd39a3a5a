"""Roof placement (cost.roofline): which roof each kernel is placed against, and why, every value by hand.

Units of the columns: t_compute = FLOPs / (TFLOP/s x 1e6) us, t_memory = bytes / (GB/s x 1e3) us,
roofline_us = max(t_compute, t_memory), roofline_fraction = roofline_us / dur_us.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from wlprof.ceilings import Ceilings, Measurement
from wlprof.cost.roofline import (
    above_roof_unexplained,
    add_roofline,
    compute_key,
    replace_roofline,
    traffic,
    working_set_bytes,
)

NAN = math.nan


def _m(v, lo, hi):
    return Measurement(v, "GB/s", "constructed", p10=lo, p90=hi)


# read 4 TB/s, copy 3 TB/s, write 3.5 TB/s, an L2 of 60 MB at 10 TB/s; bf16 matrix 800 TFLOP/s
# (spread 780-808), vector 50 TFLOP/s; every ceiling's p90 is 1% above its median, except the
# vector rate, which kept no spread.
GPU = Ceilings(
    "cuda", "NVIDIA H200", {"bfloat16": 800.0, "float32": 50.0, "tf32": 400.0}, 50.0, 3000.0, "measured",
    "2026-12-01T00:00:00+00:00", "",
    bandwidth_gbps={"hbm_read": 4000.0, "hbm_copy": 3000.0, "hbm_write": 3500.0, "l2": 10000.0},
    cache_bytes={"l2": 60_000_000},
    measurements={"hbm_read": _m(4000.0, 3960.0, 4040.0), "hbm_copy": _m(3000.0, 2970.0, 3030.0),
                  "hbm_write": _m(3500.0, 3465.0, 3535.0), "l2": _m(10000.0, 9900.0, 10100.0),
                  "matrix:bfloat16": Measurement(800.0, "TFLOP/s", "mm", p10=780.0, p90=808.0)},
)
OLD = Ceilings("cuda", "NVIDIA H200", {"bfloat16": 800.0}, 50.0, 3000.0, "measured", "", "")  # format 1: copy only


def _rows(rows, **extra):
    cols = ["flops", "bytes", "bytes_written", "dur_us", "cost_unit", "cost_dtype"]
    df = pd.DataFrame({c: pd.Series([r[i] for r in rows], dtype=object if i >= 4 else float)
                       for i, c in enumerate(cols)})
    for k, v in extra.items():
        df[k] = v
    return df


def test_read_dominated_kernel_goes_against_the_read_roof():
    # reads 1 GB, writes 1 MB: written share 1e6 / 1.001e9 = 0.1% <= 10%: read-dominated.
    # roofline_us = 1.001e9 B / 4e12 B/s = 250.25 us (against the copy roof it would be 333.7 us)
    df = _rows([(0.0, 1.001e9, 1e6, 500.0, "vector", "bfloat16")])
    add_roofline(df, GPU)
    r = df.iloc[0]
    assert (r.roof, r.memory_roof, r.compute_roof, r.bound) == ("hbm_read", "hbm_read", "compute:vector", "memory")
    assert r.ceiling_gbps == 4000.0 and r.roofline_us == pytest.approx(250.25)
    assert r.roofline_fraction == pytest.approx(250.25 / 500.0) and r.roof_note is None
    # ridge against its own memory roof: 50e12 / 4000e9 = 12.5 FLOP/byte
    assert r.ridge_flop_per_byte == pytest.approx(12.5)


def test_traffic_classes_copy_write_and_unknown():
    rows = [
        (0.0, 3e9, 1e9, 2000.0, "vector", "bfloat16"),  # a binary elementwise op: 1/3 written -> copy
        (0.0, 1e9, 1e9, 1000.0, "vector", "bfloat16"),  # a fill: all written -> write
        (0.0, 1e9, 0.92e9, 1000.0, "vector", "bfloat16"),  # 92% written -> write
        (0.0, 1e9, NAN, 1000.0, "vector", "bfloat16"),  # a formula that does not say -> copy, said so
    ]
    df = _rows(rows)
    add_roofline(df, GPU)
    assert list(df.memory_roof) == ["hbm_copy", "hbm_write", "hbm_write", "hbm_copy"]
    # 3e9 / 3000e3 = 1000 us; 1e9 / 3500e3 = 285.7 us; 1e9 / 3000e3 = 333.3 us
    assert df.roofline_us.tolist() == pytest.approx([1000.0, 1e6 / 3500, 1e6 / 3500, 1e6 / 3000])
    assert list(df.roof_note) == [None, None, None, "written_unknown"]
    assert list(traffic(np.array([10.0, 10.0, 10.0, 0.0]), np.array([1.0, 1.1, 9.0, 0.0]))) == [
        "read", "copy", "write", None]


def test_a_roof_the_ceilings_lack_falls_back_to_copy_and_says_so():
    df = _rows([(0.0, 1.001e9, 1e6, 500.0, "vector", "bfloat16"), (0.0, 1e9, 1e9, 500.0, "vector", "bfloat16")])
    add_roofline(df, OLD)
    assert list(df.memory_roof) == ["hbm_copy", "hbm_copy"]
    assert list(df.roof_note) == ["roof_unmeasured", "roof_unmeasured"]
    assert df.roofline_us.tolist() == pytest.approx([1.001e6 / 3000, 1e6 / 3000])


def test_a_matrix_op_of_a_dtype_with_no_measured_rate_is_not_placed_and_says_so():
    # GPU measured bf16, fp32 and tf32 matrix rates, no float64 or float16: a float64 GEMM of 1e9 FLOPs and
    # 1e6 bytes has no compute roof (not the vector rate, not another dtype's) and is not placed; the float64
    # elementwise op beside it is (vector compute roof; 1e6 B / 3000e3 B/us = 0.333 us on the copy roof)
    df = _rows([(1e9, 1e6, NAN, 100.0, "matrix", "float64"), (1e9, 1e6, 1e5, 100.0, "matrix", "float16"),
                (1e3, 1e6, 5e5, 1.0, "vector", "float64")])
    add_roofline(df, GPU)
    assert list(df.compute_roof) == ["compute:float64", "compute:float16", "compute:vector"]
    assert df.roofline_us.isna().tolist() == [True, True, False] and df.bound.tolist()[:2] == [None, None]
    assert df.roofline_us[2] == pytest.approx(1e6 / 3000e3)
    assert list(df.roof_note) == ["written_unknown,compute_unmeasured", "compute_unmeasured", None]


def test_fmax_picks_the_larger_time_and_bound_names_it():
    rows = [
        # gemm: t_compute = 2e9 / 800e6 = 2.5 us; t_memory = 4e6 (1e6 written -> copy) / 3000e3 = 1.333 us
        (2e9, 4e6, 1e6, 5.0, "matrix", "bfloat16"),
        # gemv: t_compute = 2e7 / 800e6 = 0.025 us; t_memory = 2e7 (read) / 4000e3 = 5 us
        (2e7, 2e7, 1e3, 10.0, "matrix", "bfloat16"),
        # no compute ceiling (fp8): no roof even though the bytes are known (np.fmax alone would give 1 us)
        (1e9, 3e6, 1e6, 10.0, "matrix", "float8_e4m3fn"),
        # bytes unknown: no roof (np.fmax alone would give t_compute)
        (1e9, NAN, NAN, 10.0, "matrix", "bfloat16"),
    ]
    df = _rows(rows)
    add_roofline(df, GPU)
    # fmin would give 1.333 and 0.025
    assert df.roofline_us.iloc[0] == pytest.approx(2.5) and df.roofline_us.iloc[1] == pytest.approx(5.0)
    assert np.isnan(df.roofline_us.iloc[2]) and np.isnan(df.roofline_us.iloc[3])
    assert list(df.bound) == ["compute", "memory", None, None]
    assert list(df.roof) == ["compute:bfloat16", "hbm_read", None, None]
    assert df.roofline_fraction.iloc[:2].tolist() == pytest.approx([0.5, 0.5])
    assert list(df.compute_roof) == ["compute:bfloat16", "compute:bfloat16", "compute:float8_e4m3fn",
                                     "compute:bfloat16"]


def test_compute_roof_names():
    assert compute_key("matrix", "float32", tf32=True) == "tf32"
    assert compute_key("matrix", "float32") == "float32" and compute_key("vector", "bfloat16") == "vector"
    assert compute_key(None, None) is None and compute_key("matrix", None) is None
    df = _rows([(4e11, 1e6, 1e5, 1000.0, "matrix", "float32")])
    add_roofline(df, GPU, tf32=True)
    # 4e11 / 400e6 = 1000 us against the tf32 rate
    assert df.roof.iloc[0] == "compute:tf32" and df.roofline_us.iloc[0] == pytest.approx(1000.0)


def _steps_of(per_step, steps=3, between=()):
    """A run: each step runs the call `per_step` (bytes, dur), then the `between` kernels."""
    rows, ts = [], 0.0
    for s in range(1, steps + 1):
        for name, (b, w, dur) in [("k", per_step), *between]:
            rows.append({"step": s, "ts_us": ts, "name": name, "op_name": f"aten::{name}",
                         "op_input_dims": "[[3145728],[3145728]]", "flops": b / 6, "bytes": b, "bytes_written": w,
                         "dur_us": dur, "cost_unit": "vector", "cost_dtype": "bfloat16"})
            ts += dur + 1.0
    return pd.DataFrame(rows)


def test_a_repeated_kernel_whose_bytes_stay_in_the_l2_goes_against_the_l2():
    # mul over 3M bf16 elements: 2 x 6.29 MB read + 6.29 MB written = 18.87 MB per call, called once a
    # step: the working set is its own 18.87 MB <= 60 MB of L2: placed against the L2 (10 TB/s).
    b = 3 * 3145728 * 2
    df = _steps_of((b, b / 3, 4.0))
    add_roofline(df, GPU)
    assert df.working_set_bytes.tolist() == [b, b, b]
    assert set(df.roof) == {"l2"} and set(df.roof_note) == {"l2_resident"}
    # 18.87e6 / 10000e3 = 1.887 us; against HBM copy (3000 GB/s) it would be 6.29 us: 157% of it
    assert df.roofline_us.iloc[0] == pytest.approx(b / 10000e3)
    assert df.roofline_fraction.iloc[0] == pytest.approx(b / 10000e3 / 4.0)
    assert above_roof_unexplained(df).empty


def test_the_traffic_between_two_calls_decides_whether_they_stay():
    b = 3 * 3145728 * 2
    # 50 MB moved between two calls of the mul: 18.87 + 50 = 68.87 MB > 60 MB: not resident
    df = _steps_of((b, b / 3, 10.0), between=[("other", (50e6, 25e6, 20.0))])
    add_roofline(df, GPU)
    k = df[df.name == "k"]
    # the first step looks forward (its call and everything until the next step's), the others back
    assert k.working_set_bytes.tolist() == pytest.approx([b + 50e6] * 3)
    assert set(k.memory_roof) == {"hbm_copy"} and k.roof_note.isna().all()
    # 10 MB between them: 28.87 MB fits
    df = _steps_of((b, b / 3, 4.0), between=[("other", (10e6, 5e6, 20.0))])
    add_roofline(df, GPU)
    assert set(df[df.name == "k"].memory_roof) == {"l2"}


def test_working_set_counts_unknown_bytes_at_the_fallback_rate_and_needs_a_repeat():
    df = _steps_of((1e6, 5e5, 1.0), steps=2, between=[("opaque", (NAN, NAN, 10.0))])
    # 10 us x 3000 GB/s = 30 MB for the kernel with unknown bytes; it repeats too (NaN bytes -> own 30 MB)
    ws = working_set_bytes(df, 3000.0)
    assert ws[df.name == "k"].tolist() == pytest.approx([1e6 + 30e6] * 2)
    assert working_set_bytes(df, None)[0] == pytest.approx(1e6)  # no fallback: unknown counts nothing
    one = _steps_of((1e6, 5e5, 1.0), steps=1)
    assert np.isnan(working_set_bytes(one, 3000.0)).all()  # a single step: nothing repeats
    # rows of two runs are never matched with each other
    two = pd.concat([_steps_of((1e6, 5e5, 1.0), steps=1).assign(run_id="a"),
                     _steps_of((1e6, 5e5, 1.0), steps=1).assign(run_id="b")], ignore_index=True)
    assert np.isnan(working_set_bytes(two, 3000.0)).all()


def test_above_the_roof_within_beyond_and_without_a_spread():
    rows = [
        # read 1e9 B in 248 us = 4032 GB/s: 100.8% of 4000, within its p90 (4040): within_spread
        (0.0, 1e9, 0.0, 248.0, "vector", "bfloat16"),
        # 4.49 TB/s against read 4000 (p90 4040): beyond the spread; above every main-memory roof
        (0.0, 1e9, 0.0, 1e9 / 4490e3, "vector", "bfloat16"),
        # copy-like (1/3 written) at 3.3 TB/s: 110% of the copy roof, but below read 4000: mixed_traffic
        (0.0, 3e9, 1e9, 3e9 / 3300e3, "vector", "bfloat16"),
        # written unknown at 3.3 TB/s: above copy, below read: the unknown traffic explains it
        (0.0, 3e9, NAN, 3e9 / 3300e3, "vector", "bfloat16"),
        # a bf16 GEMM at 820 TFLOP/s against 800 (p90 808): beyond the spread
        (8.2e11, 1e6, 1e5, 1000.0, "matrix", "bfloat16"),
        # an fp32 vector op against the vector rate, which kept no spread: above_measured_roof
        (6e10, 1e3, 0.0, 1000.0, "vector", "float32"),
    ]
    df = _rows(rows)
    add_roofline(df, GPU)
    assert df.roofline_fraction.tolist() == pytest.approx([1e9 / 4e6 / 248, 4490 / 4000, 1.1, 1.1, 820 / 800,
                                                           60 / 50])
    assert list(df.roof_note) == ["within_spread", "ceiling_stale", "mixed_traffic", "written_unknown",
                                  "ceiling_stale", "above_measured_roof"]
    assert above_roof_unexplained(df).empty
    # below the roof, nothing is said; an unexplained row is found
    bare = df.assign(roof_note=None)
    assert len(above_roof_unexplained(bare)) == 6


def test_cpu_levels_smallest_fitting_level_and_never_a_slower_roof():
    cpu = Ceilings("cpu", "cpu X", {"float32": 1.0}, 1.0, 20.0, "measured", "", "",
                   bandwidth_gbps={"dram_read": 25.0, "dram_copy": 20.0, "dram_write": 15.0, "l1": 400.0,
                                   "l2": 10.0, "l3": 60.0},
                   cache_bytes={"l1": 98304, "l2": 4 << 20, "l3": 32 << 20})
    df = pd.concat([_steps_of((b, b / 3, b / 5e3), steps=2).assign(point=i)  # at 5 GB/s: below every roof
                    for i, b in enumerate([50e3, 1e6, 10e6, 100e6])], ignore_index=True)
    add_roofline(df, cpu)
    by = df.groupby("point")
    # 50 KB fits the L1 (96 KiB); 1 MB fits the L2 but its 10 GB/s is slower than DRAM copy: DRAM copy,
    # no note; 10 MB fits the L3; 100 MB fits nothing
    assert by.memory_roof.first().tolist() == ["l1", "dram_copy", "l3", "dram_copy"]
    assert by.roof_note.first().tolist() == ["l1_resident", None, "l3_resident", None]


def test_no_ceilings_leaves_every_placement_column_empty():
    df = _rows([(1e9, 1e6, 1e5, 10.0, "matrix", "bfloat16")])
    add_roofline(df, None)
    assert df.roof.iloc[0] is None and df.roof_note.iloc[0] is None and np.isnan(df.roofline_us.iloc[0])
    assert df.achieved_tflops.iloc[0] == pytest.approx(100.0)


def test_replace_roofline_places_a_stored_table_again_and_keeps_the_input():
    df = _rows([(0.0, 1.001e9, 1e6, 500.0, "vector", "bfloat16")])
    add_roofline(df, OLD)
    assert df.roof.iloc[0] == "hbm_copy"
    new = replace_roofline(df, GPU, written_from_shapes=False)
    assert new.roof.iloc[0] == "hbm_read" and df.roof.iloc[0] == "hbm_copy"
    assert new.roofline_us.iloc[0] == pytest.approx(250.25)


def test_a_slice_of_a_stored_table_keeps_its_rows_placed_by_position():
    # a stored table's slice keeps its row labels (here 10, 5): every column must stay with its row
    df = _rows([(0.0, 1.001e9, 1e6, 500.0, "vector", "bfloat16"), (2e9, 4e6, 1e6, 5.0, "matrix", "bfloat16")])
    df.index = [10, 5]
    add_roofline(df, GPU)
    assert list(df.roof) == ["hbm_read", "compute:bfloat16"] and list(df.bound) == ["memory", "compute"]
    assert list(df.compute_roof) == ["compute:vector", "compute:bfloat16"]


def test_an_indexed_read_above_its_roof_is_said_to_reuse_rows():
    # a gather reading 1e9 B (one row per index) at 5.37 TB/s, 1/2 written (copy roof 3000, read 4000):
    # above every main-memory roof; its op reads by index, so repeated rows from the cache explain it.
    # A workload-stated aggregation (its bytes a row per message) the same; a plain copy at that rate not.
    df = _rows([(0.0, 1e9, 5e8, 1e9 / 5370e3, "vector", "bfloat16")] * 3,
               op_name=["aten::gather", "aten::mul", "aten::mul"], flops_source=["formula", "workload", "formula"])
    add_roofline(df, GPU)
    assert list(df.roof_note) == ["indexed_reuse", "indexed_reuse", "ceiling_stale"]


def test_a_kernel_whose_bytes_fit_the_l2_but_do_not_stay_may_have_found_its_inputs_there():
    # 33.6 MB (<= 60 MB of L2) at 5.1 TB/s, copy-like, not repeated within reach: against the HBM copy roof,
    # above every HBM roof: its inputs may have been left in the L2 by the kernels before it
    df = _rows([(0.0, 33.6e6, 16.8e6, 33.6e6 / 5100e3, "vector", "bfloat16"),
                (0.0, 336e6, 168e6, 336e6 / 5100e3, "vector", "bfloat16")])  # 10x: past the L2
    add_roofline(df, GPU)
    assert list(df.memory_roof) == ["hbm_copy", "hbm_copy"]
    assert list(df.roof_note) == ["cache_fit", "ceiling_stale"]


def test_a_kernel_a_little_past_the_l2_may_have_found_part_of_its_inputs_there():
    # reads 71.4 MB, writes 4.2 MB (5.9%: read-dominated, hbm_read 4000 GB/s), past the 60 MB L2.
    # At best 60 MB from the L2 and 11.4 MB from HBM: 60e6 / 10e12 + 11.4e6 / 4e12 = 6.0 + 2.85 = 8.85 us.
    # At 6.4 TB/s it took 71.4e6 / 6.4e12 = 11.16 us >= 8.85: explained; at 9 TB/s (7.93 us) not.
    df = _rows([(0.0, 71.4e6, 4.2e6, 71.4e6 / 6400e3, "vector", "bfloat16"),
                (0.0, 71.4e6, 4.2e6, 71.4e6 / 9000e3, "vector", "bfloat16")])
    add_roofline(df, GPU)
    assert list(df.memory_roof) == ["hbm_read", "hbm_read"]
    assert list(df.roofline_fraction.round(3)) == [1.6, 2.25]  # 6400 / 4000, 9000 / 4000
    assert list(df.roof_note) == ["cache_fit", "ceiling_stale"]


def test_a_gemm_above_the_randn_roof_within_the_zero_data_rate_is_data_dependent():
    # bf16 roof 800 TFLOP/s (p90 808) on randn; the same GEMM on zeros 900 (p90 909: 1% spread).
    # 2e12 FLOPs (intensity 2e12 / 4e6 = 5e5: compute-bound): at 2.3 ms 869.6 TFLOP/s, 1.087 of the roof,
    # beyond its spread (808 / 800 = 1.01) and within 909: data-dependent; at 2.1 ms 952.4 (> 909): not
    zeros = Measurement(900.0, "TFLOP/s", "mm on zeros", p10=891.0, p90=909.0)
    c = Ceilings.from_dict({**GPU.to_dict()})
    c.measurements["matrix_zeros:bfloat16"] = zeros
    df = _rows([(2e12, 4e6, 1e6, 2300.0, "matrix", "bfloat16"), (2e12, 4e6, 1e6, 2100.0, "matrix", "bfloat16")])
    add_roofline(df, c)
    assert list(df.roof) == ["compute:bfloat16"] * 2
    assert list(df.roof_note) == ["data_dependent", "ceiling_stale"]
    # the zero-data rate is not a roof: the fraction stays against the randn one
    assert df.roofline_fraction.iloc[0] == pytest.approx(2e12 / 800e6 / 2300.0)
    # without that measurement the first is beyond the spread, unexplained
    df2 = _rows([(2e12, 4e6, 1e6, 2300.0, "matrix", "bfloat16")])
    add_roofline(df2, GPU)
    assert list(df2.roof_note) == ["ceiling_stale"]


def test_an_empty_table_is_placed_without_error():
    df = _rows([])
    add_roofline(df, GPU)
    assert list(df.columns[-5:]) and len(df) == 0 and "roof_note" in df


def test_tf32_per_row_and_recovered_when_placing_again():
    # fp32 GEMMs of 4e11 FLOP in 1000 us: with TF32 against 400 TFLOP/s (1000 us), without against 50 (8000 us)
    df = _rows([(4e11, 1e6, 1e5, 1000.0, "matrix", "float32")] * 2)
    add_roofline(df, GPU, tf32=np.array([True, False]))
    assert list(df.compute_roof) == ["compute:tf32", "compute:float32"]
    assert df.roofline_us.tolist() == pytest.approx([1000.0, 8000.0])
    again = replace_roofline(df, GPU, written_from_shapes=False)  # TF32 read back from compute_roof
    assert list(again.compute_roof) == ["compute:tf32", "compute:float32"]


def test_ranks_of_one_run_are_never_matched_with_each_other():
    one = _steps_of((1e6, 5e5, 1.0), steps=1)
    two = pd.concat([one.assign(run_id="a", rank=0), one.assign(run_id="a", rank=1)], ignore_index=True)
    assert np.isnan(working_set_bytes(two, 3000.0)).all()  # one step per rank: nothing repeats


def test_copies_between_host_and_device_go_against_the_link_they_cross():
    # the link measured at 55 GB/s to the device and 50 GB/s to the host (each byte counted once)
    link = Ceilings(**{**GPU.to_dict(), "bandwidth_gbps": {**GPU.bandwidth_gbps, "host_to_device": 55.0,
                                                           "device_to_host": 50.0},
                       "measurements": {**GPU.measurements,
                                        "host_to_device": _m(55.0, 54.0, 56.0), "device_to_host": _m(50.0, 49.0, 51.0)}})
    n = 134_217_728  # 128 MiB moved by each copy
    df = _rows([(0.0, 2.0 * n, 1.0 * n, 2500.0, "vector", "float32"),  # aten::copy_'s formula: read + write
                (0.0, 1.0 * n, 1.0 * n, 2500.0, "vector", "float32"),  # the trace's bytes: device memory written
                (0.0, 2.0 * n, 1.0 * n, 3000.0, "vector", "float32"),  # to the host: device memory read
                (0.0, 1.0 * n, 0.0, 3000.0, "vector", "float32"),
                (0.0, 2.0 * n, 1.0 * n, 100.0, "vector", "float32")],  # on the device: HBM
               kind=["memcpy"] * 5, name=["Memcpy HtoD (Pinned -> Device)", "Memcpy HtoD (Pageable -> Device)",
                                          "Memcpy DtoH (Device -> Pinned)", "Memcpy DtoH (Device -> Pageable)",
                                          "Memcpy DtoD (Device -> Device)"])
    add_roofline(df, link)
    assert df.roof.tolist() == ["host_to_device", "host_to_device", "device_to_host", "device_to_host", "hbm_copy"]
    # at the roof each moves 134,217,728 B across: 134217728 / 55e3 = 2440.3 us to the device,
    # 134217728 / 50e3 = 2684.4 us to the host, whatever the row counts as its bytes
    assert df.roofline_us.tolist()[:4] == pytest.approx([n / 55e3, n / 55e3, n / 50e3, n / 50e3])
    assert df.roofline_fraction.tolist()[:4] == pytest.approx([n / 55e3 / 2500, n / 55e3 / 2500, n / 50e3 / 3000,
                                                               n / 50e3 / 3000])
    # the ceiling in the row's own bytes: its achieved GB/s over it is its fraction
    assert (df.achieved_gbps / df.ceiling_gbps).tolist()[:4] == pytest.approx(df.roofline_fraction.tolist()[:4])
    assert df.ceiling_gbps.tolist()[:2] == pytest.approx([110.0, 55.0])
    assert df.bound.tolist()[:4] == ["memory"] * 4 and df.roof_note.isna().all()
    # without a measured link (older ceilings) the copies keep the device's roofs
    old = _rows([(0.0, 2.0 * n, 1.0 * n, 2500.0, "vector", "float32")], kind=["memcpy"],
                name=["Memcpy HtoD (Pinned -> Device)"])
    add_roofline(old, GPU)
    assert old.roof.tolist() == ["hbm_copy"]

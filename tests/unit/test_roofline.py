"""Roofline placement (cost.roofline.add_roofline) on constructed rows and ceilings, every value by hand.

Ceilings: matrix 100 TFLOP/s in bfloat16, 10 in float32, 50 in tf32; vector 5 TFLOP/s;
copy 1000 GB/s. In the units of the columns: t_compute = FLOPs / (TFLOP/s * 1e6) us,
t_memory = bytes / (GB/s * 1e3) us, the roof = max(t_compute, t_memory).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from wlprof.ceilings import Ceilings
from wlprof.cost.roofline import add_roofline

C = Ceilings("cuda", "constructed", {"bfloat16": 100.0, "float32": 10.0, "tf32": 50.0}, 5.0, 1000.0,
             "measured", "", "")
NAN = math.nan

# (name, flops, bytes, dur_us, cost_unit, cost_dtype)
ROWS = [
    ("gemm", 2e9, 4e6, 40.0, "matrix", "bfloat16"),  # compute-bound
    ("copy", 1e6, 8e6, 10.0, "vector", "float32"),  # memory-bound
    ("tie", 5e6, 1e6, 2.0, "vector", "float32"),  # t_compute == t_memory
    ("fp8", 1e9, 1e6, 4.0, "matrix", "float8_e4m3fn"),  # no ceiling for the dtype
    ("unknown", NAN, NAN, 3.0, None, None),  # no formula
    ("zero", 0.0, 0.0, 0.0, "vector", "float32"),  # nothing moved, no time
]


def _df():
    cols = ["name", "flops", "bytes", "dur_us", "cost_unit", "cost_dtype"]
    # object columns, None for no cost, as cost.annotate hands them over (pandas 3 would make text
    # columns str, with NaN for None)
    return pd.DataFrame({c: pd.Series([r[i] for r in ROWS], dtype=object if i in (0, 4, 5) else float)
                         for i, c in enumerate(cols)})


def test_each_row_against_its_roof():
    df = _df()
    add_roofline(df, C)
    r = df.set_index("name")
    # gemm: t_compute = 2e9 / 100e6 = 20 us, t_memory = 4e6 / 1000e3 = 4 us: roof 20 us, compute-bound;
    #       intensity 2e9 / 4e6 = 500; achieved 2e9 / 40 / 1e6 = 50 TFLOP/s, 4e6 / 40 / 1e3 = 100 GB/s;
    #       ridge 100e12 / 1000e9 = 100 FLOP/byte; fraction 20 / 40 = 0.5
    g = r.loc["gemm"]
    assert (g.ceiling_tflops, g.ceiling_gbps, g.ridge_flop_per_byte) == (100.0, 1000.0, 100.0)
    assert (g.roofline_us, g.bound, g.roofline_fraction) == (pytest.approx(20.0), "compute", pytest.approx(0.5))
    assert (g.intensity_flop_per_byte, g.achieved_tflops, g.achieved_gbps) == (500.0, 50.0, 100.0)
    # copy: t_compute = 1e6 / 5e6 = 0.2 us, t_memory = 8e6 / 1e6 = 8 us: roof 8, memory-bound;
    #       intensity 1/8; 1e6 / 10 / 1e6 = 0.1 TFLOP/s, 8e6 / 10 / 1e3 = 800 GB/s; ridge 5e12 / 1e12 = 5
    c = r.loc["copy"]
    assert (c.ceiling_tflops, c.ridge_flop_per_byte) == (5.0, 5.0)
    assert (c.roofline_us, c.bound, c.roofline_fraction) == (pytest.approx(8.0), "memory", pytest.approx(0.8))
    assert (c.intensity_flop_per_byte, c.achieved_tflops, c.achieved_gbps) == (0.125, 0.1, 800.0)
    # tie: 5e6 / 5e6 = 1 us both ways: roof 1 us, counted compute-bound (t_compute >= t_memory)
    t = r.loc["tie"]
    assert (t.roofline_us, t.bound, t.roofline_fraction) == (pytest.approx(1.0), "compute", pytest.approx(0.5))
    # fp8: no matrix ceiling: no roof, no bound, no bandwidth ceiling either; the achieved rates stand
    f = r.loc["fp8"]
    assert np.isnan([f.ceiling_tflops, f.ceiling_gbps, f.ridge_flop_per_byte, f.roofline_us,
                     f.roofline_fraction]).all() and f.bound is None
    assert (f.achieved_tflops, f.achieved_gbps, f.intensity_flop_per_byte) == (250.0, 250.0, 1000.0)
    # unknown: no cost, so nothing but its duration
    u = r.loc["unknown"]
    assert np.isnan([u.intensity_flop_per_byte, u.achieved_tflops, u.achieved_gbps, u.roofline_us,
                     u.roofline_fraction, u.ceiling_tflops]).all() and u.bound is None
    # zero: 0 bytes and 0 us: no intensity, no rates, no fraction; the roof is 0 us, compute-bound (0 >= 0)
    z = r.loc["zero"]
    assert np.isnan([z.intensity_flop_per_byte, z.achieved_tflops, z.achieved_gbps, z.roofline_fraction]).all()
    assert z.roofline_us == 0.0 and z.bound == "compute"
    assert list(df.name) == [r[0] for r in ROWS]  # in place, order kept


def test_tf32_takes_the_tf32_matrix_ceiling_for_float32_only():
    df = pd.DataFrame({"flops": [1e9, 1e9], "bytes": [1.0, 1.0], "dur_us": [1000.0, 1000.0],
                       "cost_unit": ["matrix", "matrix"], "cost_dtype": ["float32", "bfloat16"]})
    add_roofline(df, C, tf32=True)
    # float32 at 50 TFLOP/s (tf32): 1e9 / 50e6 = 20 us; bfloat16 keeps 100: 10 us
    assert df.ceiling_tflops.tolist() == [50.0, 100.0]
    assert df.roofline_us.tolist() == pytest.approx([20.0, 10.0])
    add_roofline(df, C)  # tf32 off: float32 at 10 TFLOP/s, 1e9 / 10e6 = 100 us
    assert df.ceiling_tflops.tolist() == [10.0, 100.0] and df.roofline_us.tolist() == pytest.approx([100.0, 10.0])


def test_without_ceilings_only_the_achieved_rates():
    df = _df()
    add_roofline(df, None)
    for col in ("ceiling_tflops", "ceiling_gbps", "ridge_flop_per_byte", "roofline_us", "roofline_fraction"):
        assert df[col].isna().all(), col
    assert df.bound.isna().all()
    assert df.achieved_tflops.iloc[0] == 50.0 and df.intensity_flop_per_byte.iloc[1] == 0.125

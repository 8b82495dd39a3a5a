"""Runs' ceilings across a selection (analysis.ceilings): grouped, mixed, stale, legacy, re-placed."""

from __future__ import annotations

import numpy as np
import pandas as pd

from wlprof.analysis.ceilings import ceilings_findings, legacy_runs, mark_stale, replace_all
from wlprof.ceilings import Ceilings
from wlprof.store.selection import RunCeilings

A = Ceilings("cuda", "NVIDIA H200", {"bfloat16": 744.0, "float32": 49.5, "tf32": 398.0}, 49.5, 4132.0, "measured",
             "2026-11-29T09:46:12+00:00", "")
B = Ceilings("cuda", "NVIDIA H200", {"bfloat16": 806.0, "float32": 50.7, "tf32": 418.0}, 50.7, 4213.0, "measured",
             "2026-11-29T09:30:59+00:00", "")
NOW = Ceilings("cuda", "NVIDIA H200", {"bfloat16": 790.0, "float32": 50.7, "tf32": 418.0}, 50.7, 4272.0, "measured",
               "2026-12-01T08:00:00+00:00", "", bandwidth_gbps={"hbm_read": 4490.0, "hbm_copy": 4272.0})


def _rc():
    return {"r1": RunCeilings("r1", "cuda", "NVIDIA H200", A, NOW, ["hbm_copy 4,132 < 4,272 GB/s now"]),
            "r2": RunCeilings("r2", "cuda", "NVIDIA H200", B, NOW, []),
            "r3": RunCeilings("r3", "cuda", "NVIDIA H200", A, NOW, ["hbm_copy 4,132 < 4,272 GB/s now"])}


def _kernels():
    return pd.DataFrame({
        "run_id": ["r1", "r2", "r3", "r3"], "point": 0, "step": 1, "ts_us": [0.0, 0.0, 0.0, 10.0],
        "flops": [4e11, 2e9, 0.0, 0.0], "bytes": [1e6, 1e9, 1e9, 1e9], "bytes_written": [1e5, 1e6, 1e6, np.nan],
        "dur_us": [1000.0, 300.0, 240.0, 260.0], "cost_unit": ["matrix", "vector", "vector", "vector"],
        "cost_dtype": ["float32", "bfloat16", "bfloat16", "bfloat16"],
        # r1's fp32 GEMM was placed against A's tf32 rate (398): it ran with TF32
        "ceiling_tflops": [398.0, 49.5, 49.5, 49.5], "roofline_fraction": [1.0, 0.8, 1.01, 0.9],
        "roof": [None, None, "hbm_read", "hbm_copy"], "roof_note": [None, None, None, "written_unknown"]})


def test_findings_group_runs_by_their_ceilings_and_name_the_stale_ones():
    lines = ceilings_findings(_rc())
    assert lines[0].startswith("mixed ceilings: these 3 runs were placed against 2 different sets")
    assert lines[1].startswith("r1, r3: measured 2026-11-29T09:46:12+00:00 (format 2)")
    assert lines[2].startswith("r2: measured 2026-11-29T09:30:59+00:00")
    # r1 and r3 share their ceilings, so they are stale the same way: one line for both
    assert lines[3:] == ["ceiling_stale: the ceilings of 2 runs (r1, r3) are older than this machine's current "
                         "ones (2026-12-01T08:00:00+00:00) and hbm_copy 4,132 < 4,272 GB/s now"]
    one = ceilings_findings({"r2": _rc()["r2"]})
    assert len(one) == 1 and not one[0].startswith("mixed")


def test_stale_runs_rows_are_marked_and_legacy_runs_found():
    k = _kernels()
    marked = mark_stale(k, _rc())

    def notes(df):
        return [v if isinstance(v, str) else None for v in df.roof_note]

    assert notes(marked) == ["ceiling_stale", None, "ceiling_stale", "written_unknown,ceiling_stale"]
    assert notes(k) == [None, None, None, "written_unknown"]  # a copy
    # r1 and r2 have fractions but no roof names: placed before roofs had names
    assert legacy_runs(k) == ["r1", "r2"]


def test_replace_all_keeps_tf32_and_runs_of_other_devices():
    k = _kernels()
    rc = _rc()
    rc["r2"] = RunCeilings("r2", "cuda", "NVIDIA A100", Ceilings.from_dict({**B.to_dict(), "device_name": "NVIDIA A100"}),
                           None, [])
    k2, o2, s2, lines = replace_all(k, None, None, rc, NOW)
    assert o2 is None and s2 is None
    assert "r2: kept its own ceilings (the ceilings given are of NVIDIA H200, it ran on NVIDIA A100)" in lines
    r1 = k2[k2.run_id == "r1"].iloc[0]
    # TF32 recovered from the recorded 398 TFLOP/s: 4e11 / 418e6 = 957 us against NOW's tf32 rate
    assert r1.compute_roof == "compute:tf32" and r1.roofline_us == 4e11 / 418e6
    assert k2[k2.run_id == "r2"].roof.isna().all()  # kept as it was
    r3 = k2[k2.run_id == "r3"].sort_values("ts_us")
    assert list(r3.memory_roof) == ["hbm_read", "hbm_copy"]

"""The run summary's line about points whose matrix ops have no compute roof (roof note compute_unmeasured)."""

from __future__ import annotations

import pandas as pd

from wlprof.cli.execute import unplaced_lines


def test_points_with_unmeasured_matrix_dtypes_are_named():
    steps = pd.DataFrame({"variant": ["balanced 33x65x129 linear", "balanced 16x16x16 linear", "copy n=33"],
                          "dtype": ["float64"] * 3,
                          "roof_note": ["l2_resident,compute_unmeasured", "compute_unmeasured", "l1_resident"]})
    (line,) = unplaced_lines(steps)
    assert line.startswith("not placed: the float64 matrix ops of 2 of 3 points (balanced 33x65x129 linear; "
                           "balanced 16x16x16 linear): the ceilings hold no float64 matrix rate")
    assert "their roofline column is over their other kernels only" in line


def test_nothing_to_say_where_every_matrix_op_is_placed():
    steps = pd.DataFrame({"variant": ["a"], "dtype": ["float32"], "roof_note": [None]})
    assert unplaced_lines(steps) == [] and unplaced_lines(steps.drop(columns="roof_note")) == []


def test_an_ingested_run_without_a_dtype_is_named_without_one():
    # an ingested trace's steps row has no dtype: the line names the points and says "their dtype"
    steps = pd.DataFrame({"variant": ["fp8.pt.trace.json.gz", "bert.pt.trace.json.gz"], "dtype": [None, None],
                          "roof_note": ["compute_unmeasured", None]})
    (line,) = unplaced_lines(steps)
    assert line.startswith("not placed: matrix ops of 1 of 2 points (fp8.pt.trace.json.gz): the ceilings hold "
                           "no matrix rate for their dtype")
    assert "their" not in line.split("points")[0]

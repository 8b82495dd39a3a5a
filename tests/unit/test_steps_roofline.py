"""A steps row's roofline placement (wlprof.steps): the union of roof notes, the fields taken from a
point's kernels, and their recomputation for stored steps rows after the kernels are re-placed."""

from __future__ import annotations

import math

import pandas as pd

from wlprof.steps import note_union, replace_steps_roofline, roofline_fields

OBJ = ("bound", "roof_note", "status", "run_id")
PLACEMENT = ["roofline_us", "roofline_fraction", "bound", "ceiling_tflops", "ceiling_gbps", "ridge_flop_per_byte",
             "roof_note"]


def _frame(cols, rows):
    return pd.DataFrame({c: pd.Series([r[i] for r in rows], dtype=object if c in OBJ else None)
                         for i, c in enumerate(cols)})


def test_note_union_lists_each_note_once_in_the_roofline_order():
    notes = pd.Series(["within_spread,l2_resident", None, "l2_resident", "", "zz_new,aa_new,within_spread"],
                      dtype=object)
    # wlprof.ceilings.NOTES lists l2_resident before within_spread; notes outside it follow, sorted
    assert note_union(notes) == "l2_resident,within_spread,aa_new,zz_new"
    assert note_union(pd.Series(["l1_resident"], dtype=object)) == "l1_resident"
    assert note_union(pd.Series([None, ""], dtype=object)) is None  # no note at all


def test_roofline_fields_of_a_zero_time_kernel():
    # a kernel of 0 us with a roof of 0.5 us: the roof time counts, its fraction of no time is undefined
    k = pd.DataFrame({"step": [0], "dur_us": [0.0], "roofline_us": [0.5],
                      "bound": pd.Series(["memory"], dtype=object), "ceiling_tflops": [1.0], "ceiling_gbps": [2.0],
                      "ridge_flop_per_byte": [0.5]})
    f = roofline_fields(k, 1)
    assert f["roofline_us"] == 0.5 and math.isnan(f["roofline_fraction"]) and f["bound"] == "memory"
    assert f["roof_note"] is None  # no roof_note column


KCOLS = ["run_id", "point", "step", "dur_us", "roofline_us", "bound", "ceiling_tflops", "ceiling_gbps",
         "ridge_flop_per_byte", "roof_note"]
KERNELS = [
    ("r1", 0, -1, 1000.0, 900.0, "compute", 1.0, 1.0, 1.0, "ceiling_stale"),  # outside the steps: ignored
    ("r1", 0, 0, 10.0, 4.0, "memory", 7.0, 70.0, 0.1, "l2_resident"),
    ("r1", 0, 1, 30.0, 6.0, "compute", 8.0, 80.0, 0.2, "within_spread,l2_resident"),  # r1/0's longest
    ("r1", 1, 0, 20.0, 15.0, "memory", 9.0, 90.0, 0.3, None),  # a point of one step
    ("r2", 0, 0, 8.0, 4.0, "memory", 6.0, 60.0, 0.5, None),  # point 0 of another run
    ("r2", 1, 0, 8.0, 4.0, "memory", 6.0, 60.0, 0.5, None),  # a failed point's kernels
]
SCOLS = ["run_id", "point", "status", *PLACEMENT]
STALE = (99.0, 9.0, "stale", 0.0, 0.0, 0.0, "old")  # as stored, before the kernels were re-placed
STEPS = [("r1", 0, "ok", *STALE), ("r1", 2, "ok", *STALE), ("r1", 1, "ok", *STALE), ("r2", 0, "ok", *STALE),
         ("r2", 1, "failed", *STALE)]


def test_replace_steps_roofline_recomputes_each_rows_placement_from_its_kernels():
    steps = _frame(SCOLS, STEPS)
    out = replace_steps_roofline(steps, _frame(KCOLS, KERNELS))
    got = [tuple(out.loc[i, PLACEMENT]) for i in range(len(out))]
    assert got == [
        # r1/0, two steps: roof (4 + 6) / 2 = 5 us a step, 10 of its 40 us; compute holds 30 us against
        # memory's 10; the ceilings of the 30 us kernel; both steps' notes once, in the roofline's order
        (5.0, 0.25, "compute", 8.0, 80.0, 0.2, "l2_resident,within_spread"),
        STALE,  # r1/2: no kernels, kept as stored
        (15.0, 0.75, "memory", 9.0, 90.0, 0.3, None),  # r1/1, one step: 15 us of 20
        (4.0, 0.5, "memory", 6.0, 60.0, 0.5, None),  # r2/0: 4 us of 8 (not r1/0's kernels)
        STALE,  # r2/1 failed: kept as stored, kernels or not
    ]
    assert [tuple(r) for r in steps[PLACEMENT].itertuples(index=False)] == [STALE] * 5  # a copy: the input stays
    assert out[["run_id", "point", "status"]].values.tolist() == [list(r[:3]) for r in STEPS]


def test_replace_steps_roofline_of_no_rows():
    out = replace_steps_roofline(_frame(SCOLS, []), _frame(KCOLS, KERNELS))
    assert out.empty and list(out.columns) == SCOLS


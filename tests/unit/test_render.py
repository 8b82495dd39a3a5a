"""Tables fitted to the terminal: columns dropped by priority, nothing cut, units per magnitude."""

from __future__ import annotations

import io

import pandas as pd
from rich.console import Console

from wlprof.cli import render
from wlprof.cli.render import Col


def _text(table, width):
    con = Console(file=io.StringIO(), width=width, color_system=None)
    con.print(table)
    return con.file.getvalue()


def test_numbers_keep_three_significant_digits_and_no_scientific_notation():
    assert [render.sig(v) for v in (162356.3, 42.04, 4.271, 0.12345, 0, 999.4)] == \
        ["162,356", "42.0", "4.27", "0.123", "0", "999"]
    assert render.coef(-2.22e-16) == "0.00" and render.coef(0.98765) == "0.99"
    assert render.percent(0.1666) == "17%" and render.percent(0.006) == "0.6%" and render.percent(None) == "-"
    assert render.si(21.47e9) == "21.5 G" and render.si(4.2e6, "B") == "4.20 MB"
    assert render.ratio(163.22) == "163x"


def test_units_follow_the_magnitude():
    assert render.unit_for([42.0, 9_000.0]) == (1.0, "µs")
    assert render.unit_for([42.0, 2_739_117.0]) == (1e3, "ms")
    assert render.rate_unit([0.0003, 0.12]) == (1e-3, "GFLOP/s")  # a CPU's rates do not read 0.00
    assert render.rate_unit([4.5, 733.0]) == (1.0, "TFLOP/s")


def test_columns_drop_by_priority_and_wide_keeps_all():
    cols = [Col("name", ["a" * 20], 10, "left"), *[Col(f"c{i}", ["123,456,789"], i) for i in range(1, 10)]]
    kept, dropped = render.fit(cols, 100)
    assert [c.header for c, _ in kept][0] == "name"
    assert dropped == ["c1", "c2", "c3", "c4"]  # the lowest priorities go first: 23 + 5 x 14 + 1 <= 100
    assert sum(w for _, w in kept) + 3 * len(kept) + 1 <= 100
    kept, dropped = render.fit(cols, 100, wide=True)
    assert not dropped and len(kept) == 10
    text = _text(render.table(cols, "t", 100), 100)
    assert max(len(line) for line in text.splitlines()) <= 100 and "…" not in text
    assert "4 more columns with --wide: c1, c2, c3, c4" in " ".join(text.split())


def test_a_terminal_narrower_than_100_columns_gets_a_table_that_fits_it_with_its_key_column_whole():
    # 80 columns: the name (23 wide with its borders) and four numbers of 14 fit (23 + 4 x 14 + 1 = 80); the
    # table is drawn at the console's width, so rich squeezes no column (the name used to shrink to nothing)
    cols = [Col("name", ["a" * 20], 10, "left"), *[Col(f"c{i}", ["123,456,789"], i) for i in range(1, 10)]]
    kept, dropped = render.fit(cols, 80)
    assert [c.header for c, _ in kept] == ["name", "c6", "c7", "c8", "c9"] and len(dropped) == 5
    text = _text(render.table(cols, None, 80), 80)
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "a" * 20 in text and "…" not in text


def test_a_column_too_wide_for_any_room_goes_before_narrower_ones_of_lower_priority():
    # the op (priority 10, 40 wide) leaves 56 of 100: a 120-wide shapes column can never fit, so it is
    # dropped first and the numbers stay, though their priorities are lower than its
    cols = [Col("op", ["x" * 40], 10, "left"), Col("shapes", ["[" * 120], 9, "left"),
            *[Col(f"n{i}", ["1,234"], 8 - i) for i in range(4)]]
    kept, dropped = render.fit(cols, 100)
    assert dropped == ["shapes"] and [c.header for c, _ in kept] == ["op", "n0", "n1", "n2", "n3"]


def test_long_text_wraps_instead_of_being_cut():
    cols = [Col("kernel", ["_ZN7cutlass13device_kernelIN2at4cuda6detail25enable_3x_kernel_for_sm90"], 10, "left",
                wrap=20), Col("µs", ["6.85"], 9)]
    text = _text(render.table(cols, None, 100), 40)
    assert "…" not in text
    joined = "".join(line.strip("│ ┃") for line in text.splitlines())
    assert "enable_3x" in joined.replace("│", "").replace(" ", "")


def test_steps_table_of_an_ingested_run_has_no_nan_and_no_unmeasured_columns():
    steps = pd.DataFrame([{"variant": "trace.json.gz", "status": "ok", "latency_us": float("nan"),
                           "back_to_back_us": float("nan"), "graph_us": None, "kernel_us": 272.0, "flops": 4.4e8,
                           "bytes": 8.8e7, "achieved_tflops": 1.63, "achieved_gbps": 322.0,
                           "intensity_flop_per_byte": 5.07, "bound": None, "roofline_fraction": float("nan"),
                           "useful_flops": 4.4e8}])
    text = _text(render.steps_table(steps, "x"), 100)
    assert "nan" not in text.lower() and "latency" not in text and "roof" not in text
    assert "272" in text and "TFLOP/s" in text


def test_a_step_whose_costs_are_all_unknown_shows_no_zero_totals():
    # trace a: no kernel has FLOPs or bytes (unknown shares 1.0), so its 0 FLOPs, 0 B and rates are not shown;
    # trace b: a quarter of its kernel time has unknown FLOPs, all bytes known: 1.0 G FLOPs, 25% unknown
    steps = pd.DataFrame([
        {"variant": "a", "status": "ok", "kernel_us": 190.0, "flops": 0.0, "bytes": 0.0, "achieved_tflops": 0.0,
         "achieved_gbps": 0.0, "intensity_flop_per_byte": float("nan"), "unknown_time_share": 1.0,
         "bytes_unknown_time_share": 1.0},
        {"variant": "b", "status": "ok", "kernel_us": 100.0, "flops": 1e9, "bytes": 2e8, "achieved_tflops": 10.0,
         "achieved_gbps": 2000.0, "intensity_flop_per_byte": 5.0, "unknown_time_share": 0.25,
         "bytes_unknown_time_share": 0.0}])
    lines = [" ".join(line.replace("│", " ").split()) for line in _text(render.steps_table(steps, "x"), 140)
             .splitlines()]
    row_a = next(line for line in lines if line.startswith("a "))
    row_b = next(line for line in lines if line.startswith("b "))
    assert row_a == "a 190 - - - 100% 100% - -"  # FLOPs and bytes unknown for all of its time
    assert row_b == "b 100 1.00 G 200 MB 10.0 25% 0% 2,000 5.00"


def test_ceilings_text_without_measured_ceilings():
    assert render.ceilings_text({"origin": "no measured ceilings for X"}) == "no measured ceilings for X"
    text = render.ceilings_text({"copy_gbps": 14.8, "matrix_tflops": {"float32": 0.132}, "vector_tflops": 0.13})
    assert text.startswith("copy 14.8 GB/s; matrix float32 132 GFLOP/s") and "0 GB/s" not in text


def test_the_noisy_warning_names_the_most_spread_points_and_counts_the_rest():
    import pandas as pd

    from wlprof.cli.execute import NOISY_LISTED, noisy_lines

    steps = pd.DataFrame({"variant": [f"p{i}" for i in range(20)], "noisy": [i % 2 == 0 for i in range(20)],
                          "timing_spread": [i / 10 for i in range(20)], "timing_spread_of": "latency"})
    line, = noisy_lines(steps)
    assert line.startswith("noisy: 10 of 20 points' repeated timings spread more than 25%")
    # the eight of the ten noisy points that spread most, most first: p18 (180%) ... p4 (40%)
    assert "p18 (latency samples spread 180%); p16" in line and "p4 (latency samples spread 40%)" in line
    assert "p2 (" not in line and f"and {10 - NOISY_LISTED} more" in line


def test_text_columns_of_pandas_string_dtype_are_left_justified():
    from wlprof.cli.markdown import rich_table

    # pandas 3 reads strings as its `str` dtype, not object: the op names were right-justified like numbers
    df = pd.DataFrame({"op": ["aten::mm", "aten::index_add_"], "calls": [1, 2], "label": pd.array(["a", "b"],
                                                                                                  dtype=object)})
    assert df.op.dtype != object
    t = rich_table(df, {"op": "op", "calls": "calls", "label": "label"})
    assert [c.justify for c in t.columns] == ["left", "right", "left"]


def test_a_predicted_steps_breakdown_reads_its_shares_as_percentages():
    import numpy as np

    from wlprof.cli.markdown import table
    from wlprof.cli.predict_profile import BREAKDOWN_COLS, BREAKDOWN_FORMATS
    from wlprof.predict.report import breakdown

    ops = pd.DataFrame({"op_name": ["aten::mm", "aten::mm", "aten::gelu"],
                        "op_input_dims": ["[[2,3],[3,4]]", "[[2,3],[3,4]]", "[[2,4]]"]})
    bd = breakdown(ops, np.array([30.0, 30.0, 0.06]), np.array([0, 0, 1]))
    text = table(bd, BREAKDOWN_COLS, formats=BREAKDOWN_FORMATS)
    # the mm pair: 60 of 60.06 µs = 99.9% (two significant digits: 100%); the gelu: 0.06 / 60.06 = 0.0999%
    # (it read 0.999 and 0.000999)
    assert "| aten::mm | [[2,3],[3,4]] | 2 | 60.0 | 30.0 | 100% | same call |" in text
    assert "| aten::gelu | [[2,4]] | 1 | 0.0600 | 0.0600 | 0.10% | near |" in text


def test_a_fraction_above_its_roof_is_never_shown_without_its_reason():
    # the reason column (priority 6) goes before the roofline (7); the roofline goes with it
    why = Col("above roof:\nwhy", ["l2_resident"], 6, "left", wrap=18)
    roof = Col("roof-\nline", ["138%"], 7, needs=why)
    cols = [Col("name", ["a" * 70], 10, "left"), Col("n1", ["123,456,789"], 8), roof, why]
    headers = lambda kept: [c.header for c, _ in kept]  # noqa: E731
    assert headers(render.fit(cols, 200)[0]) == ["name", "n1", "roof-\nline", "above roof:\nwhy"]
    # 73 + 14 + 8 + 14 + 1 = 110 columns wide: the reason does not fit in 100, and the roofline goes with it
    kept, dropped = render.fit(cols, 100)
    assert headers(kept) == ["name", "n1"] and dropped == ["roof-line", "above roof: why"]

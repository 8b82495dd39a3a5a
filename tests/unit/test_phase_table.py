"""The report's phase table: one row per sweep point, rows of one run context together, keys kept."""

from __future__ import annotations

import pandas as pd

from wlprof.analysis.report import phase_table, point_order


def _runs():
    kernels, steps = [], []
    for run, tokens in (("moe-a", 32), ("moe-b", 32), ("moe-c", 8192)):
        for point, (routing, dispatch) in enumerate((("zipf:1.2", "loop"), ("balanced", "grouped"),
                                                     ("concentrated", "loop"))):
            variant = f"{routing} / {dispatch}"
            steps.append({"run_id": run, "point": point, "variant": variant, "tokens": tokens, "top_k": 1,
                          "routing": routing, "dispatch": dispatch})
            for step in (0, 1):
                for region, us in (("moe/expert", 100.0 * (point + 1)), ("moe/router", 5.0)):
                    kernels.append({"run_id": run, "point": point, "variant": variant, "step": step,
                                    "region": region, "dur_us": us, "tokens": tokens})
    return pd.DataFrame(kernels), pd.DataFrame(steps)


def test_rows_sort_as_a_reader_compares_them_and_keep_their_points():
    kernels, steps = _runs()
    ordered = point_order(steps[steps.run_id == "moe-a"])
    assert list(ordered.routing) == ["concentrated", "balanced", "zipf:1.2"]
    t = phase_table(kernels, steps)
    assert t.index.is_unique and t.index.names == ["context", "variant"]
    contexts = list(t.index.get_level_values(0))
    blocks = [c for i, c in enumerate(contexts) if i == 0 or c != contexts[i - 1]]
    assert len(blocks) == len(set(blocks)) == 3  # each context one block, even where two runs share one
    assert blocks[-1] == "8192 tok"
    assert len(t.attrs["points"]) == len(t) and t.attrs["points"][-1][0] == "moe-c"
    # per step: two profiled steps of each kernel
    assert t.loc[("8192 tok", "zipf:1.2 / loop"), "moe/expert"] == 100.0

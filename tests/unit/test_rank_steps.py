"""Per-step kernel numbers of a distributed run are per step of one rank: the ranks are averaged, not added."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from wlprof.analysis.compare import per_step
from wlprof.analysis.summary import kernel_summary, profiled_steps


def _kernels(ranks) -> pd.DataFrame:
    # each rank runs one aten::mm per step over 2 steps: rank r's kernel takes 10 * (r + 1) us, 100 FLOPs
    rows = []
    for r in ranks:
        for step in (1, 2):
            rows.append({"rank": r, "step": step, "name": "aten::mm", "op_name": "aten::mm", "region": "x",
                         "dur_us": 10.0 * (r + 1), "ts_us": 100.0 * step, "flops": 100.0, "bytes": 40.0,
                         "roofline_us": np.nan, "bound": None, "flops_source": "formula", "kind": "kernel"})
    return pd.DataFrame(rows)


def test_two_ranks_count_four_profiled_steps():
    assert profiled_steps(_kernels([0, 1])) == 4  # 2 steps x 2 ranks
    assert profiled_steps(_kernels([0])) == 2
    assert profiled_steps(_kernels([0]).assign(rank=pd.NA)) == 2  # a single-process run has no rank


@pytest.mark.parametrize("ranks, dur, count", [
    ([0], 10.0, 1.0),        # one rank: 10 us, one call per step
    ([0, 1], 15.0, 1.0),     # two ranks: (10 + 20) / 2 = 15 us per rank-step, one call (was 30 us and 2 calls)
])
def test_per_step_and_kernel_summary_average_the_ranks(ranks, dur, count):
    k = _kernels(ranks)
    ps = per_step(k, ["region"])
    assert ps.loc["x", "dur_us"] == pytest.approx(dur) and ps.loc["x", "kernels"] == pytest.approx(count)
    assert ps.loc["x", "flops"] == pytest.approx(100.0)  # each rank's step ran 100 FLOPs
    s = kernel_summary(k).iloc[0]
    assert s.dur_us_per_step == pytest.approx(dur) and s.count_per_step == pytest.approx(count)
    assert s.flops_per_step == pytest.approx(100.0)

"""The trace contract is declared once, and every workload uses only the columns it declares."""

from __future__ import annotations

import pytest
import torch

from wlprof import schema, workloads


def test_columns_unique_and_units_in_names():
    for table in schema.TABLE_NAMES:
        names = [c.name for c in schema.columns(table)]
        assert len(names) == len(set(names)), table
    kernels = {c.name: c for c in schema.columns("kernels")}
    assert kernels["dur_us"].unit == "us" and kernels["achieved_tflops"].unit == "TFLOP/s"
    assert kernels["intensity_flop_per_byte"].unit == "FLOP/byte"
    with pytest.raises(ValueError, match="table must be one of"):
        schema.columns("nope")


def test_every_table_carries_every_workload_column():
    wl_cols = {c.name for w in workloads.all_workloads() for c in w.columns}
    assert wl_cols == {c.name for c in schema.workload_columns()}
    for table in schema.TABLE_NAMES:
        assert wl_cols <= {c.name for c in schema.columns(table)}, table


@pytest.mark.parametrize("name", workloads.names())
def test_every_workload_point_uses_only_its_own_columns(name):
    wl = workloads.get(name)
    own = {c.name for c in wl.columns}
    parsed = wl.parse({}, torch.device("cpu"), torch.float32)
    for point in wl.points(parsed.spec):
        assert set(point.params) <= own, (name, set(point.params) - own)


def test_model_roles_come_from_the_workloads():
    # the performance models key data-dependent calls on what the workloads declare as their data
    assert {"expert_counts", "seed", "graph", "backend", "dispatch"} <= set(schema.columns_with("data"))
    assert {"routing", "tokens", "experts", "graph", "scale"} <= set(schema.columns_with("distribution"))
    assert {"imbalance", "mean_in_degree", "max_in_degree"} == set(schema.columns_with("feature"))

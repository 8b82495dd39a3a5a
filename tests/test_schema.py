"""The trace contract is declared once, and every workload uses only declared columns."""

from __future__ import annotations

import pytest
import torch

from wlprof import schema, workloads


def test_columns_unique_and_units_in_names():
    for table in schema.TABLES:
        names = [c.name for c in schema.columns(table)]
        assert len(names) == len(set(names)), table
    kernels = {c.name: c for c in schema.columns("kernels")}
    assert kernels["dur_us"].unit == "us" and kernels["achieved_tflops"].unit == "TFLOP/s"
    assert kernels["intensity_flop_per_byte"].unit == "FLOP/byte"
    with pytest.raises(ValueError, match="table must be one of"):
        schema.columns("nope")


@pytest.mark.parametrize("name", workloads.names())
def test_every_workload_param_is_a_declared_column(name):
    wl = workloads.get(name)
    parsed = wl.parse({}, torch.device("cpu"), torch.float32)
    for point in wl.points(parsed.spec):
        assert set(point.params) <= schema.PARAM_NAMES, (name, point.params)

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


def test_boolean_columns_read_back_as_nullable_booleans_and_show_as_set(tmp_path):
    import io

    import numpy as np
    import pandas as pd
    import pyarrow.parquet as pq
    from rich.console import Console

    from wlprof.cli.execute import _noisy_suffix
    from wlprof.cli.render import steps_table
    from wlprof.schema import conform

    # `noisy` is null where a point has no timings (an ingested trace): read back, the column was object
    steps = pd.DataFrame({"run_id": "r", "workload": "gemm", "variant": ["a", "b", "c"], "point": [0, 1, 2],
                          "status": "ok", "kernel_us": 10.0, "timing_spread": [0.5, np.nan, 0.1],
                          "timing_spread_of": "kernel", "noisy": [True, None, False]})
    pq.write_table(conform(steps, "steps"), tmp_path / "s.parquet")
    back = pd.read_parquet(tmp_path / "s.parquet")
    assert str(back.noisy.dtype) == "boolean"
    assert back.noisy.tolist()[::2] == [True, False] and back.noisy.isna().tolist() == [False, True, False]
    assert isinstance(back.noisy.iloc[0], np.bool_)
    out = io.StringIO()
    Console(file=out, width=300).print(steps_table(back, "t", wide=True))
    assert "spread" in out.getvalue() and "50%" in out.getvalue()
    assert _noisy_suffix(back.iloc[0].to_dict()) == " (noisy: kernel samples spread 50%)"
    assert _noisy_suffix(back.iloc[1].to_dict()) == "" and _noisy_suffix(back.iloc[2].to_dict()) == ""


@pytest.mark.parametrize("table", sorted(schema.TABLE_NAMES))
def test_pandas_metadata_is_arrows_for_a_frame_of_every_column(table):
    """The metadata assembled from one column per pandas type is, to the byte, what Arrow writes for a
    frame of all the table's columns (each of the pandas type it is read back as)."""
    import pandas as pd
    import pyarrow as pa

    nullable = schema.nullable_int_columns()
    frame = pd.DataFrame({c.name: schema._empty_column(c, nullable) for c in schema.columns(table)})
    want = pa.Schema.from_pandas(frame, preserve_index=False).metadata[b"pandas"]
    assert schema._pandas_metadata(table) == want

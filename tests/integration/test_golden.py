"""The golden comparison: a fixed CPU study and two ingests give the committed tables (timings aside)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "golden"))
import golden  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def runs(tmp_path_factory, cpu_ceilings, cli):
    def invoke(args):
        res = cli(*args)
        assert res.exit_code == 0, res.output
        return res.exit_code

    return golden.run_all(tmp_path_factory.mktemp("golden"), invoke)


def test_tables_equal_the_golden_files(runs):
    schemas = json.loads((golden.HERE / "schemas.json").read_text())
    for name, root in runs.items():
        for key, got in golden.reduce(root).items():
            if key.endswith("_schema"):  # the same columns and types (their order is not the contract)
                assert dict(map(tuple, got)) == dict(map(tuple, schemas[f"{name}/{key}"])), \
                    f"{name} {key}: columns or types changed"
                continue
            want = golden.machine_free(pd.read_parquet(golden.HERE / f"{name}-{key}.parquet"))
            assert sorted(got.columns) == sorted(want.columns), f"{name} {key}: columns differ"
            pd.testing.assert_frame_equal(got[list(want.columns)].reset_index(drop=True), want, check_dtype=False,
                                          rtol=1e-9, obj=f"{name} {key}")

"""Every number parameter of every workload, and a routing's zipf exponent, refuse inf and nan with a
rule they break: 'a number >= 0' is true of inf, 'a finite number >= 0' is not."""

from __future__ import annotations

import pytest
from conftest import files_under

from wlprof import workloads

FLOAT_PARAMS = [(wl.name, p) for wl in workloads.all_workloads() for p in wl.params if p.kind == "float"]


@pytest.mark.parametrize("value", ["inf", "-inf", "nan"])
@pytest.mark.parametrize(("workload", "param"), FLOAT_PARAMS, ids=[f"{w}-{p.name}" for w, p in FLOAT_PARAMS])
def test_a_number_parameter_refuses_what_is_not_finite_saying_so(tmp_path, cli, workload, param, value):
    flag = "--" + param.name.replace("_", "-")
    res = cli("run", workload, flag, value, "--device", "cpu", "-t", tmp_path / "t")
    assert res.exit_code == 2, res.output
    assert f"{flag} must be a finite number" in res.output and f"(got '{value}')" in res.output, res.output
    assert files_under(tmp_path) == []


def test_the_moe_capacity_factor_is_among_them():
    assert ("moe", "capacity_factor") in {(w, p.name) for w, p in FLOAT_PARAMS}


@pytest.mark.parametrize("value", ["zipf:inf", "zipf:nan"])
def test_a_zipf_exponent_that_is_not_finite_is_refused_saying_so(tmp_path, cli, value):
    res = cli("run", "moe", "--routing", value, "--device", "cpu", "-t", tmp_path / "t")
    assert res.exit_code == 2, res.output
    assert f"zipf:s needs a finite number s >= 0 (the skew exponent) (got '{value}')" in res.output, res.output
    assert files_under(tmp_path) == []

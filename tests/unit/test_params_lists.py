"""A comma-separated list for a parameter that takes one value is refused as a list, not as a bad number."""

from __future__ import annotations

import pytest

from wlprof.errors import InputError
from wlprof.params import Param


@pytest.mark.parametrize("param, value", [
    (Param("d_model", "int", "width", default=4), "1,2"),            # was "must be a positive integer"
    (Param("layout", "str", "layout", choices=("nn", "nt")), "nn,nt"),  # was "must be one of nn, nt"
    (Param("cf", "float", "factor", minimum=0), "0.5, 1"),
])
def test_a_list_for_a_single_value_is_named_a_list(param, value):
    with pytest.raises(InputError) as exc:
        param.parse(value)
    assert exc.value.rule == "takes one value, not a list (it is not a sweep axis)" and exc.value.value == value


def test_single_values_and_sweep_axes_still_parse():
    assert Param("d_model", "int", "width").parse("8") == 8
    assert Param("batch", "int", "batch", many=True).parse("1,2") == [1, 2]


@pytest.mark.parametrize("workload, params, key, what", [
    # each names the axis that repeats, not the workload's first parameter (was --ops, --routing, --schedule)
    ("elementwise", {"ops": "relu", "numel": "1,1"}, "numel", "1 is given more than once"),
    ("moe", {"dispatch": "grouped,grouped", "tokens": "2", "experts": 2}, "dispatch",
     "grouped is given more than once"),
    ("halo", {"nodes": "16,16"}, "nodes", "16 is given more than once"),
    ("layers", {"layers": "layer_norm", "size": "2,2"}, "size", "2 is given more than once"),
    # gnn dropped these silently (one point for two asked)
    ("gnn", {"graph": "uniform,uniform", "scale": 2}, "graph", "uniform is given more than once"),
    ("gnn", {"graph": "zipf:1.5,zipf:1.50", "scale": 2}, "graph", "zipf:1.5 and zipf:1.50 are the same value"),
    ("gnn", {"features": "3,3", "scale": 2}, "features", "3 is given more than once"),
])
def test_a_repeated_sweep_value_names_its_axis(workload, params, key, what):
    from wlprof.study import Study, prepare

    with pytest.raises(InputError) as exc:
        prepare(Study(workload=workload, params=params, device="cpu"))
    assert exc.value.key == key
    assert exc.value.rule == f"must not repeat a sweep point: {what}"
    assert exc.value.value == params[key]


def test_distinct_sweep_values_and_karate_over_scales_still_parse():
    from wlprof.study import Study, prepare

    # karate ignores the scale: two scales give one karate point and two rmat points, no repeat
    points = prepare(Study(workload="gnn", params={"graph": "karate,rmat", "scale": "3,4", "backend": "scatter"},
                           device="cpu"))[4]
    assert [p.variant for p in points] == ["karate F32 / scatter / sum", "rmat s3 F32 / scatter / sum",
                                           "rmat s4 F32 / scatter / sum"]
    assert Param("batch", "int", "batch", many=True).parse("1,8,64") == [1, 8, 64]


@pytest.mark.parametrize("value", ["1,,8", ",1,8", "1, ,8"])
def test_an_empty_item_in_a_sweep_axis_is_refused(value):
    # it was dropped silently ('1,,8' ran two points); a trailing comma stays allowed
    with pytest.raises(InputError) as exc:
        Param("batch", "int", "batch", many=True).parse(value)
    assert exc.value.rule == "must not have an empty item between commas" and exc.value.value == value
    assert Param("batch", "int", "batch", many=True).parse("1,8,") == [1, 8]

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

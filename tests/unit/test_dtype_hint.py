"""--dtype's error: the rule, the value, and a suggestion only where one is meant."""

from __future__ import annotations

import pytest
import torch

from wlprof.device import resolve_dtype
from wlprof.errors import InputError


@pytest.mark.parametrize(("value", "hint"), [
    ("flaot32", "did you mean 'float32'?"),  # a typo of a width wlprof runs
    ("bfloat", "did you mean 'bfloat16'?"),  # the start of one
    ("float8", None),  # a width wlprof does not run: not 'float' (float32)
    ("int4", None),
])
def test_a_bad_dtype_is_refused_with_a_hint_only_where_one_is_meant(value, hint):
    with pytest.raises(InputError) as err:
        resolve_dtype(value, torch.device("cpu"))
    assert "--dtype must be one of bfloat16, float16, float32, float64" in str(err.value)
    assert err.value.hint == hint

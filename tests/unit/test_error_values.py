"""An error names the value as a user would type it: no Python list brackets or reprs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from wlprof.errors import InputError, shown
from wlprof.params import toml_value


@pytest.mark.parametrize(("value", "text"), [
    (["Intel(R) Xeon(R) Processor"], "Intel(R) Xeon(R) Processor"),
    (["NVIDIA H100", "NVIDIA H200"], "NVIDIA H100, NVIDIA H200"),
    (("a", "b,c", ""), "a, 'b,c', ''"),
    ({"b", "a"}, "a, b"),
    ([], "(empty)"),
    ("float8", "'float8'"),
    ("it's", '"it\'s"'),
    (Path("/tmp/x.json"), "'/tmp/x.json'"),
    (True, "true"),
    (np.int64(3), "3"),
    (np.float64(2.5), "2.5"),
    (np.array([1, 2]), "1, 2"),
    ({"batch": 2, "dtype": "bf16"}, "batch=2, dtype=bf16"),
    (toml_value("1e3"), "1e3"),
])
def test_values_read_as_typed(value, text):
    assert shown(value) == text


def test_a_message_names_a_list_without_brackets():
    exc = InputError("--test", "must come from the device the profile was measured on (NVIDIA H200)",
                     ["Intel(R) Xeon(R) Processor"])
    assert str(exc) == ("--test must come from the device the profile was measured on (NVIDIA H200) "
                        "(got Intel(R) Xeon(R) Processor)")
    assert str(InputError("--x", "is required", None)) == "--x is required (not given)"

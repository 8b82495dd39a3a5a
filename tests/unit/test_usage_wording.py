"""Click's own conversion errors, in the wordings of the click versions typer runs over, read as wlprof
words its errors: the option, the rule and the value."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from wlprof.cli import usage


@pytest.mark.parametrize("text,want", [
    ("'abc' is not a valid int.", "--top must be an integer (got 'abc')"),
    ("'abc' is not a valid integer.", "--top must be an integer (got 'abc')"),
    ("'x1' is not a valid float.", "--top must be a number (got 'x1')"),
    ("'x1' is not a valid number.", "--top must be a number (got 'x1')"),
])
def test_click_conversion_errors_name_option_rule_and_value(text, want):
    param = SimpleNamespace(param_type_name="option", opts=["-t", "--top"], metavar=None, name="top")
    msg = usage.message(usage.click_exc.BadParameter(text, param=param))
    assert msg == f"{want} (see `wlprof --help`)"

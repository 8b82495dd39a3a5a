"""An integer parameter takes an integer written in digits wherever it is given (a flag, `--spec`, a study
file, `--set`): `1e3` and `1000.0` are refused, naming the argument, the rule and the value as written."""

from __future__ import annotations

import json

import pytest
import torch

from wlprof.errors import InputError
from wlprof.params import Param, parse_int, toml_value
from wlprof.predict.spec import parse_spec
from wlprof.study import override_params, study_from_toml
from wlprof.workloads import get

CPU = torch.device("cpu")
BATCH = Param("batch", "int", "rows")


@pytest.mark.parametrize(("raw", "typed"), [("1e3", "1e3"), ("1000.0", "1000.0"), ("1E3", "1E3")])
def test_a_whole_float_is_refused_with_its_text_and_the_digits(raw, typed):
    with pytest.raises(InputError) as exc:
        BATCH.parse(toml_value(raw))
    assert str(exc.value) == f"batch must be a positive integer (got {typed}); an integer is written in digits: 1000"


@pytest.mark.parametrize("raw", ["1000", "+1000", "1_000"])
def test_integer_literals_are_accepted(raw):
    assert BATCH.parse(toml_value(raw)) == 1000


def test_a_fraction_gets_no_digits_hint():
    with pytest.raises(InputError) as exc:
        BATCH.parse(toml_value("1.5"))
    assert str(exc.value) == "batch must be a positive integer (got 1.5)"


def test_the_flag_text_is_refused_the_same_way():
    with pytest.raises(InputError) as exc:
        parse_int("1e3", "--batch")
    assert exc.value.hint == "an integer is written in digits: 1000"


def test_spec_refuses_batch_1e3():
    spec = parse_spec("mlp batch=1e3")
    with pytest.raises(InputError) as exc:
        get("mlp").parse(spec.params, CPU, None)
    assert exc.value.key == "batch" and exc.value.value.text == "1e3"


def test_study_file_and_set_refuse_a_float_batch():
    study = study_from_toml(b'[study]\nworkload = "mlp"\n[params]\nbatch = 1e3\n', "s.toml")
    with pytest.raises(InputError) as exc:
        get("mlp").parse(study.params, CPU, None)
    assert "(got 1e3)" in str(exc.value)
    study = override_params(study_from_toml(b'[study]\nworkload = "mlp"\n', "s.toml"), ["batch=8.0"])
    with pytest.raises(InputError) as exc:
        get("mlp").parse(study.params, CPU, None)
    assert "(got 8.0); an integer is written in digits: 8" in str(exc.value)


def test_a_float_that_keeps_its_text_is_written_to_json_as_its_number():
    from wlprof import jsonio
    from wlprof.params import Written

    assert json.loads(jsonio.dumps({"min_batch_ms": Written("5.0"), "alpha": [Written("1e3")]})) == {
        "min_batch_ms": 5.0, "alpha": [1000.0]}

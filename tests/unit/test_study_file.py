"""Study files whose sections or keys have the wrong TOML type are refused naming them, not crashed on."""

from __future__ import annotations

import pytest

from wlprof.errors import InputError
from wlprof.study import study_from_toml


@pytest.mark.parametrize("text, arg, needle", [
    # `study = "gemm"` where [study] belongs: was TypeError: string indices must be integers
    ('study = "gemm"\n[params]\nshapes = "4x4x4"\n', "[study]", "must be a table"),
    ('params = 5\n[study]\nworkload = "gemm"\n', "[params]", "must be a table"),
    ('capture = "fast"\n[study]\nworkload = "gemm"\n', "[capture]", "must be a table"),
    ('cpu = 1\n[study]\nworkload = "gemm"\n', "[cpu]", "must be a table"),
    ('[study]\nworkload = "gemm"\n[cpu]\nparams = "small"\n', "[cpu.params]", "must be a table"),
    ('[study]\nworkload = "gemm"\n[cpu]\ndtype = 32\n', "cpu.dtype", "must be a string"),
    # a number where a string belongs: was accepted, and the report listed study `5`
    ('[study]\nname = 5\nworkload = "gemm"\n', "study.name", "must be a string"),
    ('[study]\nworkload = ["gemm"]\n', "study.workload", "must be a string"),
])
def test_wrong_toml_types_are_refused_naming_the_key(text, arg, needle):
    with pytest.raises(InputError) as exc:
        study_from_toml(text.encode(), "s.toml")
    assert exc.value.arg == arg and needle in exc.value.rule


def test_a_well_formed_file_still_loads():
    s = study_from_toml(b'[study]\nname = "x"\nworkload = "gemm"\n[params]\nshapes = ["4x4x4"]\n'
                        b'[cpu]\ndtype = "float32"\n[cpu.params]\nshapes = ["2x2x2"]\n', "s.toml")
    assert s.name == "x" and s.cpu.params == {"shapes": ["2x2x2"]} and s.cpu.dtype == "float32"

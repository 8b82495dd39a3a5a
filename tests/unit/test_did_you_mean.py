"""`did_you_mean`: the closest choice, or the one choice that the value starts."""

from __future__ import annotations

from wlprof.errors import did_you_mean

GEMM = ["balanced 1024x1024x1024", "medium-skinny 8x1024x1024"]


def test_a_typo_gets_the_closest_choice():
    assert did_you_mean("medium-skiny 8x1024x1024", GEMM) == "did you mean 'medium-skinny 8x1024x1024'?"


def test_the_start_of_one_choice_gets_it():
    # 'balanced' is 8 of the 23 characters of the first: difflib's ratio 2 * 8 / 31 = 0.52 is under its 0.6
    assert did_you_mean("balanced", GEMM) == "did you mean 'balanced 1024x1024x1024'?"
    assert did_you_mean("Medium", GEMM) == "did you mean 'medium-skinny 8x1024x1024'?"


def test_the_start_of_several_choices_or_of_none_gets_nothing():
    two = ["balanced 1024x1024x1024", "balanced 2048x2048x2048"]  # both at difflib's 0.52, both start so
    assert did_you_mean("balanced", two) is None
    assert did_you_mean("zzz", GEMM) is None
    assert did_you_mean("", GEMM) is None

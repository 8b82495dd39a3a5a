"""An SLO below a model's roofline time is refused with that time shown at its size, not rounded to 0.0."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from wlprof.errors import InputError
from wlprof.placement.run import _check_slos


def test_a_sub_microsecond_floor_is_shown_in_significant_digits():
    # a 1x1x1 GEMM on a CPU: a roofline floor of 0.000612 µs against an SLO of 0.0005 µs
    models = [SimpleNamespace(name="gemm-tiny", index=2, slo_us=0.0005)]
    costs = {"gemm-tiny": SimpleNamespace(roofline_us=0.000612)}
    with pytest.raises(InputError) as exc:
        _check_slos(models, costs, "Intel(R) Xeon(R) Processor")
    text = str(exc.value)
    assert "model[2].slo_us must be at least gemm-tiny's roofline time alone (0.00061 µs on" in text, text
    _check_slos([SimpleNamespace(name="gemm-tiny", index=2, slo_us=0.001)], costs, "x")  # above the floor: kept
    # a large floor keeps its thousands separator
    with pytest.raises(InputError) as exc:
        _check_slos([SimpleNamespace(name="m", index=0, slo_us=10.0)], {"m": SimpleNamespace(roofline_us=12345.6)},
                    "x")
    assert "(12,346 µs on x's" in str(exc.value)

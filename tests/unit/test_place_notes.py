"""What the placement output says about its own validation."""

from __future__ import annotations

from wlprof.placement.output import noise_note


def test_a_plan_measured_under_the_oracles_says_the_validation_is_noisy():
    planners = [{"planner": "flops", "gap_to_oracle": -0.155}, {"planner": "roofline", "gap_to_oracle": -0.03},
                {"planner": "oracle", "gap_to_oracle": 0.0}]
    note = noise_note(planners)
    assert note.startswith("the flops plan measured 15.5% under the oracle's")
    assert "below about 16% are within the measurement's noise" in note
    assert noise_note(planners[1:]) is None  # 3% under: within what the note ignores
    assert noise_note([{"planner": "flops"}]) is None  # not validated

"""`wlprof profile`'s budget messages: what a skipped section would have cost, against the budget."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import wlprof.predict.profile as P


def _sec(name, points=2, cost_s=1.0):
    return SimpleNamespace(name=name, points=points, cost_s=cost_s, passno=1, study=SimpleNamespace(name=f"profile:{name}"))


def test_a_section_skipped_after_the_budget_is_spent_says_so(monkeypatch, tmp_path):
    clock = itertools.count(0.0, 20.0)  # every monotonic() read advances 20 s
    monkeypatch.setattr(P.time, "monotonic", lambda: next(clock))
    monkeypatch.setattr("wlprof.study.run_study", lambda *a, **k: SimpleNamespace(run_id="r", status="complete"))
    lines = []
    done, skipped, _, _ = P._run_grid([_sec("a"), _sec("b")], tmp_path, 30.0, lines.append, None)
    assert [d["section"] for d in done] == ["a"] and [s["section"] for s in skipped] == ["b"]
    skip = next(x for x in lines if x.startswith("skip"))
    # "60 s spent, 4 s more would pass the budget" read as if the budget were still ahead
    assert "of the 30 s budget" in skip and "more would pass" not in skip, skip


def test_a_section_that_would_overrun_names_its_estimate_and_the_budget(monkeypatch, tmp_path):
    monkeypatch.setattr(P.time, "monotonic", lambda: 0.0)
    lines = []
    _, skipped, _, _ = P._run_grid([_sec("big", points=10, cost_s=5.0)], tmp_path, 30.0, lines.append, None)
    assert skipped and lines == ["skip profile:big: 0 of 30 s spent, 50 s more would pass the budget"]

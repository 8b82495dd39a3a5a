"""The collections between a sweep's points skip the objects that existed before the sweep."""

from __future__ import annotations

import gc

from wlprof.study import _older_objects_frozen


def test_objects_older_than_the_sweep_are_frozen_during_it_and_only_then():
    assert gc.get_freeze_count() == 0
    before = [object() for _ in range(10)]
    with _older_objects_frozen():
        assert gc.get_freeze_count() >= len(before)  # everything alive at the start, these ten included
        made = []
        made.append(made)  # a cycle made during the sweep is still collected
        del made
        assert gc.collect() >= 1
    assert gc.get_freeze_count() == 0


def test_a_freeze_made_elsewhere_is_left_as_it_was():
    gc.freeze()
    try:
        n = gc.get_freeze_count()
        with _older_objects_frozen():
            assert gc.get_freeze_count() == n
        assert gc.get_freeze_count() == n  # not unfrozen by the sweep
    finally:
        gc.unfreeze()

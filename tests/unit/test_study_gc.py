"""The collections between a sweep's points skip the objects that existed before the sweep."""

from __future__ import annotations

import gc
import weakref

from wlprof.study import _older_objects_frozen


class _Node:
    me = None


def test_objects_older_than_the_sweep_are_frozen_during_it_and_only_then():
    gc.unfreeze()  # a worker process may come here with objects frozen by what ran in it before
    assert gc.get_freeze_count() == 0
    before = [object() for _ in range(10)]
    with _older_objects_frozen():
        assert gc.get_freeze_count() >= len(before)  # everything alive at the start, these ten included
        made = _Node()
        made.me = made  # a cycle made during the sweep is still collected
        gone = weakref.ref(made)
        del made
        gc.collect()
        assert gone() is None
    assert gc.get_freeze_count() == 0


def test_a_freeze_made_elsewhere_is_left_as_it_was(monkeypatch):
    # the frozen count itself drifts (a frozen object freed by its last reference leaves it), so the calls
    # are what is checked: nothing frozen or unfrozen when objects are frozen already
    calls = []
    monkeypatch.setattr(gc, "freeze", lambda: calls.append("freeze"))
    monkeypatch.setattr(gc, "unfreeze", lambda: calls.append("unfreeze"))
    monkeypatch.setattr(gc, "get_freeze_count", lambda: 5)
    with _older_objects_frozen():
        assert calls == []
    assert calls == []
    monkeypatch.setattr(gc, "get_freeze_count", lambda: 0)
    with _older_objects_frozen():
        assert calls == ["freeze"]
    assert calls == ["freeze", "unfreeze"]

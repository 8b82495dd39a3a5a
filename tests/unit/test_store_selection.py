"""Selecting runs (wlprof.store.selection): run ids as given on the command line, and the `wlprof ls` hint."""

from __future__ import annotations

from pathlib import Path

from wlprof.store.selection import ls_hint, split_runs


def test_run_ids_from_repeated_and_comma_separated_arguments():
    assert split_runs(["a,b", " c ", "d,,e,"]) == ["a", "b", "c", "d", "e"]
    assert split_runs(["gemm-1 mlp-2"]) == ["gemm-1 mlp-2"]  # only commas separate
    assert split_runs(None) == [] and split_runs([]) == []


def test_the_ls_hint_names_a_traces_folder_other_than_the_default():
    assert ls_hint("traces") == "see `wlprof ls`" and ls_hint(Path("traces")) == "see `wlprof ls`"
    assert ls_hint("/data/TRACES") == "see `wlprof ls --traces /data/TRACES`"

"""A Ctrl-C during `wlprof profile`: what it leaves, and a message that says so (a profile has no --resume)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import wlprof.predict.profile as P
from wlprof.errors import Interrupted


def _grid_interrupted_after(make_run: bool):
    def grid(secs, traces, budget_s, progress, command):
        if make_run:  # a study finished before the interrupt: its run folder in traces/
            (traces / "gemm-20261207-000000-abcd").mkdir()
        raise KeyboardInterrupt
    return grid


def test_an_interrupted_new_profile_says_it_is_unfinished_and_how_to_measure_it(tmp_path, cli, monkeypatch,
                                                                                cpu_ceilings):
    monkeypatch.setattr(P, "_run_grid", _grid_interrupted_after(True))
    out = tmp_path / "prof"
    res = cli("profile", "--device", "cpu", "-o", out, "--budget-minutes", "0.5", "-q")
    assert res.exit_code == 130, res.output
    said = " ".join(res.output.split())
    # it said "the same command with `--resume RUN` finishes it": profile has no --resume, and neither a
    # second run into the folder (not empty) nor --extend (no profile.json) took it
    assert "--resume" not in said
    assert f"interrupted: the profile in {out}/ is unfinished: no profile.json" in said, said
    assert f"remove {out}/ and run the command again" in said
    assert (out / "traces" / "gemm-20261207-000000-abcd").is_dir() and not (out / "profile.json").exists()


def test_a_profile_interrupted_before_any_study_leaves_no_folder(tmp_path, cli, monkeypatch, cpu_ceilings):
    monkeypatch.setattr(P, "_run_grid", _grid_interrupted_after(False))
    out = tmp_path / "new" / "prof"
    res = cli("profile", "--device", "cpu", "-o", out, "--budget-minutes", "0.5", "-q")
    assert res.exit_code == 130, res.output
    assert f"interrupted: no profile was written to {out}/" in " ".join(res.output.split()), res.output
    assert not (tmp_path / "new").exists()


def test_an_interrupted_extend_says_the_profile_is_as_it_was(tmp_path, monkeypatch, cpu_ceilings):
    import torch

    out = tmp_path / "prof"
    (out / "traces").mkdir(parents=True)
    doc = {"device": {"type": "cpu", "name": P._device_name(torch.device("cpu"))}, "scale": "cpu",
           "sections": [], "failed": [], "skipped": []}
    (out / P.PROFILE_FILE).write_text(json.dumps(doc))
    pd.DataFrame({"run_id": ["r"]}).to_parquet(out / P.OPS_FILE)
    before = (out / P.PROFILE_FILE).read_bytes()
    monkeypatch.setattr(P, "_run_grid", _grid_interrupted_after(True))
    with pytest.raises(Interrupted, match=r"the profile in .*/prof/ is as it was .* the same command measures"):
        P.run_profile(out, device="cpu", budget_s=30.0, extend=True)
    assert (out / P.PROFILE_FILE).read_bytes() == before

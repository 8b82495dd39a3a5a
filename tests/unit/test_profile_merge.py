"""benchmarks/profile_merge.py: studies of one profile added to another of its device, their seconds and
rows with them; a merge of nothing, or across devices, refused. The fit itself is stubbed (its own tests
are elsewhere)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import profile_merge  # noqa: E402


def _profile(path: Path, device: str, studies: list[tuple[str, str, int, float, str]]) -> None:
    """A profile folder: (section, study, pass, seconds, run id) per study, two op rows and a step per run."""
    path.mkdir()
    sections = [{"section": s, "study": n, "pass": p, "seconds": sec, "run_id": r, "points": 1}
                for s, n, p, sec, r in studies]
    info = {"device": {"type": "cuda", "name": device}, "sections": sections,
            "grid_seconds": sum(x["seconds"] for x in sections), "gpu_minutes": 1.0,
            "skipped": [{"study": "profile:moe b", "points": 1, "section": "moe", "pass": 2}]}
    (path / "profile.json").write_text(json.dumps(info))
    runs = [r for *_, r in studies]
    pd.DataFrame({"run_id": [r for r in runs for _ in range(2)], "dur_us": 1.0}).to_parquet(path / "ops.parquet")
    pd.DataFrame({"run_id": runs, "kernel_us": 2.0}).to_parquet(path / "steps.parquet")


@pytest.fixture
def stub_fit(monkeypatch):
    from wlprof.predict import profile as P

    monkeypatch.setattr(P, "fit_profile", lambda ops, steps, traces, ceilings: ("predictor", "host"))
    monkeypatch.setattr(P, "write_predictor", lambda out, predictor, host: None)
    monkeypatch.setattr(P, "check", lambda ops, steps: {"points": len(steps), "op_calls": len(ops)})


def test_merge_adds_the_chosen_studies_their_rows_and_seconds(tmp_path, stub_fit):
    _profile(tmp_path / "p", "H200", [("gemm", "profile:gemm", 1, 10.0, "g1"), ("moe", "profile:moe a", 2, 5.0, "m1")])
    _profile(tmp_path / "q", "H200", [("moe", "profile:moe a", 2, 4.0, "m9"), ("moe", "profile:moe b", 2, 3.5, "m2"),
                                      ("moe", "profile:moe c", 1, 2.0, "m3"), ("gnn", "profile:gnn", 2, 9.0, "n1")])
    rc = profile_merge.main(["--into", str(tmp_path / "p"), "--from", str(tmp_path / "q"), "--section", "moe",
                             "--pass", "2", "--reason", "test"])
    assert rc == 0
    info = json.loads((tmp_path / "p" / "profile.json").read_text())
    # only 'moe b': 'moe a' is held already (same name and points), 'moe c' is pass 1, 'gnn' another section
    assert [s["study"] for s in info["sections"]] == ["profile:gemm", "profile:moe a", "profile:moe b"]
    assert info["grid_seconds"] == 18.5 and info["gpu_minutes"] == round(18.5 / 60, 2)
    assert info["skipped"] == []  # 'moe b' was listed as skipped; now it is measured
    assert info["merged"][0]["studies"] == 1 and info["merged"][0]["seconds"] == 3.5
    ops = pd.read_parquet(tmp_path / "p" / "ops.parquet")
    assert sorted(ops.run_id) == ["g1", "g1", "m1", "m1", "m2", "m2"]
    assert (info["points"], info["op_calls"]) == (3, 6)


def test_merge_refuses_other_devices_and_nothing_to_add(tmp_path, stub_fit, capsys):
    _profile(tmp_path / "p", "H200", [("moe", "profile:moe a", 2, 5.0, "m1")])
    _profile(tmp_path / "q", "A100", [("moe", "profile:moe b", 2, 3.5, "m2")])
    _profile(tmp_path / "r", "H200", [("moe", "profile:moe a", 2, 5.0, "m1")])
    before = (tmp_path / "p" / "profile.json").read_text()
    assert profile_merge.main(["--into", str(tmp_path / "p"), "--from", str(tmp_path / "q"), "--reason", "x"]) == 2
    assert "--from must be a profile of" in capsys.readouterr().err
    assert profile_merge.main(["--into", str(tmp_path / "p"), "--from", str(tmp_path / "r"), "--reason", "x"]) == 2
    assert "must hold studies the profile lacks" in capsys.readouterr().err
    assert (tmp_path / "p" / "profile.json").read_text() == before

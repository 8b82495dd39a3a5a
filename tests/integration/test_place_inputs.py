"""Placement inputs: the mix format and its refusals, calibrations, the Level-3 lookup, trace labels."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from wlprof.errors import InputError
from wlprof.placement import calibration as cal
from wlprof.placement.corun import label_streams
from wlprof.placement.l3 import Profile, _same
from wlprof.placement.mix import load_mix, mix_from_toml, resolve
from wlprof.placement.run import choose_planners

ROOT = Path(__file__).resolve().parents[2]
MIXES = sorted((ROOT / "workloads" / "mixes").glob("mix_*.toml"))


def _cpu():
    import torch

    return torch.device("cpu")


def _err(text: str, device=True) -> InputError:
    with pytest.raises(InputError) as e:
        mix = mix_from_toml(text.encode(), "t.toml")
        if device:
            resolve(mix, _cpu())
    return e.value


def test_committed_mixes_resolve_on_the_cpu():
    assert {p.stem for p in MIXES} >= {"mix_dense", "mix_moe_gnn_dense", "mix_flops_mislead"}
    for p in MIXES:
        mix = load_mix(p)
        models = resolve(mix, _cpu())
        assert 2 <= len(models) <= 8  # small enough for the oracle
        for m in models:
            assert m.point is not None and m.dtype_name == "float32"
            # the GPU configuration names every size: the CPU override only shrinks it
            entry = mix.models[m.index]
            assert entry.cpu, f"{p.name}: {m.name} has no cpu sizes"


def test_mix_refusals_name_the_key():
    assert "model[0].workload must be one of" in str(_err("[[model]]\nworkload='mpl'"))
    assert "did you mean 'mlp'" in str(_err("[[model]]\nworkload='mpl'"))
    e = _err("[[model]]\nname='a'\nworkload='mlp'\nparams={batch=8}\n[[model]]\nname='a'\nworkload='mlp'\n"
             "params={batch=8}")
    assert "model[1].name must be unique" in str(e)
    assert "model[0].slo_us must be a positive number" in str(_err("[[model]]\nworkload='mlp'\nslo_us=0", False))
    assert "model[0].layers must be a positive" in str(_err("[[model]]\nworkload='mlp'\nlayers=0", False))
    assert "model[0].bogus is not a model key" in str(_err("[[model]]\nworkload='mlp'\nbogus=1", False))
    assert "mix.gpu is not a mix key" in str(_err("[mix]\ngpu=2\n[[model]]\nworkload='mlp'", False))
    assert "[[model]] must list at least one model" in str(_err("[mix]\nname='x'", False))
    e = _err("[[model]]\nworkload='mlp'\nparams={batch=[1,8]}")
    assert "model[0].params.batch must be one configuration of mlp (it gives 2 sweep points)" in str(e)
    e = _err("[[model]]\nworkload='mlp'\nparams={batch=-1}")
    assert str(e).startswith("model[0].params.batch must be a positive integer")
    assert "must be valid TOML" in str(_err("[[model]\n", False))


def test_cpu_overrides_apply_on_the_cpu_only():
    mix = mix_from_toml(b"[mix]\ndtype='bfloat16'\ncpu_dtype='float32'\n[[model]]\nworkload='mlp'\n"
                        b"params={batch=4096, d_model=64, d_ff=128}\nslo_us=10\ncpu={batch=2, slo_us=99}")
    (m,) = resolve(mix, _cpu())
    assert m.params["batch"] == 2 and m.slo_us == 99 and m.dtype_name == "float32"
    assert m.spec_text().startswith("mlp batch=2 d_model=64 d_ff=128")
    assert len(m.key("cpu")) == 16 and m.key("cpu") != m.key("NVIDIA H200")


def test_planner_choice():
    assert choose_planners(None, 6, None, False)[0] == ["flops", "roofline"]
    names, notes = choose_planners(None, 6, Path("p"), True)
    assert names == ["flops", "roofline", "profile", "oracle"] and not notes
    names, notes = choose_planners(None, 9, None, True)
    assert "oracle" not in names and any("oracle skipped" in n for n in notes)
    assert choose_planners(["all"], 3, None, False)[0] == ["flops", "roofline", "profile", "oracle"]
    assert choose_planners(["flops,oracle"], 3, None, False)[0] == ["flops", "oracle"]
    with pytest.raises(InputError, match="oracle measures every group"):
        choose_planners(["oracle"], 9, None, False)
    with pytest.raises(InputError, match="did you mean 'roofline'"):
        choose_planners(["rooflne"], 3, None, False)


def test_profile_is_required_and_checked(tmp_path):
    with pytest.raises(InputError, match="--profile is required by the profile planner"):
        Profile.open(None)
    with pytest.raises(InputError, match="--profile must be an existing"):
        Profile.open(tmp_path / "nope")
    with pytest.raises(InputError, match="must hold at least one profiled run"):
        Profile.open(tmp_path)


def test_same_point_lookup_on_the_committed_h200_profile():
    profile = Profile.open(ROOT / "benchmarks/results/2026-11-29-h200/offline")
    with pytest.raises(InputError, match="must hold runs of the device"):
        profile.check_device("Some Other GPU")
    mix = mix_from_toml(b"[mix]\ndtype='bfloat16'\n[[model]]\nworkload='mlp'\n"
                        b"params={batch=2048, d_model=4096, d_ff=16384, activation='gelu'}\n"
                        b"[[model]]\nworkload='gemm'\nparams={shapes='1x4096x2621440'}\nlayers=2\n"
                        b"[[model]]\nworkload='mlp'\nparams={batch=3, d_model=4096, d_ff=16384}\n")
    a, b, c = resolve(mix, _cpu())
    graph = profile.same_point(a, "NVIDIA H200", "graph")
    assert graph.source == "same point" and graph.us == pytest.approx(796.148, rel=1e-3)
    eager = profile.same_point(a, "NVIDIA H200", "eager")
    assert eager.us == pytest.approx(767.68, rel=1e-3)  # the single-call latency
    assert profile.same_point(b, "NVIDIA H200", "graph").us == pytest.approx(2 * 4802.24, rel=1e-3)
    assert profile.same_point(c, "NVIDIA H200", "graph") is None  # batch 3 was never profiled


def test_same_values():
    assert _same(None, None) and _same(float("nan"), None) and not _same(3, None)
    assert _same(4096, 4096) and _same(4096.0, 4096) and not _same(4095, 4096)
    assert _same([1, 2], [1, 2]) and _same(np.array([1, 2]), [1, 2]) and not _same([1], [1, 2])
    assert _same("rmat", "rmat") and not _same("rmat", "uniform")
    assert _same(np.bool_(False), False)


def test_calibration_roundtrip_and_duplicate_configurations(tmp_path):
    c = cal.Calibration("dev")
    c.alone = {"a": [100.0, 102.0], "b": [50.0]}
    c.put_pair("b", "a", [60.0], [110.0])  # b's samples, a's samples
    c.put_pair("a", "a", [150.0], [160.0])  # two models of one configuration
    assert c.pairs[("a", "b")] == ([110.0], [60.0])
    keys = ["a", "b", "a"]
    assert c.missing(keys) == ([], [])
    rho = c.rho(keys)
    assert rho[0, 1] == pytest.approx(110 / 101 - 1) and rho[1, 0] == pytest.approx(0.2)
    assert rho[0, 2] == pytest.approx(150 / 101 - 1) and rho[2, 0] == pytest.approx(160 / 101 - 1)
    cal.save(c, tmp_path / "coloc.json")
    back = cal.load([tmp_path], "dev")
    assert back.pairs == c.pairs and back.alone == c.alone
    assert cal.load([tmp_path], "other").pairs == {}  # another device's calibration is not used
    with pytest.raises(InputError, match="--coloc must be a co-location calibration"):
        cal.load([tmp_path / "missing.json"], "dev")
    assert c.missing(["a", "c"]) == (["c"], [("a", "c")])


def test_label_streams_names_gpu_streams_after_their_model():
    doc = {"traceEvents": [
        {"ph": "X", "cat": "user_annotation", "name": "place/a", "pid": 1, "tid": 1, "ts": 0, "dur": 10},
        {"ph": "X", "cat": "user_annotation", "name": "place/b", "pid": 1, "tid": 1, "ts": 20, "dur": 10},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch", "pid": 1, "tid": 1, "ts": 2, "dur": 3,
         "args": {"correlation": 7}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch", "pid": 1, "tid": 1, "ts": 22, "dur": 3,
         "args": {"correlation": 8}},
        {"ph": "X", "cat": "kernel", "name": "k1", "pid": 0, "tid": 7, "ts": 40, "dur": 5, "args": {"correlation": 7}},
        {"ph": "X", "cat": "kernel", "name": "k2", "pid": 0, "tid": 13, "ts": 40, "dur": 5,
         "args": {"correlation": 8}},
        {"ph": "X", "cat": "user_annotation", "name": "place/c", "pid": 1, "tid": 5, "ts": 0, "dur": 10},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 5, "args": {"name": "thread 5"}},
    ]}
    label_streams(doc, {"a", "b", "c"})
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in doc["traceEvents"]
             if e.get("ph") == "M" and e.get("name") == "thread_name"}
    assert names[(0, 7)] == "stream 7: a" and names[(0, 13)] == "stream 13: b"
    assert names[(1, 5)] == "c (host)"  # replaced, not duplicated
    assert sum(1 for e in doc["traceEvents"] if e.get("ph") == "M" and e.get("tid") == 5) == 1
    assert (1, 1) not in names  # the launching thread ran two models


def test_validation_table_columns_are_described():
    from wlprof.placement.output import VALIDATION_COLUMNS

    assert all(isinstance(v, str) and v for v in VALIDATION_COLUMNS.values())


def test_profile_folder_of_wlprof_profile_layout(tmp_path):
    """`wlprof profile` keeps its runs under traces/: the profile planner reads them there."""
    import importlib.util
    import shutil

    from wlprof.placement.l3 import branch_latency

    run = next((ROOT / "tests/fixtures/h200").glob("mlp-*"))
    shutil.copytree(run, tmp_path / "p" / "traces" / run.name)
    profile = Profile.open(tmp_path / "p")
    assert profile.store == tmp_path / "p" / "traces" and profile.devices == ["NVIDIA H200"]
    if importlib.util.find_spec("wlprof.predict") is None:  # the predictor is not installed: no answer
        (m,) = resolve(mix_from_toml(b"[[model]]\nworkload='mlp'\nparams={batch=8}"), _cpu())
        assert branch_latency(tmp_path / "p", m, None, "graph") is None


def test_the_shipped_profile_opens_without_its_runs():
    # benchmarks/profiles/h200 holds the profile's tables and predictor, not its run folders
    import json

    root = ROOT / "benchmarks" / "profiles" / "h200"
    profile = Profile.open(root)
    info = json.loads((root / "profile.json").read_text())
    assert profile.devices == ["NVIDIA H200"] and len(profile.steps) == info["points"]
    assert profile.store is None


def test_a_coloc_file_is_checked_before_any_model_is_built(tmp_path, monkeypatch):
    # --coloc was never read without the profile planner (a missing file passed), and with it only after
    # every model was built and costed; a coloc.json without its fields said "('device')"
    from wlprof.placement import corun
    from wlprof.placement.run import PlaceOptions, place

    monkeypatch.setattr(corun.CoRunner, "build", lambda *a, **k: pytest.fail("the models were built"))
    mix = load_mix(ROOT / "workloads" / "mixes" / "mix_dense.toml")
    with pytest.raises(InputError) as info:
        place(mix, PlaceOptions(gpus=2, coloc=(tmp_path / "missing.json",), device="cpu"))
    assert str(info.value) == ("--coloc applies to the profile planner (pass --planner profile with --profile "
                               f"DIR) (got '{tmp_path / 'missing.json'}')")
    (tmp_path / "other.json").write_text('{"a": 1}')
    with pytest.raises(InputError, match=r"--coloc must be a readable coloc.json \(it has no 'device' field\)"):
        cal.load([tmp_path / "other.json"], "dev")

"""The profile grid: every section well formed, and no held-out configuration inside it (no leak)."""

from __future__ import annotations

from pathlib import Path

import pytest

from wlprof.predict import grid
from wlprof.study import load_study

WORKLOADS = Path(__file__).resolve().parents[2] / "workloads"
# every held-out set (A: heldout_*.toml, B-E: set_b/ ... set_e/) and the GEMM study
HELDOUT = sorted((WORKLOADS / "heldout").rglob("*.toml")) + [WORKLOADS / "gemm_same_flops.toml"]


def _points(study):
    import torch

    from wlprof import workloads

    wl = workloads.get(study.workload)
    from wlprof.params import parse_all

    values = parse_all(wl.params, study.params, "cuda", wl.name)
    # the spec checks that need a GPU (grouped GEMM probes) are skipped: shapes only
    if study.workload == "moe":
        from wlprof.workloads.moe import MoeSpec
        from wlprof.workloads.moe import routing as rt

        spec = MoeSpec(tuple(rt.parse_spec(r, "routing").label for r in values["routing"]),
                       tuple(values["dispatch"]), tuple(values["tokens"]), values["experts"], values["top_k"],
                       values["d_model"], values["d_ff"], values["ffn"], values["capacity_factor"], values["seed"])
    else:
        spec = wl.spec(values, torch.device("cpu"), torch.float32).spec
    return [(study.workload, p.params) for p in wl.points(spec)]


def _key(workload, p):
    if workload == "gemm":
        return ("gemm", p["m"], p["k"], p["n"], p.get("layout", "nn"))
    if workload == "elementwise":
        return ("elementwise", p["op"], p["numel"])
    if workload == "moe":  # a configuration: its sizes (routing and dispatch vary inside one)
        return ("moe", p["tokens"], p["experts"], p["top_k"], p["d_model"], p["d_ff"])
    if workload == "gnn":
        return ("gnn", p["graph"], p["scale"], p["features"])
    if workload == "mlp":  # a width and batch, whatever the activation
        return ("mlp", p["batch"], p["d_model"], p["d_ff"])
    return (workload, tuple(sorted((k, str(v)) for k, v in p.items())))


@pytest.fixture(scope="module")
def grid_keys():
    keys = set()
    for s in grid.sections("gpu"):
        keys |= {(s.study.dtype, *_key(w, p)) for w, p in _points(s.study)}  # a shape in another dtype is another
    return keys


def test_sections_are_well_formed_and_the_coarse_pass_comes_first():
    secs = grid.sections("gpu")
    assert [s.passno for s in secs] == sorted(s.passno for s in secs)
    assert {s.name for s in secs} == {"gemm nn", "gemm nt", "gemm linear", "gemm odd", "gemm ragged", "gemm narrow", "elementwise",
                                      "elementwise mixed",
                                      "gnn raw", "gnn pyg", "moe", "mlp", "layers", "optim"}
    assert 1000 < sum(s.points for s in secs) < 1850  # 1,807 with the coarse optimizer sweep
    assert grid.expected_seconds(secs) < 500  # the first guess (485 s); the budget decides what runs
    for s in secs:
        assert s.study.capture.profiled_steps >= 3  # the samples a call's spread needs
        assert s.points == len(_points(s.study))


def test_moe_grid_points_stay_within_work_and_memory():
    for s in grid.sections("gpu"):
        if s.name != "moe":
            continue
        p = s.study.params
        assert p["dispatch"] and set(p["dispatch"]) <= {"loop", "padded", "grouped"}
        assert p["top_k"] <= p["experts"]


@pytest.mark.parametrize("path", HELDOUT, ids=[p.stem for p in HELDOUT])
def test_no_held_out_configuration_is_in_the_grid(path, grid_keys):
    study = load_study(path)
    assert study.dtype, f"{path.name} names no dtype: the grid's are named, so nothing would compare"
    keys = {(study.dtype, *_key(w, p)) for w, p in _points(study)}
    if study.workload == "mlp":  # its two Linear layers are GEMMs the grid's nn.Linear section could hold
        keys |= {(study.dtype, "gemm", p["batch"], a, b, "linear") for _, p in _points(study)
                 for a, b in ((p["d_model"], p["d_ff"]), (p["d_ff"], p["d_model"]))}
    assert keys and not keys & grid_keys, sorted(keys & grid_keys)[:5]


def test_cpu_miniature_has_the_same_sections():
    gpu = {s.name for s in grid.sections("gpu")}
    cpu = {s.name for s in grid.sections("cpu")}
    assert {"gemm nn", "gemm nt", "gemm linear", "elementwise", "moe", "mlp"} <= cpu and cpu - {"gnn"} <= gpu


def test_an_extended_profile_lists_what_it_still_lacks():
    from wlprof.predict.profile import _still_skipped

    # two studies of one section share a name: told apart by their points
    before = [{"study": "profile:gnn raw uniform pass 2", "points": 16}, {"study": "profile:gnn raw uniform pass 2",
                                                                         "points": 24}, {"study": "b", "points": 3}]
    done = [{"study": "profile:gnn raw uniform pass 2", "points": 24}]
    now = [{"study": "b", "points": 3}, {"study": "profile:mlp d1024 pass 2", "points": 6}]
    assert _still_skipped(before, done, now) == [before[0], before[2], now[1]]


def test_the_profile_command_names_every_section_of_the_grid():
    import inspect

    from wlprof.cli import profile as cli_profile

    text = " ".join(inspect.getsource(cli_profile.profile).split())
    names = {s.name for s in grid.sections("gpu")} | {s.name for s in grid.sections("cpu")}
    assert names and all(n in text for n in names), sorted(n for n in names if n not in text)


def test_the_coarse_pass_holds_a_training_step_s_layers_and_optimizers():
    # a budget that stops in the fill-in must still leave the profile a training step's layers (convolution,
    # norms, pooling, attention, cross entropy, embeddings: forward and backward) and its optimizer kernels
    coarse = [s for s in grid.sections("gpu") if s.passno == 1]
    layers = {k for s in coarse if s.name == "layers" for k in s.study.params["layers"]}
    assert {"conv2d", "batch_norm", "max_pool", "avg_pool", "layer_norm", "attention", "cross_entropy",
            "embedding"} <= layers
    optim = [s.study.params for s in coarse if s.name == "optim"]
    assert len(optim) == 1
    assert set(optim[0]["optimizer"]) == {"adamw", "sgd"} and set(optim[0]["impl"]) == {"foreach", "fused"}
    # 4 sizes x 2 optimizers x 2 implementations over 16 tensors
    assert optim[0]["numel"] == [4096, 65536, 1048576, 16777216]

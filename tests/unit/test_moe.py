"""The MoE workload on the CPU: dispatches agree, FLOPs by hand, _grouped_mm counted (the CLI: integration/test_moe_cli.py).

FLOPs per computed token-expert row (wlprof's convention: multiply = add = 1; silu 5,
mul 1, gelu 20 per element, wlprof.cost.elementwise), for d_model 16, d_ff 32:
  swiglu: 3 GEMMs 3 * 2 * 16 * 32 = 3072, silu 5 * 32 = 160, gate mul 1 * 32 = 32 -> 3264
  gelu:   2 GEMMs 2 * 2 * 16 * 32 = 2048, gelu 20 * 32 = 640                    -> 2688
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from wlprof.cli.options import spell_study
from wlprof.errors import InputError
from wlprof.workloads import get
from wlprof.workloads import moe as moe_mod
from wlprof.workloads.base import Point
from wlprof.workloads.moe import costs as moe_costs
from wlprof.workloads.moe import grouped as moe_grouped
from wlprof.workloads.moe import tensors as moe_tensors

CPU = torch.device("cpu")
F32 = torch.float32
SMALL = {"tokens": "20", "experts": 12, "top_k": 2, "d_model": 16, "d_ff": 32}


def points(params: dict, dtype=F32) -> list[Point]:
    wl = get("moe")
    return wl.points(wl.parse(params, CPU, dtype).spec)


def build(point: Point, dtype=F32):
    return get("moe").build(point, CPU, dtype)


def reference(params: dict, keep: np.ndarray | None = None) -> torch.Tensor:
    """Every expert on every token, densely, then each token's gated sum: no dispatch at all."""
    t = moe_tensors.make_tensors(params, CPU, F32)
    r = moe_tensors.routing_for(params)
    x = t.x
    ys = []
    for e in range(params["experts"]):
        h = x @ t.w1[e].T
        h = torch.nn.functional.silu(h) * (x @ t.w3[e].T) if params["activation"] == "swiglu" \
            else torch.nn.functional.gelu(h)
        ys.append(h @ t.w2[e].T)
    ys = torch.stack(ys)  # [experts, tokens, d_model]
    ids = torch.as_tensor(r.expert_ids)
    gates = torch.as_tensor(r.gates) * (torch.as_tensor(keep, dtype=F32) if keep is not None else 1.0)
    picked = ys[ids, torch.arange(params["tokens"])[:, None]]  # [tokens, top_k, d_model]
    return (picked * gates[..., None]).sum(dim=1)


# ---------------------------------------------------------------- implementations agree


@pytest.mark.parametrize("ffn", ["swiglu", "gelu"])
@pytest.mark.parametrize("top_k", [1, 2])
def test_loop_padded_grouped_agree_with_a_dense_reference(ffn, top_k):
    routings = "concentrated,balanced,dispersed,zipf:1.2,router" + (",explicit:1x10+2x5" if top_k == 1 else "")
    pts = points({**SMALL, "top_k": top_k, "ffn": ffn, "routing": routings})
    assert len(pts) == (6 if top_k == 1 else 5) * 3
    by_routing: dict[str, dict] = {}
    for p in pts:
        by_routing.setdefault(p.params["routing"], {})[p.params["dispatch"]] = build(p).step()
    for r, outs in by_routing.items():
        ref = reference(next(p.params for p in pts if p.params["routing"] == r))
        for d, out in outs.items():
            torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5, msg=f"{r} / {d}")


def test_every_dispatch_sees_the_same_assignments_and_facts():
    pts = points({**SMALL, "routing": "zipf:1.2,router"})
    facts = {p.variant: build(p).facts for p in pts}
    for r in ("zipf:1.2", "router"):
        same = [facts[f"{r} / {d}"] for d in ("loop", "padded", "grouped")]
        for key in ("expert_counts", "active_experts", "max_expert_share", "imbalance"):
            assert len({str(f[key]) for f in same}) == 1, (r, key)


def test_padded_with_a_dropping_capacity_differs_exactly_in_the_dropped_assignments():
    [p] = points({**SMALL, "tokens": "32", "experts": 4, "routing": "zipf:1.2", "dispatch": "padded",
                  "capacity_factor": 0.5})
    b = build(p)
    r = moe_tensors.routing_for(p.params)
    counts = r.counts()
    cap = math.ceil(0.5 * 32 * 2 / 4)  # = 8 rows per expert
    assert b.facts["capacity"] == cap
    # priority: every first choice (token order) before any second choice, per expert
    keep = np.zeros_like(r.expert_ids, dtype=bool)
    used = [0] * 4
    for j in range(2):
        for i in range(32):
            e = r.expert_ids[i, j]
            keep[i, j] = used[e] < cap
            used[e] += 1
    dropped = int((~keep).sum())
    assert dropped == int(np.maximum(counts - cap, 0).sum()) == b.facts["dropped_tokens"] > 0
    out = b.step()
    torch.testing.assert_close(out, reference(p.params, keep), rtol=1e-5, atol=1e-5)
    full = reference(p.params)
    hit = ~keep.all(axis=1)  # tokens with a dropped assignment differ; the others do not
    assert torch.equal(torch.isclose(out, full, rtol=1e-5, atol=1e-5).all(dim=1), torch.as_tensor(~hit))


def test_grouped_fallback_when_torch_has_no_grouped_mm(monkeypatch):
    monkeypatch.setattr(moe_grouped, "_grouped_mm_op", lambda: None)
    # the per-group fallback takes any dtype: float64 is accepted then
    pts = points({**SMALL, "routing": "zipf:1.2", "dispatch": "grouped"}, dtype=torch.float64)
    assert len(pts) == 1
    [p] = points({**SMALL, "routing": "zipf:1.2", "dispatch": "grouped"})
    b = build(p)
    assert b.facts["grouped_path"] == moe_grouped.PATH_FALLBACK and b.graph_safe
    torch.testing.assert_close(b.step(), reference(p.params), rtol=1e-5, atol=1e-5)


def test_grouped_path_is_observed_on_the_cpu_and_loop_is_not_graph_safe():
    by = {p.params["dispatch"]: build(p) for p in points({**SMALL, "routing": "balanced"})}
    # torch 2.13's CPU _grouped_mm runs one aten::mm per group after reading offs (FIELD-NOTES)
    assert by["grouped"].facts["grouped_path"] == moe_grouped.PATH_TORCH_LOOP
    assert not by["grouped"].graph_safe and not by["loop"].graph_safe and by["padded"].graph_safe
    assert all(b.executed_regions == ("moe/expert",) for b in by.values())


# ---------------------------------------------------------------- FLOPs by hand


def test_flops_per_row_by_hand():
    assert moe_costs.flops_per_row(16, 32, "swiglu") == 3264  # 3072 + 160 + 32
    assert moe_costs.flops_per_row(16, 32, "gelu") == 2688  # 2048 + 640


HAND = {"tokens": "8", "experts": 4, "top_k": 1, "d_model": 16, "d_ff": 32, "routing": "explicit:1x5+1x3"}


def test_useful_flops_by_hand_and_padding_dropped_in_capacity():
    # counts [5, 3, 0, 0]: 8 routed rows -> useful 8 * 3264 = 26,112 for every dropless dispatch
    for p in points(HAND):
        assert build(p).useful_flops == 26_112, p.variant
    # padded, capacity factor 1: capacity ceil(1 * 8 * 1 / 4) = 2; kept min(5,2) + min(3,2) = 4,
    # dropped 3 + 1 = 4: useful 4 * 3264 = 13,056
    [p] = points({**HAND, "dispatch": "padded", "capacity_factor": 1})
    b = build(p)
    assert (b.facts["capacity"], b.facts["dropped_tokens"], b.useful_flops) == (2, 4, 13_056)
    assert "dropped" in b.note and "active 2/4 experts" in b.note


def test_flop_counter_mode_sees_the_loop_and_padded_gemms_but_not_the_grouped_ones():
    from torch.utils.flop_counter import FlopCounterMode

    # router GEMM 2 * 8 * 16 * 4 = 1,024; expert GEMMs 3 * 2 * 16 * 32 = 3,072 per row:
    # loop 8 rows -> 24,576; padded 4 experts x capacity 5 = 20 rows -> 61,440; grouped:
    # FlopCounterMode does not count torch._grouped_mm, so it sees the router alone
    want = {"loop": 1_024 + 24_576, "padded": 1_024 + 61_440, "grouped": 1_024}
    for p in points(HAND):
        step = build(p).step
        with FlopCounterMode(display=False) as fc:
            step()
        assert fc.get_total_flops() == want[p.params["dispatch"]], p.variant


def test_flop_counter_mode_does_not_count_grouped_mm_but_wlprof_does(tmp_path):
    from torch.profiler import ProfilerActivity, profile
    from torch.utils.flop_counter import FlopCounterMode

    from wlprof.cost import OpCall, cost_of

    x = torch.randn(24, 16)
    w = torch.randn(3, 8, 16).transpose(1, 2)  # [3, 16, 8] column-major, as the workload passes it
    offs = torch.tensor([5, 5, 24], dtype=torch.int32)
    with FlopCounterMode(display=False) as fc:
        torch._grouped_mm(x, w, offs=offs)
    assert fc.get_total_flops() == 0

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        torch._grouped_mm(x, w, offs=offs)
    path = tmp_path / "t.json"
    prof.export_chrome_trace(str(path))
    [ev] = [e for e in json.loads(path.read_text())["traceEvents"]
            if e.get("cat") == "cpu_op" and e.get("name") == "aten::_grouped_mm"]
    c = cost_of(OpCall.from_args(ev["name"], ev["args"], ()))
    # flops 2 * 24 * 16 * 8 = 6144; bytes fp32: a 24*16*4 = 1536, b 3*16*8*4 = 1536,
    # offs 3*4 = 12, out 24*8*4 = 768 -> 3852
    assert (c.flops, c.bytes) == (6144, 3852)


def test_study_file_prefix_names_params_and_defaults_note_cpu():
    with pytest.raises(InputError) as exc:
        get("moe").parse({"top_k": 9, "experts": 4}, CPU, F32)
    assert exc.value.message(spell_study) == ("params.top_k must be at most params.experts (4): a token picks "
                                              "distinct experts (got 9)")
    parsed = get("moe").parse({}, CPU, F32)
    assert parsed.spec.routings == ("concentrated", "balanced", "dispersed")
    assert parsed.spec.dispatches == ("loop", "padded", "grouped")
    assert (parsed.spec.tokens, parsed.spec.experts, parsed.spec.d_model, parsed.spec.d_ff) == ((32,), 16, 256, 512)
    assert any(n.startswith("CPU:") for n in parsed.notes)


def test_default_routings_include_dispersed_at_any_token_count():
    # 8192 tokens over 64 experts: dispersed is every expert active with 1-256 assignments
    parsed = get("moe").parse({"tokens": 8192, "experts": 64, "d_model": 16, "d_ff": 32}, CPU, F32)
    assert parsed.spec.routings == ("concentrated", "balanced", "dispersed")
    assert not any("skipped" in n for n in parsed.notes)


def test_oversized_configs_are_refused_before_allocation(monkeypatch):
    from wlprof import study

    # the GPU defaults: 64 experts x 3 x 4096 x 14336 bf16 weights = 22,548,578,304 bytes
    p = Point("x", {"tokens": 128, "experts": 64, "top_k": 1, "routing": "balanced", "dispatch": "grouped",
                    "capacity_factor": None, "d_model": 4096, "d_ff": 14336, "activation": "swiglu"})
    assert get("moe").estimate_bytes(p, torch.bfloat16) >= 64 * 3 * 4096 * 14336 * 2
    monkeypatch.setattr(study, "_free_memory", lambda device: 2**30)
    with pytest.raises(InputError) as exc:
        study.prepare(study.Study("moe", {"d_model": 4096, "d_ff": 14336, "dispatch": "loop"}))
    assert "must fit in host memory" in exc.value.rule_text()


def test_padded_memory_estimate_counts_the_real_loads():
    # HAND, padded, dropless: loads [5, 3, 0, 0], capacity 5, rows 4 * 5 + 1 = 21; fp32, d 16, f 32, swiglu:
    # weights 3*4*16*32 + 4*16 = 6,208; acts 2*8*16 + 21*(3*16 + 3*32) = 256 + 3,024 = 3,280;
    # (6,208 + 3,280) * 4 = 37,952 bytes, plus indices 8 * 8 * 1 * (4 + 8) = 768: 38,720
    [p] = points({**HAND, "dispatch": "padded"})
    assert get("moe").estimate_bytes(p, F32) == 38_720


def test_padded_memory_estimate_never_draws_an_absurd_routing(monkeypatch):
    # Bug: the estimate of a padded point drew its routing first (tokens x top_k ids), so
    # `wlprof run moe --dispatch padded --tokens 1099511627776` died allocating 8 TiB instead of
    # being refused. Past ROUTING_ESTIMATE_LIMIT elements every expert may take every token.
    wl = get("moe")
    monkeypatch.setattr(moe_mod, "routing_for", lambda p: pytest.fail("the estimate drew the routing"))
    t, e, d, f = 2**40, 32, 256, 512
    p = Point("x", {"tokens": t, "experts": e, "top_k": 1, "routing": "balanced", "dispatch": "padded",
                    "capacity_factor": None, "d_model": d, "d_ff": f, "activation": "swiglu", "seed": 0})
    rows = e * t + 1
    weights = 3 * e * d * f + e * d
    assert wl.estimate_bytes(p, F32) == (weights + 2 * t * d + rows * (3 * d + 3 * f)) * 4 + 8 * t * (e + 8)
    # a capacity factor sets the buffer without the loads: ceil(1.5 * 2^40 / 32) = 3 * 2^34 rows each
    cf = Point("x", {**p.params, "capacity_factor": 1.5})
    rows = e * 3 * 2**34 + 1
    assert wl.estimate_bytes(cf, F32) == (weights + 2 * t * d + rows * (3 * d + 3 * f)) * 4 + 8 * t * (e + 8)
    many = Point("x", {**p.params, "tokens": 8, "experts": 2**40})
    assert wl.estimate_bytes(many, F32) > 2**50


def test_a_capacity_factor_too_big_for_memory_is_named():
    from wlprof.cli.options import spell_cli
    from wlprof.study import Study, prepare

    # capacity = ceil(1e9 x 16 x 1 / 4) = 4e9 rows per expert: 16e9 buffer rows x (3 x 8 + 3 x 16) floats
    # ~ 4 TiB; the refusal named --tokens, --experts, --d-model, --d-ff but not the factor that caused it
    study = Study(workload="moe", device="cpu", params={
        "tokens": [16], "experts": 4, "d_model": 8, "d_ff": 16, "routing": ["balanced"], "dispatch": ["padded"],
        "capacity_factor": 1e9})
    with pytest.raises(InputError) as exc:
        prepare(study)
    text = exc.value.message(spell_cli)
    assert "must fit in host memory" in text and "--capacity-factor" in text


def test_a_default_grouped_dispatch_that_cannot_run_says_how_to_leave_it_out():
    from wlprof.workloads.moe import grouped as g

    if g._grouped_mm_op() is None:
        pytest.skip("no torch._grouped_mm: the per-group fallback takes any size")
    wl = get("moe")
    # d_model 7 in float32: 28-byte rows, not a multiple of 16; the user never asked for grouped
    with pytest.raises(InputError) as exc:
        wl.parse({"tokens": 4, "experts": 2, "d_model": 7, "d_ff": 8}, torch.device("cpu"), F32)
    assert exc.value.message(lambda k: f"--{k.name}") == (
        "--d_model must be a multiple of 4 for --dispatch grouped in float32 (torch._grouped_mm needs 16-byte "
        "aligned rows) (got 7); grouped is one of the default dispatches; set --dispatch to loop,padded to leave "
        "it out")
    # spelled as `predict --spec` spells its keys
    spec = exc.value.spelled(lambda k: f"--spec's {k.name}")
    assert spec.hint == "grouped is one of the default dispatches; set --spec's dispatch to loop,padded to leave it out"
    assert spec.rule.startswith("must be a multiple of 4 for --spec's dispatch grouped in float32")
    with pytest.raises(InputError) as exc:  # asked for: no hint to drop it
        wl.parse({"tokens": 4, "experts": 2, "d_model": 7, "d_ff": 8, "dispatch": "grouped"}, torch.device("cpu"),
                 F32)
    assert exc.value.hint is None


@pytest.mark.parametrize("routing, top_k, dup", [
    ("concentrated,2", 1, "concentrated and concentrated:2"),          # bare N continues: concentrated:2
    ("concentrated:3,concentrated", 3, "concentrated and concentrated:3"),  # default hot = max(2, top-k) = 3
])
def test_concentrated_and_its_explicit_n_are_one_sweep_point(routing, top_k, dup):
    # both drew the same assignments ([8, 8, 0, 0] at 16 tokens, 4 experts, top-1) under two labels
    with pytest.raises(InputError) as exc:
        get("moe").parse({"tokens": 16, "experts": 4, "top_k": top_k, "routing": routing, "dispatch": "loop"},
                         torch.device("cpu"), F32)
    assert f"must not repeat a sweep point: {dup} are the same routing" in str(exc.value)


def test_concentrated_with_another_n_is_a_different_point():
    parsed = get("moe").parse({"tokens": 16, "experts": 4, "routing": "concentrated,concentrated:3",
                               "dispatch": "loop"}, torch.device("cpu"), F32)
    assert list(parsed.spec.routings) == ["concentrated", "concentrated:3"]


def test_top_k_equal_to_the_expert_count_says_every_routing_is_balanced():
    # top-3 over 3 experts: every token goes to every expert, so concentrated and zipf gave the same
    # counts as balanced, and only dispersed said so
    parsed = get("moe").parse({"tokens": 37, "experts": 3, "top_k": 3, "d_model": 16, "d_ff": 32,
                               "routing": "concentrated,zipf:1.1,dispersed,balanced"}, CPU, F32)
    notes = [n for n in parsed.notes if "every token goes to every expert" in n]
    assert len(notes) == 1, parsed.notes
    assert "concentrated, zipf:1.1, dispersed" in notes[0] and "same counts as balanced" in notes[0]
    assert not any(n.startswith("dispersed at") for n in parsed.notes)  # said once, not twice
    parsed = get("moe").parse({"tokens": 37, "experts": 4, "top_k": 3, "d_model": 16, "d_ff": 32,
                               "routing": "concentrated:3"}, CPU, F32)
    assert not any("every token goes to every expert" in n for n in parsed.notes)

"""`--spec` lists the calls CUDA runs: the meta-device recording against the committed H200 fixtures."""

from __future__ import annotations

import difflib

import pytest
from conftest import H200

import wlprof
from wlprof.predict.spec import parse_spec, record

# (fixture run, spec, least similarity of the (op, input dims) sequences, of the op names alone)
CASES = [
    ("mlp-20261129-093337-6c80", "mlp batch=4,64 d_model=1024 d_ff=4096", 1.0, 1.0),
    # the CPU draws another graph than CUDA from the same seed: the edge counts differ a little
    ("gnn-20261129-093943-be50", "gnn graph=rmat scale=10 edge_factor=8 features=16 backend=scatter,csr,pyg:gcn "
     "dtype=float32", 0.3, 1.0),
    ("moe-20261129-094804-ffc6", "moe tokens=16 experts=8 top_k=1 d_model=512 d_ff=1024 "
     "routing=dispersed,concentrated dispatch=loop,grouped", 0.85, 0.85),
]


@pytest.mark.parametrize("run,text,least,names", CASES, ids=[c[0].split("-")[0] for c in CASES])
def test_spec_lists_the_ops_and_shapes_the_h200_ran(run, text, least, names):
    fixture = wlprof.load(H200 / run, table="ops")
    listed = record(parse_spec(text))
    ratios = []
    for variant, g in listed.groupby("variant", sort=False):
        f = fixture[fixture.variant == variant]
        if f.empty:  # karate is in the fixture, not in the spec
            continue
        f = f[f.step == f.step.min()].sort_values("ts_us")
        ran = list(zip(f.op_name, f.op_input_dims, strict=True))
        got = list(zip(g.op_name, g.op_input_dims, strict=True))
        ratios.append((difflib.SequenceMatcher(a=ran, b=got, autojunk=False).ratio(),
                       difflib.SequenceMatcher(a=[r[0] for r in ran], b=[r[0] for r in got], autojunk=False).ratio()))
        if "edges" in g and g.edges.notna().any():
            assert g.edges.iat[0] == pytest.approx(f.edges.iat[0], rel=0.1)
    assert ratios and min(r[0] for r in ratios) >= least and min(r[1] for r in ratios) >= names, ratios


def test_spec_carries_the_points_parameters_and_build_facts():
    ops = record(parse_spec("moe tokens=64 experts=8 top_k=2 d_model=256 d_ff=512 routing=zipf:1.2 dispatch=grouped"))
    assert set(ops.variant) == {"zipf:1.2 / grouped"}
    counts = ops.expert_counts.iat[0]
    assert len(counts) == 8 and sum(counts) == 128  # the routing drawn at build time
    assert (ops.workload == "moe").all() and (ops.dispatch == "grouped").all()
    assert "aten::_grouped_mm" in set(ops.op_name)


def _peak_rss_bytes() -> int:
    """This process's largest resident set so far (Linux counts it in KiB, macOS in bytes)."""
    import resource
    import sys

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def test_a_spec_of_gpu_sizes_is_listed_without_their_memory():
    # the experts' weights alone, [64, 4096, 14336] three times in bfloat16, are 22.5 GB: held on the CPU they
    # would raise this process's peak by that much (on a smaller machine it would run out of memory)
    before = _peak_rss_bytes()
    ops = record(parse_spec("moe tokens=4096 experts=64 top_k=2 routing=balanced dispatch=padded"))
    assert _peak_rss_bytes() - before < 2 << 30
    bmm = ops[ops.op_name == "aten::bmm"]
    assert len(bmm) == 3 and "[64,128,4096]" in bmm.op_input_dims.iat[0]  # capacity 128 rows per expert


def test_a_large_graph_is_listed_with_its_real_edges():
    # scale 13 with 16 edges per node draws 131,072 edge endpoints per side: more than the meta device's
    # threshold (65,536 elements), so the graph must be drawn for real before the step is listed.
    # Expected: every gathered or scattered index has as many rows as the workload's own simplified
    # graph, built here on the CPU for real.
    import torch

    from wlprof import workloads

    listed = record(parse_spec("gnn graph=rmat scale=13 edge_factor=16 features=8 backend=scatter dtype=float32"))
    wl = workloads.get("gnn")
    point = wl.points(wl.parse({"graph": "rmat", "scale": 13, "edge_factor": 16, "features": 8,
                                "backend": "scatter"}, torch.device("cpu"), torch.float32).spec)[0]
    edges = wl.build(point, torch.device("cpu"), torch.float32).facts["edges"]
    assert edges > 100_000
    assert listed.edges.iat[0] == edges
    index_ops = listed[listed.op_name.isin(["aten::gather", "aten::index_select", "aten::scatter_add_"])]
    assert len(index_ops) >= 2
    assert all(f"[{edges}," in dims or f"[{edges}]" in dims for dims in index_ops.op_input_dims), \
        index_ops.op_input_dims.tolist()


def test_a_spec_is_checked_for_the_gpu_not_this_cpu():
    # bfloat16 CSR SpMM: the CPU's MKL kernel lacks it, CUDA has it; a spec lists the GPU's step
    ops = record(parse_spec("gnn graph=rmat scale=8 features=8 backend=csr"))
    assert set(ops.dtype) == {"bfloat16"} and "aten::addmm" in set(ops.op_name)
    from wlprof.errors import InputError
    from wlprof.study import Study, prepare

    with pytest.raises(InputError, match="torch.sparse.mm supports on cpu"):  # running it here is refused
        prepare(Study(workload="gnn", params={"graph": "rmat", "scale": 8, "features": 8, "backend": "csr"},
                      device="cpu", dtype="bfloat16"))


def test_a_large_csr_graph_is_listed():
    # 8,192 nodes x 16 edges: the CSR values (one per edge, > 65,536) are built on the meta device, and the
    # sparse constructor, which checks its parts' devices before any dispatch, gets real zeros for them
    ops = record(parse_spec("gnn graph=uniform scale=13 edge_factor=16 features=8 backend=csr dtype=float32"))
    spmm = ops[ops.op_name == "aten::addmm"]
    assert len(spmm) == 1 and spmm.op_input_dims.iat[0].startswith("[[8192,8],[8192,8192],[8192,8]")


def test_a_step_the_meta_device_cannot_list_is_refused_with_torchs_whole_reason(monkeypatch):
    # torch's reason is kept whole where it is short enough: it ends with its last words, not cut at 160
    # characters mid-word ("... but torch.")
    from wlprof.errors import InputError
    from wlprof.workloads import gemm

    reason = ("`fused=True` requires all the params to be floating point Tensors of supported devices: ['mps', "
              "'cuda', 'xpu', 'hpu', 'cpu', 'mtia', 'privateuseone'] but torch.bfloat16 and meta")

    def refuse(self, point, device, dtype):
        raise RuntimeError(reason + "\nsecond line")

    monkeypatch.setattr(gemm.Gemm, "build", refuse)
    with pytest.raises(InputError) as info:
        record(parse_spec("gemm shapes=8x8x8"))
    text = str(info.value.rule)
    assert "point 'balanced 8x8x8': RuntimeError: " + reason + ")" in text and "second line" not in text, text


def test_a_fused_optimizer_step_lists_its_one_kernel_as_the_h200_ran_it():
    # fused AdamW over 4 tensors of 4,096 (float32): the profile's H200 step is the step counters' add and one
    # _fused_adamw_ over the four lists (params, grads, exp_avgs, exp_avg_sqs), the max_exp_avg_sqs list empty;
    # torch's fused optimizers refused the meta device before any dispatch
    profile = __import__("pandas").read_parquet(
        H200.parents[2] / "benchmarks" / "profiles" / "h200" / "ops.parquet",
        columns=["op_name", "op_input_dims", "variant", "run_id", "step"])
    ran = profile[profile.variant == "adamw fused T4 n=4096"]
    ran = ran[(ran.run_id == ran.run_id.iat[0]) & (ran.step == ran.step.min())]
    launching = frozenset({"aten::_foreach_add_", "aten::_fused_adamw_", "aten::_fused_sgd_"})  # as a profile's
    ops = record(parse_spec("optim optimizer=adamw impl=fused tensors=4 numel=131072 dtype=float32"), launching=launching)
    assert ops.op_name.tolist() == ran.op_name.tolist() == ["aten::_foreach_add_", "aten::_fused_adamw_"]
    assert ops.op_input_dims.iat[1] == ran.op_input_dims.iat[1].replace("4096", "131072")
    sgd = record(parse_spec("optim optimizer=sgd impl=fused tensors=2 numel=131072"), launching=launching)
    assert sgd.op_name.tolist() == ["aten::_fused_sgd_"]
    assert sgd.op_input_dims.iat[0].startswith("[[[131072],[131072]],[[131072],[131072]],[[131072],[131072]]")


def test_a_foreach_optimizer_step_lists_its_kernels_and_not_its_host_side_step_reads():
    # AdamW foreach over 3 tensors: the 8 _foreach_ calls a CUDA step launches on the parameters and states
    # (mul_ twice, lerp_, addcmul_, sqrt, div_, add_, addcdiv_); the step counters live on the host, so their
    # increment and their reads (_local_scalar_dense, 3 per step) launch nothing and are not listed, nor the
    # states' zero fills of a first step
    foreach = frozenset(f"aten::_foreach_{n}" for n in ("mul_", "lerp_", "addcmul_", "sqrt", "div_", "add_",
                                                         "addcdiv_"))  # as a profile's launching ops name them
    ops = record(parse_spec("optim optimizer=adamw impl=foreach tensors=3 numel=131072 dtype=float32"),
                 launching=foreach)
    names = ops.op_name.value_counts().to_dict()
    assert "aten::_local_scalar_dense" not in names and "aten::fill_" not in names and "aten::zero_" not in names
    assert names.get("aten::_foreach_mul_") == 2 and names.get("aten::_foreach_add_") == 1
    # the counters' increment, _foreach_add_(state_steps, tensor(1.0), alpha=1.0), runs on the host too: the 8
    # calls a CUDA step launches kernels for (the H200 measured 8 for AdamW foreach over 40 tensors, set M)
    assert sum(v for k, v in names.items() if k.startswith("aten::_foreach_")) == 8 == len(ops)


def test_an_optimizer_step_over_more_tensors_than_the_profiler_records_lists_their_shapes():
    # 40 tensors: torch.profiler records lists of more than 30 as []; the workload's own record of its
    # list calls gives every _foreach_ call its 40 shapes, so a spec of 40 x 131072 is not a spec of 40 x 7
    import json

    foreach = frozenset(f"aten::_foreach_{n}" for n in ("mul_", "lerp_", "addcmul_", "sqrt", "div_", "add_",
                                                         "addcdiv_"))
    ops = record(parse_spec("optim optimizer=adamw impl=foreach tensors=40 numel=131072 dtype=float32"),
                 launching=foreach)
    lists = ops[ops.op_name == "aten::_foreach_sqrt"]
    assert len(lists) == 1 and json.loads(lists.op_input_dims.iat[0]) == [[[131072]] * 40]
    assert all(json.loads(d)[0] for d in ops.op_input_dims)  # no call's first list is left []


def test_the_router_routing_is_drawn_on_real_tensors_and_listed():
    # routing=router runs the router on the layer's input; at d_model 4096 that input (128 x 4096
    # elements) lives on the meta device while the step is listed, so the routing is drawn before
    from wlprof.workloads.moe.tensors import routing_for

    ops = record(parse_spec("moe tokens=128 experts=8 top_k=2 routing=router dispatch=grouped,padded"))
    assert set(ops.variant) == {"router / grouped", "router / padded"}
    want = routing_for({"routing": "router", "tokens": 128, "experts": 8, "top_k": 2, "d_model": 4096,
                        "seed": 0}).counts().tolist()
    assert sum(want) == 256  # 128 tokens x top-2
    for _, g in ops.groupby("variant"):
        assert list(g.expert_counts.iat[0]) == want
    bmm = ops[ops.op_name == "aten::bmm"]  # padded, dropless: capacity = the largest load
    assert len(bmm) == 3 and f"[8,{max(want)},4096]" in bmm.op_input_dims.iat[0]


def test_a_graph_too_large_for_this_machines_memory_is_refused_before_it_is_drawn():
    # scale 40 at edge factor 16: 2^44 edges drawn, 6 int64 index arrays of them (edge_index and the
    # generator's temporaries) = 48 x 2^44 bytes = 768 TiB on the CPU
    from wlprof.errors import InputError

    with pytest.raises(InputError) as info:
        record(parse_spec("gnn graph=rmat scale=40 backend=scatter"))
    text = str(info.value)
    assert "index data fits in this machine's memory" in text and "draws about 786,432.0 GiB" in text, text


def test_an_alltoall_dispatch_is_refused_naming_the_dispatch():
    from wlprof.errors import InputError

    with pytest.raises(InputError) as info:
        record(parse_spec("moe tokens=64 experts=8 top_k=2 dispatch=grouped,alltoall"))
    text = str(info.value)
    assert text.startswith("--spec's dispatch must not be alltoall") and "(got 'grouped,alltoall')" in text, text


def test_a_dtype_given_twice_must_agree():
    # 'mlp dtype=float32' with --dtype bfloat16 listed float32 calls without a word
    from wlprof.errors import InputError

    with pytest.raises(InputError) as info:
        record(parse_spec("mlp batch=2 d_model=64 d_ff=128 dtype=float32"), dtype="bfloat16")
    assert str(info.value) == "--dtype must agree with --spec's dtype (float32), or be left out (got 'bfloat16')"
    ops = record(parse_spec("mlp batch=2 d_model=64 d_ff=128 dtype=fp32"), dtype="float32")
    assert set(ops.dtype) == {"float32"}


def test_a_key_given_twice_is_refused_not_overwritten():
    from wlprof.errors import InputError

    with pytest.raises(InputError, match=r"must give shapes once \(a list is comma-separated: shapes=A,B\)"):
        parse_spec("gemm shapes=8x8x8 shapes=16x16x16")
    with pytest.raises(InputError, match="must give top_k once"):  # top-k is top_k
        parse_spec("moe top-k=2 top_k=4")
    assert parse_spec("gemm shapes=8x8x8,16x16x16").params == {"shapes": "8x8x8,16x16x16"}


def _cpu_run_calls(workload: str, params: dict, dtype, tmp_path):
    """The calls one step of `params` launches when it runs on the CPU for real, listed as `record` lists
    them (the reference a spec's listing must equal)."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    from wlprof import workloads
    from wlprof.predict.spec import calls_of_trace

    wl = workloads.get(workload)
    point = wl.points(wl.parse(params, torch.device("cpu"), dtype).spec)[0]
    with torch.no_grad():
        wl.prepare(point, torch.device("cpu"))
        built = wl.build(point, torch.device("cpu"), dtype)
        built.step()
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
            with record_function("wlprof/step#0"):
                built.step()
    path = tmp_path / "step.json"
    prof.export_chrome_trace(str(path))
    return calls_of_trace(str(path), None, built.tensor_lists), built.facts


def test_a_float32_grouped_moe_on_the_meta_device_lists_its_grouped_gemms(tmp_path):
    # 23 experts x d_model 96 x d_ff 32 = 70,656 weight elements per matrix: more than the meta device's
    # threshold (65,536), so the weights are shapes only. torch's meta kernel of _grouped_mm refuses every
    # dtype but bfloat16 (CUDA's one grouped kernel), and the listing fell back to the workload's own
    # per-expert loop (41 mm and gelu calls) where CUDA and the CPU call _grouped_mm twice (gelu FFN).
    # 80 tokens x top-4 = 320 routed rows:
    #   up:   [320, 96] x [23, 96, 32] -> 2 x 320 x 96 x 32 = 1,966,080 FLOPs;
    #         bytes 320*96*4 + 23*96*32*4 + 23*4 (int32 offs) + 320*32*4 (out) = 446,556
    #   down: [320, 32] x [23, 32, 96] -> the same FLOPs and bytes
    import torch

    from wlprof.predict.calls import describe

    text = ("moe tokens=80 experts=23 top_k=4 d_model=96 d_ff=32 ffn=gelu routing=zipf:2.5 dispatch=grouped "
            "seed=440 dtype=float32")
    ops = record(parse_spec(text))
    gmm = ops[ops.op_name == "aten::_grouped_mm"]
    assert gmm.op_input_dims.tolist() == ["[[320,96],[23,96,32],[23],[],[]]", "[[320,32],[23,32,96],[23],[],[]]"]
    d = describe(gmm)
    assert d.flops.tolist() == [1_966_080, 1_966_080] and d.bytes.tolist() == [446_556, 446_556]
    assert (ops.grouped_path == "torch._grouped_mm: per-group mm").all()  # CUDA's path for float32
    assert "aten::gelu" in set(ops.op_name) and (ops.op_name == "aten::mm").sum() == 1  # the router's only
    params = dict(parse_spec(text).params)
    params.pop("dtype")
    ran, facts = _cpu_run_calls("moe", params, torch.float32, tmp_path)
    assert list(zip(ops.op_name, ops.op_input_dims, strict=True)) == \
        list(zip(ran.op_name, ran.op_input_dims, strict=True))
    assert list(ops.expert_counts.iat[0]) == facts["expert_counts"]


def test_a_fused_adam_step_lists_its_kernel_though_the_profile_holds_only_adamw():
    # the H200 profile measured _fused_adamw_ and _fused_sgd_, not Adam's _fused_adam_; the listing kept the
    # ops CUDA launches by LAUNCHING and the profile's op names, so an Adam fused step listed the counters'
    # add alone and lost the optimizer's one kernel (the CPU ops table of the same step costs it: 41,344 FLOPs
    # at 17 x 187). Every optimizer list op launches its multi-tensor-apply kernels on CUDA. Expected, Adam
    # without weight decay: 13 FLOPs per element (cost.optimizers.fused_adam) x 4 x 131,072 = 6,815,744
    import json

    from wlprof.predict.calls import describe

    profile = H200.parents[2] / "benchmarks" / "profiles" / "h200" / "predictor.json"
    launching = frozenset(json.loads(profile.read_text())["predictor"]["meta"]["op_names"])
    assert "aten::_fused_adam_" not in launching
    ops = record(parse_spec("optim optimizer=adam impl=fused tensors=4 numel=131072 dtype=float32"),
                 launching=launching)
    assert ops.op_name.tolist() == ["aten::_foreach_add_", "aten::_fused_adam_"]
    assert ops.op_input_dims.iat[1].startswith("[[[131072],[131072],[131072],[131072]],")
    assert describe(ops).flops.iat[1] == 13 * 4 * 131_072


def test_a_sage_csr_mean_step_lists_the_branch_pyg_takes_on_cuda():
    # PyG's spmm(reduce='mean') over a CSR adjacency calls torch.sparse.mm(adj, x, 'mean') on the CPU, a
    # CPU-only kernel (_sparse_mm_reduce_impl) that CUDA does not launch: the listing lost the aggregation and
    # kept the two linear layers. On CUDA PyG sums with a sparse mm and divides by the clamped in-degrees:
    # deg = ptr[1:] - ptr[:-1] (sub over 256 int64), the SpMM [256, 256] x [256, 8], clamp_(deg [256, 1], min=1)
    # and the division [256, 8] / [256, 1]. The rmat graph of 2^8 nodes draws 837 edges here (seed 0): the SpMM's
    # FLOPs are 2 x 837 x 8 = 13,392
    from wlprof.predict.calls import describe

    ops = record(parse_spec("gnn graph=rmat scale=8 edge_factor=4 features=8 backend=pyg:sage-csr reduction=mean "
                            "transform=false dtype=float32"))
    assert "aten::_sparse_mm_reduce_impl" not in set(ops.op_name)
    calls = list(zip(ops.op_name, ops.op_input_dims, strict=True))
    for call in [("aten::sub", "[[256],[256],[]]"), ("aten::addmm", "[[256,8],[256,256],[256,8],[],[]]"),
                 ("aten::clamp_", "[[256,1],[],[]]"), ("aten::div", "[[256,8],[256,1]]")]:
        assert call in calls, calls
    spmm = describe(ops)[ops.op_input_dims == "[[256,8],[256,256],[256,8],[],[]]"]
    assert ops.edges.iat[0] == 837 and spmm.flops.tolist() == [13_392]


def test_a_loop_moe_step_lists_one_hot_without_the_cpus_checks():
    # F.one_hot checks the class values on the CPU (aminmax, then two item() reads back to the host) and on
    # CUDA leaves that to scatter's device assert: the listing had two fills of 0-d tensors and two host
    # syncs (_local_scalar_dense) that the H200's loop step has not. Its dispatch now starts as the H200's:
    # the zeros of the one-hot mask [tokens, top_k, experts] = [9, 1, 4], the scatter_ into it, the sum
    # over the tokens, gt and nonzero (the profile's loop points: fill_, scatter_, sum, gt, nonzero)
    import pandas as pd

    ops = record(parse_spec("moe tokens=9 experts=4 top_k=1 routing=balanced dispatch=loop d_model=32 d_ff=32 "
                            "dtype=float32"))
    dispatch = ops[ops.region == "moe/dispatch"]
    assert "aten::_local_scalar_dense" not in set(dispatch.op_name)
    assert list(zip(dispatch.op_name[:5], dispatch.op_input_dims[:5], strict=True)) == [
        ("aten::fill_", "[[9,1,4],[]]"), ("aten::scatter_", "[[9,1,4],[],[9,1,1],[]]"),
        ("aten::sum", "[[4,1,9],[],[],[]]"), ("aten::gt", "[[4],[]]"), ("aten::nonzero", "[[4]]")]
    profile = pd.read_parquet(H200.parents[2] / "benchmarks" / "profiles" / "h200" / "ops.parquet",
                              columns=["op_name", "variant", "run_id", "step", "region", "ts_us"])
    ran = profile[profile.variant.str.endswith("/ loop") & (profile.region == "moe/dispatch")]
    ran = ran[(ran.run_id == ran.run_id.iat[0]) & (ran.variant == ran.variant.iat[0]) & (ran.step == ran.step.min())]
    assert ran.sort_values("ts_us").op_name.tolist()[:5] == dispatch.op_name.tolist()[:5]


def test_an_in_place_division_is_a_call_as_its_out_of_place_form_is():
    # the scatter and index_add backends' mean divides in place (out.div_(deg)): a kernel on CUDA, which the
    # listing dropped (div is among the ops that launch, div_ was not, nor in the profile's op names).
    # 2^6 nodes, 7 features: div_([64, 7], [64, 1]) = 448 FLOPs; bytes 448 x 4 read + 64 x 4 read +
    # 448 x 4 written = 3,840
    from wlprof.predict.calls import describe

    ops = record(parse_spec("gnn graph=uniform scale=6 edge_factor=8 features=7 backend=scatter,index_add "
                            "reduction=mean transform=false dtype=float32"))
    div = ops[ops.op_name == "aten::div_"]
    assert len(div) == 2 and set(div.op_input_dims) == {"[[64,7],[64,1]]"}
    d = describe(div)
    assert d.flops.tolist() == [448, 448] and d.bytes.tolist() == [3_840, 3_840]

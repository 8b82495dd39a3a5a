"""Cross-run analysis on constructed data with known answers: the spectrum, compare, the model ladder, plots."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from wlprof.analysis import models
from wlprof.analysis.compare import compare_kernels, compare_steps, negative_overhead_note
from wlprof.analysis.families import add_family, op_category
from wlprof.analysis.spectrum import equal_flops_spread, r2_flops_only, r2_linear, spearman, spectrum


def _steps(workload, flops, latency, **cols):
    n = len(flops)
    return pd.DataFrame({"workload": workload, "status": "ok", "flops": np.asarray(flops, float),
                         "latency_us": np.asarray(latency, float), "kernel_us": np.asarray(latency, float),
                         "achieved_tflops": np.asarray(flops, float) / np.asarray(latency, float) / 1e6,
                         "ceiling_tflops": 800.0, "roofline_fraction": 0.5, "run_id": "r", "variant":
                         [f"v{i}" for i in range(n)], **cols})


def test_perfectly_flops_proportional_family_has_r2_one():
    flops = [1e9, 2e9, 4e9, 8e9]
    lat = [f / 5e6 for f in flops]  # 5 TFLOP/s exactly: latency = FLOPs / 5e6 us
    s = spectrum(_steps("mlp", flops, lat, batch=[1024, 2048, 4096, 8192]))
    row = s.iloc[0]
    assert row.family == "dense MLP (large batch)" and row.points == 4
    assert row.r2_flops_only == pytest.approx(1.0) and row.r2_linear == pytest.approx(1.0)
    assert row.spearman == pytest.approx(1.0)
    assert np.isnan(row.equal_flops_spread)  # no two points of equal FLOPs
    assert row.median_peak_fraction == pytest.approx(5 / 800)


def test_equal_flops_variants_give_the_spread():
    # three GEMMs of 21.47 GFLOP taking 42.5, 198.8 and 4918.2 us: spread 4918.2 / 42.5 = 115.72
    flops = [21_474_836_480.0] * 3
    s = spectrum(_steps("gemm", flops, [42.5, 198.8, 4918.2]))
    assert s.iloc[0].family == "GEMM shapes"
    assert s.iloc[0].equal_flops_spread == pytest.approx(4918.2 / 42.5)
    assert equal_flops_spread(np.array([1.0, 1.005, 3.0]), np.array([10.0, 30.0, 7.0])) == pytest.approx(3.0)


def test_r2_helpers_on_known_data():
    x = np.array([1.0, 2.0, 3.0, 4.0])
    assert r2_linear(x, 3 * x + 7) == pytest.approx(1.0)
    # y = 3x + 7 through the origin: a = sum(xy)/sum(x^2) = (10+26+48+76)/30 = 160/30; R^2 < 1
    a = 160 / 30
    pred = a * x
    y = 3 * x + 7
    expected = 1 - ((y - pred) ** 2).sum() / ((y - y.mean()) ** 2).sum()
    assert r2_flops_only(x, y) == pytest.approx(expected)
    assert spearman(x, -x) == pytest.approx(-1.0)


def test_families_and_categories():
    df = pd.DataFrame({"workload": ["gemm", "mlp", "mlp", "moe", "gnn", "elementwise"],
                       "batch": [None, 8, 4096, None, None, None], "routing": [None, None, None, "zipf:1.2", None, None],
                       "backend": [None, None, None, None, "csr", None]})
    assert list(add_family(df).family) == ["GEMM shapes", "MLP (small batch)", "dense MLP (large batch)",
                                           "MoE (zipf)", "GNN (csr)", "roofline micro-kernels"]
    assert op_category("aten::addmm") == "matmul" and op_category("aten::scatter_add_") == "gather/scatter"
    assert op_category(None) == "no op (graph replay)" and op_category("aten::weird") == "other"
    # Inductor's GEMM templates are matmuls; its pointwise kernels are not
    assert op_category("triton_tem_fused__unsafe_view_mm_mul_silu_t_view_6") == "matmul"
    assert op_category("triton_tem_fused_bmm_19") == "matmul" and op_category("triton_poi_fused_add_0") == "other"


def _kernels(rows):
    return pd.DataFrame(rows, columns=["step", "op_name", "region", "dur_us", "flops", "bytes"])


def test_compare_attributes_the_extra_time():
    a = _kernels([(0, "aten::mm", "moe/expert", 10.0, 100.0, 10.0), (1, "aten::mm", "moe/expert", 10.0, 100.0, 10.0)])
    b = _kernels([(0, "aten::mm", "moe/expert", 30.0, 100.0, 10.0), (0, "aten::index_add_", "moe/combine", 20.0, 1, 1),
                  (1, "aten::mm", "moe/expert", 30.0, 100.0, 10.0), (1, "aten::index_add_", "moe/combine", 20.0, 1, 1)])
    t = compare_kernels(a, b, ["category"]).set_index("category")
    # per step: matmul 10 -> 30 (+20), gather/scatter 0 -> 20 (+20): each half of the +40 us
    assert t.loc["matmul", "diff_us"] == 20 and t.loc["matmul", "ratio"] == 3
    assert t.loc["gather/scatter", "dur_us_a"] == 0 and t.loc["gather/scatter", "share_of_diff"] == 0.5


def test_compare_puts_communication_in_a_category_of_its_own():
    # NCCL's kernels (launched under c10d's ops or record_param_comms) and gloo's work were "other" or the
    # category of the op that happened to launch them
    assert op_category("c10d::allreduce_") == "communication" and op_category("record_param_comms") == "communication"
    assert op_category("nccl:all_reduce") == "communication" and op_category("aten::mm") == "matmul"
    rows = [(s, "aten::mm", None, 10.0, 100.0, 10.0, "ampere_bf16_gemm", None) for s in (0, 1)]
    a = pd.DataFrame(rows, columns=["step", "op_name", "region", "dur_us", "flops", "bytes", "name", "comm_class"])
    b = pd.concat([a, pd.DataFrame(
        [(0, "record_param_comms", None, 8.0, None, None, "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "collective"),
         (1, "aten::copy_", None, 6.0, None, None, "ncclDevKernel_SendRecv", None),  # named by its kernel alone
         (1, "c10d::send", None, 2.0, None, None, "gloo:send", "p2p"),
         (1, "aten::copy_", None, 1.0, None, None, "Memcpy DtoD (Device -> Device)", "memcpy")],
        columns=a.columns)], ignore_index=True)
    t = compare_kernels(a, b, ["category"]).set_index("category")
    assert t.loc["communication", "dur_us_b"] == pytest.approx((8 + 6 + 2) / 2)
    assert t.loc["communication", "kernels_b"] == 1.5 and t.loc["copy/fill", "dur_us_b"] == 0.5
    assert t.loc["matmul", "diff_us"] == 0
    steps = compare_steps(pd.Series({"latency_us": 2.0, "flops": 10.0}), pd.Series({"latency_us": 4.0, "flops": 10.0}))
    said = dict(zip(steps.metric, steps.statistic, strict=True))
    assert said["latency_us"] == "median of single calls" and said["kernel_us"] == "median of profiled steps"
    assert said["flops"] == "mean of profiled steps" and said["achieved_tflops"] == "mean FLOPs / median kernel time"
    ratio = dict(zip(steps.metric, steps.ratio, strict=True))
    assert ratio["latency_us"] == 2.0 and ratio["flops"] == 1.0
    # a negative host overhead (kernels outlasting the latency) has no meaningful B / A
    neg = compare_steps(pd.Series({"host_overhead_us": -3.0}), pd.Series({"host_overhead_us": 2.0}))
    assert np.isnan(neg.set_index("metric").ratio["host_overhead_us"])


def _ops(n, seed, scale=1.0):
    rng = np.random.default_rng(seed)
    m = rng.integers(1, 4096, n)
    k = np.full(n, 4096)
    nn = np.full(n, 4096)
    flops = 2.0 * m * k * nn
    nbytes = 2.0 * (m * k + k * nn + m * nn)
    # a synthetic device: 500 TFLOP/s, 4000 GB/s, plus 3 us per call
    dur = np.maximum(flops / 500e6, nbytes / 4000e3) * scale + 3.0

    return pd.DataFrame({
        "run_id": "r", "point": np.arange(n) // 2, "step": np.arange(n) % 2, "workload": "gemm", "op_name": "aten::mm",
        "op_input_dims": [json.dumps([[int(a), 4096], [4096, 4096]]) for a in m], "flops": flops, "bytes": nbytes,
        "dur_us": dur, "ceiling_tflops": 800.0, "ceiling_gbps": 4200.0, "cost_dtype": "bfloat16",
        "roofline_us": np.maximum(flops / 800e6, nbytes / 4200e3), "kernel_count": 1,
        "roofline_fraction": np.maximum(flops / 800e6, nbytes / 4200e3) / dur,
    })


@pytest.mark.slow
def test_a_negative_host_overhead_is_named_with_its_reason():
    # A: latency 100 us, kernels 140 us -> -40 us; B: 100 - 60 = +40 us; C: not measured (an ingested trace)
    a = pd.Series({"host_overhead_us": 100.0 - 140.0})
    b = pd.Series({"host_overhead_us": 100.0 - 60.0})
    c = pd.Series({"host_overhead_us": np.nan})
    note = negative_overhead_note({"A": a, "B": b})
    assert note.startswith("note: host_overhead_us is negative in A:") and "profiler" in note
    assert "negative in A and B" in negative_overhead_note({"A": a, "B": a})
    assert negative_overhead_note({"A": b, "B": c}) is None
    assert negative_overhead_note({"A": pd.Series({"latency_us": 5.0})}) is None


def test_ladder_scores_are_the_errors_they_claim():
    train, test = models.features(_ops(300, 0)), models.features(_ops(100, 1))
    first_m = json.loads(train.op_input_dims.iloc[0])[0][0]
    assert list(train[["M", "N", "K", "B"]].iloc[0]) == [first_m, 4096, 4096, 1]
    ladder = models.fit(train)
    ops_s, steps_s = models.score(ladder, test)
    by = ops_s[ops_s.family == "all"].set_index("model")
    # L0 peak predicts FLOPs / 800 TFLOP/s: far too fast for the 500 TFLOP/s + 3 us device
    assert by.loc["L0 peak", "within_10pct"] < 0.2
    assert by.loc["L3 profile", "median_ape"] < 0.05  # the profile-based model learns this device
    # the scoring itself: a perfect prediction has zero error; a 2x one has |error| 1.0
    perfect = models.Ladder(1.0, {}, {}, None, [])
    t = test.assign(flops=test.dur_us * 1.0)
    o, _ = models.score(perfect, t)
    assert o[(o.model == "L0 fitted") & (o.family == "all")].median_ape.iloc[0] == pytest.approx(0.0)
    assert o[(o.model == "L0 fitted") & (o.family == "all")].within_10pct.iloc[0] == 1.0
    double = models.Ladder(0.5, {}, {}, None, [])
    o, s = models.score(double, t)
    assert o[(o.model == "L0 fitted") & (o.family == "all")].median_ape.iloc[0] == pytest.approx(1.0)
    assert s[(s.model == "L0 fitted") & (s.family == "all")].step_median_ape.iloc[0] == pytest.approx(1.0)


def test_matrix_dims_of_recorded_calls():
    assert models.matrix_dims("aten::addmm", "[[1024],[64,512],[512,1024],[],[]]") == (64, 1024, 512, 1)
    assert models.matrix_dims("aten::bmm", "[[8,4,16],[8,16,32]]") == (4, 32, 16, 8)
    assert models.matrix_dims("aten::_grouped_mm", "[[64,256],[4,256,128],[4]]") == (16, 128, 256, 4)
    assert all(np.isnan(models.matrix_dims("aten::gelu", "[[10]]")))


def test_figures_are_drawn(tmp_path):
    from wlprof.plots import figures

    ops = add_family(_ops(20, 0).assign(intensity_flop_per_byte=lambda d: d.flops / d["bytes"],
                                        achieved_tflops=lambda d: d.flops / d.dur_us / 1e6))
    fig = figures.roofline(ops, {"copy_gbps": 4200.0, "matrix_tflops": {"bfloat16": 800.0}, "vector_tflops": 50.0})
    path = tmp_path / "r.png"
    fig.savefig(path)
    assert path.stat().st_size > 10_000
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and "FLOP/byte" in ax.get_xlabel() and "TFLOP/s" in ax.get_ylabel()
    assert len(ax.collections) >= 1 and len(ax.collections[0].get_offsets()) == 20


@pytest.mark.slow
def test_l3_answers_profiled_calls_from_their_measured_time():
    train = models.features(_ops(200, 0))
    ladder = models.fit(train)
    same = train.assign(run_id="other")  # the same calls, measured again elsewhere
    assert ladder.sources(same)["same point"] == 1.0
    pred = ladder.predict(same)["L3 profile"]
    # every call appears once per (point, step) here, so its median is its own time
    med = train.groupby(models.call_key(train)).dur_us.median()
    assert np.allclose(pred, models.call_key(same).map(med).to_numpy())
    unseen = models.features(_ops(50, 7).assign(op_input_dims=lambda d: d.op_input_dims + " "))
    # the dims text differs, so no call is the same call; their parsed shapes lie among the
    # profiled ones, so neighbours answer
    src = ladder.sources(unseen)
    assert src["same point"] == src["same call"] == 0.0 and src["nearest"] == 1.0


# ------------------------------------------------------------- L3: which calls share a profile


def _calls(rows, **cols):
    """Op rows (op, dims, types, strides, dur_us, roofline_us) for the L3 lookups."""
    df = pd.DataFrame(rows, columns=["op_name", "op_input_dims", "op_input_types", "op_input_strides", "dur_us",
                                     "roofline_us"])
    n = len(df)
    base = {"run_id": "r", "point": 0, "step": np.arange(n), "workload": "moe", "op_concrete_inputs": "[]",
            "flops": df.roofline_us * 1e6, "bytes": df.roofline_us * 4e3, "ceiling_tflops": 1.0,
            "ceiling_gbps": 4000.0, "cost_dtype": "bfloat16", "kernel_count": 1,
            "roofline_fraction": df.roofline_us / df.dur_us}
    return models.features(df.assign(**{**base, **cols}))


MM = ("aten::mm", "[[64,4096],[4096,14336]]", '["c10::BFloat16","c10::BFloat16"]', "[[4096,1],[1,4096]]")
INDEX_ADD = ("aten::index_add_", "[[8192,4096],[],[300],[300,4096]]",
             '["c10::BFloat16","Scalar","long int","c10::BFloat16"]', "[[4096,1],[],[1],[4096,1]]")
CSR = ("aten::addmm", "[[1048576,64],[1048576,1048576],[1048576,64],[],[],[0,0]]",
       '["float","float","float","Scalar","Scalar","float"]', "[[64,1],[],[64,1],[],[],[1,1]]")
INDEX = ("aten::index", "[[8192,4096],[]]", '["c10::BFloat16",""]', "[[4096,1],[]]")


def test_data_dependence_from_the_recorded_inputs():
    calls = _calls([(*MM, 30.0, 20.0), (*INDEX_ADD, 5.0, 1.0), (*CSR, 1000.0, 100.0), (*INDEX, 4.0, 1.0)])
    # dense GEMM: shapes only; index_add_ takes int64 indices; the CSR adjacency is a tensor
    # recorded with dims but no strides (sparse); aten::index's index list is recorded as ""
    assert list(models.data_dependent(calls)) == [False, True, True, True]


def test_profile_lookup_ignores_the_data_of_a_dense_op_only():
    counts = {"expert_counts": "[64,0]", "routing": "concentrated", "dispatch": "loop",
              "variant": "concentrated / loop"}
    train = _calls([(*MM, 30.0, 20.0), (*INDEX_ADD, 5.0, 1.0)], **counts)
    other_draw = _calls([(*MM, 99.0, 20.0), (*INDEX_ADD, 99.0, 1.0)],
                        **{**counts, "expert_counts": "[32,32]", "routing": "balanced", "variant": "balanced / loop"})
    ladder = models.fit(train)
    pred = ladder.predict(other_draw)["L3 profile"]
    # the GEMM of the same shapes is the same GEMM whatever the routing: its measured 30 us;
    # index_add_ over other expert counts is not the profiled call (and no neighbour shares
    # its routing), so the regression answers, not the 5 us lookup
    assert pred[0] == 30.0
    assert ladder.sources(other_draw) == {"same point": 0.0, "same call": 0.5, "nearest": 0.0, "regression": 0.5}


def test_nearest_profiled_shapes_interpolate_on_the_roofline():
    # mul of n bf16 elements: roofline 6n bytes / 4000 GB/s; measured t = 2 us + 3 * roofline
    roof = lambda n: 6 * n / 4000e3  # noqa: E731  (us)
    rows = [("aten::mul", f"[[{n}],[{n}]]", '["c10::BFloat16","c10::BFloat16"]', "[[1],[1]]", 2 + 3 * roof(n),
             roof(n)) for n in (1_000_000, 3_000_000)]
    ladder = models.fit(_calls(rows))
    test_rows = [("aten::mul", f"[[{n}],[{n}]]", '["c10::BFloat16","c10::BFloat16"]', "[[1],[1]]", 1.0, roof(n))
                 for n in (2_000_000, 1_500_000, 9_000_000)]
    test = _calls(test_rows)
    pred = ladder.predict(test)["L3 profile"]
    # 2M and 1.5M lie between the profiled 1M and 3M: the line through them is t = 2 + 3 * roofline,
    # 2 + 3 * 3 = 11 us and 2 + 3 * 2.25 = 8.75 us; 9M is 3x past the largest: no neighbour
    assert pred[0] == pytest.approx(2 + 3 * roof(2_000_000))
    assert pred[1] == pytest.approx(2 + 3 * roof(1_500_000))
    assert ladder.sources(test) == pytest.approx({"same point": 0.0, "same call": 0.0, "nearest": 2 / 3,
                                                  "regression": 1 / 3})


def test_one_neighbour_adds_the_roofline_difference():
    r1, r2 = 1.5, 1.8  # us: 1M and 1.2M bf16 mul
    ladder = models.fit(_calls([("aten::mul", "[[1000000],[1000000]]", '["c10::BFloat16","c10::BFloat16"]',
                                 "[[1],[1]]", 4.0, r1)]))
    test = _calls([("aten::mul", "[[1200000],[1200000]]", '["c10::BFloat16","c10::BFloat16"]', "[[1],[1]]",
                    1.0, r2)])
    # the profiled 4 us plus the 0.3 us more the roofline asks for
    assert ladder.predict(test)["L3 profile"][0] == pytest.approx(4.3)


def test_noise_floor_is_the_median_of_the_other_steps():
    calls = _calls([(*MM, t, 20.0) for t in (10.0, 20.0, 40.0)] + [(*INDEX_ADD, 5.0, 1.0)])
    calls["step"] = [0, 1, 2, 0]
    floor = models.remeasured(calls)
    # step 0 against (20, 40): 30; step 1 against (10, 40): 25; step 2 against (10, 20): 15;
    # index_add_ ran in one step only: no re-measurement
    assert floor[:3].tolist() == [30.0, 25.0, 15.0] and np.isnan(floor[3])
    o, s = models.score_predictions(calls, {"floor": floor})
    row = o[o.family == "all"].iloc[0]
    # |30-10|/10 = 2, |25-20|/20 = 0.25, |15-40|/40 = 0.625: none within 10%, median 0.625
    assert row.ops == 3 and row.within_10pct == 0 and row.median_ape == pytest.approx(0.625)
    # the step holding the index_add_ (step 0) has no composed prediction; steps 1 and 2 do
    assert s[s.family == "all"].steps.iloc[0] == 2


def test_the_same_sweep_point_answers_before_the_same_call_elsewhere():
    train = _calls([(*MM, 30.0, 20.0), (*MM, 40.0, 20.0), (*MM, 44.0, 20.0)])
    train["variant"] = ["grid 64x4096x14336", "moe step", "moe step"]
    test = _calls([(*MM, 1.0, 20.0), (*MM, 1.0, 20.0)])
    test["variant"] = ["moe step", "another point"]
    ladder = models.fit(train)
    # in its own point the GEMM took 40 and 44 us (median 42); elsewhere, the median of all three is 40
    assert ladder.predict(test)["L3 profile"].tolist() == [42.0, 40.0]
    assert ladder.sources(test) == {"same point": 0.5, "same call": 0.5, "nearest": 0.0, "regression": 0.0}


def test_two_points_give_no_rank_correlation_or_r2_and_the_tables_say_why():
    from wlprof.analysis.spectrum import FEW_POINTS_NOTE
    from wlprof.cli.markdown import SPECTRUM_COLUMNS, SPECTRUM_FORMATS, spectrum_cells, table

    x = np.array([1.0, 2.0])
    y = np.array([5.0, 3.0])  # any two points: a line through them fits exactly, their ranks correlate -1
    assert np.isnan(spearman(x, y)) and np.isnan(r2_linear(x, y)) and np.isnan(r2_flops_only(x, y))
    three = np.array([1.0, 2.0, 3.0])
    assert spearman(three, -three) == pytest.approx(-1.0) and r2_linear(three, 2 * three) == pytest.approx(1.0)
    s = spectrum(pd.concat([_steps("gemm", [1e9, 2e9], [10.0, 30.0]),
                            _steps("mlp", [1e9, 2e9, 4e9], [1.0, 2.0, 4.0], batch=[1024, 2048, 4096])]))
    gemm = s[s.family == "GEMM shapes"].iloc[0]
    assert np.isnan(gemm.spearman) and np.isnan(gemm.r2_linear) and np.isnan(gemm.r2_flops_only)
    shown, note = spectrum_cells(s)
    assert note == FEW_POINTS_NOTE and note.startswith("n/a: fewer than 3 points")
    md = table(shown, SPECTRUM_COLUMNS, formats=SPECTRUM_FORMATS)
    assert "| GEMM shapes | 2 | n/a | n/a | n/a |" in md
    assert "| dense MLP (large batch) | 3 | 1.00 | 1.00 | 1.00 |" in md
    assert spectrum_cells(s[s.points >= 3])[1] is None


def test_short_kernel_name_keeps_the_name_after_an_anonymous_namespace():
    from wlprof.analysis.summary import short_kernel_name

    adam = ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::"
            "FusedOptimizerTensorListMetadata<4>, float const*>(at::native::(anonymous namespace)::"
            "FusedOptimizerTensorListMetadata<4>, float const*)")
    cat = ("void at::native::(anonymous namespace)::CatArrayBatchedCopy_vectorized<at::native::(anonymous "
           "namespace)::OpaqueType<4u>, unsigned int, 2>(char*, unsigned int)")
    assert short_kernel_name(adam) == "at::native::multi_tensor_apply_kernel"
    assert short_kernel_name(cat) == "at::native::CatArrayBatchedCopy_vectorized"
    assert short_kernel_name("void at::native::vectorized_elementwise_kernel<4, at::native::AbsFunctor<float>>"
                             "(int, float*)") == "at::native::vectorized_elementwise_kernel"


def test_the_spectrum_names_the_reasons_above_the_roof_as_words_apart():
    # 'within_spread,mixed_traffic,data_dependent' wrapped mid-word in the report's narrow column
    steps = _steps("gemm", [1e9, 2e9, 4e9], [200.0, 400.0, 800.0], roofline_fraction=[1.2, 1.1, 0.5],
                   roof_note=["within_spread,l2_resident", "data_dependent", None])
    assert spectrum(steps).iloc[0].above_roof == "2 of 3: within_spread, data_dependent"


def test_the_regression_of_a_small_training_set_runs_on_one_openmp_thread():
    import sklearn.ensemble  # noqa: F401  (loads the OpenMP runtime the regression runs on)
    from threadpoolctl import threadpool_info

    from wlprof.analysis import models

    def openmp_threads():
        return [p["num_threads"] for p in threadpool_info() if p["user_api"] == "openmp"]

    outside = openmp_threads()
    assert outside  # scikit-learn's OpenMP runtime is loaded
    with models._threads(332):
        assert openmp_threads() == [1] * len(outside)
    assert openmp_threads() == outside  # restored after
    with models._threads(models.ONE_THREAD_ROWS):
        assert openmp_threads() == outside  # a large set keeps the default threads

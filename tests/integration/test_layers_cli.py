"""`wlprof run layers` on the CPU: each layer's forward and backward are captured in their regions, with
FLOPs by hand (convolution) and as FlopCounterMode counts the same step (attention)."""

from __future__ import annotations

import pytest
import torch

import wlprof
from wlprof import workloads

FAST = ["--steps", "2", "--warmup", "1", "--reps", "2", "-q", "--device", "cpu"]


@pytest.fixture(scope="module")
def run(tmp_path_factory, cpu_ceilings, cli):
    traces = tmp_path_factory.mktemp("layers")
    res = cli("run", "layers", "--layers", "conv2d,attention,layer_norm,cross_entropy,max_pool", "--batch", "2",
              "--channels", "32", "--size", "8", "--head-dim", "16", "--traces", traces, *FAST)
    assert res.exit_code == 0, res.output
    return wlprof.load(traces), wlprof.load(traces, table="steps")


@pytest.mark.slow
def test_convolution_forward_and_backward_flops_by_hand(run):
    kernels, steps = run
    # conv2d of x [2, 32, 8, 8] by w [32, 32, 3, 3], padding 1: 2 * N * K * C * k^2 * S^2 =
    # 2 * 2 * 32 * 32 * 9 * 64 = 2,359,296 FLOPs forward; the input's and the weight's gradients twice that
    row = steps.set_index("variant").loc["conv2d N2 C32 S8"]
    assert row.flops == 3 * 2_359_296
    k = kernels[(kernels.variant == "conv2d N2 C32 S8") & (kernels.step >= 0)]
    per_region = k.groupby("region").flops.sum() / k.step.nunique()
    assert per_region["layers/forward"] == 2_359_296 and per_region["layers/backward"] == 2 * 2_359_296
    assert set(k[k.region == "layers/backward"].op_name) >= {"aten::convolution_backward"}
    assert (steps.layer == steps.variant.str.split().str[0]).all()
    assert set(steps.spatial) == {8} and set(steps.channels) == {32} and set(steps.batch) == {2}


@pytest.mark.slow
def test_attention_flops_by_the_documented_convention(run):
    kernels, steps = run
    # q, k, v [2, 2, 8, 16] (C 32 / head_dim 16 = 2 heads), counted in full whatever is_causal says:
    # forward 2*B*H*S*S*(D + Dv) = 2*2*2*8*8*32 = 16,384; backward 2*B*H*S*S*(3D + 2Dv) = 2*2*2*8*8*80 = 40,960
    # (FlopCounterMode counts 0 for SDPA on the CPU; the CUDA backends are checked on the H200 fixtures)
    assert steps.set_index("variant").loc["attention N2 C32 S8"].flops == 16_384 + 40_960
    k = kernels[(kernels.variant == "attention N2 C32 S8") & (kernels.step >= 0)]
    per_region = k.groupby("region").flops.sum() / k.step.nunique()
    assert per_region["layers/forward"] == 16_384 and per_region["layers/backward"] == 40_960


@pytest.mark.slow
def test_every_layer_has_its_forward_and_backward_costed(run):
    kernels, steps = run
    k = kernels[kernels.step >= 0]
    regions = k.groupby("variant").region.agg(lambda r: set(r.dropna()))
    assert all({"layers/forward", "layers/backward"} <= r for r in regions), regions
    # the ops that do the work have bytes from a formula: pooling, norm and loss, forward and backward
    ops = set(k[k["bytes"].notna() & (k.flops_source == "formula")].op_name)
    assert {"aten::max_pool2d_with_indices", "aten::max_pool2d_with_indices_backward",
            "aten::native_layer_norm", "aten::native_layer_norm_backward", "aten::_log_softmax",
            "aten::_log_softmax_backward_data", "aten::nll_loss_forward", "aten::nll_loss_backward"} <= ops, ops
    assert len(steps) == 5 and (steps.status == "ok").all()


def test_attention_widths_are_checked_against_the_head_width(cli, tmp_path):
    res = cli("run", "layers", "--layers", "attention", "--channels", "48", "--head-dim", "32", "--traces", tmp_path)
    assert res.exit_code == 2
    assert "error: --channels must be multiples of --head-dim (32) for attention (got 48)" in res.output
    res = cli("run", "layers", "--layers", "attention,conv2d", "--channels", "16", "--head-dim", "32",
              "--traces", tmp_path)
    assert "error: --head-dim must be at most --channels (16) for attention (got 32)" in res.output
    assert not any(tmp_path.iterdir())


def test_points_and_memory_estimate():
    wl = workloads.get("layers")
    spec = wl.parse({"layers": ["conv2d", "embedding"], "batch": [2, 4], "channels": [8], "size": [4], "vocab": 100},
                    torch.device("cpu"), torch.float32).spec
    pts = wl.points(spec)
    assert [x.variant for x in pts] == ["conv2d N2 C8 S4", "conv2d N4 C8 S4", "embedding N2 C8 S4",
                                        "embedding N4 C8 S4"]
    assert pts[0].params == {"layer": "conv2d", "batch": 2, "channels": 8, "spatial": 4, "kernel_size": 3}
    assert pts[2].params["vocab"] == 100
    # conv2d N2 C8 S4 in float32: 4 * (2*8*4*4 elements + 8*8*3*3 weights) * 4 bytes = 4 * (256 + 576) * 4
    assert wl.estimate_bytes(pts[0], torch.float32) == 13_312
    # embedding N4 C8 S4: 4 * (4*8*4 + 100*8) * 4 = 4 * 928 * 4
    assert wl.estimate_bytes(pts[3], torch.float32) == 14_848


def test_group_norm_takes_the_groups_that_divide_its_channels():
    # 48 channels: gcd(32, 48) = 16 groups of 3 channels (32 groups would not divide them)
    wl = workloads.get("layers")
    pts = wl.points(wl.parse({"layers": ["group_norm"], "batch": [2], "channels": [48], "size": [4]},
                             torch.device("cpu"), torch.float32).spec)
    built = wl.build(pts[0], torch.device("cpu"), torch.float32)
    gx, gw, gb = built.step()
    assert gx.shape == (2, 48, 4, 4) and gw.shape == gb.shape == (48,)


def test_predict_spec_refuses_the_layers_it_cannot_list_as_cuda_runs_them(cli):
    from pathlib import Path

    profile = Path(__file__).resolve().parents[2] / "benchmarks" / "profiles" / "h200"
    res = cli("predict", "--profile", profile, "--spec", "layers layers=conv2d batch=32")
    assert res.exit_code == 2
    assert "--spec must name a workload whose step the meta device lists as CUDA launches it (layers:" in \
        " ".join(res.output.split())


def test_sizes_torch_refuses_are_refused_at_parse_naming_the_argument(cli, tmp_path):
    # each ran, failed inside torch and left a partial run behind (exit 1): batch norm over one value per
    # channel (N x S x S = 1), group norm of 8 channels in gcd(32, 8) = 8 groups of one value, a 2x2 average
    # pool over a 1x1 image
    cases = [
        (["batch_norm", "--batch", "1", "--size", "1"],
         "error: --batch must be at least 2 for batch_norm at --size 1: a batch norm in training needs more than "
         "one value per channel (N x S x S is 1) (got 1)"),
        (["group_norm", "--batch", "1", "--size", "1", "--channels", "8"],
         "error: --batch must be at least 2 for group_norm at --size 1 and --channels 8 (8 groups of one channel): "
         "a group norm needs more than one value per group (N x S x S x C / groups is 1) (got 1)"),
        (["avg_pool,conv2d", "--size", "4,1"], "error: --size must be at least 2 for avg_pool (one 2x2 window) (got 1)"),
    ]
    for args, message in cases:
        res = cli("run", "layers", "--layers", *args, "--traces", tmp_path / "t", *FAST)
        assert res.exit_code == 2, res.output
        assert message in " ".join(res.output.split())
        assert not (tmp_path / "t").exists()


def test_every_size_parse_accepts_builds_and_every_one_it_refuses_torch_refuses():
    from wlprof.errors import InputError
    from wlprof.workloads.layers import LayersSpec

    wl, cpu, refused = workloads.get("layers"), torch.device("cpu"), []
    for layer in ("conv2d", "batch_norm", "group_norm", "layer_norm", "max_pool", "avg_pool", "attention",
                  "cross_entropy", "embedding"):
        for n in (1, 2):
            for c in (1, 3, 4):
                for s in (1, 2):
                    raw = {"layers": [layer], "batch": [n], "channels": [c], "size": [s], "head_dim": 1,
                           "kernel_size": 1, "vocab": 1}
                    try:
                        point = wl.points(wl.parse(raw, cpu, torch.float32).spec)[0]
                    except InputError:
                        # refused: the step torch would run raises too (the spec built without the check)
                        refused.append((layer, n, c, s))
                        point = wl.points(LayersSpec((layer,), (n,), (c,), (s,), 1, 1, 1))[0]
                        with pytest.raises((ValueError, RuntimeError)):
                            wl.build(point, cpu, torch.float32).step()
                        continue
                    grads = wl.build(point, cpu, torch.float32).step()
                    assert all(torch.isfinite(g).all() for g in grads), (layer, n, c, s)
    # N = S = 1: batch norm at every width, group norm at 1 and 4 channels (3 makes one group of 3 values);
    # S = 1: average pooling
    assert sorted(refused) == sorted(
        [("batch_norm", 1, c, 1) for c in (1, 3, 4)] + [("group_norm", 1, c, 1) for c in (1, 4)]
        + [("avg_pool", n, c, 1) for n in (1, 2) for c in (1, 3, 4)])


def test_batch_norm_with_float32_weights_beside_bfloat16_activations():
    wl = workloads.get("layers")
    spec = wl.parse({"layers": ["batch_norm", "conv2d"], "batch": [2], "channels": [4], "size": [3],
                     "norm_weights": "float32"}, torch.device("cpu"), torch.bfloat16).spec
    pts = wl.points(spec)
    # only the batch norm takes float32 weights (and says so in its variant); the convolution is unchanged
    assert [p.variant for p in pts] == ["batch_norm N2 C4 S3 w32", "conv2d N2 C4 S3"]
    assert pts[0].params["norm_weights"] == "float32" and "norm_weights" not in pts[1].params
    gx, gw, gb = wl.build(pts[0], torch.device("cpu"), torch.bfloat16).step()
    assert gx.dtype == torch.bfloat16 and gw.dtype == gb.dtype == torch.float32 and gw.shape == (4,)


def test_float32_norm_weights_need_a_batch_norm(cli, tmp_path):
    res = cli("run", "layers", "--layers", "conv2d", "--norm-weights", "float32", "--traces", tmp_path)
    assert res.exit_code == 2
    assert "error: --norm-weights applies to batch_norm only, and --layers holds none (got 'float32')" in \
        " ".join(res.output.split())
    assert not any(tmp_path.iterdir())


def test_float32_norm_weights_refused_beside_float64(cli, tmp_path):
    # torch's batch norm runs float32 weights beside bfloat16/float16 activations only: float64 ones had
    # failed at the point's build ("mixed dtype (CPU): all inputs must share same datatype", exit 1)
    res = cli("run", "layers", "--layers", "batch_norm", "--norm-weights", "float32", "--dtype", "float64",
              "--device", "cpu", "--traces", tmp_path)
    assert res.exit_code == 2
    assert ("error: --norm-weights must be dtype for --dtype float64: a batch norm takes float32 weights beside "
            "bfloat16, float16 or float32 activations only (got 'float32')") in " ".join(res.output.split())
    assert not any(tmp_path.iterdir())


def test_float32_norm_weights_beside_float64_named_by_study_keys(cli, tmp_path):
    f = tmp_path / "bn.toml"
    f.write_text('[study]\nname = "bn"\nworkload = "layers"\ndtype = "float64"\n'
                 '[params]\nlayers = ["batch_norm"]\nnorm_weights = "float32"\n')
    res = cli("sweep", f, "--device", "cpu", "--traces", tmp_path / "t")
    assert res.exit_code == 2
    assert "error: params.norm_weights must be dtype for study.dtype float64" in " ".join(res.output.split())
    assert not (tmp_path / "t").exists()


def test_the_layout_recurrent_and_bag_layers_take_their_gradients():
    wl = workloads.get("layers")
    spec = wl.parse({"layers": ["channels_last", "head_transpose", "lstm", "embedding_bag"], "batch": [2],
                     "channels": [32], "size": [8], "head_dim": 16, "vocab": 50},
                    torch.device("cpu"), torch.float32).spec
    pts = {p.params["layer"]: p for p in wl.points(spec)}
    assert pts["head_transpose"].params["head_dim"] == 16 and pts["embedding_bag"].params["vocab"] == 50
    (gx,) = wl.build(pts["channels_last"], torch.device("cpu"), torch.float32).step()
    assert gx.shape == (2, 32, 8, 8)
    (gx,) = wl.build(pts["head_transpose"], torch.device("cpu"), torch.float32).step()
    assert gx.shape == (2, 8, 32)
    grads = wl.build(pts["lstm"], torch.device("cpu"), torch.float32).step()
    # x and one layer's w_ih [4C, C], w_hh [4C, C], b_ih [4C], b_hh [4C]
    assert [tuple(g.shape) for g in grads] == [(2, 8, 32), (128, 32), (128, 32), (128,), (128,)]
    (gt,) = wl.build(pts["embedding_bag"], torch.device("cpu"), torch.float32).step()
    assert gt.shape == (50, 32)
    # lstm N2 C32 S8 in float32: 4 * (2*8*6*32 activations and gates + 8*32*32 + 8*32 weights) * 4 bytes
    assert wl.estimate_bytes(pts["lstm"], torch.float32) == 4 * (3072 + 8448) * 4


@pytest.mark.slow
def test_layout_copies_are_costed_with_their_strides(cli, tmp_path, cpu_ceilings):
    res = cli("run", "layers", "--layers", "channels_last,head_transpose", "--batch", "2", "--channels", "32",
              "--size", "8", "--head-dim", "16", "--traces", tmp_path, *FAST)
    assert res.exit_code == 0, res.output
    ops = wlprof.load(tmp_path, table="ops")
    copies = ops[(ops.step >= 0) & (ops.op_name == "aten::copy_")]
    by = copies.groupby("variant")
    # channels_last: x [2, 32, 8, 8] float32 (16,384 B) to NHWC and back, each copy reading and writing it
    cl = copies[copies.variant == "channels_last N2 C32 S8"]
    assert set(cl["bytes"]) == {2 * 16_384} and by.size()["channels_last N2 C32 S8"] == 2 * 2
    # the first copy's destination is channels-last: strides (C*S*S, 1, S*C, C) = (2048, 1, 256, 32)
    assert "[2048,1,256,32]" in set(cl.op_input_strides.str.replace(" ", "").str[1:16])
    # head_transpose: x [2, 8, 32] (2,048 B) to [2, 2, 8, 16] and back
    ht = copies[copies.variant == "head_transpose N2 C32 S8"]
    assert set(ht["bytes"]) == {2 * 2_048} and len(ht) == 2 * 2


def test_a_linear_layers_step_costs_its_gemms_as_flopcountermode_and_its_bias_gradient_sum(cli, tmp_path,
                                                                                          cpu_ceilings):
    from torch.utils.flop_counter import FlopCounterMode

    wl = workloads.get("layers")
    spec = wl.parse({"layers": ["linear"], "batch": [2], "channels": [32], "size": [8]}, torch.device("cpu"),
                    torch.float32).spec
    (pt,) = wl.points(spec)
    step = wl.build(pt, torch.device("cpu"), torch.float32).step
    with FlopCounterMode(display=False) as fcm:
        gx, gw, gb = step()
    assert (gx.shape, gw.shape, gb.shape) == ((2, 8, 32), (32, 32), (32,))
    # x [2, 8, 32] -> 16 rows through a 32 x 32 weight: 2 * 16 * 32 * 32 = 32,768 FLOPs forward, twice that back
    assert fcm.get_total_flops() == 3 * 32_768
    # 4 * (2*8*32 activations + 32*32 + 32 weights) * 4 bytes
    assert wl.estimate_bytes(pt, torch.float32) == 4 * (512 + 1056) * 4
    res = cli("run", "layers", "--layers", "linear", "--batch", "2", "--channels", "32", "--size", "8",
              "--traces", tmp_path, *FAST)
    assert res.exit_code == 0, res.output
    ops = wlprof.load(tmp_path, table="ops")
    ops = ops[ops.step == ops.step.max()]
    matrix = ops[ops.op_name.isin(["aten::addmm", "aten::mm"])]
    assert matrix.flops.sum() == fcm.get_total_flops()
    (bias,) = ops[ops.op_name == "aten::sum"].itertuples()
    # the bias gradient: the output's gradient [16, 32] summed over its 16 rows, 15 * 32 adds counted as 16 * 32
    assert (bias.region, bias.op_input_dims, bias.flops) == ("layers/backward", "[[16,32],[],[],[]]", 512)

"""`predict --profile GPU --trace CPU_TRACE`: ops CUDA launches under the name the CPU recorded (a sqrt, the
single-tensor AdamW's lerp_/addcmul_/addcdiv_) are calls, even where neither the profile nor the fixed list
of launching ops holds them."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from wlprof.cli.main import app

PROFILE = Path(__file__).resolve().parents[2] / "benchmarks" / "profiles" / "h200"


def _cpu_trace(path: Path, step, grad: bool = True) -> Path:
    """`step()` profiled on the CPU with its shapes recorded (under no_grad unless `grad`), written to `path`."""
    import contextlib
    import warnings

    import torch
    from torch.profiler import ProfilerActivity, profile

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof, \
                (contextlib.nullcontext() if grad else torch.no_grad()):
            step()
    prof.export_chrome_trace(str(path))
    return path


@pytest.fixture(scope="module")
def trace(tmp_path_factory) -> Path:
    """One CPU training step: Linear(8, 6) -> pow(2) -> rsqrt -> sigmoid -> sum, backward, then a
    single-tensor AdamW step (foreach=False: per parameter lerp_, mul_, addcmul_, sqrt, div_, addcdiv_)."""

    import torch

    torch.manual_seed(0)
    lin = torch.nn.Linear(8, 6)
    opt = torch.optim.AdamW(lin.parameters(), lr=1e-3, foreach=False)
    x = torch.randn(5, 8)
    def step():
        torch.sigmoid(torch.rsqrt(lin(x).pow(2) + 1)).sum().backward()
        opt.step()

    return _cpu_trace(tmp_path_factory.mktemp("generic") / "adamw.pt.trace.json", step)


def test_generic_ops_are_calls_not_left_out(trace):
    from wlprof.predict.profile import load_profile
    from wlprof.predict.spec import calls_and_left_out

    predictor, _, _ = load_profile(PROFILE, False)
    calls, left = calls_and_left_out(str(trace), frozenset(predictor.meta.get("op_names", [])))
    assert left.op_name.tolist() == []
    names = calls.op_name.tolist()
    # pow three times (the forward's x^2, RsqrtBackward0's result^3, PowBackward0's x^1), the forward's rsqrt,
    # and per parameter (weight [6, 8], bias [6]) one of each update op
    for op, n in (("aten::pow", 3), ("aten::rsqrt", 1), ("aten::lerp_", 2), ("aten::addcmul_", 2),
                  ("aten::addcdiv_", 2), ("aten::sqrt", 2)):
        assert names.count(op) == n, (op, names)
    lerp = calls[calls.op_name == "aten::lerp_"].op_input_dims.tolist()
    assert sorted(lerp) == ["[[6,8],[6,8],[]]", "[[6],[6],[]]"]


def test_predict_trace_predicts_them_and_leaves_nothing_out(trace, tmp_path):
    res = CliRunner().invoke(app, ["predict", "--profile", str(PROFILE), "--trace", str(trace), "--top", "0",
                                   "-o", str(tmp_path / "p.md")], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    shown = " ".join(res.output.split())
    assert "left out" not in shown
    rows = [line for line in (tmp_path / "p.md").read_text().splitlines() if line.startswith("| aten::sqrt")]
    assert rows, (tmp_path / "p.md").read_text()


def test_a_channels_last_convolution_and_a_no_grad_max_pool_are_named_as_cuda_launches_them(tmp_path):

    import torch

    from wlprof.predict.spec import calls_and_left_out

    if not torch.backends.mkldnn.is_available():
        pytest.skip("the CPU's convolution runs through oneDNN here only where torch has it")
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(3, 5, 3, stride=2).to(memory_format=torch.channels_last)
    x = torch.randn(2, 3, 9, 9).to(memory_format=torch.channels_last)
    path = _cpu_trace(tmp_path / "conv_pool.pt.trace.json", lambda: torch.nn.functional.max_pool2d(conv(x), 2),
                      grad=False)
    if '"aten::mkldnn_convolution"' not in path.read_text():
        pytest.skip("this torch ran the convolution through another CPU kernel")
    calls, left = calls_and_left_out(str(path))
    assert left.op_name.tolist() == []
    # cuDNN's convolution, then the bias added to its output: (9 - 3) // 2 + 1 = 4, [2, 5, 4, 4] channels-last
    # (strides 80, 1, 20, 5); CUDA's max_pool2d runs max_pool2d_with_indices on the same arguments
    assert calls.op_name.tolist() == ["aten::cudnn_convolution", "aten::add_", "aten::max_pool2d_with_indices"]
    assert calls.op_input_dims.tolist()[:2] == ["[[2,3,9,9],[5,3,3,3],[],[],[],[],[],[],[]]",
                                                "[[2,5,4,4],[1,5,1,1],[]]"]
    assert calls.op_input_strides.iat[1] == "[[80,1,20,5],[5,1,1,1],[]]"
    assert calls.op_concrete_inputs.iat[0] == '["","","[0, 0]","[2, 2]","[1, 1]","1","False","False","True"]'
    assert calls.op_input_dims.iat[2].startswith("[[2,5,4,4],")


def test_an_embedding_bag_and_an_upsample_are_one_call_each_not_their_cpu_internals(tmp_path):

    import torch

    from wlprof.predict.spec import calls_and_left_out

    torch.manual_seed(0)
    bag = torch.nn.EmbeddingBag(50, 12, mode="mean")
    idx = torch.randint(0, 50, (6, 5))
    x = torch.randn(2, 6, 11, 11)
    def step():
        bag(idx)
        torch.nn.functional.interpolate(x, scale_factor=2, mode="nearest")

    path = _cpu_trace(tmp_path / "bag_upsample.pt.trace.json", step, grad=False)
    calls, left = calls_and_left_out(str(path))
    assert left.op_name.tolist() == []
    # F.embedding_bag's offsets for a 2-D input (arange, on either device), then the bag and the upsample: CUDA
    # launches each under its own name; the CPU's offsets arithmetic (index_add_, cumsum) and mean division
    # inside the bag, and the upsample's layout copies, are their own work, no calls
    names = calls.op_name.tolist()
    assert names == ["aten::arange", "aten::_embedding_bag", "aten::upsample_nearest2d"], names
    assert calls.op_input_dims.iat[1].startswith("[[50,12],[30],[6],")
    assert calls.op_input_dims.iat[2].startswith("[[2,6,11,11],")


def test_a_transposed_convolution_is_cudnns_transpose_call_and_its_bias_add(tmp_path):

    import torch

    from wlprof.predict.spec import calls_and_left_out

    torch.manual_seed(0)
    up = torch.nn.ConvTranspose2d(4, 6, 3, stride=2, output_padding=1)
    x = torch.randn(2, 4, 5, 5)
    path = _cpu_trace(tmp_path / "convT.pt.trace.json", lambda: up(x), grad=False)
    calls, left = calls_and_left_out(str(path))
    assert left.op_name.tolist() == []
    # the CPU records its kernel under no op of its own: _convolution(x, w, bias, stride [2, 2], padding [0, 0],
    # dilation [1, 1], transposed, output_padding [1, 1], groups 1) is CUDA's
    # cudnn_convolution_transpose(x, w, padding, output_padding, stride, dilation, groups, ...), then the bias
    # added to its output: (5 - 1) x 2 - 0 + (3 - 1) + 1 + 1 = 12, [2, 6, 12, 12]
    assert calls.op_name.tolist() == ["aten::cudnn_convolution_transpose", "aten::add_"], calls.op_name.tolist()
    assert calls.op_input_dims.iat[0] == "[[2,4,5,5],[4,6,3,3],[],[],[],[],[],[],[],[]]"
    assert calls.op_concrete_inputs.iat[0] == '["","","[0, 0]","[1, 1]","[2, 2]","[1, 1]","1","False","False","True"]'
    assert calls.op_input_dims.iat[1] == "[[2,6,12,12],[1,6,1,1],[]]"

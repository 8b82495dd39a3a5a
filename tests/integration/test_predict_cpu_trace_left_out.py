"""`predict --profile GPU --trace CPU_TRACE`: the CPU-only work no GPU call covers is named, not dropped silently."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from wlprof.cli.main import app

PROFILE = Path(__file__).resolve().parents[2] / "benchmarks" / "profiles" / "h200"


def _capture(path: Path, scheduled: bool) -> Path:
    """Two CPU training steps of Linear -> ReLU -> causal SDPA (the CPU's flash kernel) -> sum; with a
    schedule each step is marked (ProfilerStep#N), without one torch records no step markers."""
    import warnings

    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    torch.manual_seed(0)
    lin = torch.nn.Linear(16, 16)
    x = torch.randn(2, 2, 8, 16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # no warm-up: this test counts calls, not times
        kw = {"schedule": schedule(wait=0, warmup=0, active=2, repeat=1),
              "on_trace_ready": lambda p: p.export_chrome_trace(str(path))} if scheduled else {}
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True, **kw) as prof:
            for _ in range(2):
                h = torch.relu(lin(x))
                torch.nn.functional.scaled_dot_product_attention(h, h, h, is_causal=True).sum().backward()
                prof.step()
    if not scheduled:
        prof.export_chrome_trace(str(path))
    return path


@pytest.fixture(scope="module")
def traces(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("cpu_step")
    return {"plain": _capture(d / "plain.pt.trace.json", False), "steps": _capture(d / "steps.pt.trace.json", True)}


def test_calls_and_left_out_name_the_cpu_only_kernel_and_keep_relu_backward(traces):
    from wlprof.predict.profile import load_profile
    from wlprof.predict.spec import calls_and_left_out

    predictor, _, _ = load_profile(PROFILE, False)
    calls, left = calls_and_left_out(str(traces["plain"]), frozenset(predictor.meta.get("op_names", [])))
    # the CPU's flash attention has no CUDA launch under its name: forward and backward once per step,
    # left out (the backward's nested zeros and contiguous are fills and copies, not its work)
    fwd = "aten::_scaled_dot_product_flash_attention_for_cpu"
    assert left.op_name.tolist() == [fwd, f"{fwd}_backward"] * 2
    # ReLU's backward launches one kernel on CUDA: a call of each step, sized as recorded
    relu_bwd = calls[calls.op_name == "aten::threshold_backward"]
    assert len(relu_bwd) == 2
    assert relu_bwd.op_input_dims.iat[0] == "[[2,2,8,16],[2,2,8,16],[]]"


def _predict(trace: Path, out: Path) -> tuple[str, str]:
    res = CliRunner().invoke(app, ["predict", "--profile", str(PROFILE), "--trace", str(trace), "-o", str(out)],
                             env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    return " ".join(res.output.split()), " ".join(out.read_text().split())


LEFT = ("left out, not predicted: {n} that did work on the CPU but whose op NVIDIA H200 does not launch "
        "under that name and the profile does not hold (the step's predicted times lack them): "
        "aten::_scaled_dot_product_flash_attention_for_cpu ({k}), "
        "aten::_scaled_dot_product_flash_attention_for_cpu_backward ({k})")


def test_predict_trace_says_what_it_left_out_within_the_first_step(traces, tmp_path):
    shown, md = _predict(traces["steps"], tmp_path / "p.md")
    note = LEFT.format(n="2 calls", k=1)
    assert note in shown and note in md
    assert "no ProfilerStep#N markers" not in shown
    assert "steps.pt.trace.json: 13 calls," in shown  # the first step only (the second adds into .grad)


def test_predict_trace_without_step_markers_says_it_predicts_the_whole_trace_as_one_step(traces, tmp_path):
    shown, md = _predict(traces["plain"], tmp_path / "p.md")
    marker = ("plain.pt.trace.json: no ProfilerStep#N markers: the whole trace is taken as one step, and predicted "
              "as one (a torch.profiler schedule marks each step)")
    assert marker in shown and marker in md
    assert LEFT.format(n="4 calls", k=2) in shown
    assert "plain.pt.trace.json: 28 calls," in shown


def test_a_bad_scale_is_refused_before_the_trace_is_read(traces, tmp_path):
    out = tmp_path / "p.md"
    res = CliRunner().invoke(app, ["predict", "--profile", str(PROFILE), "--trace", str(traces["steps"]),
                                   "--scale", "batch=abc", "-o", str(out)], env={"COLUMNS": "200"})
    assert res.exit_code == 2
    # one error line naming the option, the rule and the value; no prediction notes printed before it
    assert res.output.strip().splitlines() == [
        "error: --scale must be DIM=FACTOR with DIM batch (rows, tokens) or a dimension's value and FACTOR a "
        "positive number (e.g. batch=4) (got 'batch=abc')"]
    assert not out.exists()


def test_top_zero_lists_every_op_row_as_show_does(traces, tmp_path):
    res = CliRunner().invoke(app, ["predict", "--profile", str(PROFILE), "--trace", str(traces["steps"]),
                                   "--top", "0", "-o", str(tmp_path / "p.md")], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    rows = [line for line in (tmp_path / "p.md").read_text().splitlines() if line.startswith("| aten::")]
    assert len(rows) == 10 and "more)" not in res.output  # 13 calls in 10 (op, shapes) rows, none folded


def _capture_conv_lstm(path: Path) -> Path:
    """Two scheduled CPU training steps of Conv2d -> ReLU -> LSTM -> sum: the step's first op is the
    convolution, and oneDNN's LSTM layer nests a bias add (a call CUDA launches) as its own setup."""
    import warnings

    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    torch.manual_seed(0)
    conv, lstm = torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.LSTM(16, 8, batch_first=True)
    x = torch.randn(2, 3, 4, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                     schedule=schedule(wait=0, warmup=0, active=2, repeat=1),
                     on_trace_ready=lambda p: p.export_chrome_trace(str(path))) as prof:
            for _ in range(2):
                h = torch.relu(conv(x)).reshape(2, 4, 16)  # [batch, seq, features]
                lstm(h)[0].sum().backward()
                prof.step()
    return path


def test_a_steps_first_convolution_is_cudnns_call_and_a_onednn_lstm_is_named_as_left_out(tmp_path):
    import torch

    from wlprof.predict.profile import load_profile
    from wlprof.predict.spec import calls_and_left_out

    if not torch.backends.mkldnn.is_available():
        pytest.skip("the CPU's convolution and LSTM run through oneDNN here only where torch has it")
    trace = _capture_conv_lstm(tmp_path / "conv_lstm.pt.trace.json")
    predictor, _, _ = load_profile(PROFILE, False)
    calls, left = calls_and_left_out(str(trace), frozenset(predictor.meta.get("op_names", [])))
    names = " ".join(trace.read_text().split('"name": ')[1:])
    # oneDNN's convolution is CUDA's cudnn_convolution (no bias: x [2, 3, 4, 4], w [4, 3, 3, 3], padding,
    # stride and dilation [1, 1], one group) and the bias added to its [2, 4, 4, 4] output, once a step
    conv = calls[calls.op_name == "aten::cudnn_convolution"]
    assert conv.trace_step.tolist() == [0, 1]
    assert conv.op_input_dims.iat[0] == "[[2,3,4,4],[4,3,3,3],[],[],[],[],[],[],[]]"
    assert conv.op_concrete_inputs.iat[0] == '["","","[1, 1]","[1, 1]","[1, 1]","1","False","False","True"]'
    bias = calls[(calls.op_name == "aten::add_") & (calls.op_input_dims == "[[2,4,4,4],[1,4,1,1],[]]")]
    assert len(bias) == 2 and bias.op_input_strides.iat[0] == "[[64,16,4,1],[4,1,1,1],[]]"
    assert "aten::_convolution" not in left.op_name.tolist()
    if '"aten::mkldnn_rnn_layer"' in names:  # the LSTM ran through oneDNN: forward and backward
        per_step = left.groupby("trace_step").op_name.apply(list).to_dict()
        assert len(per_step) == 2, per_step  # ProfilerStep#0 and #1
        for step, ops in per_step.items():
            # CUDA runs it as _cudnn_rnn: named, once a step; its nested bias add is a call, but the
            # layer's gate products are not in it
            assert ops.count("aten::mkldnn_rnn_layer") == 1 and ops.count("aten::mkldnn_rnn_layer_backward") == 1, \
                (step, ops)
    # the convolution opens each step: the step filter keeps it (the working ops' times began after it)
    res = CliRunner().invoke(app, ["predict", "--profile", str(PROFILE), "--trace", str(trace), "--top", "0",
                                   "-o", str(tmp_path / "p.md")], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    rows = [line for line in (tmp_path / "p.md").read_text().splitlines()
            if line.startswith("| aten::cudnn_convolution | [[2,3,4,4],[4,3,3,3],")]
    assert len(rows) == 1 and rows[0].split("|")[3].strip() == "1", rows


def test_a_compiled_cpu_steps_inductor_kernels_are_named_as_left_out(tmp_path):
    # a torch.compile'd MobileNet training step on the CPU: Inductor's fused C++ kernels run inside the compiled
    # regions with no op of their own, so only the ATen ops they call out to are calls; their time (the
    # regions' own time) was dropped without a word
    import gzip
    import json

    trace = Path(__file__).resolve().parents[1] / "fixtures" / "cpu_zoo4" / "mobilenet-compiled.json.gz"
    events = [e for e in json.loads(gzip.open(trace).read())["traceEvents"]
              if e.get("ph") == "X" and e.get("cat") == "cpu_op"]

    def own(r):  # duration less that of the ops directly nested in it, from the raw events
        inside = [e for e in events if e is not r and e["tid"] == r["tid"] and e["ts"] >= r["ts"]
                  and e["ts"] + e["dur"] <= r["ts"] + r["dur"]]
        direct = [e for e in inside if not any(o is not e and o["ts"] <= e["ts"] and o["dur"] > e["dur"]
                                               and o["ts"] + o["dur"] >= e["ts"] + e["dur"] for o in inside)]
        return r["dur"] - sum(e["dur"] for e in direct)

    regions = [e for e in events if e["name"].startswith("Torch-Compiled Region")
               or e["name"] in ("CompiledFunction", "CompiledFunctionBackward")]
    assert len(regions) == 3
    expected = sum(own(r) for r in regions)  # 659.97 + 4,245.90 + 9,317.80 µs
    shown, md = _predict(trace, tmp_path / "p.md")
    note = ("left out, not predicted: the work inside torch.compile'd regions (CompiledFunction, "
            f"CompiledFunctionBackward, Torch-Compiled Region: 0/0) that no recorded op stands for, {expected:,.1f} µs "
            "of their own time, ")
    assert note in shown and note in md, (expected, shown)
    assert "the step's predicted times lack them" in shown.split(note)[1]

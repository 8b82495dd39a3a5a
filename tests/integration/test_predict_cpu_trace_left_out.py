"""`predict --profile GPU --trace CPU_TRACE`: the CPU's own attention kernel is predicted as the kernel CUDA's
SDPA launches for it, and CPU-only work no GPU call covers is named, not dropped silently."""

from __future__ import annotations

import json
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


def test_calls_take_the_cpu_attention_as_cuda_s_efficient_kernel_and_keep_relu_backward(traces):
    from wlprof.cost import registry
    from wlprof.cost.registry import OpCall
    from wlprof.predict.profile import load_profile
    from wlprof.predict.spec import calls_and_left_out

    predictor, _, _ = load_profile(PROFILE, False)
    calls, left = calls_and_left_out(str(traces["plain"]), frozenset(predictor.meta.get("op_names", [])))
    assert left.empty, left
    # float32 attention runs on CUDA as the memory-efficient kernel (flash and cuDNN take 16-bit inputs), on
    # [B, S, H, D] views of the [B, H, S, D] = [2, 2, 8, 16] inputs; causal is its custom_mask_type 1, and the
    # log-sum-exp is kept for the backward
    fwd = calls[calls.op_name == "aten::_efficient_attention_forward"]
    bwd = calls[calls.op_name == "aten::_efficient_attention_backward"]
    assert len(fwd) == len(bwd) == 2
    q = [2, 8, 2, 16]
    assert fwd.op_input_dims.iat[0] == str([q, q, q] + [[]] * 9).replace(" ", "")
    assert fwd.op_concrete_inputs.iat[0] == '["","","","","","","","","0.","1","True",""]'
    # the backward's grad_out, q, k, v and out as [B, S, H, D]; the log-sum-exp [B, H, S] as the CPU wrote it
    dims = json.loads(bwd.op_input_dims.iat[0])
    assert [dims[j] for j in (0, 1, 2, 3, 5, 10)] == [q, q, q, q, q, [2, 2, 8]]
    # B*H*Sq*Sk = 2*2*8*8 = 256: forward 2*256*16 (QK^T) + 2*256*16 (PV) = 16,384 FLOPs; backward
    # 2*256*(3*16 + 2*16) = 40,960, the counts of the CPU kernel's own formula
    def flops(row):
        args = {"Input Dims": json.loads(row.op_input_dims), "Input type": json.loads(row.op_input_types),
                "Concrete Inputs": json.loads(row.op_concrete_inputs)}
        return registry.cost_of(OpCall.from_args(row.op_name, args)).flops

    cost = {"f": flops(fwd.iloc[0]), "b": flops(bwd.iloc[0])}
    assert cost == {"f": 16_384, "b": 40_960}
    # ReLU's backward launches one kernel on CUDA: a call of each step, sized as recorded
    relu_bwd = calls[calls.op_name == "aten::threshold_backward"]
    assert len(relu_bwd) == 2
    assert relu_bwd.op_input_dims.iat[0] == "[[2,2,8,16],[2,2,8,16],[]]"


def _predict(trace: Path, out: Path) -> tuple[str, str]:
    res = CliRunner().invoke(app, ["predict", "--profile", str(PROFILE), "--trace", str(trace), "-o", str(out)],
                             env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    return " ".join(res.output.split()), " ".join(out.read_text().split())


def test_predict_trace_predicts_the_attention_within_the_first_step(traces, tmp_path):
    shown, md = _predict(traces["steps"], tmp_path / "p.md")
    assert "left out" not in shown and "left out" not in md
    assert "no ProfilerStep#N markers" not in shown
    # per step: linear (addmm), relu, the attention, sum, and the backward's calls; the first step only (the
    # second adds into .grad)
    assert "steps.pt.trace.json: 11 calls," in shown
    assert "aten::_efficient_attention_forward" in shown and "aten::_efficient_attention_backward" in shown


def test_predict_trace_without_step_markers_says_it_predicts_the_whole_trace_as_one_step(traces, tmp_path):
    shown, md = _predict(traces["plain"], tmp_path / "p.md")
    marker = ("plain.pt.trace.json: no ProfilerStep#N markers: the whole trace is taken as one step, and predicted "
              "as one (a torch.profiler schedule marks each step)")
    assert marker in shown and marker in md
    assert "plain.pt.trace.json: 24 calls," in shown

"""`predict --profile GPU --trace CPU_TRACE`: an op that CUDA runs under its own name (torch declares a CUDA
kernel for it) is predicted, not left out, whether or not the profile holds it; only work CUDA runs under
another name (the CPU's own attention and oneDNN kernels) is predicted as CUDA runs it."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from wlprof.cli.main import app
from wlprof.predict.cuda_ops import cuda_kernel_ops, parse

ROOT = Path(__file__).resolve().parents[2]
H200 = ROOT / "benchmarks" / "profiles" / "h200"
H100 = ROOT / "benchmarks" / "profiles" / "h100"
ZOO6 = ROOT / "tests" / "fixtures" / "cpu_zoo6"

YAML = """\
- func: pow.Tensor_Scalar_out(Tensor self, Scalar exponent, *, Tensor(a!) out) -> Tensor(a!)
  structured: True
  dispatch:
    CPU, CUDA: pow_Tensor_Scalar_out
    MPS: pow_Tensor_Scalar_out_mps
  tags: pointwise

- func: pow.Tensor_Scalar(Tensor self, Scalar exponent) -> Tensor
  structured_delegate: pow.Tensor_Scalar_out
  variants: function, method

- func: rsqrt(Tensor self) -> Tensor
  structured_delegate: rsqrt.out

- func: rsqrt.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)
  dispatch:
    CPU, CUDA, MPS, MTIA: rsqrt_out

- func: masked_fill.Scalar(Tensor self, Tensor mask, Scalar value) -> Tensor
  dispatch:
    CompositeExplicitAutograd: masked_fill
    NestedTensorCPU, NestedTensorHPU, NestedTensorCUDA: NestedTensor_masked_fill

- func: _scaled_dot_product_flash_attention_for_cpu(Tensor query) -> (Tensor, Tensor)
  dispatch:
    CPU: _scaled_dot_product_flash_attention_cpu

- func: neg_sparse_only(Tensor self) -> Tensor
  dispatch:
    SparseCPU, SparseCUDA: neg_sparse

- func: layer_norm(Tensor input, int[] normalized_shape) -> Tensor
"""


def test_parse_takes_a_cuda_kernel_directly_or_through_the_out_overload_it_is_structured_on():
    # pow's functional overload and rsqrt (delegate declared before its target) inherit their out= CUDA
    # kernel; a composite, a CPU-only kernel, a sparse-only CUDA kernel and an undispatched op do not count
    assert parse(YAML) == frozenset({"aten::pow", "aten::rsqrt"})


def test_the_installed_torch_declares_the_ops_and_not_the_cpu_only_kernels():
    ops = cuda_kernel_ops()
    if not ops:
        pytest.skip("this torch ships no native_functions.yaml")
    assert {"aten::pow", "aten::rsqrt", "aten::native_layer_norm", "aten::_log_softmax", "aten::nll_loss_forward",
            "aten::masked_fill_", "aten::bernoulli_", "aten::embedding_dense_backward"} <= ops
    assert not {"aten::_scaled_dot_product_flash_attention_for_cpu", "aten::mkldnn_convolution",
                "aten::_convolution", "aten::layer_norm", "aten::linear", "aten::masked_fill"} & ops


def _raw_count(path: Path, name: str) -> int:
    events = json.loads(gzip.open(path).read())["traceEvents"]
    return sum(1 for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op" and e.get("name") == name)


@pytest.mark.parametrize("profile", [H200, H100], ids=["h200", "h100"])
def test_a_t5_steps_rms_norm_dropout_and_loss_are_calls_not_left_out(profile):
    from wlprof.cost import registry
    from wlprof.predict.profile import load_profile
    from wlprof.predict.spec import calls_and_left_out

    if not cuda_kernel_ops():
        pytest.skip("this torch ships no native_functions.yaml")
    trace = ZOO6 / "t5-train.json.gz"
    predictor, _, _ = load_profile(profile, False)
    calls, left = calls_and_left_out(str(trace), frozenset(predictor.meta.get("op_names", [])))
    # T5's RMS norm is x * rsqrt(mean(x.pow(2)) + eps): each pow and rsqrt the CPU ran is a CUDA launch of
    # the same op, one call each (the trace's count, from the raw events)
    for name in ("aten::pow", "aten::rsqrt", "aten::bernoulli_", "aten::_log_softmax", "aten::nll_loss_forward"):
        n = _raw_count(trace, name)
        assert n > 0 and (calls.op_name == name).sum() == n, (name, n)
    declared = {n for n in left.op_name if n in cuda_kernel_ops() and registry.has_formula(n)}
    assert not declared, sorted(declared)


def test_a_clip_step_leaves_nothing_out_its_attention_and_convolution_run_as_cuda_runs_them(tmp_path):
    if not cuda_kernel_ops():
        pytest.skip("this torch ships no native_functions.yaml")
    out = tmp_path / "p.md"
    res = CliRunner().invoke(app, ["predict", "--profile", str(H100), "--trace", str(ZOO6 / "clip-train.json.gz"),
                                   "--top", "0", "-o", str(out)], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    shown = " ".join(res.output.split())
    assert "left out" not in shown
    # the CPU's flash attention (2 forward, 2 backward, float32) as CUDA's memory-efficient kernel; the CPU's
    # _convolution as cudnn_convolution
    md = out.read_text()
    for launched in ("aten::_efficient_attention_forward", "aten::_efficient_attention_backward",
                     "aten::cudnn_convolution", "aten::native_layer_norm", "aten::_log_softmax"):
        assert launched in md, launched
    assert "_for_cpu" not in md


def _bf16_attention(path: Path, masked: bool = False) -> Path:
    """One CPU forward and backward of bfloat16 SDPA ([B, H, S, D] = [1, 2, 8, 16], not causal), with an [8, 8]
    boolean attn_mask where `masked`."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    q = torch.randn(1, 2, 8, 16, dtype=torch.bfloat16, requires_grad=True)
    mask = torch.ones(8, 8, dtype=torch.bool).tril() if masked else None
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        torch.nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=mask).sum().backward()
    prof.export_chrome_trace(str(path))
    return path


CUDNN_ATTENTION = frozenset(("aten::_cudnn_attention_forward", "aten::_cudnn_attention_backward"))


def _attention_calls(trace: Path) -> dict:
    """Per profile (h200, h100, and "no cudnn": the H200 profile's ops without cuDNN's attention): the attention
    calls' names and their forward call's first four arguments' dims, as `calls_and_left_out` translates the CPU
    trace; asserts nothing is left out."""
    from wlprof.predict.profile import load_profile
    from wlprof.predict.spec import calls_and_left_out

    got = {}
    helds = {}
    for name, profile in (("h200", H200), ("h100", H100)):
        predictor, _, _ = load_profile(profile, False)
        helds[name] = frozenset(predictor.meta.get("op_names", []))
    helds["no cudnn"] = helds["h200"] - CUDNN_ATTENTION
    for name, held in helds.items():
        calls, left = calls_and_left_out(str(trace), held)
        assert left.empty, left
        att = calls[calls.op_name.str.contains("attention")]
        got[name] = (att.op_name.tolist(), json.loads(att.op_input_dims.iat[0])[:4])
    return got


def test_16_bit_attention_runs_as_the_backend_the_profile_measured_else_flash(tmp_path):
    got = _attention_calls(_bf16_attention(tmp_path / "bf16.pt.trace.json"))
    # both shipped profiles hold cuDNN's attention (torch picked it there): [B, H, S, D] as SDPA passes it; a
    # profile that holds none: flash, on [B, S, H, D] views; no mask (cuDNN's attn_bias, flash's cum_seq_q: [])
    b, h = [1, 2, 8, 16], [1, 8, 2, 16]
    for name in ("h200", "h100"):
        assert got[name] == (["aten::_cudnn_attention_forward", "aten::_cudnn_attention_backward"], [b, b, b, []])
    assert got["no cudnn"] == (["aten::_flash_attention_forward", "aten::_flash_attention_backward"], [h, h, h, []])


def test_16_bit_attention_with_a_mask_runs_as_the_memory_efficient_kernel_where_cudnn_is_not_held(tmp_path):
    """Flash takes no attn_mask (SDPA's can_use_flash_attention refuses one): a masked 16-bit call runs as the
    memory-efficient kernel with the mask as its bias, unless the profile holds cuDNN's attention."""
    got = _attention_calls(_bf16_attention(tmp_path / "bf16-mask.pt.trace.json", masked=True))
    b, h = [1, 2, 8, 16], [1, 8, 2, 16]
    # cuDNN: (q, k, v, attn_bias, ...) on [B, H, S, D]; efficient: (q, k, v, bias, ...) on [B, S, H, D] views
    for name in ("h200", "h100"):
        assert got[name] == (["aten::_cudnn_attention_forward", "aten::_cudnn_attention_backward"], [b, b, b, [8, 8]])
    assert got["no cudnn"] == (["aten::_efficient_attention_forward", "aten::_efficient_attention_backward"],
                               [h, h, h, [8, 8]])

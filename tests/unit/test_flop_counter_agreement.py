"""Our GEMM and convolution FLOPs equal FlopCounterMode's on real CPU profiler traces.

Each case runs a call once under torch.profiler (`record_shapes=True`) and once under
`torch.utils.flop_counter.FlopCounterMode`. From the exported Chrome trace we rebuild
every `cpu_op` as an `OpCall` (ancestors from time containment on the same thread),
pick the ops the pipeline costs (the rule of `wlprof.trace.join._flag_ops`, restated
here so this test depends on the cost registry only: an op with a formula is costed
unless a costed, non-support op is nested inside it and its formula does not declare
its nested ops auxiliary, or an op of its own name is nested inside it), and sum the
FLOPs of the matrix-unit costs among them. That sum must equal FlopCounterMode's
total: a missing implementation op, wrong argument positions, or a wrong
dispatcher/auxiliary flag each break it.

CPU implementation ops reached here (torch 2.13): aten::mm, aten::addmm, aten::bmm,
aten::baddbmm, aten::mkldnn_convolution (float32/bfloat16), aten::_slow_conv2d_forward
(float64, and float32 1x1 or batch-1 strided cases), aten::slow_conv_dilated2d/3d,
aten::slow_conv3d_forward, aten::slow_conv_transpose2d/3d (float64), and
aten::_convolution itself for oneDNN transposed convolutions (float32), which nest no
implementation op.
"""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile
from torch.utils.flop_counter import FlopCounterMode

import wlprof.cost as cost
from wlprof.cost import MATRIX, OpCall, cost_of


def _trace_events(fn, tmp_path) -> list[dict]:
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        fn()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    return [e for e in events if e.get("cat") == "cpu_op" and e.get("ph") == "X"]


def _with_parents(events: list[dict]) -> list[tuple[dict, int]]:
    """(event, parent index or -1), parents by time containment on the same thread."""
    order = sorted(range(len(events)), key=lambda i: (events[i]["tid"], events[i]["ts"], -events[i]["dur"]))
    parent = [-1] * len(events)
    stack: list[int] = []
    tid = None
    for i in order:
        e = events[i]
        if e["tid"] != tid:
            stack, tid = [], e["tid"]
        end = e["ts"] + e["dur"]
        while stack and not (events[stack[-1]]["ts"] <= e["ts"] and end <= events[stack[-1]]["ts"] + events[stack[-1]]["dur"]):
            stack.pop()
        parent[i] = stack[-1] if stack else -1
        stack.append(i)
    return list(zip(events, parent, strict=True))


def _costed_calls(events: list[dict]) -> list[OpCall]:
    nodes = _with_parents(events)
    names = [e["name"] for e, _ in nodes]
    parents = [p for _, p in nodes]
    n = len(nodes)
    has_formula = [cost.has_formula(x) for x in names]
    costed = [has_formula[i] and names[i] not in cost.SUPPORT_OPS for i in range(n)]
    has_costed_desc = [False] * n
    same_name_child = [False] * n
    for i in range(n):
        p = parents[i]
        if p >= 0 and names[p] == names[i]:
            same_name_child[p] = True
        if costed[i]:
            while p >= 0 and not has_costed_desc[p]:
                has_costed_desc[p] = True
                p = parents[p]
    calls = []
    for i, (e, _) in enumerate(nodes):
        dispatcher = (has_formula[i] and has_costed_desc[i] and not cost.aux_children(names[i])) or same_name_child[i]
        if not has_formula[i] or dispatcher:
            continue
        ancestors, p = [], parents[i]
        while p >= 0:
            ancestors.append(names[p])
            p = parents[p]
        calls.append(OpCall.from_args(names[i], e.get("args", {}), ancestors))
    return calls


def _our_matrix_flops(fn, tmp_path) -> tuple[int, list[str]]:
    total, names = 0, []
    for call in _costed_calls(_trace_events(fn, tmp_path)):
        c = cost_of(call)
        if c is None:
            # every costed GEMM/conv op must be understood; others may be unknown
            assert not (call.name.endswith("mm") or "conv" in call.name), f"{call.name} uncosted: {call}"
            continue
        if c.unit == MATRIX:
            total += c.flops
            names.append(call.name)
    return total, names


def _flop_counter_flops(fn) -> int:
    mode = FlopCounterMode(display=False)
    with mode:
        fn()
    return mode.get_total_flops()


def _r(*shape, dtype=torch.float32):
    return torch.randn(*shape, dtype=dtype)


torch.manual_seed(0)
_LINEAR = torch.nn.Linear(5, 3, bias=True)
_D = torch.float64

# (case id, function, the implementation op that must be costed)
CASES = [
    ("mm", lambda a=_r(4, 5), b=_r(5, 6): torch.mm(a, b), "aten::mm"),
    ("linear_bias_2d", lambda x=_r(4, 5): _LINEAR(x), "aten::addmm"),
    ("linear_bias_3d", lambda x=_r(2, 4, 5): _LINEAR(x), "aten::addmm"),
    ("addmm", lambda c=_r(6), a=_r(4, 5), b=_r(5, 6): torch.addmm(c, a, b, beta=0.5, alpha=2), "aten::addmm"),
    ("bmm", lambda a=_r(3, 4, 5), b=_r(3, 5, 2): torch.bmm(a, b), "aten::bmm"),
    ("baddbmm", lambda c=_r(3, 4, 2), a=_r(3, 4, 5), b=_r(3, 5, 2): torch.baddbmm(c, a, b), "aten::baddbmm"),
    ("matmul_3d_3d", lambda a=_r(2, 3, 4), b=_r(2, 4, 5): torch.matmul(a, b), "aten::bmm"),
    ("matmul_3d_2d", lambda a=_r(2, 3, 4), b=_r(4, 5): torch.matmul(a, b), "aten::mm"),
    ("conv1d_s2_p1_d2_g2", lambda x=_r(2, 4, 10), w=_r(6, 2, 3):
        F.conv1d(x, w, stride=2, padding=1, dilation=2, groups=2), "aten::mkldnn_convolution"),
    ("conv2d_bias_s2_p1_g2", lambda x=_r(2, 4, 9, 9), w=_r(6, 2, 3, 3), b=_r(6):
        F.conv2d(x, w, b, stride=2, padding=1, groups=2), "aten::mkldnn_convolution"),
    ("conv2d_p2_d2", lambda x=_r(2, 4, 9, 8), w=_r(6, 4, 3, 2):
        F.conv2d(x, w, padding=2, dilation=2), "aten::mkldnn_convolution"),
    ("conv2d_depthwise", lambda x=_r(2, 4, 8, 8), w=_r(8, 1, 3, 3):
        F.conv2d(x, w, padding=1, groups=4), "aten::mkldnn_convolution"),
    # oneDNN runs a bf16 conv only on a CPU with bf16 support (AVX512-BF16, AMX); elsewhere ATen's slow path does
    ("conv2d_bf16", lambda x=_r(2, 4, 9, 9, dtype=torch.bfloat16), w=_r(6, 4, 3, 3, dtype=torch.bfloat16):
        F.conv2d(x, w, stride=2, padding=1),
        "aten::mkldnn_convolution" if torch.ops.mkldnn._is_mkldnn_bf16_supported() else "aten::_slow_conv2d_forward"),
    ("conv2d_channels_last", lambda x=_r(2, 4, 9, 9).to(memory_format=torch.channels_last), w=_r(6, 4, 3, 3):
        F.conv2d(x, w, padding=1), "aten::mkldnn_convolution"),
    ("conv2d_same_dilated", lambda x=_r(1, 4, 8, 8), w=_r(4, 4, 3, 3): F.conv2d(x, w, padding="same", dilation=2),
        "aten::slow_conv_dilated2d"),
    ("conv2d_unbatched", lambda x=_r(4, 9, 9), w=_r(6, 4, 3, 3): F.conv2d(x, w), "aten::_slow_conv2d_forward"),
    ("conv2d_1x1", lambda x=_r(1, 16, 8, 8), w=_r(8, 16, 1, 1), b=_r(8): F.conv2d(x, w, b),
        "aten::_slow_conv2d_forward"),
    ("conv2d_f64_bias_s2", lambda x=_r(2, 4, 9, 9, dtype=_D), w=_r(6, 4, 3, 3, dtype=_D), b=_r(6, dtype=_D):
        F.conv2d(x, w, b, stride=2, padding=1), "aten::_slow_conv2d_forward"),
    ("conv2d_f64_groups", lambda x=_r(2, 4, 7, 7, dtype=_D), w=_r(6, 2, 3, 3, dtype=_D):
        F.conv2d(x, w, padding=1, groups=2), "aten::_slow_conv2d_forward"),
    ("conv2d_f64_dilated", lambda x=_r(2, 4, 9, 9, dtype=_D), w=_r(6, 4, 3, 3, dtype=_D), b=_r(6, dtype=_D):
        F.conv2d(x, w, b, padding=1, dilation=2), "aten::slow_conv_dilated2d"),
    ("conv3d_p1", lambda x=_r(1, 2, 5, 5, 5), w=_r(3, 2, 3, 3, 3): F.conv3d(x, w, padding=1),
        "aten::slow_conv3d_forward"),
    ("conv3d_f64_dilated", lambda x=_r(1, 2, 6, 6, 6, dtype=_D), w=_r(3, 2, 2, 2, 2, dtype=_D):
        F.conv3d(x, w, dilation=2), "aten::slow_conv_dilated3d"),
    ("conv_transpose1d", lambda x=_r(2, 4, 5), w=_r(4, 3, 3): F.conv_transpose1d(x, w, stride=2),
        "aten::_convolution"),
    ("conv_transpose2d_bias_outpad", lambda x=_r(2, 4, 5, 5), w=_r(4, 3, 3, 3), b=_r(3):
        F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1), "aten::_convolution"),
    ("conv_transpose2d_g2_d2", lambda x=_r(2, 4, 5, 5), w=_r(4, 3, 3, 3):
        F.conv_transpose2d(x, w, stride=2, padding=1, groups=2, dilation=2), "aten::_convolution"),
    ("conv_transpose2d_f64_bias", lambda x=_r(2, 4, 5, 5, dtype=_D), w=_r(4, 3, 3, 3, dtype=_D), b=_r(3, dtype=_D):
        F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1, dilation=2),
        "aten::slow_conv_transpose2d"),
    ("conv_transpose2d_f64_g2", lambda x=_r(2, 4, 5, 5, dtype=_D), w=_r(4, 3, 3, 3, dtype=_D):
        F.conv_transpose2d(x, w, stride=2, groups=2), "aten::slow_conv_transpose2d"),
    ("conv_transpose3d_f64", lambda x=_r(1, 2, 3, 3, 3, dtype=_D), w=_r(2, 3, 2, 2, 2, dtype=_D):
        F.conv_transpose3d(x, w, stride=2), "aten::slow_conv_transpose3d"),
]


@pytest.mark.parametrize(("fn", "impl"), [pytest.param(f, i, id=k) for k, f, i in CASES])
def test_matrix_flops_equal_flop_counter(fn, impl, tmp_path):
    expected = _flop_counter_flops(fn)
    assert expected > 0
    ours, names = _our_matrix_flops(fn, tmp_path)
    assert impl in names, f"expected {impl} to carry the cost, costed: {names}"
    assert ours == expected, f"costed {names}"


def test_scaled_mm_flops_equal_flop_counter(tmp_path):
    # On the CPU _scaled_mm dequantizes and runs an aten::mm nested inside it: a dispatcher
    # there, the cost lands on the mm (on CUDA _scaled_mm itself is costed).
    a = torch.randn(16, 32).to(torch.float8_e4m3fn)
    b = torch.randn(16, 32).to(torch.float8_e4m3fn).t()
    one = torch.tensor(1.0)

    def fn():
        return torch._scaled_mm(a, b, one, one, out_dtype=torch.bfloat16)

    try:
        fn()
    except (RuntimeError, NotImplementedError) as e:  # builds without a CPU fp8 GEMM
        pytest.skip(f"_scaled_mm unavailable on this CPU build: {e}")
    expected = _flop_counter_flops(fn)
    ours, names = _our_matrix_flops(fn, tmp_path)
    assert expected == 2 * 16 * 32 * 16
    assert ours == expected, f"costed {names}"


def test_grouped_mm_cpu_trace_costs_each_group_once(tmp_path):
    # FlopCounterMode has no _grouped_mm formula; on the CPU it runs one aten::mm per group
    # (so it is a dispatcher there) and the groups' FLOPs must add up to the formula's
    # count for a full offs: 2 * tokens * K * N.
    a = torch.randn(6, 8, dtype=torch.bfloat16)
    b = torch.randn(2, 8, 8, dtype=torch.bfloat16).transpose(-2, -1)
    offs = torch.tensor([2, 6], dtype=torch.int32)
    try:
        torch._grouped_mm(a, b, offs=offs)
    except (RuntimeError, NotImplementedError) as e:
        pytest.skip(f"_grouped_mm unavailable on this CPU build: {e}")
    ours, names = _our_matrix_flops(lambda: torch._grouped_mm(a, b, offs=offs), tmp_path)
    assert names == ["aten::mm", "aten::mm"]
    assert ours == 2 * 6 * 8 * 8  # = 2*(2*8*8) + 2*(4*8*8) over the two groups
    events = _trace_events(lambda: torch._grouped_mm(a, b, offs=offs), tmp_path)
    (g,) = [e for e in events if e["name"] == "aten::_grouped_mm"]
    assert cost_of(OpCall.from_args(g["name"], g["args"])).flops == ours

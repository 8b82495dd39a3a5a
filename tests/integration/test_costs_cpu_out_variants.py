"""Ops called with `out=` on the CPU: the out tensor, recorded as one more input, is written once
and never read as an operand, so each call costs what its functional form costs."""

from __future__ import annotations

import torch
from torch.profiler import ProfilerActivity, profile

# float32 [256, 128]: 32,768 elements, 131,072 bytes a tensor
N, T = 256 * 128, 256 * 128 * 4


def _calls(tmp_path, name, fns):
    """Each fn run once under the profiler: its working op's (name, FLOPs, bytes, bytes written)."""
    from wlprof.pipeline import costed, read

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for fn in fns:
            fn()
    path = tmp_path / f"{name}.json"
    prof.export_chrome_trace(str(path))
    k = costed(read(path)).kernels
    k = k[~k.op_name.isin(["aten::copy_", "aten::fill_"])]  # a Python scalar's copy to a 0-d tensor
    return list(zip(k.op_name, k.flops, k["bytes"], k.bytes_written, strict=True))


def test_an_out_tensor_is_written_once_not_read(tmp_path):
    torch.manual_seed(0)
    a, b, c = torch.randn(256, 128), torch.randn(256, 128), torch.empty(256, 128)
    pairs = [  # (functional, out=) of each form
        (lambda: torch.div(a, b), lambda: torch.div(a, b, out=c)),
        (lambda: torch.div(a, 2.0), lambda: torch.div(a, 2.0, out=c)),
        (lambda: torch.div(a, b, rounding_mode="floor"), lambda: torch.div(a, b, rounding_mode="floor", out=c)),
        (lambda: torch.true_divide(a, b), lambda: torch.true_divide(a, b, out=c)),
        (lambda: torch.mul(a, b), lambda: torch.mul(a, b, out=c)),
        (lambda: torch.add(a, b), lambda: torch.add(a, b, out=c)),
        (lambda: torch.add(a, b, alpha=2), lambda: torch.add(a, b, alpha=2, out=c)),
        (lambda: torch.sub(a, b), lambda: torch.sub(a, b, out=c)),
        (lambda: torch.where(a > 0, a, b), lambda: torch.where(a > 0, a, b, out=c)),
        (lambda: torch.addcmul(a, a, b), lambda: torch.addcmul(a, a, b, out=c)),
        (lambda: torch.clamp(a, min=b), lambda: torch.clamp(a, min=b, out=c)),
        (lambda: torch.exp(a), lambda: torch.exp(a, out=c)),
        (lambda: torch.mm(a[:128], b[:128]), lambda: torch.mm(a[:128], b[:128], out=c[:128])),
    ]
    functional = _calls(tmp_path, "functional", [f for f, _ in pairs])
    out = _calls(tmp_path, "out", [o for _, o in pairs])
    assert [r[0] for r in out] == [r[0] for r in functional]
    for f, o in zip(functional, out, strict=True):
        assert o[1:] == f[1:], (f, o)
    # div.out(a, b, out): reads a and b, writes the out tensor: 3 x 131,072 = 393,216 bytes
    # (read as a third operand, the out tensor made it 524,288)
    assert out[0] == ("aten::div", N, 3 * T, T)
    # div.out(a, 2.0, out): a, the scalar as an 8-byte double 0-d tensor, the out tensor written
    assert out[1] == ("aten::div", N, 2 * T + 8, T)
    # div.out_mode(a, b, "floor", out) and true_divide (div.out nested in it)
    assert out[2] == out[3] == ("aten::div", N, 3 * T, T)

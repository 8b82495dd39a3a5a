"""A CPU trace captured here with the ops small models from outside wlprof run between their
matrix products (transformers' Llama, GPT-2, Mixtral and Mamba pad their masks and inputs, histc
counts expert loads, detach_ marks buffers; ResNet asks _nnpack_available): every row is costed,
no wrapper or metadata op is a row of its own, and benchmarks/coverage.py reads the CPU rows."""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))


def capture(path: Path) -> None:
    x = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    w = torch.ones(6, 3)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        F.pad(x, (1, 2), value=0.5)  # [4, 9]: fill_ the output, copy_ the input in
        F.pad(x, (-1, -1))  # [4, 4]: a narrowed view cloned
        torch.linspace(0, 1, 7)
        torch.linspace(0, 1, 5, dtype=torch.float64)
        torch.randn(4, 6)
        _ = x.mT
        torch.broadcast_tensors(x, w[:, 0].reshape(6))
        (x @ w).detach_()
        torch.result_type(x, 2)
        torch._nnpack_available()
    prof.export_chrome_trace(str(path))


def test_cpu_rows_of_model_glue_ops(tmp_path):
    from wlprof.pipeline import costed, read

    path = tmp_path / "glue.json"
    capture(path)
    k = costed(read(path)).kernels
    names = set(k.op_name)
    for gone in ("aten::pad", "aten::constant_pad_nd", "aten::randn", "aten::mT", "aten::broadcast_tensors",
                 "aten::detach_", "detach_", "aten::result_type", "aten::_nnpack_available"):
        assert gone not in names, gone
    assert k["bytes"].notna().all(), k[k["bytes"].isna()].op_name.tolist()
    by = k.groupby("op_name")["bytes"].apply(sorted).to_dict()
    # fill_ of the [4, 9] fp32 pad: 36 * 4 = 144 bytes written
    assert by["aten::fill_"] == [144.0]
    # copy_: the negative pad's clone of [4, 4], 16 * 4 read + 16 * 4 written = 128; the input
    # [4, 6] copied into the padded output, 24 * 4 * 2 = 192
    assert by["aten::copy_"] == [128.0, 192.0]
    # linspace out forms: 7 fp32 = 28 bytes, 5 fp64 = 40; randn's normal_: 24 fp32 = 96
    assert by["aten::linspace"] == [28.0, 40.0]
    assert by["aten::normal_"] == [96.0]
    # mm [4, 6] x [6, 3]: reads (24 + 18) * 4 = 168, writes 12 * 4 = 48; FLOPs 2 * 4 * 3 * 6 = 144
    mm = k[k.op_name == "aten::mm"]
    assert mm["bytes"].tolist() == [216.0] and mm.flops.tolist() == [144.0]
    assert set(names) == {"aten::fill_", "aten::copy_", "aten::linspace", "aten::normal_", "aten::mm"}

    from coverage import coverage

    row = coverage(path)
    assert row.error is None and row.kernels == len(k) == 7
    assert row.bytes_known == row.flops_known == 1.0 and row.top == []

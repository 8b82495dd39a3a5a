"""Every tensor dtype torch.profiler records: its C++ name in `Input type` is known, with torch's
element size, so a copy of it is costed."""

from __future__ import annotations

import json

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from wlprof.cost import dtypes

# sub-byte and bit dtypes torch has no kernels for (torch.int4, torch.bits8, torch.quint4x2, ...) stay unknown
UNCOSTED = ("bits", "int1", "int2", "int3", "int4", "int5", "int6", "int7", "quint2x4", "quint4x2")
DTYPES = sorted({d for d in vars(torch).values() if isinstance(d, torch.dtype)
                 and not any(str(d).removeprefix("torch.").removeprefix("u").startswith(p) for p in UNCOSTED)},
                key=str)


def test_every_recorded_dtype_name_is_known_with_its_size(tmp_path):
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for d in DTYPES:
            torch.empty((4, 8), dtype=d).view(d)
    path = tmp_path / "dtypes.json"
    prof.export_chrome_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    recorded = [e["args"]["Input type"][0] for e in events if e.get("name") == "aten::view"]
    assert len(recorded) == len(DTYPES) > 15
    for d, name in zip(DTYPES, recorded, strict=True):
        assert dtypes.canonical(name) == str(d).removeprefix("torch."), name
        assert dtypes.element_size(name) == d.itemsize, name


@pytest.mark.parametrize(("dtype", "nbytes"), [
    # clone of [4, 8]: 32 elements read and written. FP4 packs two values in a 1-byte element:
    # 2 x 32 x 1 = 64 bytes; uint16 2 x 32 x 2 = 128; uint64 2 x 32 x 8 = 512
    (torch.float4_e2m1fn_x2, 64), (torch.uint16, 128), (torch.uint64, 512),
])
def test_a_copy_of_a_newer_dtype_is_costed(tmp_path, dtype, nbytes):
    from wlprof.pipeline import costed, read

    x = torch.empty((4, 8), dtype=dtype)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        x.clone()
    path = tmp_path / "clone.json"
    prof.export_chrome_trace(str(path))
    k = costed(read(path)).kernels
    copy = k[k.op_name == "aten::copy_"]
    assert len(copy) == 1 and copy["bytes"].iloc[0] == nbytes

"""index_add_ on the CPU, captured here: a 2-D index_add_ runs a nested scatter_add_ that does the
work, so its cost is counted once, on the scatter_add_; a 1-D one has nothing nested and carries
its own cost."""

from __future__ import annotations

import torch
from torch.profiler import ProfilerActivity, profile


def test_cpu_index_add_is_counted_once(tmp_path):
    from wlprof.pipeline import costed, read

    dst2, src2 = torch.zeros(5, 3), torch.ones(7, 3)
    dst1, src1 = torch.zeros(5), torch.ones(7)
    idx = torch.tensor([0, 1, 1, 4, 2, 0, 3])
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        dst2.index_add_(0, idx, src2)
        dst1.index_add_(0, idx, src1)
    path = tmp_path / "index_add.json"
    prof.export_chrome_trace(str(path))
    c = costed(read(path))
    ops = c.joined.ops
    two_d = ops[(ops.name == "aten::index_add_") & (ops.parent < 0)].iloc[0]
    assert bool(two_d.dispatcher)  # the 2-D call: its nested scatter_add_ carries the cost
    k = c.kernels
    by = {name: (g.flops.tolist(), g["bytes"].tolist()) for name, g in k.groupby("op_name")}
    # 2-D: scatter_add_ of src [7, 3] into dst [5, 3] by an index expanded to [7, 3] (stride 0 along
    # the columns: 7 int64 read, 56 bytes): 21 adds; bytes 56 + 21 * 4 (src) + 2 * 15 * 4 (dst rows
    # touched, at most dst's 15 elements, read and written) = 260
    assert by["aten::scatter_add_"] == ([21.0], [260.0])
    # 1-D: index_add_ of src [7] into dst [5]: 7 adds; bytes 7 * 8 (index) + 7 * 4 (src) + 2 * 5 * 4 = 124
    assert by["aten::index_add_"] == ([7.0], [124.0])
    assert k.flops.sum() == 28.0

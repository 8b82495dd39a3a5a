"""A CPU cat takes its dtype from the op that reads its result next, past the views run between.

The MoE padded dispatch's combine runs `cat([buffer, zero row])`, then `t`, `reshape` and `zeros_like`
(each with its own nested as_strided, view or empty_strided) before the index_select that reads the
cat's result: the consumer lay past the eight ops looked at, and the cat's bytes were unknown in every
padded point of a `wlprof run moe` on the CPU.
"""

from __future__ import annotations

import torch
from cpu_costed import costed_cpu


def _ops(tmp_path, fn):
    return costed_cpu(tmp_path, fn).ops


def test_cat_consumer_found_past_views_and_allocations(tmp_path):
    a, b, w = torch.rand(4, 4, dtype=torch.float64), torch.zeros(1, 4, dtype=torch.float64), torch.rand(8, 1)
    idx = torch.tensor([0, 1, 2, 3, 4, 4, 4, 4])

    def fn():
        out = torch.cat([a, b])
        w.t().reshape(1, 8)  # t -> transpose -> as_strided, reshape -> view
        torch.zeros_like(a)  # -> empty_like -> empty_strided, zero_ -> fill_
        out.index_select(0, idx)  # the first reader of a [5, 4] tensor: the ninth op after the cat

    ops = _ops(tmp_path, fn)
    # 20 float64 elements read and written: 2 x 160 bytes
    assert ops[ops.op_name == "aten::cat"][["bytes", "bytes_written"]].values.tolist() == [[320, 160]]


def test_moe_padded_combine_cat_has_bytes(tmp_path):
    from wlprof.workloads import get

    w, dev = get("moe"), torch.device("cpu")
    spec = w.parse({"routing": "explicit:1x8", "dispatch": "padded", "tokens": "8", "experts": 4, "top_k": 1,
                    "capacity_factor": 0.01, "d_model": 4, "d_ff": 4, "ffn": "gelu"}, dev, torch.float32).spec
    (point,) = w.points(spec)
    built = w.build(point, dev, torch.float32)
    with torch.inference_mode():
        built.step()
        ops = _ops(tmp_path, built.step)
    # capacity ceil(0.01 x 8 / 4) = 1: the [4 experts x 1, 4] buffer and one zero row, float32: 20 x 4 read
    # and written
    assert ops[ops.op_name == "aten::cat"][["op_input_dims", "bytes", "bytes_written"]].values.tolist() == \
        [["[[[4,4],[1,4]],[]]", 160, 80]]

"""Sparse constructors, index-format conversions, repeat_interleave and diff captured on the CPU.

PyG's GATConv given a CSR adjacency converts it back to COO and forth (`diff` of the row offsets,
`repeat_interleave` of the degrees, `_convert_indices_from_coo_to_csr`, `sparse_compressed_tensor`):
every one of those had been an `unknown` row in a `gnn --backend pyg:gat-csr` step.
"""

from __future__ import annotations

import torch
from cpu_costed import costed_cpu


def _kernels(tmp_path, fn):
    return costed_cpu(tmp_path, fn).kernels


def test_conversions_and_constructors_costed_by_hand(tmp_path):
    crow, col = torch.tensor([0, 2, 3, 5]), torch.tensor([0, 2, 1, 0, 2])
    rows, values = torch.tensor([0, 0, 1, 2, 2]), torch.arange(5.0)
    repeats = torch.tensor([1, 2, 3, 0])

    def fn():
        torch.sparse_csr_tensor(crow, col, values, (3, 3))
        torch.sparse_coo_tensor(torch.stack([rows, col]), values, (3, 3))
        torch._convert_indices_from_coo_to_csr(rows, 3)
        torch._convert_indices_from_coo_to_csr(rows, 3, out_int32=True)
        torch._convert_indices_from_csr_to_coo(crow, col)
        torch.repeat_interleave(repeats)  # the length (6) is the data's: read back from the device
        torch.repeat_interleave(repeats, output_size=6)
        torch.diff(crow)

    k = _kernels(tmp_path, fn)
    assert not set(k[k.flops_source == "unknown"].op_name), k[k.flops_source == "unknown"].op_name.tolist()
    for view in ("aten::sparse_csr_tensor", "aten::sparse_compressed_tensor", "aten::_sparse_compressed_tensor_unsafe",
                 "aten::sparse_coo_tensor", "aten::_sparse_coo_tensor_with_dims_and_tensors", "aten::diff"):
        assert view not in set(k.op_name)
    c2r = k[k.op_name == "aten::_convert_indices_from_coo_to_csr"][["flops", "bytes", "bytes_written"]]
    # 5 int64 row indices read (40 bytes), 3 + 1 offsets written: int64 32 bytes, int32 16 bytes
    assert c2r.values.tolist() == [[0, 72, 32], [0, 56, 16]]
    r2c = k[k.op_name == "aten::_convert_indices_from_csr_to_coo"]
    # crow 4 x 8 and col 5 x 8 read, [2, 5] int64 written: 32 + 40 + 80
    assert r2c[["flops", "bytes", "bytes_written"]].values.tolist() == [[0, 152, 80]]
    ri = k[k.op_name == "aten::repeat_interleave"]
    # repeats 4 x 8 and their int64 cumsum 4 x 8 read, 1 + 2 + 3 + 0 = 6 int64 written: 32 + 32 + 48
    assert ri[["flops", "bytes", "bytes_written"]].values.tolist() == [[0, 112, 48], [0, 112, 48]]
    # diff: the nested sub of the two 3-element views: 3 FLOPs, 2 x 24 read, 24 written
    assert k[k.op_name == "aten::sub"][["flops", "bytes"]].values.tolist() == [[3, 72]]


def test_repeat_interleave_of_a_tensor_dispatches(tmp_path):
    x, repeats = torch.arange(8.0).reshape(4, 2), torch.tensor([1, 2, 3, 0])

    k = _kernels(tmp_path, lambda: x.repeat_interleave(repeats, dim=0))
    # one row of repeat_interleave: the inner form (repeats only); the gather is the index_select's:
    # 6 rows of 2 float32 read and written (48 + 48) and the 6 int64 indices read (48)
    assert k[k.op_name == "aten::repeat_interleave"].op_input_dims.tolist() == ["[[4],[]]"]
    assert k[k.op_name == "aten::index_select"].bytes.tolist() == [144]


def test_gat_csr_step_leaves_no_op_unknown(tmp_path):
    from wlprof.workloads import get

    w, dev = get("gnn"), torch.device("cpu")
    spec = w.parse({"graph": "rmat", "scale": "4", "features": "3", "backend": "pyg:gat-csr"}, dev,
                   torch.float32).spec
    (point,) = w.points(spec)
    w.prepare(point, dev)
    built = w.build(point, dev, torch.float32)
    with torch.inference_mode():
        built.step()
        k = _kernels(tmp_path, built.step)
    assert not set(k[k.flops_source == "unknown"].op_name)
    assert (k.bytes > 0).all()

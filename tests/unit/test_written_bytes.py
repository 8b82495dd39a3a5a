"""The bytes formulas say they write (Cost.written), which choose a kernel's memory roof, by hand;
and their recomputation for stored rows that predate them (cost.annotate.written_from_shapes)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from wlprof.cost import OpCall, cost_of
from wlprof.cost.annotate import written_from_shapes
from wlprof.cost.roofline import traffic


def _call(name, dims, types, strides=None, concrete=None):
    return OpCall.from_args(name, {"Input Dims": dims, "Input type": types,
                                   "Input Strides": strides or [[] for _ in dims],
                                   "Concrete Inputs": concrete or ["" for _ in dims]})


BF = "c10::BFloat16"


@pytest.mark.parametrize("name,dims,types,concrete,written,cls", [
    # the tall-skinny GEMM: A [1, 4096], B [4096, 2621440] bf16: writes C = 1 x 2621440 x 2 B
    ("aten::mm", [[1, 4096], [4096, 2621440]], [BF, BF], None, 2621440 * 2, "read"),
    # medium-skinny: C = 32 x 81920 x 2 B of 32*4096*2 + 4096*81920*2 + C read and written
    ("aten::mm", [[32, 4096], [4096, 81920]], [BF, BF], None, 32 * 81920 * 2, "read"),
    # balanced 2048 x 2048 x 2560: C 2048 x 2560 x 2 of 2*(2048*2048 + 2048*2560 + 2048*2560): 36% copy
    ("aten::mm", [[2048, 2048], [2048, 2560]], [BF, BF], None, 2048 * 2560 * 2, "copy"),
    # mul of two 3M bf16 tensors: one third written
    ("aten::mul", [[3145728], [3145728]], [BF, BF], None, 3145728 * 2, "copy"),
    # copy_(dst, src): half written
    ("aten::copy_", [[1024], [1024]], ["float", "float"], ["", "False"], 4096, "copy"),
    # fill_: all written
    ("aten::fill_", [[1024], []], ["float", "Scalar"], ["", "1"], 4096, "write"),
    # a full sum: 4 bytes written of 4 MiB read
    ("aten::sum", [[1 << 20]], ["float"], [""], 4, "read"),
    # mv(A [4096, 8192], x): 4096 outputs
    ("aten::mv", [[4096, 8192], [8192]], [BF, BF], None, 4096 * 2, "read"),
    # layer norm over [64, 1024] fp32 with weight and bias: the output and two fp32 stats per row
    ("aten::native_layer_norm", [[64, 1024], [], [1024], [1024], []], ["float", "", "float", "float", "double"],
     ["", "[1024]", "", "", "1e-05"], 64 * 1024 * 4 + 2 * 64 * 4, "copy"),
    # gather of 1000 elements with int64 indices: the 1000 outputs
    ("aten::gather", [[5000], [], [1000], []], ["float", "Scalar", "long int", "Scalar"], ["", "0", "", "False"],
     4000, "copy"),
    # scatter_add_ of 1000 source elements into 500: the 500 touched, read and written once each
    ("aten::scatter_add_", [[500], [], [1000], [1000]], ["float", "Scalar", "long int", "float"],
     ["", "0", "", ""], 2000, "copy"),
    # sort of 1000 fp32: values and int64 indices
    ("aten::sort", [[1000], [], []], ["float", "Scalar", "Scalar"], ["", "-1", "False"], 1000 * 12, "copy"),
])
def test_formulas_state_what_they_write(name, dims, types, concrete, written, cls):
    c = cost_of(_call(name, dims, types, concrete=concrete))
    assert c is not None and c.written == written and c.written <= c.bytes
    assert traffic(np.array([c.bytes], float), np.array([c.written], float))[0] == cls


def test_workload_stated_costs_state_their_writes():
    from wlprof.workloads.gnn.costs import aggregate_cost
    from wlprof.workloads.moe.costs import grouped_expert_cost

    # GNN: the nodes x features output, once
    assert aggregate_cost(1000, 100, 16, "sum", 2, "bfloat16").written == 100 * 16 * 2
    # MoE SwiGLU's three grouped GEMMs, R=8 rows, d=4, f=16, bf16: x@W1 and x@W3 write 8*16 each,
    # h@W2 8*4: 2 * (2*8*16 + 8*4) = 576 bytes written (silu and the gating mul write their own)
    assert grouped_expert_cost(8, 2, 4, 4, 16, "swiglu", 2, "bfloat16").written == 576.0
    # GELU's two: 2 * (8*16 + 8*4) = 320
    assert grouped_expert_cost(8, 2, 4, 4, 16, "gelu", 2, "bfloat16").written == 320.0


def _stored(rows):
    cols = ["kind", "name", "op_name", "op_input_dims", "op_input_types", "op_input_strides", "op_concrete_inputs",
            "cost_share", "bytes", "flops_source"]
    return pd.DataFrame([dict(zip(cols, r, strict=True)) for r in rows])


def test_written_is_recomputed_only_where_the_same_formula_gives_the_bytes():
    dims, types = json.dumps([[64, 128], [128, 256]]), json.dumps(["float", "float"])
    # mm [64,128] x [128,256] fp32: bytes 4*(64*128 + 128*256 + 64*256) = 229376, written 65536
    rows = [
        ("kernel", "gemm", "aten::mm", dims, types, None, None, 1.0, 229376.0, "formula"),
        ("kernel", "gemm_splitk", "aten::mm", dims, types, None, None, 0.25, 57344.0, "formula"),  # a quarter
        ("kernel", "gemm", "aten::mm", dims, types, None, None, 1.0, 1000.0, "formula"),  # not this formula's bytes
        ("kernel", "gemm", "aten::mm", dims, types, None, None, 1.0, 229376.0, "workload"),  # stated: not recomputed
        ("memcpy", "Memcpy DtoD (Device -> Device)", "aten::foo", None, None, None, None, 1.0, 2048.0, "formula"),
        ("memcpy", "Memcpy HtoD (Pinned -> Device)", "aten::foo", None, None, None, None, 1.0, 1024.0, "formula"),
        ("memcpy", "Memcpy DtoH (Device -> Pinned)", "aten::foo", None, None, None, None, 1.0, 1024.0, "formula"),
        ("memset", "Memset (Device)", "aten::foo", None, None, None, None, 1.0, 512.0, "formula"),
        ("kernel", "k", None, None, None, None, None, 1.0, np.nan, "unknown"),
    ]
    got = written_from_shapes(_stored(rows))
    want = [65536.0, 16384.0, np.nan, np.nan, 1024.0, 1024.0, 0.0, 512.0, np.nan]
    np.testing.assert_array_equal(got, want)


def test_a_copy_without_a_formula_moves_the_bytes_its_direction_says():
    from wlprof.cost.annotate import _memcpy_bytes, _memcpy_written

    # device to device: read and written on the device; host<->device and memsets touch it once; a copy to
    # the host writes no device memory
    got = {name: (_memcpy_bytes(name, 1024), _memcpy_written(name, 1024)) for name in (
        "Memcpy DtoD (Device -> Device)", "Memcpy HtoD (Pinned -> Device)", "Memcpy DtoH (Device -> Pinned)",
        "Memset (Device)")}
    assert got == {"Memcpy DtoD (Device -> Device)": (2048.0, 1024.0), "Memcpy HtoD (Pinned -> Device)": (1024.0, 1024.0),
                   "Memcpy DtoH (Device -> Pinned)": (1024.0, 0.0), "Memset (Device)": (1024.0, 1024.0)}
    assert {type(v) for pair in got.values() for v in pair} == {float}


def test_written_from_shapes_with_columns_missing_strides_and_concrete_inputs():
    dims, types = json.dumps([[64, 128], [128, 256]]), json.dumps(["float", "float"])
    # only the op and its bytes: every row a formula's kernel with share 1; a row without an op first (None in
    # an object column); bytes off by 0.1 match (a relative 1e-6), off by 29,376 or 228,376 do not
    df = pd.DataFrame({"op_name": pd.Series([None, "aten::mm", "aten::mm", "aten::mm", "aten::mm"], dtype=object),
                       "op_input_dims": [None] + [dims] * 4, "op_input_types": [None] + [types] * 4,
                       "bytes": [8.0, 229376.0, 1000.0, 229376.1, 200000.0]})
    np.testing.assert_array_equal(written_from_shapes(df), [np.nan, 65536.0, np.nan, 65536.0, np.nan])
    # a CPU op whose bytes are not its formula's is no copy either
    cpu = df.iloc[[2]].assign(kind="cpu_op", flops_source="formula")
    np.testing.assert_array_equal(written_from_shapes(cpu), [np.nan])
    one = df.iloc[[1]].reset_index(drop=True)
    np.testing.assert_array_equal(written_from_shapes(one), [65536.0])
    np.testing.assert_array_equal(written_from_shapes(pd.DataFrame({"bytes": [1.0]})), [np.nan])  # no op column
    # a copy without a name column: no direction to read, all its bytes written
    copy = pd.DataFrame({"kind": ["memcpy"], "op_name": ["aten::copy_"], "bytes": [512.0], "flops_source": ["formula"]})
    np.testing.assert_array_equal(written_from_shapes(copy), [512.0])
    # _softmax_backward_data(dy [8, 16] broadcast from one fp32 element, y [8, 16] fp32, -1, input_dtype 15 =
    # bf16): reads 4 + 512, writes 128 * 2 = 256: its bytes match only with the strides and the dtype code read
    sm = pd.DataFrame({"kind": ["kernel"], "name": ["softmax_bwd"], "op_name": ["aten::_softmax_backward_data"],
                       "op_input_dims": [json.dumps([[8, 16], [8, 16], [], []])],
                       "op_input_types": [json.dumps(["float", "float", "Scalar", "Scalar"])],
                       "op_input_strides": [json.dumps([[0, 0], [16, 1], [], []])],
                       "op_concrete_inputs": [json.dumps(["", "", "-1", "15"])],
                       "cost_share": [1.0], "bytes": [772.0], "flops_source": ["formula"]})
    np.testing.assert_array_equal(written_from_shapes(sm), [256.0])

"""What decides a call's time, from its recorded shapes: class, group, coordinates, data features."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from wlprof.predict.calls import describe, parse_call

BF = '"c10::BFloat16"'


def call(name, dims, types, strides, concrete=None):
    concrete = concrete or "[" + ",".join('""' for _ in dims.split("],[")) + "]"
    return parse_call(name, dims, types, strides, concrete)


def test_gemm_layouts_and_bias_are_groups_and_mnk_the_coordinates():
    nn = call("aten::mm", "[[64,4096],[4096,14336]]", f"[{BF},{BF}]", "[[4096,1],[14336,1]]")
    nt = call("aten::mm", "[[64,4096],[4096,14336]]", f"[{BF},{BF}]", "[[4096,1],[1,4096]]")
    lin = call("aten::addmm", "[[14336],[64,4096],[4096,14336],[],[]]", f'[{BF},{BF},{BF},"Scalar","Scalar"]',
               "[[1],[4096,1],[1,4096],[],[]]")
    assert nn[0] == nt[0] == lin[0] == "gemm"
    assert len({nn[1], nt[1], lin[1]}) == 3  # layout and bias split the groups
    assert nn[1].endswith("|nn|") and nt[1].endswith("|nt|") and lin[1].endswith("|nt|bias")
    assert nn[2] == nt[2] == lin[2] == "gemm|bfloat16"  # the relaxed group merges them
    assert nn[3][:4] == (6.0, math.log2(14336), 12.0, 0.0)  # log2 M, N, K, B
    q = nn[4]
    assert (q["M"], q["N"], q["K"], q["B"], q["itemsize"]) == (64, 14336, 4096, 1, 2)
    assert q["flops"] == 2 * 64 * 14336 * 4096  # the registry's formula, from the shapes


def test_sparse_addmm_is_spmm_and_grouped_mm_its_own_class():
    sp = call("aten::addmm", "[[1024,64],[1024,1024],[1024,64],[],[],[0,0]]",
              '["float","float","float","Scalar","Scalar","float"]', "[[64,1],[],[64,1],[],[],[1,1]]")
    assert sp[0] == "spmm" and sp[4]["W"] == 64 and sp[4]["R"] == 1024
    g = call("aten::_grouped_mm", "[[8192,4096],[64,4096,14336],[64],[],[]]", f'[{BF},{BF},"int","",""]',
             "[[4096,1],[58720256,1,4096],[1],[],[]]")
    assert g[0] == "grouped"
    assert (g[4]["M"], g[4]["K"], g[4]["N"], g[4]["B"]) == (8192, 4096, 14336, 64)


def test_an_inductor_gemm_template_is_a_gemm_of_its_buffers_shape():
    # a real max-autotune launch (H200, torch 2.11): x [2, 1024, 8192] read as [2048, 8192] @ w [8192, 1024]
    # -> out [2048, 1024]; the first two buffers share K = 8192, the first and the output M = 2048
    t = call("triton_tem_fused_mm_t_view_0", "[[2,1024,8192],[8192,1024],[2048,1024],[],[],[]]",
             f'[{BF},{BF},{BF},"Scalar","Scalar","Scalar"]', "[[8388608,8192,1],[1024,1],[1024,1],[],[],[]]")
    assert t[0] == "gemm" and t[2] == "gemm|bfloat16"  # answered by the profile's GEMMs of its dtype
    q = t[4]
    assert (q["B"], q["M"], q["N"], q["K"]) == (1, 2048, 1024, 8192)
    assert q["flops"] == 2 * 2048 * 1024 * 8192 and q["matrix_unit"]
    assert t[3][:4] == (11.0, 10.0, 13.0, 0.0)
    # its fused backward's epilogue: dY [2048, 2816] and X [2048, 1024] give dW [2816, 1024], K = 2048 tokens
    b = call("triton_tem_fused__unsafe_view_mm_mul_silu_t_view_6", "[[2,1024,2816],[2048,1024],[2816,1024],[],[],[]]",
             f'[{BF},{BF},{BF},"Scalar","Scalar","Scalar"]', "[[2883584,2816,1],[1024,1],[1024,1],[],[],[]]")
    assert (b[4]["M"], b[4]["N"], b[4]["K"]) == (2816, 1024, 2048)
    # a flex-attention template is no GEMM: it stays a memory call of its buffers
    f = call("triton_tem_fused_flex_attention_0", "[[4,16,2048,64],[4,16,2048,64],[4,16,2048,64]]",
             f"[{BF},{BF},{BF}]", "[[2097152,131072,64,1],[2097152,131072,64,1],[2097152,131072,64,1]]")
    assert f[0] == "memory"


def test_a_trace_without_strides_holds_dense_gemms_not_sparse_ones():
    # before torch 2.0 a trace records no `Input Strides`: no tensor is told sparse by its missing strides
    bmm = parse_call("aten::bmm", "[[8,10,128],[8,128,10]]", f"[{BF},{BF}]", "", "")
    assert bmm[0] == "gemm" and (bmm[4]["M"], bmm[4]["N"], bmm[4]["K"], bmm[4]["B"]) == (10, 10, 128, 8)
    lin = parse_call("aten::addmm", "[[768],[32,768],[768,768],[],[]]", f'[{BF},{BF},{BF},"Scalar","Scalar"]',
                     "", "")
    assert lin[0] == "gemm" and lin[4]["flops"] == 2 * 32 * 768 * 768  # 2 M K N, as FlopCounterMode counts addmm
    assert lin[1].startswith("gemm|aten::addmm|")


def test_a_reduction_that_keeps_the_innermost_dim_is_apart_from_one_along_rows():
    def sumcall(dims, strides, reduced):
        return call("aten::sum", f"[{dims},[],[],[]]", f'[{BF},"ScalarList","Scalar",""]', f"[{strides},[],[],[]]",
                    f'["","{reduced}","True",""]')

    bias = sumcall("[4096,1024]", "[1024,1]", "[0]")  # a bias gradient: each of 1024 columns summed down 4096 rows
    rows = sumcall("[4096,1024]", "[1024,1]", "[-1]")
    assert bias[2] == "memory|aten::sum|bfloat16|outer" and rows[2] == "memory|aten::sum|bfloat16"
    assert bias[1] != rows[1]
    # NCHW over N, H, W reduces the innermost W; channels-last (C innermost in memory) keeps it
    nchw = sumcall("[16,64,128,128]", "[1048576,16384,128,1]", "[0, 2, 3]")
    nhwc = sumcall("[16,64,128,128]", "[1048576,1,8192,64]", "[0, 2, 3]")
    assert not nchw[2].endswith("|outer") and nhwc[2].endswith("|outer")
    # a dim of one element is no innermost dim: [N, 1] over N reduces along its only real dim
    assert not sumcall("[2048,1]", "[1,1]", "[0]")[2].endswith("|outer")
    # every dim (no dim list) and a softmax over its last dim reduce the innermost
    assert not sumcall("[64,64]", "[64,1]", "[]")[2].endswith("|outer")
    sm = call("aten::_softmax", "[[8,128,128],[],[]]", f'[{BF},"Scalar","Scalar"]', "[[16384,128,1],[],[]]",
              '["","-1","False"]')
    assert not sm[2].endswith("|outer")
    sm0 = call("aten::_softmax", "[[8,128,128],[],[]]", f'[{BF},"Scalar","Scalar"]', "[[16384,128,1],[],[]]",
               '["","1","False"]')
    assert sm0[2].endswith("|outer")


def test_an_in_place_op_shares_its_relaxed_group_with_its_out_of_place_twin():
    # a += b reads a and b and writes a, as a + b does: the profile's adds answer a trace's add_ (other layouts
    # and scalars), apart from its own group; a copy_ or fill_ has no twin
    args = ("[[1024,1024],[1024,1024],[]]", f'[{BF},{BF},"Scalar"]', "[[1024,1],[1024,1],[]]")
    inplace, plain = call("aten::add_", *args), call("aten::add", *args)
    assert inplace[2] == plain[2] == "memory|aten::add|bfloat16" and inplace[1] != plain[1]
    assert call("aten::copy_", *args)[2] == "memory|aten::copy_|bfloat16"


def test_a_copy_into_a_wider_float_is_its_own_group_and_relaxed_group():
    # copy_(dst, src): bfloat16 -> float32 (the destination first) runs other kernels than float32 -> bfloat16
    # over the same bytes; the sorted dtypes name both "bfloat16,float32"
    args = ("[[4096,512],[4096,512],[]]", "[[512,1],[512,1],[]]")
    up = call("aten::copy_", args[0], f'["float",{BF},"Scalar"]', args[1])
    down = call("aten::copy_", args[0], f'[{BF},"float","Scalar"]', args[1])
    assert up[1] == "memory|aten::copy_|bfloat16,float32|cc||widen" and up[2] == "memory|aten::copy_|float32|widen"
    assert down[1] == "memory|aten::copy_|bfloat16,float32|cc|" and down[2] == "memory|aten::copy_|bfloat16"
    # from an integer (a mask, an index) or within one dtype: no direction to tell
    assert not call("aten::copy_", args[0], '["float","long int","Scalar"]', args[1])[1].endswith("widen")
    assert not call("aten::copy_", args[0], f'[{BF},{BF},"Scalar"]', args[1])[1].endswith("widen")


def test_a_0d_operand_of_an_elementwise_op_is_a_scalar_argument():
    # x * 0.5 is recorded with the number as a 0-d float64 tensor: the same group as x * Scalar, no float64 in
    # its dtypes, no broadcast operand in its layouts, and no elements of a second operand in its coordinates
    wrapped = call("aten::mul", "[[3072,768],[]]", '["float","double"]', "[[768,1],[]]")
    scalar = call("aten::mul", "[[3072,768],[]]", '["float","Scalar"]', "[[768,1],[]]")
    assert wrapped[1] == scalar[1] == "memory|aten::mul|float32|c|" and wrapped[3] == scalar[3]
    assert wrapped[4]["bytes"] == 3072 * 768 * 4 * 2 + 8  # x read, the product written, the 8-byte number
    # a 0-d tensor alone (a scalar's arithmetic) keeps its operands
    assert call("aten::mul", "[[],[]]", '["float","double"]', "[[],[]]")[1] == "memory|aten::mul|float32,float64|cc|"


def test_index_ops_count_indexed_rows_not_the_expanded_index():
    # index_select on CUDA runs as gather with the index expanded to [E, F] by a zero stride
    g = call("aten::gather", "[[1048576,64],[],[16777073,64],[],[16777073,64]]",
             '["float","Scalar","long int","Scalar","float"]', "[[64,1],[],[1,0],[],[64,1]]")
    assert g[0] == "index"
    assert (g[4]["L"], g[4]["W"], g[4]["R"]) == (16777073, 64, 1048576)
    seg = call("aten::segment_reduce", "[[4096,32],[],[],[],[513],[],[],[]]",
               '["float","","","","long int","","",""]', "[[32,1],[],[],[],[1],[],[],[]]")
    assert (seg[4]["L"], seg[4]["W"], seg[4]["R"]) == (4096, 32, 512)


def test_memory_ops_group_by_layout_and_reduced_dims():
    a = call("aten::mul", "[[64,4096],[64,1]]", f"[{BF},{BF}]", "[[4096,1],[1,1]]")
    b = call("aten::mul", "[[64,4096],[64,4096]]", f"[{BF},{BF}]", "[[4096,1],[4096,1]]")
    assert a[0] == b[0] == "memory" and a[1] != b[1]  # a broadcast operand is another kernel
    # ... whichever operand it is: a [rows, 1] scale times [rows, features] values broadcasts its first
    first = call("aten::mul", "[[64,1],[64,4096]]", f"[{BF},{BF}]", "[[1,1],[4096,1]]")
    assert first[1] == "memory|aten::mul|bfloat16|rc|" and a[1] == "memory|aten::mul|bfloat16|cr|"
    assert first[1] != b[1]
    s0 = call("aten::cumsum", "[[8192,64],[],[]]", '["int","Scalar",""]', "[[64,1],[],[]]", '["","0",""]')
    s1 = call("aten::cumsum", "[[8192,64],[],[]]", '["int","Scalar",""]', "[[64,1],[],[]]", '["","1",""]')
    assert s0[1] != s1[1]  # a scan down the rows is not a scan along them
    t2 = call("aten::topk", "[[8192,64],[],[],[],[]]", '["float","Scalar","Scalar","Scalar","Scalar"]',
              "[[64,1],[],[],[],[]]", '["","2","-1","True","True"]')
    t4 = call("aten::topk", "[[8192,64],[],[],[],[]]", '["float","Scalar","Scalar","Scalar","Scalar"]',
              "[[64,1],[],[],[],[]]", '["","4","-1","True","True"]')
    assert t2[1] == t4[1] and t2[3][3] == 1.0 and t4[3][3] == 2.0  # k is a coordinate, not a group


def test_a_memory_call_knows_how_its_size_ends():
    # 65,536 = 2^16 ends on a 2^10 block: 2.0; 50,000 = 2^4 * 3,125: 2 * 4 / 10 = 0.8; 777,777 is odd: 0
    sizes = {65_536: 2.0, 50_000: 0.8, 777_777: 0.0}
    for n, want in sizes.items():
        c = call("aten::mul", f"[[{n}],[{n}]]", f"[{BF},{BF}]", "[[1],[1]]")
        assert c[0] == "memory" and c[3][3] == pytest.approx(want), n
    # topk keeps its k there
    t = call("aten::topk", "[[1000,64],[],[],[],[]]", '["float","Scalar","Scalar","Scalar","Scalar"]',
             "[[64,1],[],[],[],[]]", '["","8","-1","True","True"]')
    assert t[3][3] == 3.0


def test_a_strided_copy_knows_how_far_apart_its_elements_lie():
    # an MoE loop's mask[e] slice of a one-hot [1800 tokens, 6 top-k, 96 experts] int64 tensor, copied out:
    # the source view [6, 1800] has strides [96, 576], so it spans 5*96 + 1799*576 + 1 = 1,036,705 elements
    # for its 10,800: log2(1,036,705 / 10,800) = 6.58
    sl = call("aten::copy_", "[[6,1800],[6,1800],[]]", '["long int","long int","Scalar"]',
              "[[1800,1],[96,576],[]]")
    assert sl[0] == "memory" and sl[3][4] == pytest.approx(math.log2(1_036_705 / 10_800))
    # the same slice of a 32-expert tensor lies closer: strides [32, 192], 5*32 + 1799*192 + 1 = 345,569
    near = call("aten::copy_", "[[6,1800],[6,1800],[]]", '["long int","long int","Scalar"]',
                "[[1800,1],[32,192],[]]")
    assert near[1] == sl[1] and near[3][4] == pytest.approx(math.log2(345_569 / 10_800))
    # a transposed copy reads every element of what it spans, a contiguous one too: 0
    tr = call("aten::copy_", "[[64,32],[64,32],[]]", f"[{BF},{BF},\"Scalar\"]", "[[32,1],[1,64],[]]")
    c = call("aten::copy_", "[[64,32],[64,32],[]]", f"[{BF},{BF},\"Scalar\"]", "[[32,1],[32,1],[]]")
    assert tr[3][4] == 0.0 and c[3][4] == 0.0 and tr[1] != c[1]


def _ops(rows, **facts):
    df = pd.DataFrame(rows, columns=["op_name", "op_input_dims", "op_input_types", "op_input_strides",
                                     "op_concrete_inputs"])
    for k, v in facts.items():
        df[k] = [v] * len(df) if isinstance(v, list) else v
    return df


def test_describe_reads_expert_counts_degrees_order_and_context():
    g = ("aten::_grouped_mm", "[[80,64],[4,64,128],[4],[],[]]", f'[{BF},{BF},"int","",""]',
         "[[64,1],[8192,1,64],[1],[],[]]", '["","","","",""]')
    ops = _ops([g], workload="moe", dispatch="grouped")
    ops["expert_counts"] = [[50, 30, 0, 0]]
    d = describe(ops)
    assert d.active.iat[0] == 2 and d.largest.iat[0] == 50
    # 2 active groups; the largest group is no coordinate (c4), its padding is: 50 and 30 rows take
    # ceil(50/64) + ceil(30/64) = 2 tiles of 64 rows (128 rows), 2 of 128 (256), 2 of 256 (512)
    assert d.c3.iat[0] == pytest.approx(1.0) and d.c4.iat[0] == 0.0
    assert (d.padded64.iat[0], d.padded128.iat[0], d.padded256.iat[0]) == (128.0, 256.0, 512.0)
    assert d.group.iat[0].endswith("|@moe:grouped")
    sc = ("aten::scatter_add_", "[[1024,16],[],[16384,16],[16384,16]]", '["float","Scalar","long int","float"]',
          "[[16,1],[],[1,0],[16,1]]", '["","","",""]')
    d = describe(_ops([sc, sc], workload="gnn", backend="segment", max_in_degree=64.0, mean_in_degree=16.0,
                      dst_sorted=True))
    assert d.c3.iat[0] == pytest.approx(2.0)  # log2(max / mean in-degree)
    assert "|dst-sorted|@gnn" in d.group.iat[0]
    d = describe(_ops([sc], workload="gnn", backend="scatter", max_in_degree=16.0, mean_in_degree=16.0))
    assert "|dst-unsorted|@gnn" in d.group.iat[0] and d.c3.iat[0] == 0.0


def test_gat_over_csr_scatters_in_destination_order_whatever_the_run_records():
    # PyG's GATConv turns a CSR adjacency (rows = destinations) back into edge indices in row order: its
    # scatter's index is sorted by destination (checked on the CPU: every step of the index is >= 0), so its
    # scatters are keyed dst-sorted although the run recorded dst_sorted=False; its gathers keep the record
    sc = ("aten::scatter_add_", "[[1024,1,16],[],[16384,1,16],[16384,1,16]]",
          '["float","Scalar","long int","float"]', "[[16,16,1],[],[1,0,0],[16,16,1]]", '["","","",""]')
    ga = ("aten::gather", "[[1024,1],[],[16384,1],[],[16384,1]]", '["float","Scalar","long int","Scalar","float"]',
          "[[1,1],[],[1,1],[],[1,1]]", '["","","","",""]')
    d = describe(_ops([sc, ga], workload="gnn", backend="pyg:gat-csr", max_in_degree=64.0, mean_in_degree=16.0,
                      dst_sorted=False))
    assert "|dst-sorted|@gnn" in d.group.iat[0]
    assert "|dst-unsorted|@gnn" in d.group.iat[1]
    d = describe(_ops([sc], workload="gnn", backend="pyg:gat", max_in_degree=64.0, mean_in_degree=16.0,
                      dst_sorted=False))
    assert "|dst-unsorted|@gnn" in d.group.iat[0]


def test_describe_never_reads_durations():
    row = ("aten::mm", "[[64,64],[64,64]]", f"[{BF},{BF}]", "[[64,1],[64,1]]", '["",""]')
    a = describe(_ops([row], workload="gemm").assign(dur_us=1.0, flops=1.0, bytes=1.0))
    b = describe(_ops([row], workload="gemm").assign(dur_us=99.0, flops=7.0, bytes=7.0))
    pd.testing.assert_frame_equal(a, b)


def test_a_loop_dispatch_gathers_each_hit_experts_rows_in_expert_order():
    # x[top_x] records only x [8, 16] (its index list is not recorded): 3 and 5 rows for experts 0 and 2
    x = ("aten::index", "[[8,16],[]]", f'[{BF},"GenericList"]', "[[16,1],[]]", '["",""]')
    ops = _ops([x, x, x, x], workload="moe", dispatch="loop", run_id="r", point=0)
    ops["step"] = [0, 0, 1, 1]
    ops["ts_us"] = [20.0, 10.0, 30.0, 40.0]  # step 0's rows out of time order
    ops["expert_counts"] = [[3, 0, 5]] * 4
    d = describe(ops)
    assert d.L.tolist() == [5.0, 3.0, 3.0, 5.0]
    assert d.c0.tolist() == pytest.approx([math.log2(5), math.log2(3), math.log2(3), math.log2(5)])
    assert not d.rows_unknown.any()
    # a step whose calls do not pair with the hit experts one to one keeps the table's rows (8), unknown
    d = describe(ops.iloc[:3].assign(step=0))
    assert d.L.tolist() == [8.0] * 3 and d.rows_unknown.all()
    d = describe(ops.assign(dispatch="grouped"))
    assert d.L.tolist() == [8.0] * 4 and d.rows_unknown.all()


def test_tensor_list_ops_are_memory_calls_by_their_element_counts():
    cat = ("aten::cat", "[[[1024,64],[1,64]],[]]", '["TensorList","Scalar"]', "[[],[]]", '["","0"]')
    ops = _ops([cat, cat], workload="moe", dtype="bfloat16")
    ops["bytes"] = [262_272.0, 1.0]
    ops["flops_source"] = ["formula", "workload"]  # a stated cost never enters the features
    d = describe(ops)
    assert d.cls.tolist() == ["memory", "memory"] and d.group.iat[0].startswith("memory|aten::cat|list1|")
    assert d.numel0.iat[0] == 1025 * 64
    assert d.c0.iat[0] == pytest.approx(math.log2(1025 * 64)) and d.c2.iat[0] == 1.0  # two tensors
    # bytes: the formula's where recorded, else every element read and written at the run's dtype
    assert d["bytes"].tolist() == [262_272.0, 2 * 1025 * 64 * 2]


def test_a_loop_dispatchs_mask_copy_knows_its_working_set_and_where_its_segment_starts():
    # expert_mask[e] of a [T=100, k=2, E=16] int64 one-hot: a [2, 100] view, strides [16, 32], copied per expert
    cp = ("aten::copy_", "[[2,100],[2,100],[]]", '["long int","long int","Scalar"]', "[[100,1],[16,32],[]]",
          '["","",""]')
    counts = [10] * 4 + [20] * 12  # 4 * 10 + 12 * 20 = 280 = T * k rows
    ops = _ops([cp] * 16, workload="moe", dispatch="loop", run_id="r", point=0)
    ops["step"] = 0
    ops["ts_us"] = [float(i) for i in range(16)]
    ops["experts"], ops["d_model"], ops["d_ff"], ops["activation"], ops["dtype"] = 16, 64, 128, "swiglu", "bfloat16"
    ops["expert_counts"] = [counts] * 16
    d = describe(ops)
    mask = 100 * 2 * 16 * 8  # the whole one-hot, 25,600 bytes
    weights = 3 * 64 * 128 * 2  # gate, up and down, 49,152 bytes

    def acts(n):  # n tokens in and out (2 x 64) and three d_ff-wide intermediates, bf16
        return n * (2 * 64 + 3 * 128) * 2

    assert d.c2.iat[0] == pytest.approx(math.log2(mask))  # the first copy reads the mask just written
    assert d.c2.iat[1] == pytest.approx(math.log2(mask + weights + acts(10)))
    assert d.c2.iat[5] == pytest.approx(math.log2(mask + weights + acts(20)))
    # expert 8's 8-byte offset is 64: a segment no copy before it fetched
    assert d.c3.tolist() == [0.0] * 8 + [2.0] + [0.0] * 7
    # not a loop, or experts that do not pair with the calls: the size and alignment as for any copy
    other = describe(ops.assign(dispatch="padded"))
    assert other.c2.iat[1] == pytest.approx(math.log2(200)) and other.c3.iat[8] == other.c3.iat[1]
    assert describe(ops.assign(experts=17)).c2.iat[1] == pytest.approx(math.log2(200))


def test_a_batch_norm_is_placed_by_its_channels_forward_and_backward():
    f32 = '"float"'
    fwd = call("aten::native_batch_norm", "[[64,64,32,32],[64],[64],[64],[64],[],[],[]]",
               f'[{BF},{f32},{f32},{f32},{f32},"Scalar","Scalar","Scalar"]',
               "[[65536,1024,32,1],[1],[1],[1],[1],[],[],[]]")
    bwd = call("aten::native_batch_norm_backward", "[[64,64,32,32],[64,64,32,32],[64],[64],[64],[64],[64],[],[],[]]",
               f'[{BF},{BF},{f32},{f32},{f32},{f32},{f32},"Scalar","Scalar","ScalarList"]',
               "[[65536,1024,32,1],[65536,1024,32,1],[1],[1],[1],[1],[1],[],[],[]]")
    # 64 x 64 x 32 x 32 = 2^22 values over 64 = 2^6 channels: coordinates 22 and 6 for both directions
    # (the backward's second tensor is the input's gradient, 2^22 values, not its channels)
    assert fwd[3][0] == bwd[3][0] == 22.0 and fwd[3][2] == bwd[3][2] == 6.0
    # float32 weights beside bfloat16 activations (torch.autocast) are a group of their own, but the relaxed
    # group is the op in bfloat16, which the same op with bfloat16 weights shares
    same = call("aten::native_batch_norm", "[[64,64,32,32],[64],[64],[64],[64],[],[],[]]",
                f'[{BF},{BF},{BF},{BF},{BF},"Scalar","Scalar","Scalar"]',
                "[[65536,1024,32,1],[1],[1],[1],[1],[],[],[]]")
    assert fwd[1] == "norm|aten::native_batch_norm|bfloat16,float32|crrrr|"
    assert same[1] == "norm|aten::native_batch_norm|bfloat16|crrrr|"
    assert fwd[2] == same[2] == "norm|aten::native_batch_norm|bfloat16"


def test_a_list_op_with_plain_tensors_beside_its_lists_is_a_list_call():
    # fused AdamW under a GradScaler: its 0-d grad_scale and found_inf are tensors, and the call was described
    # by them (12 bytes, every coordinate 0) instead of by its lists: 2 tensors of 65,536 and 131,072 elements
    lists = "[[65536],[131072]]"
    dims = f"[{lists},{lists},{lists},{lists},[],[[],[]],[],[],[],[],[],[],[],[],[]]"
    types = '["TensorList","TensorList","TensorList","TensorList","TensorList","TensorList",' + \
            '"Scalar","Scalar","Scalar","Scalar","Scalar","Scalar","Scalar","float","float"]'
    cls, group, _, coords, q = call("aten::_fused_adamw_", dims, types, "[" + ",".join(["[]"] * 15) + "]")
    assert cls == "memory" and "|list5|" in group  # four parameter-shaped lists and the step counters
    assert coords[:3] == (math.log2(196608), math.log2(131072), 1.0)  # elements, largest tensor, tensors
    assert q["launches"] == 1 and q["numel0"] == 196608


def test_a_norms_units_and_block_steps_follow_what_its_op_reduces():
    f32 = '"float"'
    # batch norm, [16, 128, 12, 12]: 128 channels, each 16 images of 144 values; a block's 512 threads lie
    # 256 along a plane (the least power of two from 32 that covers 144) and 2 along the images:
    # ceil(16 / 2) x ceil(144 / 256) = 8 steps
    fwd = call("aten::native_batch_norm", "[[16,128,12,12],[128],[128],[128],[128],[],[],[]]",
               f'[{BF},{f32},{f32},{f32},{f32},"Scalar","Scalar","Scalar"]',
               "[[18432,144,12,1],[1],[1],[1],[1],[],[],[]]")
    assert fwd[0] == "norm" and (fwd[4]["R"], fwd[4]["W"], fwd[4]["L"]) == (128, 144, 8)
    # its backward, [96, 32, 24, 24]: 576 values a plane take all 512 lanes twice, one image at a time:
    # 96 x 2 = 192 steps
    bwd = call("aten::native_batch_norm_backward", "[[96,32,24,24],[96,32,24,24],[32],[32],[32],[32],[32],[],[],[]]",
               f'[{BF},{BF},{f32},{f32},{f32},{f32},{f32},"Scalar","Scalar","ScalarList"]',
               "[[18432,576,24,1],[18432,576,24,1],[1],[1],[1],[1],[1],[],[],[]]")
    assert (bwd[4]["R"], bwd[4]["W"], bwd[4]["L"]) == (32, 576, 192)
    # a 1-d batch norm, [256, 64]: one value per image, 32 lanes and 16 rows: ceil(256 / 16) = 16 steps
    flat = call("aten::native_batch_norm", "[[256,64],[64],[64],[64],[64],[],[],[]]",
                f'[{BF},{f32},{f32},{f32},{f32},"Scalar","Scalar","Scalar"]', "[[64,1],[1],[1],[1],[1],[],[],[]]")
    assert (flat[4]["R"], flat[4]["W"], flat[4]["L"]) == (64, 1, 16)
    # group norm, [8, 64, 28, 28] in 32 groups (its scalars N, C, HxW, group): 8 x 32 = 256 units of
    # 2 channels x 784 = 1,568 values, ceil(1568 / 512) = 4 steps, forward and backward
    gn = call("aten::native_group_norm", "[[8,64,28,28],[64],[64],[],[],[],[],[]]", f'[{BF},{BF},{BF},"Scalar",'
              '"Scalar","Scalar","Scalar","Scalar"]', "[[50176,784,28,1],[1],[1],[],[],[],[],[]]",
              '["","","","8","64","784","32","1e-05"]')
    gnb = call("aten::native_group_norm_backward", "[[8,64,28,28],[8,64,28,28],[8,32],[8,32],[64],[],[],[],[],[]]",
               f'[{BF},{BF},{BF},{BF},{BF},"Scalar","Scalar","Scalar","Scalar","ScalarList"]',
               "[[50176,784,28,1],[50176,784,28,1],[32,1],[32,1],[1],[],[],[],[],[]]",
               '["","","","","","8","64","784","32","[True, True, True]"]')
    assert (gn[4]["R"], gn[4]["W"], gn[4]["L"]) == (gnb[4]["R"], gnb[4]["W"], gnb[4]["L"]) == (256, 1568, 4)
    # layer norm over the last 1,024 of [4, 256, 1024] (its normalized shape, a list scalar): 1,024 rows,
    # 2 steps each; its backward names the shape third, after its mask-free tensors
    ln = call("aten::native_layer_norm", "[[4,256,1024],[],[1024],[1024],[]]", f'[{BF},"ScalarList",{BF},{BF},"Scalar"]',
              "[[262144,1024,1],[],[1],[1],[]]", '["","[1024]","","","1e-05"]')
    lnb = call("aten::native_layer_norm_backward", "[[4,256,1024],[4,256,1024],[],[4,256,1],[4,256,1],[1024],[1024],[]]",
               f'[{BF},{BF},"ScalarList","float","float",{BF},{BF},"ScalarList"]',
               "[[262144,1024,1],[262144,1024,1],[],[256,1,1],[256,1,1],[1],[1],[]]",
               '["","","[1024]","","","","","[True, True, True]"]')
    assert (ln[4]["R"], ln[4]["W"], ln[4]["L"]) == (lnb[4]["R"], lnb[4]["W"], lnb[4]["L"]) == (1024, 1024, 2)
    # the coordinates stay the sizes (log2 values, last dim, channels)
    assert fwd[3][:3] == (math.log2(16 * 128 * 144), math.log2(12), 7.0)


def test_an_ingested_traces_dtype_does_not_name_its_tensor_lists():
    # a foreach optimizer call whose kernels name no dtype (cost_dtype null): a wlprof run's dtype names its lists
    # (the optim workload in bfloat16 updates bfloat16 parameters); an ingested trace's dtype is its matrix
    # kernels' (bfloat16 under autocast) while its optimizer's parameters and states are float32
    import numpy as np
    import pandas as pd

    from wlprof.predict.calls import _list_dtypes

    ops = pd.DataFrame({"workload": ["optim", "ingest", "ingest"], "dtype": ["bfloat16", "bfloat16", "bfloat16"],
                        "cost_dtype": [None, None, "float32"]})
    assert list(_list_dtypes(ops, np.arange(3))) == ["bfloat16", "", "float32"]

"""Cost formulas where a mutation run changed an operand or a check without a test failing: the whole
Cost of a bmm (its dtype and written bytes), the attention FLOPs' shape checks and a value head size
unlike the key's, and ceil_mode pooling whose last window would start in the right padding."""

from __future__ import annotations

import pytest
import torch
from cost_calls import BF16, T, op
from torch.utils.flop_counter import FlopCounterMode

import wlprof.cost  # noqa: F401  (registers every formula)
from wlprof.cost import MATRIX, cost_of
from wlprof.cost.attention import bwd_flops, fwd_flops
from wlprof.cost.gemm import _bmm
from wlprof.cost.pooling import out_size
from wlprof.cost.registry import Cost, TensorArg


def test_bmm_cost_whole():
    # bmm a [2, 3, 4] x b [2, 4, 5] bf16: FLOPs 2 * 2 * 3 * 5 * 4 = 240; reads 2 * 24 + 2 * 40 = 128,
    # writes the [2, 3, 5] result: 2 * 30 = 60
    c = cost_of(op("aten::bmm", T([2, 3, 4], BF16), T([2, 4, 5], BF16)))
    assert c == Cost(240, 128 + 60, MATRIX, "bfloat16", written=60)
    with FlopCounterMode(display=False) as fc:
        torch.bmm(torch.zeros(2, 3, 4, dtype=torch.bfloat16), torch.zeros(2, 4, 5, dtype=torch.bfloat16))
    assert fc.get_total_flops() == c.flops
    with pytest.raises(ValueError, match="^batch or inner dimensions differ$"):
        _bmm(TensorArg((2, 3, 4), "float"), TensorArg((3, 4, 5), "float"))  # batch 2 vs 3


def test_attention_flops_with_a_value_head_size_unlike_the_keys():
    # (B, H, S, D): q, k [1, 2, 8, 16], v [1, 2, 8, 8]: QK^T 2*1*2*8*8*16 = 4096, PV 2*1*2*8*8*8 = 2048
    q = k = (1, 2, 8, 16)
    v = (1, 2, 8, 8)
    assert fwd_flops(q, k, v) == 4096 + 2048
    # backward: 2*B*H*Sq*Sk*(3*D + 2*Dv) = 256 * (48 + 16)
    assert bwd_flops(q, k, v) == 256 * 64
    # one dimension of the key unlike the query's (head size) or the value's (sequence) is refused
    for bad_k in ((1, 2, 8, 12), (1, 2, 6, 16)):
        for f in (fwd_flops, bwd_flops):
            with pytest.raises(ValueError, match="^key and query or value shapes do not match$"):
                f(q, bad_k, v)


@pytest.mark.parametrize(("size", "k", "s", "p"), [(6, 3, 2, 1), (5, 2, 2, 1), (7, 3, 3, 1), (10, 4, 3, 2)])
def test_ceil_mode_output_sizes_as_torch_gives_them(size, k, s, p):
    # (6, 3, 2, 1): ceil((6 + 2 - 2 - 1) / 2) + 1 = 4, and the 4th window starts at 3 * 2 = 6 < 6 + 1, inside the
    # padded input: kept (it would be dropped if it started at or beyond size + p)
    want = torch.nn.functional.max_pool1d(torch.zeros(1, 1, size), k, s, p, ceil_mode=True).shape[-1]
    assert out_size(size, k, s, p, 1, True) == want
    assert out_size(6, 3, 2, 1, 1, True) == 4


def test_row_and_list_helpers():
    from wlprof.cost.comm import size_bytes
    from wlprof.cost.gemm import _as_list
    from wlprof.cost.indexing import _row_numel

    # the elements of one slice along dim: [4, 6] along 1 (or -1) is 4, along 0 is 6; none of a 0-d
    # tensor or of a zero-size dim
    x, none, zero = TensorArg((4, 6), "float"), TensorArg((), "float"), TensorArg((4, 0), "float")
    got = [_row_numel(x, 1), _row_numel(x, -1), _row_numel(x, 0), _row_numel(none, 0), _row_numel(zero, 1)]
    assert got == [4, 4, 6, 0, 0] and {type(v) for v in got} == {int}
    assert _as_list(3, 2, 1) == [3, 3] and _as_list(None, 2, 1) == [1, 1]
    assert _as_list([2], 3, 1) == [2, 2, 2] and _as_list([1, 2], 2, 1) == [1, 2]
    # no size without a collective or an element size
    assert size_bytes({"collective": None, "in_nelems": 4, "out_nelems": 4, "dtype": "Float"}, 2) is None
    assert size_bytes({"collective": "all_reduce", "in_nelems": 4, "out_nelems": 4, "dtype": None}, 2) is None


def test_convolution_arguments_not_recorded_and_transposed_groups():
    from cost_calls import NONE, S

    # _convolution, not transposed, output_padding [0, 0] (a non-empty list, not the flag): x [2,4,9,9],
    # w [6,4,3,3], stride 2, padding 1: out 5x5; flops 2*2*6*25*4*9 = 21600; bytes 4*(648 + 216) + 4*2*6*25
    c = cost_of(op("aten::_convolution", T([2, 4, 9, 9]), T([6, 4, 3, 3]), NONE, S([2, 2]), S([1, 1]), S([1, 1]),
                   S(False), S([0, 0]), S(1), S(False), S(False), S(True), S(True)))
    assert (c.flops, c.bytes) == (21600, 3456 + 1200)
    # _slow_conv2d_forward with stride and padding recorded as [1, 1], [0, 0]: out 7x7; not recorded (a trace
    # without Concrete Inputs): the output size, so the cost, unknown
    c = cost_of(op("aten::_slow_conv2d_forward", T([1, 4, 9, 9]), T([6, 4, 3, 3]), S([3, 3]), NONE, S([1, 1]),
                   S([0, 0])))
    assert c.flops == 2 * 1 * 6 * 7 * 7 * 4 * 3 * 3
    assert cost_of(op("aten::_slow_conv2d_forward", T([1, 4, 9, 9]), T([6, 4, 3, 3]), S([3, 3]), NONE, NONE,
                      NONE)) is None
    # cudnn_convolution_transpose(x, w, padding, output_padding, stride, dilation, groups, ...): x [2,4,5,5],
    # w [C_in 4, C_out/g 3, 2, 2], groups 2: C_out 6; out (5-1)*2 - 2 + (2-1) + 1 + 1 = 9;
    # flops 2*N*Hin*Win*C_in*(C_out/g)*kh*kw = 2*2*25*4*3*4 = 4800; reads 800 + 192, writes 4*2*6*81 = 3888
    x, w = T([2, 4, 5, 5]), T([4, 3, 2, 2])

    def tconv(padding, out_pad, groups):
        return cost_of(op("aten::cudnn_convolution_transpose", x, w, S(padding), out_pad, S([2, 2]), S([1, 1]),
                          groups, S(False), S(False), S(True)))

    c = tconv([1, 1], S([1, 1]), S(2))
    assert (c.flops, c.bytes, c.written) == (4800, 992 + 3888, 3888)
    # groups 1: C_out 3 (4*2*3*81 = 1944 written); output_padding 0: out 8x8; either not recorded: unknown
    assert tconv([1, 1], S([1, 1]), S(1)).written == 1944
    assert tconv([1, 1], S([0, 0]), S(2)).written == 4 * 2 * 6 * 64
    assert tconv([1, 1], S([1, 1]), NONE) is None and tconv([1, 1], NONE, S(2)) is None
    assert tconv([1, 1, 1], S([1, 1]), S(2)) is None  # three paddings for two spatial dims
    # no spatial dim at all: unknown
    assert cost_of(op("aten::mkldnn_convolution", T([2, 4]), T([6, 4]), NONE, S([]), S([]), S([]), S(1))) is None


def test_scatter_and_convolution_costs_whole():
    from cost_calls import I64, S

    from wlprof.cost import VECTOR

    dst, idx, src = T([3, 5]), T([1, 5], I64), T([4, 5])
    # scatter_add_: 5 adds; reads idx 40 + the 5 indexed src values 20, the 5 touched dst values 20;
    # writes them 20
    assert cost_of(op("aten::scatter_add_", dst, S(0), idx, src)) == Cost(5, 100, VECTOR, "float32", written=20)
    # scatter_ without a reduce: no arithmetic, dst written only; with a value, no src read
    assert cost_of(op("aten::scatter_", dst, S(0), idx, src)) == Cost(0, 80, VECTOR, "float32", written=20)
    assert cost_of(op("aten::scatter_", dst, S(0), idx, S(1.0))) == Cost(0, 60, VECTOR, "float32", written=20)
    # mkldnn_convolution of test_cost_formulas' CASES: out [2, 6, 5, 5] fp32 written, 1200 bytes
    c = cost_of(op("aten::mkldnn_convolution", T([2, 4, 9, 9]), T([6, 2, 3, 3]), T([6]), S([1, 1]), S([2, 2]),
                   S([1, 1]), S(2)))
    assert c == Cost(10800, 4248, MATRIX, "float32", written=1200)


def test_annotate_column_helpers():
    from wlprof.cost.annotate import _json, _obj

    assert _json(None) is None and _json([[64, 128], [128]]) == "[[64,128],[128]]"  # compact
    assert _json({"a": 1}) == '{"a":1}'
    name = "sm90_xmma_gemm_bf16bf16_bf16f32"
    col = _obj([name, "mm"])
    # object dtype, the rows holding the very string objects given (not copies into an Arrow buffer)
    assert col.dtype == object and col.tolist() == [name, "mm"] and col[0] is name
    assert _obj(["gemm", None]).tolist() == ["gemm", None]


def test_segment_reduce_by_offsets_and_by_lengths():
    from cost_calls import I64, NONE, S

    from wlprof.cost import VECTOR

    # data [12, 3] fp32 in 4 segments by offsets [5] (int64): 36 combines; reads 144 + 40, writes the
    # 4 x 3 output 48 -> 232 bytes. The reduce string is not recorded: no mean divides counted.
    off = op("aten::segment_reduce", T([12, 3]), NONE, NONE, NONE, T([5], I64), S(0), S(True), S(0.0))
    assert cost_of(off) == Cost(36, 232, VECTOR, "float32", written=48)
    # by lengths [4] along axis 1 of [2, 12]: 24 combines; reads 96 + 32, writes 2 x 4 = 8 values (32)
    by_len = op("aten::segment_reduce", T([2, 12]), NONE, T([4], I64), NONE, NONE, S(1), S(False), NONE)
    assert cost_of(by_len) == Cost(24, 160, VECTOR, "float32", written=32)
    # a trace that records the reduce string: a mean adds its 4 x 3 = 12 divides
    mean = op("aten::segment_reduce", T([12, 3]), S("mean"), NONE, NONE, T([5], I64), S(0), S(True), S(0.0))
    assert cost_of(mean) == Cost(48, 232, VECTOR, "float32", written=48)
    # neither bounds tensor recorded: unknown
    assert cost_of(op("aten::segment_reduce", T([12, 3]), NONE, NONE, NONE, NONE, S(0))) is None


def test_quantized_gemms():
    from cost_calls import I32, S

    i8 = "signed char"
    # _int_mm [16, 64] @ [64, 32] int8 -> int32: 2*16*32*64 = 65,536; reads 1,024 + 2,048, writes 2,048
    assert cost_of(op("aten::_int_mm", T([16, 64], i8), T([64, 32], i8))) == Cost(
        65_536, 1024 + 2048 + 2048, MATRIX, "int8", written=2048)
    # _weight_int8pack_mm(A [16, 64] bf16, B [32, 64] int8, scales [32] bf16): reads 2,048 + 2,048 + 64,
    # writes 16*32*2 = 1,024
    assert cost_of(op("aten::_weight_int8pack_mm", T([16, 64], BF16), T([32, 64], i8), T([32], BF16))) == Cost(
        65_536, 2048 + 2048 + 64 + 1024, MATRIX, "bfloat16", written=1024)
    # _weight_int4pack_mm(A [16, 64] bf16, packed B, group 32, scales and zeros [2, 32, 2] bf16): N = 32,
    # the weights 32*64/2 = 1,024 bytes; reads 2,048 + 1,024 + 256, writes 1,024
    c = cost_of(op("aten::_weight_int4pack_mm", T([16, 64], BF16), T([4, 1, 32, 4], I32), S(32), T([2, 32, 2], BF16)))
    assert c == Cost(65_536, 2048 + 1024 + 256 + 1024, MATRIX, "bfloat16", written=1024)


def test_scaled_grouped_mm():
    from cost_calls import F32, I32, NONE, S

    fp8 = "c10::Float8_e4m3fn"
    # a [64, 128] fp8, b [4, 128, 256] fp8 (4 experts), row scales [64] and [4, 256] fp32, offs [4] int32:
    # 2*64*128*256 = 4,194,304 FLOPs; reads 8,192 + 131,072 + 16 + 256 + 4,096, writes 64*256 bf16 = 32,768
    c = cost_of(op("aten::_scaled_grouped_mm", T([64, 128], fp8), T([4, 128, 256], fp8), T([64], F32),
                   T([4, 256], F32), T([4], I32), NONE, NONE, NONE, S(False)))
    assert c == Cost(4_194_304, 8192 + 131_072 + 16 + 256 + 4096 + 32_768, MATRIX, "float8_e4m3fn", written=32_768)

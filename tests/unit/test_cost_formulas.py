"""Table-driven tests of the cost formulas: FLOPs and bytes derived by hand per op family.

Each call is built the way torch.profiler records it with `record_shapes=True`
(`Input Dims`, `Input type`, `Input Strides`, `Concrete Inputs`), argument lists
copied from real CPU traces of torch 2.13 where the op runs there. The expected
numbers are worked out in the comment beside them (fp32 = 4 bytes, bf16 = 2,
int64 = 8, bool = 1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest

import wlprof.cost as cost
from wlprof.cost import MATRIX, VECTOR, Cost, OpCall, TensorArg, cost_of
from wlprof.cost.registry import formula, register_wrapper

BF16, F32, F64, I64, I32, BOOL, FP8 = (
    "c10::BFloat16", "float", "double", "long int", "int", "bool", "c10::Float8_e4m3fn",
)


# ---------------------------------------------------------------- call builders


@dataclass(frozen=True)
class _Arg:
    dims: list
    type: str
    strides: list
    concrete: str


def T(dims, type=F32, strides=None) -> _Arg:
    """A tensor input; contiguous strides unless given (0 marks a broadcast dim)."""
    if strides is None:
        strides, acc = [], 1
        for d in reversed(dims):
            strides.insert(0, acc)
            acc *= d
    return _Arg(list(dims), type, list(strides), "")


def S(value) -> _Arg:
    """A scalar input as the profiler writes it: '2', '0.', 'False', '[1, 1]' ..."""
    text = str(value) if not isinstance(value, bool) else ("True" if value else "False")
    kind = "ScalarList" if isinstance(value, list) else "Scalar"
    return _Arg([], kind, [], text)


NONE = _Arg([], "", [], "")  # an absent optional (None) or a string argument


def TL(*dims) -> _Arg:
    return _Arg([list(d) for d in dims], "TensorList", [[] for _ in dims], "")


def op(name: str, *args: _Arg, ancestors=()) -> OpCall:
    return OpCall.from_args(
        name,
        {
            "Input Dims": [a.dims for a in args],
            "Input type": [a.type for a in args],
            "Input Strides": [a.strides for a in args],
            "Concrete Inputs": [a.concrete for a in args],
        },
        ancestors,
    )


# ---------------------------------------------------------------- the table

CASES = [
    # ---- matrix products
    # mm [4,5]x[5,6] fp32: flops 2*4*5*6 = 240; bytes 4*(4*5 + 5*6 + 4*6) = 296
    ("mm", op("aten::mm", T([4, 5]), T([5, 6])), 240, 296),
    # addmm bias[6] + [4,5]x[5,6] (nn.Linear: weight.t() has strides [1,5]) fp32:
    # flops 2*4*5*6 = 240 (the bias add is not counted); bytes 4*(6 + 4*5 + 5*6 + 4*6) = 320
    ("addmm", op("aten::addmm", T([6]), T([4, 5]), T([5, 6], strides=[1, 5]), S(1), S(1)), 240, 320),
    # bmm [3,4,5]x[3,5,2] fp32: flops 2*3*4*5*2 = 240; bytes 4*(3*4*5 + 3*5*2 + 3*4*2) = 4*114 = 456
    ("bmm", op("aten::bmm", T([3, 4, 5]), T([3, 5, 2])), 240, 456),
    # baddbmm bias[3,4,2] + [3,4,5]x[3,5,2] bf16: flops 2*3*4*5*2 = 240;
    # bytes 2*(24 + 60 + 30 + 24) = 276
    ("baddbmm", op("aten::baddbmm", T([3, 4, 2], BF16), T([3, 4, 5], BF16), T([3, 5, 2], BF16), S(1), S(1)),
     240, 276),
    # _grouped_mm 2-D a[6,8] x 3-D b[2,8,16] bf16, int32 offs[2] (MoE forward; offs[-1] = 6 assumed):
    # flops 2*6*8*16 = 1536; bytes 2*6*8 + 2*2*8*16 + 4*2 + 2*6*16 = 96 + 512 + 8 + 192 = 808
    ("grouped_mm_2d_3d", op("aten::_grouped_mm", T([6, 8], BF16), T([2, 8, 16], BF16, strides=[128, 1, 8]),
                            T([2], I32), NONE, NONE), 1536, 808),
    # _grouped_mm 3-D a[3,8,8] x 2-D b[8,16] bf16, offs[3] split N: out [8,16];
    # flops 2*8*8*16 = 2048; bytes 2*3*8*8 + 2*8*16 + 4*3 + 2*8*16 = 384 + 256 + 12 + 256 = 908
    ("grouped_mm_3d_2d", op("aten::_grouped_mm", T([3, 8, 8], BF16), T([8, 16], BF16, strides=[1, 8]),
                            T([3], I32), NONE, NONE), 2048, 908),
    # _grouped_mm 2-D a[8,16] x 2-D b[16,8] bf16, offs[2] split K: out [2,8,8];
    # flops 2*8*16*8 = 2048; bytes 2*128 + 2*128 + 4*2 + 2*2*8*8 = 256 + 256 + 8 + 256 = 776
    ("grouped_mm_2d_2d", op("aten::_grouped_mm", T([8, 16], BF16), T([16, 8], BF16, strides=[1, 16]),
                            T([2], I32), NONE, NONE), 2048, 776),
    # _grouped_mm 3-D x 3-D, no offs: batched [2,4,8]x[2,8,4] bf16: flops 2*2*4*8*4 = 512;
    # bytes 2*(64 + 64 + 2*4*4) = 320
    ("grouped_mm_3d_3d", op("aten::_grouped_mm", T([2, 4, 8], BF16), T([2, 8, 4], BF16), NONE, NONE, NONE),
     512, 320),
    # _scaled_mm fp8 a[16,32] x b[32,16], fp32 scalar scales, out_dtype 15 (bf16):
    # flops 2*16*32*16 = 16384; bytes 1*(16*32 + 32*16) + 4 + 4 + 2*16*16 = 1024 + 8 + 512 = 1544
    ("scaled_mm_bf16_out", op("aten::_scaled_mm", T([16, 32], FP8), T([32, 16], FP8, strides=[1, 32]),
                              T([], F32), T([], F32), NONE, NONE, S(15), S(False)), 16384, 1544),
    # _scaled_mm with out_dtype None: output in a's dtype (fp8): bytes 1024 + 8 + 1*16*16 = 1288
    ("scaled_mm_fp8_out", op("aten::_scaled_mm", T([16, 32], FP8), T([32, 16], FP8, strides=[1, 32]),
                             T([], F32), T([], F32), NONE, NONE, NONE, S(False)), 16384, 1288),
    # mv [4,5]x[5] fp32: flops 2*4*5 = 40; bytes 4*(20 + 5 + 4) = 116
    ("mv", op("aten::mv", T([4, 5]), T([5])), 40, 116),
    # dot [5].[5] fp32: flops 2*5 = 10 (5 multiplies, 5 adds); bytes 4*(5 + 5 + 1) = 44
    ("dot", op("aten::dot", T([5]), T([5])), 10, 44),
    # ---- convolutions (implementation ops; argument orders as the CPU trace records them)
    # mkldnn_convolution(x[2,4,9,9], w[6,2,3,3], b[6], padding [1,1], stride [2,2], dilation [1,1], groups 2):
    # out spatial (9 + 2*1 - 1*(3-1) - 1)//2 + 1 = 5; flops 2*N*Cout*Hout*Wout*(Cin/g)*kh*kw
    # = 2*2*6*5*5*2*3*3 = 10800; bytes 4*(2*4*81 + 6*2*9 + 6) + 4*2*6*5*5 = 3048 + 1200 = 4248
    ("mkldnn_convolution", op("aten::mkldnn_convolution", T([2, 4, 9, 9]), T([6, 2, 3, 3]), T([6]),
                              S([1, 1]), S([2, 2]), S([1, 1]), S(2)), 10800, 4248),
    # mkldnn_convolution 1-D as conv1d records it (unsqueezed to 2-D): x[2,4,1,10], w[6,2,1,3],
    # padding [0,1], stride [1,2], dilation [1,2], groups 2: Wout = (10 + 2 - 2*2 - 1)//2 + 1 = 4;
    # flops 2*2*6*1*4*2*1*3 = 576; bytes 4*(80 + 36) + 4*2*6*4 = 464 + 192 = 656
    ("mkldnn_convolution_1d", op("aten::mkldnn_convolution", T([2, 4, 1, 10]), T([6, 2, 1, 3]), NONE,
                                 S([0, 1]), S([1, 2]), S([1, 2]), S(2)), 576, 656),
    # _slow_conv2d_forward(x[1,4,9,9] f64, w[6,4,3,3], kernel [3,3], bias None, stride [1,1], padding [0,0]):
    # out 7x7; flops 2*1*6*7*7*4*3*3 = 21168; bytes 8*(324 + 216) + 8*(6*49) = 4320 + 2352 = 6672
    ("slow_conv2d_forward", op("aten::_slow_conv2d_forward", T([1, 4, 9, 9], F64), T([6, 4, 3, 3], F64),
                               S([3, 3]), NONE, S([1, 1]), S([0, 0])), 21168, 6672),
    # slow_conv_transpose2d(x[2,4,5,5] f64, w[4,3,3,3], kernel, bias[3], stride [2,2], padding [1,1],
    # output_padding [1,1], dilation [2,2]): out (5-1)*2 - 2 + 2*(3-1) + 1 + 1 = 12;
    # flops 2*N*Hin*Win*Cin*(Cout/g)*kh*kw = 2*2*25*4*3*9 = 10800;
    # bytes 8*(200 + 108 + 3) + 8*2*3*12*12 = 2488 + 6912 = 9400
    ("slow_conv_transpose2d", op("aten::slow_conv_transpose2d", T([2, 4, 5, 5], F64), T([4, 3, 3, 3], F64),
                                 S([3, 3]), T([3], F64), S([2, 2]), S([1, 1]), S([1, 1]), S([2, 2])),
     10800, 9400),
    # _convolution, transposed (the CPU's oneDNN conv_transpose2d has no implementation op nested):
    # x[2,4,5,5], w[4,3,3,3], stride [2,2], padding [1,1], dilation [1,1], transposed, output_padding
    # [1,1], groups 1: out (5-1)*2 - 2 + 2 + 1 + 1 = 10; flops 2*2*25*4*3*9 = 10800;
    # bytes 4*(200 + 108) + 4*2*3*10*10 = 1232 + 2400 = 3632
    ("_convolution_transposed", op("aten::_convolution", T([2, 4, 5, 5]), T([4, 3, 3, 3]), NONE,
                                   S([2, 2]), S([1, 1]), S([1, 1]), S(True), S([1, 1]), S(1),
                                   S(False), S(False), S(True), S(True)), 10800, 3632),
    # ---- unary elementwise, [4,5] = 20 elements
    # clamp_min (what relu runs): 1/elem: flops 20; bytes 4*20 + 4*20 = 160
    ("clamp_min", op("aten::clamp_min", T([4, 5]), S(0)), 20, 160),
    # relu itself (a dispatcher over clamp_min in traces): same count, flops 20; bytes 160
    ("relu", op("aten::relu", T([4, 5])), 20, 160),
    # gelu bf16, approximate 'none': 20/elem: flops 20*20 = 400; bytes 2*20 + 2*20 = 80
    ("gelu", op("aten::gelu", T([4, 5], BF16), NONE), 400, 80),
    # silu: 5/elem: flops 100; bytes 160
    ("silu", op("aten::silu", T([4, 5])), 100, 160),
    # sigmoid: 4/elem: flops 80; bytes 160
    ("sigmoid", op("aten::sigmoid", T([4, 5])), 80, 160),
    # tanh: 1/elem: flops 20; bytes 160
    ("tanh", op("aten::tanh", T([4, 5])), 20, 160),
    # exp: 1/elem: flops 20; bytes 160
    ("exp", op("aten::exp", T([4, 5])), 20, 160),
    # exp(x, out=y) records y as a 2nd input: an output, not read: flops 20; bytes 160
    ("exp_out", op("aten::exp", T([4, 5]), T([4, 5])), 20, 160),
    # abs out-variant nested in the CPU's abs, out still empty ([0]): flops 4; bytes 4*4 + 4*4 = 32
    ("abs_out_empty", op("aten::abs", T([4]), T([0])), 4, 32),
    # ---- binary elementwise
    # add [4,5] + [5] (broadcast), alpha 1: flops 20; bytes 4*(20 + 5) + 4*20 = 180
    ("add_broadcast", op("aten::add", T([4, 5]), T([5]), S(1)), 20, 180),
    # add [4,5] + y.expand(4,5) (strides [0,1]: 5 stored elements): flops 20; bytes 4*(20 + 5) + 4*20 = 180
    ("add_expanded_zero_stride", op("aten::add", T([4, 5]), T([4, 5], strides=[0, 1]), S(1)), 20, 180),
    # add with alpha=2: a multiply more: 2/elem: flops 40; bytes 180
    ("add_alpha2", op("aten::add", T([4, 5]), T([5]), S(2)), 40, 180),
    # add(x, y, out=z): z (recorded after alpha) is not an operand: flops 20; bytes 180
    ("add_out", op("aten::add", T([4, 5]), T([5]), S(1), T([4, 5])), 20, 180),
    # sub_ in place, alpha 0.5: flops 2*20 = 40; bytes 4*(20 + 20) + 4*20 = 240
    ("sub_inplace_alpha", op("aten::sub_", T([4, 5]), T([4, 5]), S(0.5)), 40, 240),
    # gt [4,5] > [5] fp32 writes bool: flops 20; bytes 4*(20 + 5) + 1*20 = 120
    ("gt_bool_out", op("aten::gt", T([4, 5]), T([5])), 20, 120),
    # eq [4,5] == scalar: flops 20; bytes 4*20 + 1*20 = 100
    ("eq_scalar", op("aten::eq", T([4, 5]), S(0)), 20, 100),
    # where(cond bool[4,5], x[4,5], y[5]) fp32: 1 select/elem: flops 20;
    # bytes 1*20 + 4*20 + 4*5 + 4*20 = 200
    ("where", op("aten::where", T([4, 5], BOOL), T([4, 5]), T([5])), 20, 200),
    # ---- data movement
    # copy_ float -> bf16 (x.to(bfloat16)): flops 0; bytes read 4*20 + write 2*20 = 120
    ("copy_f32_to_bf16", op("aten::copy_", T([4, 5], BF16), T([4, 5]), S(False)), 0, 120),
    # copy_ of an expanded bias (addmm on the CPU): src [4,3] strides [0,1] stores 3:
    # bytes 4*3 + 4*12 = 60
    ("copy_expanded_src", op("aten::copy_", T([4, 3]), T([4, 3], strides=[0, 1]), S(False)), 0, 60),
    # fill_ [4,5] fp32: writes 20: bytes 80
    ("fill_", op("aten::fill_", T([4, 5]), S(1.0)), 0, 80),
    # ---- softmax, normalization
    # _softmax [4,5] fp32, dim 1, half_to_float False: 5/elem: flops 100; bytes 80 + 80 = 160
    ("softmax", op("aten::_softmax", T([4, 5]), S(1), S(False)), 100, 160),
    # _softmax bf16 with half_to_float: writes fp32: flops 100; bytes 2*20 + 4*20 = 120
    ("softmax_half_to_float", op("aten::_softmax", T([4, 5], BF16), S(1), S(True)), 100, 120),
    # native_layer_norm x[4,5], shape [5], weight[5], bias[5]: (5 + 1 + 1)/elem: flops 7*20 = 140;
    # bytes 4*(20 + 5 + 5) + 4*20 + mean,rstd 2*4 rows*4 = 120 + 80 + 32 = 232
    ("native_layer_norm", op("aten::native_layer_norm", T([4, 5]), S([5]), T([5]), T([5]), S(1e-05)),
     140, 232),
    # native_layer_norm without affine: 5/elem: flops 100; bytes 80 + 80 + 32 = 192
    ("native_layer_norm_no_affine", op("aten::native_layer_norm", T([4, 5]), S([5]), NONE, NONE, S(1e-05)),
     100, 192),
    # rms_norm x[4,5], shape [5], weight[5], eps None: (3 + 1)/elem: flops 80;
    # bytes 4*(20 + 5) + 4*20 + rstd 4 rows*4 = 100 + 80 + 16 = 196
    ("rms_norm", op("aten::rms_norm", T([4, 5]), S([5]), T([5]), NONE), 80, 196),
    # ---- reductions (overloads told apart by argument count)
    # sum(self, dtype=None) [4,5]: everything: flops 20; bytes 80 + 4*1 = 84
    ("sum_all", op("aten::sum", T([4, 5]), NONE), 20, 84),
    # sum.dim_IntList(self, [1], keepdim False, dtype None): out 4: flops 20; bytes 80 + 4*4 = 96
    ("sum_dim", op("aten::sum", T([4, 5]), S([1]), S(False), NONE), 20, 96),
    # sum.IntList_out as mean runs it (out tensor last, dtype 6): out 1: flops 20; bytes 80 + 4 = 84
    ("sum_dim_out", op("aten::sum", T([4, 5]), S([0, 1]), S(True), S(6), T([1, 1])), 20, 84),
    # sum(self, dtype=7 float64): out 1 double: flops 20; bytes 80 + 8 = 88
    ("sum_dtype_f64", op("aten::sum", T([4, 5]), S(7)), 20, 88),
    # sum of int32[3]: accumulates into int64: flops 3; bytes 4*3 + 8 = 20
    ("sum_int32_to_int64", op("aten::sum", T([3], I32), NONE), 3, 20),
    # mean.dim([0,1], keepdim True): out 1: flops 20 adds + 1 divide = 21; bytes 80 + 4 = 84
    ("mean_dims", op("aten::mean", T([4, 5]), S([0, 1]), S(True), NONE), 21, 84),
    # mean.dim([1]): out 4: flops 20 + 4 = 24; bytes 80 + 16 = 96
    ("mean_dim1", op("aten::mean", T([4, 5]), S([1]), S(False), NONE), 24, 96),
    # max.dim(self, 1, keepdim False): values and int64 indices: flops 20; bytes 80 + 4*4 + 8*4 = 128
    ("max_dim", op("aten::max", T([4, 5]), S(1), S(False)), 20, 128),
    # max(self): one value, no indices: flops 20; bytes 80 + 4 = 84
    ("max_all", op("aten::max", T([4, 5])), 20, 84),
    # argmax(self, dim=None, keepdim False): one int64: flops 20; bytes 80 + 8 = 88
    ("argmax_all", op("aten::argmax", T([4, 5]), NONE, S(False)), 20, 88),
    # argmax(self, 0, False): 5 int64: flops 20; bytes 80 + 8*5 = 120
    ("argmax_dim0", op("aten::argmax", T([4, 5]), S(0), S(False)), 20, 120),
    # amax(self, [], False): [] reduces everything: flops 20; bytes 84
    ("amax_empty_dims", op("aten::amax", T([4, 5]), S([]), S(False)), 20, 84),
    # count_nonzero.dim_IntList(self, [1]): 4 int64 counts: flops 20; bytes 80 + 8*4 = 112
    ("count_nonzero_dim", op("aten::count_nonzero", T([4, 5]), S([1])), 20, 112),
    # var_mean.correction(self, [1], 1, False): 4/elem + 1 divide per row: flops 4*20 + 4 = 84;
    # bytes 80 + 2 outputs*4*4 = 112
    ("var_mean_dim", op("aten::var_mean", T([4, 5]), S([1]), S(1), S(False)), 84, 112),
    # linalg_vector_norm(self, 2, [1], False, None): 2/elem: flops 40; bytes 80 + 16 = 96
    ("vector_norm_dim", op("aten::linalg_vector_norm", T([4, 5]), S(2), S([1]), S(False), NONE), 40, 96),
    # any(bool[4,5]): flops 20; bytes 1*20 + 1 = 21
    ("any_all", op("aten::any", T([4, 5], BOOL)), 20, 21),
    # cumsum int64[3], dim 0: flops 3; bytes 8*3 + 8*3 = 48
    ("cumsum_int64", op("aten::cumsum", T([3], I64), S(0), NONE), 3, 48),
    # cumsum int32[3]: output widened to int64: bytes 4*3 + 8*3 = 36
    ("cumsum_int32", op("aten::cumsum", T([3], I32), S(0), NONE), 3, 36),
    # cumsum fp32[4,5] dtype=7 (float64): flops 20; bytes 4*20 + 8*20 = 240
    ("cumsum_dtype", op("aten::cumsum", T([4, 5]), S(1), S(7)), 20, 240),
    # ---- indexing, scatter, gather
    # index_select(x[4,5], 0, idx[3]): 3 rows of 5: bytes read 4*15 + idx 8*3 + write 4*15 = 144
    ("index_select", op("aten::index_select", T([4, 5]), S(0), T([3], I64)), 0, 144),
    # gather(x[4,5], 1, idx[4,3] expanded from [4,1], strides [1,0]): 12 outputs, idx stores 4:
    # bytes 4*12 + 8*4 + 4*12 = 128
    ("gather_expanded_index", op("aten::gather", T([4, 5]), S(1), T([4, 3], I64, strides=[1, 0]), S(False)),
     0, 128),
    # scatter_add_(dst[3,5], 0, idx[1,5], src[4,5]): 5 adds; src read only where indexed (5 of 20);
    # bytes idx 8*5 + src 4*5 + dst read+write 2*4*5 = 40 + 20 + 40 = 100
    ("scatter_add_", op("aten::scatter_add_", T([3, 5]), S(0), T([1, 5], I64), T([4, 5])), 5, 100),
    # scatter_reduce_(dst, 0, idx[1,5], src[4,5], reduce (a string, recorded ''), include_self):
    # as scatter_add_: flops 5; bytes 100
    ("scatter_reduce_", op("aten::scatter_reduce_", T([3, 5]), S(0), T([1, 5], I64), T([4, 5]), NONE,
                           S(True)), 5, 100),
    # scatter_(dst[3,5], 0, idx[1,5], src[4,5]) without reduce: writes only:
    # bytes 8*5 + 4*5 + 4*5 = 80
    ("scatter_", op("aten::scatter_", T([3, 5]), S(0), T([1, 5], I64), T([4, 5])), 0, 80),
    # index_add_(dst[3,5], 0, idx[3], src[3,5], alpha 2): add + multiply per source element:
    # flops 2*15 = 30; bytes 8*3 + 4*15 + dst read+write 2*4*15 = 24 + 60 + 120 = 204
    ("index_add_alpha2", op("aten::index_add_", T([3, 5]), S(0), T([3], I64), T([3, 5]), S(2)), 30, 204),
    # index_add_ with alpha 1: flops 15; bytes 204
    ("index_add_alpha1", op("aten::index_add_", T([3, 5]), S(0), T([3], I64), T([3, 5]), S(1)), 15, 204),
    # embedding(weight[4,5], idx[3], -1, False, False): 3 rows of 5: bytes 4*15 + 8*3 + 4*15 = 144
    ("embedding", op("aten::embedding", T([4, 5]), T([3], I64), S(-1), S(False), S(False)), 0, 144),
    # topk(x[4,5], 2, -1, largest, sorted): 4 slices; flops 20 + 4*2*ceil(log2 2) = 28;
    # bytes 80 + 4*2*(4 + 8) = 176
    ("topk", op("aten::topk", T([4, 5]), S(2), S(-1), S(True), S(True)), 28, 176),
    # sort.stable(x[4,5], stable False, dim 0, descending False): slices of 4: flops 20*ceil(log2 4) = 40;
    # bytes 80 + 20*(4 + 8) = 320
    ("sort_stable", op("aten::sort", T([4, 5]), S(False), S(0), S(False)), 40, 320),
    # sort(x[4,5], dim 1, descending False): slices of 5: flops 20*ceil(log2 5) = 60; bytes 320
    ("sort", op("aten::sort", T([4, 5]), S(1), S(False)), 60, 320),
    # bincount(int64[3], None, minlength 5): 3 increments; bytes 8*3 + 8*5 int64 bins = 64
    ("bincount", op("aten::bincount", T([3], I64), NONE, S(5)), 3, 64),
    # bincount with bf16 weights[3], minlength 4: multiply-add each: flops 6; the sums are
    # float64 for any weights but float32: bytes 8*3 + 2*3 + 8*4 = 62
    ("bincount_weights_bf16", op("aten::bincount", T([3], I64), T([3], BF16), S(4)), 6, 62),
    # bincount with fp32 weights, minlength 4: fp32 bins: bytes 8*3 + 4*3 + 4*4 = 52
    ("bincount_weights_f32", op("aten::bincount", T([3], I64), T([3]), S(4)), 6, 52),
    # histc(x[4,5], bins 4, min -1, max 1): 3/elem: flops 60; bytes 80 + 4*4 = 96
    ("histc", op("aten::histc", T([4, 5]), S(4), S(-1), S(1)), 60, 96),
    # cat: FLOPs 0, bytes unknown (a TensorList's dtype is not recorded)
    ("cat", op("aten::cat", TL([4, 5], [4, 5]), S(0)), 0, None),
    # ---- arange overloads (writes only)
    # arange(end 10, dtype None, layout, device, pin_memory): 10 int64: bytes 80
    ("arange_end", op("aten::arange", S(10), NONE, NONE, NONE, S(False)), 0, 80),
    # arange(start 2, end 10, dtype None, ...): 8 int64: bytes 64
    ("arange_start_end", op("aten::arange", S(2), S(10), NONE, NONE, NONE, S(False)), 0, 64),
    # arange(0, 1, 0.1, dtype None, ...): ceil(1/0.1) = 10 float32: bytes 40
    ("arange_start_end_step", op("aten::arange", S(0), S(1), S(0.10000000000000001), NONE, NONE, NONE,
                                 S(False)), 0, 40),
    # arange(5, dtype=6 float32, ...): 5*4 = 20
    ("arange_dtype", op("aten::arange", S(5), S(6), NONE, NONE, S(False)), 0, 20),
    # arange.start(0, 4, dtype 4 int64, layout 0, device, pin_memory) as sort runs it: 4*8 = 32
    ("arange_start_dtype", op("aten::arange", S(0), S(4), S(4), S(0), NONE, NONE), 0, 32),
    # arange.start_out(0, 10, 1, out int64[0]), nested in every CPU arange: 10*8 = 80
    ("arange_start_out", op("aten::arange", S(0), S(10), S(1), T([0], I64)), 0, 80),
    # arange.start_out(0, 1, 0.1, out float[0]): 10*4 = 40
    ("arange_start_out_f32", op("aten::arange", S(0), S(1), S(0.10000000000000001), T([0])), 0, 40),
]


@pytest.mark.parametrize(("call", "flops", "nbytes"), [pytest.param(c, f, b, id=k) for k, c, f, b in CASES])
def test_formula(call, flops, nbytes):
    got = cost_of(call)
    assert got is not None, f"{call.name}: no cost"
    assert got.flops == flops
    assert got.bytes == nbytes


def test_case_ids_are_unique():
    ids = [k for k, *_ in CASES]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize(
    ("call", "unit", "dtype"),
    [
        pytest.param(op("aten::mm", T([4, 5], BF16), T([5, 6], BF16)), MATRIX, "bfloat16", id="mm"),
        pytest.param(op("aten::mkldnn_convolution", T([1, 2, 4, 4]), T([2, 2, 1, 1]), NONE, S([0, 0]), S([1, 1]),
                        S([1, 1]), S(1)), MATRIX, "float32", id="conv"),
        pytest.param(op("aten::_scaled_mm", T([16, 32], FP8), T([32, 16], FP8), T([], F32), T([], F32), NONE,
                        NONE, S(15), S(False)), MATRIX, "float8_e4m3fn", id="scaled_mm"),
        pytest.param(op("aten::mv", T([4, 5]), T([5])), VECTOR, "float32", id="mv"),
        pytest.param(op("aten::gelu", T([4, 5], BF16), NONE), VECTOR, "bfloat16", id="gelu"),
        # the bool condition does not set the result dtype
        pytest.param(op("aten::where", T([4, 5], BOOL), T([4, 5], BF16), T([4, 5], BF16)), VECTOR, "bfloat16",
                     id="where"),
        pytest.param(op("aten::copy_", T([4, 5], BF16), T([4, 5])), VECTOR, "bfloat16", id="copy_"),
        pytest.param(op("aten::bincount", T([3], I64), T([3], BF16), S(0)), VECTOR, "float64",
                     id="bincount_weighted"),
        pytest.param(op("aten::arange", S(5), S(6), NONE, NONE, S(False)), VECTOR, "float32", id="arange"),
    ],
)
def test_unit_and_dtype(call, unit, dtype):
    got = cost_of(call)
    assert (got.unit, got.dtype) == (unit, dtype)


# ---------------------------------------------------------------- registry behaviour


def test_unknown_op_has_no_cost():
    assert cost_of(op("aten::definitely_not_an_op", T([4, 5]))) is None
    assert cost_of(op("mylib::custom_kernel", T([4, 5]))) is None


def test_views_and_wrappers_are_not_costed():
    for name in ("aten::view", "aten::conv2d", "aten::linear", "aten::thnn_conv2d", "aten::softmax"):
        assert not cost.has_formula(name), name
    assert cost.is_view("aten::as_strided") and cost.is_wrapper("aten::conv2d")
    # _convolution carries the formula: it is a dispatcher wherever an implementation is nested
    assert cost.has_formula("aten::_convolution") and not cost.aux_children("aten::_convolution")
    # a convolution implementation's nested ops (bias add_, zero_) are auxiliary work
    assert cost.aux_children("aten::slow_conv_transpose2d") and cost.aux_children("aten::mkldnn_convolution")
    # var/std over everything nest aten::mean on the CPU: auxiliary, not a dispatch
    assert cost.aux_children("aten::var") and cost.aux_children("aten::std")


@pytest.mark.parametrize("name", ["aten::mm", "aten::linear", "aten::view", "aten::_convolution"])
def test_registering_a_name_twice_raises(name):
    with pytest.raises(ValueError, match="already registered"):
        formula(name)(lambda call: Cost(0, 0))
    with pytest.raises(ValueError, match="already registered"):
        register_wrapper(name)
    assert cost.has_formula(name) == (name in ("aten::mm", "aten::_convolution"))


def test_registering_without_namespace_raises():
    with pytest.raises(ValueError, match="namespace"):
        formula("mm")(lambda call: Cost(0, 0))
    assert not cost.has_formula("mm")
    from wlprof.cost.registry import _check_new

    with pytest.raises(ValueError, match="namespace"):
        _check_new("::mm")  # colons but no namespace before them
    _check_new("myext::X")  # a namespace and a one-letter name: accepted (nothing registered)


def test_addmm_under_sparse_ancestor_is_unknown():
    # torch.sparse.mm(csr, X) records aten::addmm with the sparse operand's dense sizes.
    args = (T([6]), T([4, 5]), T([5, 6]), S(1), S(1))
    assert cost_of(op("aten::addmm", *args)) is not None
    assert cost_of(op("aten::addmm", *args, ancestors=("aten::_sparse_addmm", "aten::_sparse_mm"))) is None
    assert cost_of(op("aten::mm", T([4, 5]), T([5, 6]), ancestors=("aten::_sparse_mm",))) is None


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(op("aten::mm", T([2, 4, 5]), T([5, 6])), id="mm_3d_operand"),
        pytest.param(op("aten::mm", T([4, 5]), T([4, 6])), id="mm_inner_mismatch"),
        pytest.param(op("aten::mm", T([4, 5])), id="mm_missing_operand"),
        pytest.param(OpCall("aten::mm"), id="mm_no_args"),
        pytest.param(op("aten::bmm", T([4, 5]), T([5, 6])), id="bmm_2d"),
        pytest.param(op("aten::bmm", T([2, 4, 5]), T([3, 5, 6])), id="bmm_batch_mismatch"),
        pytest.param(op("aten::mv", T([4, 5, 1]), T([5])), id="mv_3d"),
        pytest.param(op("aten::mkldnn_convolution", T([2, 4, 9, 9]), T([6, 2, 3]), NONE, S([1, 1]), S([2, 2]),
                        S([1, 1]), S(1)), id="conv_weight_rank"),
        pytest.param(op("aten::mkldnn_convolution", T([2, 4, 9, 9]), T([6, 4, 3, 3]), NONE, S([1, 1, 1]),
                        S([2, 2]), S([1, 1]), S(1)), id="conv_padding_rank"),
        pytest.param(op("aten::_grouped_mm", T([6]), T([2, 8, 16]), NONE, NONE, NONE), id="grouped_mm_1d"),
        pytest.param(op("aten::add", T([4, 5]), T([3]), S(1)), id="add_no_broadcast"),
        pytest.param(op("aten::arange", S(0), S(float("inf")), S(1), T([0])), id="arange_infinite"),
        pytest.param(op("aten::arange", S(0), S(10), S(1), NONE, NONE, NONE, S(False), S(1)), id="arange_8_args"),
        pytest.param(op("aten::index_select", T([4, 5]), S(0)), id="index_select_no_index"),
        pytest.param(op("aten::max", T([4, 5]), T([5])), id="max_other_is_elementwise"),
    ],
)
def test_malformed_or_unhandled_call_is_none(call):
    assert cost_of(call) is None


@pytest.mark.parametrize(("flops", "nbytes"), [(-1, 0), (0, -1), (-0.5, None)])
def test_cost_rejects_negative_values(flops, nbytes):
    with pytest.raises(ValueError, match="non-negative"):
        Cost(flops, nbytes)


def test_cost_rejects_unknown_unit():
    with pytest.raises(ValueError):
        Cost(1, 1, unit="tensor_core")
    assert Cost(0, None).bytes is None


# ---------------------------------------------------------------- OpCall parsing


def test_opcall_parses_profiler_args():
    call = op("aten::foo", T([4, 5], strides=[0, 1]), S(0.0), S(False), S([1, 2]), NONE, TL([2, 3], [4]),
              S("sum"), S(1e-05))
    t = call.tensor(0)
    assert t == TensorArg((4, 5), F32, (0, 1))
    assert (t.numel, t.stored, t.itemsize, t.nbytes_read, t.dtype) == (20, 5, 4, 20, "float32")
    assert call.scalar(1) == 0.0 and call.scalar(2) is False and call.scalar(3) == [1, 2]
    assert call.scalar(4) is None and call.scalar(6) == "sum" and math.isclose(call.scalar(7), 1e-05)
    assert call.scalar(99) is None
    # scalars, None and lists are not tensors
    assert [call.tensor(i) for i in range(1, 8)] == [None] * 7
    assert call.tensors == [t]
    # the profiler's own spellings
    parsed = OpCall.from_args("aten::x", {"Concrete Inputs": ["0.", "True", "-inf", "[]"]})
    assert parsed.scalar(0) == 0.0 and parsed.scalar(1) is True
    assert parsed.scalar(2) == float("-inf") and parsed.scalar(3) == []


def test_tensor_with_mismatched_strides_counts_all_elements():
    assert TensorArg((4, 5), F32, (1,)).stored == 20
    assert TensorArg((4, 5), F32, None).stored == 20
    assert TensorArg((), F32, ()).stored == 1


def test_in_place_addmm_and_baddbmm_are_costed_like_their_out_of_place_forms():
    # PyTorch 1.10's CPU convolution: one addmm_ per image, [64, 12544] += [64, 147] @ [147, 12544]
    # 2 x 64 x 147 x 12544 = 236,027,904 FLOPs; bytes (fp32): the accumulator read 3,211,264 and written
    # 3,211,264, the operands 37,632 + 7,375,872
    call = op("aten::addmm_", T([64, 12544]), T([64, 147]), T([147, 12544]), S(1), S(1))
    c = cost_of(call)
    assert (c.flops, c.bytes, c.written) == (236027904, 3211264 * 2 + 37632 + 7375872, 3211264)
    # baddbmm_: [2, 3, 5] += [2, 3, 4] @ [2, 4, 5]: 2 x 2 x 3 x 5 x 4 = 240 FLOPs
    b = cost_of(op("aten::baddbmm_", T([2, 3, 5]), T([2, 3, 4]), T([2, 4, 5]), S(1), S(1)))
    assert (b.flops, b.bytes, b.written) == (240, 4 * (30 + 24 + 40 + 30), 4 * 30)

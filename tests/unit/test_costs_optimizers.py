"""`_foreach_*` and fused optimizer formulas: FLOPs and bytes by hand, the element type from kernel names."""

from __future__ import annotations

import pytest
from cost_calls import NONE, TL, S, T, mta_kernel, op

import wlprof.cost  # noqa: F401  (registers every formula)
from wlprof.cost import cost_of
from wlprof.cost.kernel_types import multi_tensor_dtype, opaque_size

F32_K = (mta_kernel("float"),)
BF16_K = (mta_kernel("c10::BFloat16"),)


def test_kernel_types_read_the_functor_not_the_opmath_type():
    ns = "at::native::(anonymous namespace)::"
    name = (f"void {ns}multi_tensor_apply_kernel<{ns}TensorListScalarListMetadata<float, 1>, "
            f"{ns}BinaryOpScalarListFunctor<c10::BFloat16, 1, 1, 0>, std::divides<float> >(...)")
    assert multi_tensor_dtype([name]) == "bfloat16"  # the metadata's float is the scalars' opmath type
    fused = (f"void {ns}multi_tensor_apply_kernel<{ns}FusedOptimizerTensorListMetadata<4>, "
             f"{ns}FusedAdamMathFunctor<c10::Half, 4, (at::native::ADAM_MODE)1, false>, double>(...)")
    assert multi_tensor_dtype([fused]) == "float16"
    assert multi_tensor_dtype(["void at::native::vectorized_elementwise_kernel<4, ...>"]) is None
    cat = f"void {ns}CatArrayBatchedCopy<{ns}OpaqueType<2u>, unsigned int, 4, 64, 64>(...)"
    assert opaque_size([cat], "CatArrayBatchedCopy") == 2
    assert opaque_size(["CatArrayBatchedCopy_contig<int>"], "CatArrayBatchedCopy") is None


CASES = [
    # _foreach_mul_.Scalar over [4,5] and [6] fp32, in place: 20 + 6 = 26 elements, 1 FLOP each;
    # bytes: self read and written 4*26*2 = 208, written 104
    ("mul_scalar", op("aten::_foreach_mul_", TL([4, 5], [6]), S(0.9), kernels=F32_K), 26, 208, 104),
    # _foreach_add_.List(self, other, alpha=1) bf16: 26 adds; bytes 2*26*(2 read + 1 written) = 156
    ("add_list", op("aten::_foreach_add_", TL([4, 5], [6]), TL([4, 5], [6]), S(1), kernels=BF16_K), 26, 156, 52),
    # ... alpha=-0.1 costs a multiply more: 2*26 = 52 FLOPs
    ("add_list_alpha", op("aten::_foreach_add_", TL([4, 5], [6]), TL([4, 5], [6]), S(-0.1), kernels=F32_K),
     52, 312, 104),
    # _foreach_addcdiv_.ScalarList(self, t1, t2, scalars) fp32: 3*26 = 78 FLOPs; bytes 4*26*(3 + 1) = 416
    ("addcdiv", op("aten::_foreach_addcdiv_", TL([4, 5], [6]), TL([4, 5], [6]), TL([4, 5], [6]), S([-1e-3, -1e-3]),
                   kernels=F32_K), 78, 416, 104),
    # _foreach_lerp_.Scalar(self, end, weight) fp32: 3*26 = 78; bytes 4*26*3 = 312
    ("lerp", op("aten::_foreach_lerp_", TL([4, 5], [6]), TL([4, 5], [6]), S(0.1), kernels=F32_K), 78, 312, 104),
    # _foreach_sqrt (out of place): 26 FLOPs; reads 4*26, writes a new list 4*26: 208
    ("sqrt", op("aten::_foreach_sqrt", TL([4, 5], [6]), kernels=F32_K), 26, 208, 104),
    # _foreach_add_.Tensor(self, other: 0-d fp32 tensor, alpha=1): reads self 4*26 + the 4-byte tensor
    ("add_tensor", op("aten::_foreach_add_", TL([4, 5], [6]), T([]), S(1), kernels=F32_K), 26, 212, 104),
    # _foreach_copy_(self, src): self only written: 4*26 read (src) + 4*26 written = 208; 0 FLOPs
    ("copy", op("aten::_foreach_copy_", TL([4, 5], [6]), TL([4, 5], [6]), S(False), kernels=F32_K), 0, 208, 104),
    # _foreach_zero_: 26 elements written, nothing read
    ("zero", op("aten::_foreach_zero_", TL([4, 5], [6]), kernels=F32_K), 0, 104, 104),
    # _foreach_norm(self, ord=2): 2 FLOPs per element = 52; reads 4*26 = 104, writes one fp32 per tensor = 8
    ("norm", op("aten::_foreach_norm", TL([4, 5], [6]), S(2), NONE, kernels=F32_K), 52, 112, 8),
    # ... with dtype=6 (float32) for bf16 inputs: reads 2*26 = 52, writes 2*4 = 8
    ("norm_dtype", op("aten::_foreach_norm", TL([4, 5], [6]), S(2), S(6), kernels=BF16_K), 52, 60, 8),
]


@pytest.mark.parametrize(("call", "flops", "nbytes", "written"), [pytest.param(c, f, b, w, id=k)
                                                                   for k, c, f, b, w in CASES])
def test_foreach(call, flops, nbytes, written):
    c = cost_of(call)
    assert (c.flops, c.bytes, c.written) == (flops, nbytes, written)


def test_foreach_without_kernel_names_knows_flops_not_bytes():
    # a TensorList's dtype is not recorded: with no kernel naming it (a CPU trace) bytes stay unknown
    c = cost_of(op("aten::_foreach_mul_", TL([4, 5], [6]), S(0.9)))
    assert c.flops == 26 and c.bytes is None


def _adam_args(*lists, wd=0.01, amsgrad=False, maximize=False, grad_scale=NONE):
    # (params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr, beta1, beta2, weight_decay,
    #  eps, amsgrad, maximize, grad_scale, found_inf)
    return (*lists, S(1e-3), S(0.9), S(0.999), S(wd), S(1e-8), S(amsgrad), S(maximize), grad_scale, NONE)


def test_fused_adamw():
    p = ([4, 5], [6])
    k = (mta_kernel("float", "FusedAdamMathFunctor", 4),)
    call = op("aten::_fused_adamw_", *_adam_args(TL(*p), TL(*p), TL(*p), TL(*p), TL(), TL([], [])), kernels=k)
    c = cost_of(call)
    # 26 elements x (13 + 1 for AdamW's decay) = 364 FLOPs
    # reads params, grads, exp_avgs, exp_avg_sqs 4*26*4 = 416, 2 fp32 step counters 8; writes p, m, v 4*26*3 = 312
    assert (c.flops, c.bytes, c.written) == (364, 416 + 8 + 312, 312)
    assert c.dtype == "float32"  # the functor's element type


def test_fused_adam_amsgrad_grad_scale():
    p = ([10],)
    k = (mta_kernel("c10::BFloat16", "FusedAdamMathFunctor", 5),)
    call = op("aten::_fused_adam_", *_adam_args(TL(*p), TL(*p), TL(*p), TL(*p), TL(*p), TL([]), amsgrad=True,
                                                grad_scale=T([])), kernels=k)
    c = cost_of(call)
    # 10 x (13 + 2 Adam decay + 1 amsgrad + 1 unscale) = 170 FLOPs
    # reads 5 lists 2*10*5 = 100, 1 step counter 4, grad_scale 4; writes p, m, v, max_v, grads 2*10*5 = 100
    assert (c.flops, c.bytes, c.written) == (170, 100 + 4 + 4 + 100, 100)
    assert c.dtype == "bfloat16"


def test_fused_sgd_momentum():
    p = ([4, 5], [6])
    k = (mta_kernel("float", "FusedSgdMathFunctor", 3),)
    # (params, grads, momentum_buffer_list, weight_decay, momentum, lr, dampening, nesterov, maximize,
    #  is_first_step, grad_scale, found_inf)
    args = (TL(*p), TL(*p), TL(*p), S(0.0), S(0.9), S(0.1), S(0.0), S(False), S(False), S(False), NONE, NONE)
    c = cost_of(op("aten::_fused_sgd_", *args, kernels=k))
    # 26 x (2 update + 2 momentum without dampening) = 104, as the foreach path counts the same update
    # (mul_ 1, add_ with alpha 1: 1, add_ with alpha -lr: 2); reads p, g, buf 4*26*3 = 312; writes p, buf
    # 4*26*2 = 208
    assert (c.flops, c.bytes, c.written) == (104, 520, 208)
    damped = (*args[:6], S(0.1), *args[7:])
    assert cost_of(op("aten::_fused_sgd_", *damped, kernels=k)).flops == 26 * 5  # (1 - dampening) * g: 1 more
    first = (*args[:9], S(True), NONE, NONE)
    c = cost_of(op("aten::_fused_sgd_", *first, kernels=k))
    assert c.bytes == 4 * 26 * 2 + 208  # the first step does not read the (new) buffers


def test_fused_optimizer_on_cpu_knows_flops_only():
    p = ([4, 5], [6])
    c = cost_of(op("aten::_fused_adamw_", *_adam_args(TL(*p), TL(*p), TL(*p), TL(*p), TL(), TL([], []))))
    assert c.flops == 364 and c.bytes is None


def test_list_numels_only_of_tensor_lists_and_foreach_norm_with_an_unknown_dtype_code():
    from wlprof.cost.optimizers import _list_numels

    call = op("aten::_foreach_mul_", TL([4, 5], [6]), T([2, 3]), S(2))
    assert _list_numels(call, 0) == [20, 6]
    assert _list_numels(call, 1) is None  # a plain tensor is not a list
    assert _list_numels(call, 3) is None  # past the last argument
    # _foreach_norm(self, ord, dtype=99): no ScalarType of that code, so the input's bf16: reads 2*26 = 52,
    # writes 2 x 2 bytes
    c = cost_of(op("aten::_foreach_norm", TL([4, 5], [6]), S(2), S(99), kernels=BF16_K))
    assert (c.flops, c.bytes, c.written) == (52, 56, 4)


def test_tensor_lists_whose_shapes_were_not_recorded_are_unknown_not_free():
    # TraceLens' MI300 ResNet trace: aten::_foreach_add_(TensorList, TensorList, -0.001) with Input Dims
    # [[], [], []] launched a 32 us multi_tensor_apply kernel; it was costed 0 FLOPs and 0 bytes
    k = (mta_kernel("c10::BFloat16", "BinaryOpListAlphaFunctor", 3),)
    assert cost_of(op("aten::_foreach_add_", TL(), TL(), S(-0.001), kernels=k)) is None
    assert cost_of(op("aten::_foreach_sqrt", TL(), kernels=k)) is None
    assert cost_of(op("aten::_foreach_mm", TL(), TL())) is None
    assert cost_of(op("aten::_fused_adamw_", *_adam_args(TL(), TL(), TL(), TL(), TL(), TL()))) is None
    # the lists recorded: 26 adds and alpha's 26 multiplies, 2 x 26 x 3 bytes
    c = cost_of(op("aten::_foreach_add_", TL([4, 5], [6]), TL([4, 5], [6]), S(-0.001), kernels=k))
    assert (c.flops, c.bytes) == (52, 156)


def test_amp_unscale_reads_and_writes_the_gradients():
    # _amp_foreach_non_finite_check_and_unscale_(grads [4,5] and [6] fp32, found_inf, inv_scale): 26 elements x
    # (finiteness compare + multiply) = 52 FLOPs; reads the grads 4*26 = 104 and inv_scale 4, writes the grads 104
    k = (mta_kernel("float", "UnaryOpFunctor", 1),)
    c = cost_of(op("aten::_amp_foreach_non_finite_check_and_unscale_", TL([4, 5], [6]), T([]), T([]), kernels=k))
    assert (c.flops, c.bytes, c.written, c.dtype) == (52, 104 + 4 + 104, 104, "float32")
    # without the kernels (a CPU trace) the dtype and so the bytes are unknown
    c = cost_of(op("aten::_amp_foreach_non_finite_check_and_unscale_", TL([4, 5], [6]), T([]), T([])))
    assert (c.flops, c.bytes) == (52, None)


def test_amp_update_scale_reads_three_scalars_and_writes_two():
    # _amp_update_scale_(scale fp32, growth_tracker int32, found_inf fp32, 2.0, 0.5, 2000): reads 3 x 4 bytes,
    # writes the scale and the tracker 2 x 4; one multiply
    c = cost_of(op("aten::_amp_update_scale_", T([]), T([], "int"), T([]), S(2.0), S(0.5), S(2000)))
    assert (c.flops, c.bytes, c.written) == (1, 20, 8)

"""Batch/group norm forward and every norm's backward: FLOPs per element as stated, bytes by hand."""

from __future__ import annotations

from cost_calls import BF16, F32, NONE, S, T, op

import wlprof.cost  # noqa: F401  (registers every formula)
from wlprof.cost import cost_of, is_wrapper

# x [2, 3, 4, 4] bf16: 96 elements, C = 3, 192 bytes; per-channel fp32 vectors [3]: 12 bytes
X = T([2, 3, 4, 4], BF16)
C3 = T([3])


def test_native_batch_norm_training():
    c = cost_of(op("aten::native_batch_norm", X, C3, C3, C3, C3, S(True), S(0.1), S(1e-5)))
    # (5 + weight 1 + bias 1) * 96 = 672; reads x 192 + 4 vectors 48 = 240;
    # writes y 192 + save_mean/invstd 2*3*4 = 24 + running stats updated 24 = 240
    assert (c.flops, c.bytes, c.written) == (672, 240 + 240, 240)


def test_native_batch_norm_eval_and_no_affine():
    c = cost_of(op("aten::native_batch_norm", X, NONE, NONE, C3, C3, S(False), S(0.1), S(1e-5)))
    # running statistics: subtract and scale, 2 * 96 = 192; reads 192 + 24, writes y 192
    assert (c.flops, c.bytes, c.written) == (192, 216 + 192, 192)


def test_cudnn_batch_norm_and_with_update():
    # cudnn_batch_norm(input, weight, bias, running_mean, running_var, training, factor, eps): as native
    c = cost_of(op("aten::cudnn_batch_norm", X, C3, C3, C3, C3, S(True), S(0.1), S(1e-5)))
    assert (c.flops, c.bytes) == (672, 480)
    # _batch_norm_with_update(input, weight, bias, running_mean, running_var, momentum, eps): training
    c = cost_of(op("aten::_batch_norm_with_update", X, C3, C3, C3, C3, S(0.1), S(1e-5)))
    assert (c.flops, c.bytes) == (672, 480)


def test_native_group_norm():
    # native_group_norm(x, w[3], b[3], N=2, C=3, HxW=16, group=3, eps): (5+2)*96 = 672;
    # reads 192 + 24; writes y 192 + mean and rstd [2,3] in bf16: 2*6*2 = 24
    c = cost_of(op("aten::native_group_norm", X, C3, C3, S(2), S(3), S(16), S(3), S(1e-5)))
    assert (c.flops, c.bytes, c.written) == (672, 216 + 216, 216)


def test_layer_norm_backward():
    # native_layer_norm_backward(dy [4,8], x [4,8], [8], mean [4,1], rstd [4,1], w [8], b [8], mask) fp32
    dy, x, m, w = T([4, 8]), T([4, 8]), T([4, 1]), T([8])
    call = op("aten::native_layer_norm_backward", dy, x, S([8]), m, m, w, w, S([True, True, True]))
    c = cost_of(call)
    # grad_input 10*32 + grad_weight 2*32 + grad_bias 32 = 416;
    # reads dy 128 + x 128 + mean 16 + rstd 16 + w 32 + b 32 = 352; writes dx 128 + dw 32 + db 32 = 192
    assert (c.flops, c.bytes, c.written) == (416, 352 + 192, 192)
    only_input = cost_of(op("aten::native_layer_norm_backward", dy, x, S([8]), m, m, w, w,
                            S([True, False, False])))
    assert (only_input.flops, only_input.written) == (320, 128)
    # grad_weight alone recomputes x_hat: (2 + 2) * 32 = 128
    only_weight = cost_of(op("aten::native_layer_norm_backward", dy, x, S([8]), m, m, w, w,
                             S([False, True, False])))
    assert (only_weight.flops, only_weight.written) == (128, 32)


def test_batch_norm_backward_train_and_eval():
    dy = T([2, 3, 4, 4], BF16)
    # (grad_out, input, weight, running_mean, running_var, save_mean, save_invstd, train, eps, output_mask)
    train = op("aten::native_batch_norm_backward", dy, X, C3, C3, C3, C3, C3, S(True), S(1e-5),
               S([True, True, True]))
    c = cost_of(train)
    # (10 + 2 + 1) * 96 = 1248; reads dy 192 + x 192 + 5 vectors 60 = 444; writes dx 192 + dw 12 + db 12
    assert (c.flops, c.bytes, c.written) == (1248, 444 + 216, 216)
    evaluation = op("aten::native_batch_norm_backward", dy, X, C3, C3, C3, NONE, NONE, S(False), S(1e-5),
                    S([True, False, False]))
    c = cost_of(evaluation)
    # dy * (w * rstd): 96; reads 192 + 192 + 36, writes dx 192
    assert (c.flops, c.bytes) == (96, 420 + 192)


def test_cudnn_batch_norm_backward():
    # cudnn_batch_norm_backward(input, grad_output, weight, running_mean, running_var, save_mean, save_var,
    #  epsilon, reserve [0] uint8): always all three gradients
    c = cost_of(op("aten::cudnn_batch_norm_backward", X, T([2, 3, 4, 4], BF16), C3, C3, C3, C3, C3, S(1e-5),
                   T([0], "unsigned char")))
    assert (c.flops, c.written) == (1248, 216)


def test_group_norm_backward():
    # (grad_out, input, mean [2,3], rstd [2,3], weight, N, C, HxW, group, output_mask): all three, fp32
    x = T([2, 3, 4, 4])
    c = cost_of(op("aten::native_group_norm_backward", x, x, T([2, 3]), T([2, 3]), C3, S(2), S(3), S(16), S(3),
                   S([True, True, True])))
    # 13 * 96 = 1248; reads 384 + 384 + 24 + 24 + 12 = 828; writes dx 384 + dw 12 + db 12 = 408
    assert (c.flops, c.bytes, c.written) == (1248, 828 + 408, 408)


def test_fused_rms_norm_backward():
    # (grad_out, input, normalized_shape, rstd, weight, output_mask[2]) fp32 [4, 8]
    x = T([4, 8])
    c = cost_of(op("aten::_fused_rms_norm_backward", x, x, S([8]), T([4, 1]), T([8]), S([True, True])))
    # grad_input 7*32 + grad_weight 2*32 = 288; reads 128 + 128 + 16 + 32 = 304; writes 128 + 32
    assert (c.flops, c.bytes, c.written) == (288, 304 + 160, 160)
    # no weight (the recorded [True, False] of an elementwise_affine=False norm): grad_input only
    c = cost_of(op("aten::_fused_rms_norm_backward", x, x, S([8]), T([4, 1]), NONE, S([True, False])))
    assert (c.flops, c.written) == (224, 128)
    _ = F32


def test_batch_norm_forward_dtype_channels_and_affine_halves():
    # float64 x [2, 3, 4, 4] (768 bytes) and [3] vectors (24 bytes): the saved mean and inverse deviation
    # accumulate in float64, 2 * 3 * 8 = 48; (5 + 2) * 96 = 672; reads 768 + 4 * 24, writes 768 + 48 + 2 * 24
    x, v = T([2, 3, 4, 4], "double"), T([3], "double")
    c = cost_of(op("aten::native_batch_norm", x, v, v, v, v, S(True), S(0.1), S(1e-5)))
    assert (c.flops, c.bytes, c.written, c.dtype) == (672, 864 + 864, 864, "float64")
    # a weight without a bias: (5 + 1) * 96 = 576 (a bias without a weight the same count)
    assert cost_of(op("aten::native_batch_norm", X, C3, NONE, C3, C3, S(True), S(0.1), S(1e-5))).flops == 576
    assert cost_of(op("aten::native_batch_norm", X, NONE, C3, C3, C3, S(True), S(0.1), S(1e-5))).flops == 576
    # [N=4, C=3] (BatchNorm1d), bf16: C is dim 1; 5 * 12 = 60; reads 24 + 24, writes y 24 + 2 * 3 * 4 + 24
    x2 = T([4, 3], BF16)
    c = cost_of(op("aten::native_batch_norm", x2, NONE, NONE, C3, C3, S(True), S(0.1), S(1e-5)))
    assert (c.flops, c.bytes, c.written, c.dtype) == (60, 48 + 72, 72, "bfloat16")
    # one dim: one channel; 5 * 6 = 30; reads 24, writes 24 + 2 * 1 * 4
    c = cost_of(op("aten::native_batch_norm", T([6]), NONE, NONE, NONE, NONE, S(True), S(0.1), S(1e-5)))
    assert (c.flops, c.bytes, c.written) == (30, 24 + 32, 32)


def test_batch_norm_legit_without_running_stats():
    # _native_batch_norm_legit(input, weight, bias, training, momentum, eps): no running stats to update
    c = cost_of(op("aten::_native_batch_norm_legit", X, C3, C3, S(True), S(0.1), S(1e-5)))
    # (5 + 2) * 96 = 672; reads x 192 + w, b 24; writes y 192 + save_mean/invstd 2 * 3 * 4 = 24
    assert (c.flops, c.bytes, c.written, c.dtype) == (672, 216 + 216, 216, "bfloat16")
    # not training (the batch's statistics, nothing saved): (2 + 2) * 96 = 384, writes y 192
    c = cost_of(op("aten::_native_batch_norm_legit", X, C3, C3, S(False), S(0.1), S(1e-5)))
    assert (c.flops, c.bytes, c.written) == (384, 216 + 192, 192)
    # a weight, no bias: (5 + 1) * 96 = 576; [N=4, C=3] fp32 and one dim as in native_batch_norm
    assert cost_of(op("aten::_native_batch_norm_legit", X, C3, NONE, S(True), S(0.1), S(1e-5))).flops == 576
    c = cost_of(op("aten::_native_batch_norm_legit", T([4, 3]), NONE, NONE, S(True), S(0.1), S(1e-5)))
    assert (c.flops, c.bytes, c.written) == (60, 48 + 72, 72)  # 5 * 12; reads 48, writes 48 + 2 * 3 * 4
    c = cost_of(op("aten::_native_batch_norm_legit", T([6]), NONE, NONE, S(True), S(0.1), S(1e-5)))
    assert (c.flops, c.bytes, c.written) == (30, 24 + 32, 32)  # one channel: 24 + 2 * 1 * 4


def test_norm_backward_masks_bias_without_weight_and_rms_weight_alone():
    dy, x, m, b = T([4, 8], BF16), T([4, 8], BF16), T([4, 1]), T([8], BF16)
    # layer norm without a weight but with a bias: grad_input 10 * 32 + grad_bias 32 = 352; reads dy 64 + x 64
    # + mean 16 + rstd 16 + b 16 = 176; writes dx 64 + db at x's itemsize 8 * 2 = 16
    c = cost_of(op("aten::native_layer_norm_backward", dy, x, S([8]), m, m, NONE, b, S([True, False, True])))
    assert (c.flops, c.bytes, c.written, c.dtype) == (352, 176 + 80, 80, "bfloat16")
    # an output mask of the wrong length: unknown, not a guess
    assert cost_of(op("aten::native_layer_norm_backward", dy, x, S([8]), m, m, NONE, b, S([True, False]))) is None
    # RMS norm, grad_weight alone recomputes x_hat once (no mean): (2 + 1) * 32 = 96; writes dw 8 * 4 = 32
    xf = T([4, 8])
    c = cost_of(op("aten::_fused_rms_norm_backward", xf, xf, S([8]), m, T([8]), S([False, True])))
    assert (c.flops, c.written) == (96, 32)


def test_batch_norm_impl_index_is_a_wrapper():
    assert is_wrapper("aten::_batch_norm_impl_index") and is_wrapper("aten::_batch_norm_impl_index_backward")

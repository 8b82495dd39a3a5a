"""Loss formulas: FLOPs per element as stated, bytes by hand."""

from __future__ import annotations

from cost_calls import F32, I64, NONE, S, T, op

import wlprof.cost  # noqa: F401  (registers every formula)
from wlprof.cost import cost_of, is_wrapper


def test_nll_loss_forward():
    # (self [16, 10] fp32, target [16] int64, weight None, reduction mean, ignore_index): 2 * 16 = 32;
    # reads the targets 128 + one log-probability per sample 64; writes the loss and total_weight 8
    c = cost_of(op("aten::nll_loss_forward", T([16, 10]), T([16], I64), NONE, S(1), S(-100)))
    assert (c.flops, c.bytes, c.written) == (32, 192 + 8, 8)
    # weighted, unreduced: 3 * 16 = 48; reads + the 10 weights 40; writes 16 losses + total_weight 68
    c = cost_of(op("aten::nll_loss_forward", T([16, 10]), T([16], I64), T([10]), S(0), S(-100)))
    assert (c.flops, c.bytes, c.written) == (48, 232 + 68, 68)
    # unbatched (self [10], a 0-d target): one sample, 2 FLOPs; reads the target 8 + one log-probability 4;
    # writes the loss and total_weight 8
    c = cost_of(op("aten::nll_loss_forward", T([10]), T([], I64), NONE, S(1), S(-100)))
    assert (c.flops, c.bytes, c.written) == (2, 12 + 8, 8)


def test_nll_loss_backward():
    # (grad_output [] fp32, self [16, 10], target [16], weight None, reduction, ignore_index, total_weight []):
    # 2 * 16 = 32; reads grad 4 + targets 128 + total_weight 4; writes one element per sample 64
    c = cost_of(op("aten::nll_loss_backward", T([]), T([16, 10]), T([16], I64), NONE, S(1), S(-100), T([])))
    assert (c.flops, c.bytes, c.written) == (32, 136 + 64, 64)


def test_nll_loss2d():
    # self [2, 5, 3, 3], target [2, 3, 3]: 18 samples: 36 FLOPs; reads 8*18 + 4*18, writes 8
    c = cost_of(op("aten::nll_loss2d_forward", T([2, 5, 3, 3]), T([2, 3, 3], I64), NONE, S(1), S(-100)))
    assert (c.flops, c.bytes) == (36, 216 + 8)


def test_mse_loss_and_backward():
    # mse_loss(self [8, 4], target [8, 4], mean): (2 + 1) * 32 = 96; reads 256, writes 4
    c = cost_of(op("aten::mse_loss", T([8, 4]), T([8, 4]), S(1)))
    assert (c.flops, c.bytes, c.written) == (96, 260, 4)
    # unreduced: 2 * 32; writes 128
    assert cost_of(op("aten::mse_loss", T([8, 4]), T([8, 4]), S(0))).flops == 64
    # mse_loss_backward(grad [], self, target, mean): 3 * 32 = 96; reads 4 + 256, writes 128
    c = cost_of(op("aten::mse_loss_backward", T([]), T([8, 4]), T([8, 4]), S(1)))
    assert (c.flops, c.bytes, c.written) == (96, 388, 128)


def test_smooth_l1_and_bce():
    c = cost_of(op("aten::smooth_l1_loss", T([8, 4]), T([8, 4]), S(1), S(1.0)))
    assert c.flops == (5 + 1) * 32
    c = cost_of(op("aten::smooth_l1_loss_backward", T([]), T([8, 4]), T([8, 4]), S(1), S(1.0)))
    assert c.flops == 4 * 32
    # binary_cross_entropy(self, target, weight [8, 4], sum): (7 + 1 + 1) * 32; reads 3 * 128, writes 4
    c = cost_of(op("aten::binary_cross_entropy", T([8, 4]), T([8, 4]), T([8, 4]), S(2)))
    assert (c.flops, c.bytes) == (288, 388)
    c = cost_of(op("aten::binary_cross_entropy_backward", T([]), T([8, 4]), T([8, 4]), NONE, S(1)))
    assert (c.flops, c.bytes) == (6 * 32, 4 + 256 + 128)
    _ = F32


def test_composite_losses_are_wrappers():
    for name in ("cross_entropy_loss", "nll_loss_nd", "nll_loss", "nll_loss2d", "l1_loss",
                 "binary_cross_entropy_with_logits"):
        assert is_wrapper(f"aten::{name}")


def test_loss_reduced_by_a_nested_mean():
    # CUDA: mse_loss writes the elementwise loss [5, 128] and a nested aten::mean reduces it (costed on its
    # own): 2 * 640 FLOPs; reads 2 * 2560, writes 2560; the mean keeps it costed (not a dispatcher)
    from dataclasses import replace

    import pandas as pd

    from wlprof.cost.attribution import flag_ops

    call = replace(op("aten::mse_loss", T([5, 128]), T([5, 128]), S(1)),
                   children=(op("aten::mean", T([5, 128]), S([]), S(False), NONE, NONE),))
    c = cost_of(call)
    assert (c.flops, c.bytes, c.written) == (1280, 5120 + 2560, 2560)
    ops = pd.DataFrame({"name": ["aten::mse_loss", "aten::mean"], "parent": [-1, 0]})
    assert not flag_ops(ops).dispatcher[0]


def test_pointwise_losses_count_selfs_elements_when_the_target_broadcasts():
    # mse_loss(self [4, 6], target [6], none): the target broadcasts (torch warns), the loss has self's 24
    # elements: 2 * 24 = 48; reads 96 + 24, writes 96
    c = cost_of(op("aten::mse_loss", T([4, 6]), T([6]), S(0)))
    assert (c.flops, c.bytes, c.written) == (48, 120 + 96, 96)
    # mse_loss_backward(grad [4, 6], self [4, 6], target [6], none): a gradient of self's shape, 3 * 24 = 72;
    # reads 96 + 96 + 24, writes 96
    c = cost_of(op("aten::mse_loss_backward", T([4, 6]), T([4, 6]), T([6]), S(0)))
    assert (c.flops, c.bytes, c.written) == (72, 216 + 96, 96)


CTC_LP, CTC_T = T([4, 2, 6]), T([2, 3], I64)  # log_probs [T=4, N=2, C=6], padded targets [N=2, S=3]


def test_ctc_loss_counts_each_samples_states():
    # _ctc_loss(log_probs, targets, input_lengths [4, 4], target_lengths [3, 2], blank, zero_infinity):
    # states 4 * (2*3 + 1) + 4 * (2*2 + 1) = 48, 13 each = 624; reads 48 floats and 6 int64 (240 bytes);
    # writes the loss [2] and log_alpha [2, 4, 7]: 58 floats = 232 bytes
    c = cost_of(op("aten::_ctc_loss", CTC_LP, CTC_T, S([4, 4]), S([3, 2]), S(0), S(False)))
    assert (c.flops, c.bytes, c.written) == (624, 240 + 232, 232)
    # the Tensor overload's lengths are data: FLOPs unknown, bytes known
    c = cost_of(op("aten::_ctc_loss", CTC_LP, CTC_T, T([2], I64), T([2], I64), S(0), S(False)))
    assert c.flops is None and c.written == 232


def test_ctc_loss_backward():
    # (grad [2], log_probs, targets, input_lengths, target_lengths, nll [2], log_alpha [2, 4, 7], blank, zi):
    # beta and the combination 18 x 48 states = 864, 4 per log-probability x 48 = 192
    c = cost_of(op("aten::_ctc_loss_backward", T([2]), CTC_LP, CTC_T, S([4, 4]), S([3, 2]), T([2]),
                   T([2, 4, 7]), S(0), S(False)))
    assert c.flops == 1_056
    # reads grad 8, log_probs 192, targets 48, nll 8, log_alpha 224; writes the gradient 192
    assert (c.bytes, c.written) == (480 + 192, 192)


def test_composite_losses_met_on_the_cpu_are_wrappers():
    for name in ("kl_div", "cosine_similarity", "cosine_embedding_loss", "pairwise_distance", "triplet_margin_loss",
                 "margin_ranking_loss", "soft_margin_loss", "soft_margin_loss_backward", "ctc_loss"):
        assert is_wrapper(f"aten::{name}"), name

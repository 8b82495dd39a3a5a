"""Batch and group normalization, and the backward of every normalization layer.

FLOPs per element are conventions in the spirit of `reductions.layer_norm` (docs/costs.md):
- forward with batch statistics: the mean (1), subtract it (1), square (1), sum (1), scale by
  the inverse deviation (1) = 5, plus 1 for the weight and 1 for the bias; with running
  statistics (evaluation) only the subtract and the scale: 2, plus weight and bias. The
  running statistics' update is per channel and not counted.
- backward with batch statistics, per element: grad_input 10 (x_hat = (x - mean) * rstd: 2;
  dy * w: 1; dy * w * x_hat: 1; their two sums: 2; dy * w - c1 - x_hat * c2: 3; times rstd: 1),
  grad_weight 2 (dy * x_hat and its sum; x_hat's 2 more when grad_input is not computed),
  grad_bias 1 (the sum of dy). With running statistics grad_input is dy * (w * rstd): 1.
  RMS norm: grad_input 7 (x_hat = x * rstd: 1; dy * w: 1; dy * w * x_hat: 1; its sum: 1;
  x_hat * c: 1; subtract: 1; times rstd: 1), grad_weight 2 (+1 for x_hat alone).
Bytes: every tensor argument read once (saved statistics and running stats included), every
result written once: the output (or each gradient the output mask asks for) at the dtype of
the tensor it mirrors; saved mean and inverse deviation one per channel (batch norm) or per
row and group (group norm) at the accumulation type, 4 bytes (8 for float64 inputs).
"""

from __future__ import annotations

from wlprof.cost.registry import VECTOR, Cost, OpCall, TensorArg, formula, register_wrapper

# always dispatch to native_batch_norm / cudnn_batch_norm / miopen_batch_norm (and their backward)
register_wrapper("aten::_batch_norm_impl_index", "aten::_batch_norm_impl_index_backward")


def _acc(x: TensorArg) -> int:
    return 8 if x.dtype == "float64" else 4


def _reads(call: OpCall) -> int:
    return sum(t.nbytes_read for t in call.tensors)


def _bn_forward(call: OpCall, training: bool) -> Cost:
    """Batch norm over the channel dim 1 of `input` (arguments 0-4: input, weight?, bias?,
    running_mean?, running_var?). Training writes the output, the saved mean and inverse
    deviation (C each) and the updated running stats; evaluation writes the output only."""
    x, w, b = call.tensor(0), call.tensor(1), call.tensor(2)
    rm, rv = call.tensor(3), call.tensor(4)
    c = x.dims[1] if len(x.dims) > 1 else 1
    per = (5 if training else 2) + (w is not None) + (b is not None)
    written = x.numel * x.itemsize
    if training:
        written += 2 * c * _acc(x)
        written += sum(t.numel * t.itemsize for t in (rm, rv) if t is not None)
    return Cost(per * x.numel, _reads(call) + written, VECTOR, x.dtype, written=written)


@formula("aten::native_batch_norm", "aten::cudnn_batch_norm", "aten::miopen_batch_norm",
         "aten::_native_batch_norm_legit", "aten::_native_batch_norm_legit_functional")
def batch_norm(call: OpCall) -> Cost | None:
    # (input, weight?, bias?, running_mean?, running_var?, training, momentum, eps); the legit
    # no_stats overload (input, weight, bias, training, momentum, eps) has no running stats
    if len(call.types) == 6:
        return _bn_forward_no_stats(call)
    return _bn_forward(call, call.scalar(5) is True)


def _bn_forward_no_stats(call: OpCall) -> Cost:
    x, w, b = call.tensor(0), call.tensor(1), call.tensor(2)
    training = call.scalar(3) is True
    c = x.dims[1] if len(x.dims) > 1 else 1
    per = (5 if training else 2) + (w is not None) + (b is not None)
    written = x.numel * x.itemsize + (2 * c * _acc(x) if training else 0)
    return Cost(per * x.numel, _reads(call) + written, VECTOR, x.dtype, written=written)


@formula("aten::_batch_norm_with_update", "aten::_batch_norm_with_update_functional")
def batch_norm_with_update(call: OpCall) -> Cost | None:
    # (input, weight?, bias?, running_mean, running_var, momentum, eps): batch statistics, stats updated
    return _bn_forward(call, True)


@formula("aten::_batch_norm_no_update", "aten::_native_batch_norm_legit_no_training")
def batch_norm_no_update(call: OpCall) -> Cost | None:
    # (input, weight?, bias?, running_mean?, running_var?, momentum, eps): running statistics when
    # given (evaluation), else the batch's (training without running stats); nothing updated
    return _bn_forward(call, call.tensor(3) is None)


@formula("aten::native_group_norm")
def group_norm(call: OpCall) -> Cost | None:
    # native_group_norm(input, weight?, bias?, N, C, HxW, group, eps) -> (out, mean [N, G], rstd [N, G]):
    # batch statistics per (sample, group); mean and rstd have the input's dtype
    x, w, b = call.tensor(0), call.tensor(1), call.tensor(2)
    n, g = call.scalar(3), call.scalar(6)
    if not isinstance(n, int) or not isinstance(g, int):
        return None
    per = 5 + (w is not None) + (b is not None)
    written = x.numel * x.itemsize + 2 * n * g * x.itemsize
    return Cost(per * x.numel, _reads(call) + written, VECTOR, x.dtype, written=written)


# ---------------------------------------------------------------- backward


def _mask(v, n: int = 3) -> list[bool] | None:
    if not isinstance(v, list) or len(v) != n:
        return None
    return [x is True for x in v]


def _norm_backward(call: OpCall, x: TensorArg, w: TensorArg | None, mask: list[bool], batch_stats: bool,
                   bias_numel: int | None, rms: bool = False) -> Cost:
    n = x.numel
    if rms:
        per_in, per_w, xhat = 7, 2, 1
    else:
        per_in, per_w, xhat = (10 if batch_stats else 1), 2, 2
    flops = 0
    if mask[0]:
        flops += per_in * n
    if len(mask) > 1 and mask[1] and w is not None:
        flops += per_w * n + (0 if mask[0] and batch_stats else xhat * n)
    if len(mask) > 2 and mask[2] and bias_numel:
        flops += n
    written = x.numel * x.itemsize if mask[0] else 0
    if len(mask) > 1 and mask[1] and w is not None:
        written += w.numel * w.itemsize
    if len(mask) > 2 and mask[2] and bias_numel:
        written += bias_numel * (w.itemsize if w is not None else x.itemsize)
    return Cost(flops, _reads(call) + written, VECTOR, x.dtype, written=written)


@formula("aten::native_layer_norm_backward")
def layer_norm_backward(call: OpCall) -> Cost | None:
    # (grad_out, input, normalized_shape, mean, rstd, weight?, bias?, output_mask)
    mask = _mask(call.scalar(7))
    if mask is None:
        return None
    x, w, b = call.tensor(1), call.tensor(5), call.tensor(6)
    return _norm_backward(call, x, w, mask, True, b.numel if b is not None else None)


@formula("aten::native_batch_norm_backward")
def batch_norm_backward(call: OpCall) -> Cost | None:
    # (grad_out, input, weight?, running_mean?, running_var?, save_mean?, save_invstd?, train, eps, output_mask)
    mask = _mask(call.scalar(9))
    if mask is None:
        return None
    x, w = call.tensor(1), call.tensor(2)
    c = x.dims[1] if len(x.dims) > 1 else 1
    return _norm_backward(call, x, w, mask, call.scalar(7) is True, c)


@formula("aten::batch_norm_backward")
def batch_norm_backward_new(call: OpCall) -> Cost | None:
    # (grad_out, input, weight, running_mean?, running_var?, save_mean?, save_var?, update, eps, output_mask,
    #  reserve): batch statistics when the forward saved them (training)
    mask = _mask(call.scalar(9))
    if mask is None:
        return None
    x, w = call.tensor(1), call.tensor(2)
    c = x.dims[1] if len(x.dims) > 1 else 1
    batch_stats = call.scalar(7) is True or call.tensor(5) is not None
    return _norm_backward(call, x, w, mask, batch_stats, c)


@formula("aten::cudnn_batch_norm_backward", "aten::miopen_batch_norm_backward")
def cudnn_batch_norm_backward(call: OpCall) -> Cost | None:
    # (input, grad_output, weight, running_mean?, running_var?, save_mean?, save_var?, epsilon[, reserveSpace]):
    # training only; all three gradients
    x, w = call.tensor(0), call.tensor(2)
    c = x.dims[1] if len(x.dims) > 1 else 1
    return _norm_backward(call, x, w, [True, True, True], True, c)


@formula("aten::native_group_norm_backward")
def group_norm_backward(call: OpCall) -> Cost | None:
    # (grad_out, input, mean, rstd, weight?, N, C, HxW, group, output_mask)
    mask = _mask(call.scalar(9))
    if mask is None:
        return None
    x, w = call.tensor(1), call.tensor(4)
    c = call.scalar(6)
    return _norm_backward(call, x, w, mask, True, c if isinstance(c, int) else None)


@formula("aten::_fused_rms_norm_backward")
def rms_norm_backward(call: OpCall) -> Cost | None:
    # (grad_out, input, normalized_shape, rstd, weight?, output_mask[2])
    mask = _mask(call.scalar(5), n=2)
    if mask is None:
        return None
    x, w = call.tensor(1), call.tensor(4)
    return _norm_backward(call, x, w, mask, True, None, rms=True)


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
# weight normalization: _weight_norm runs _weight_norm_interface nested (its backward has no such wrapper)
register_wrapper("aten::_weight_norm")


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


def _weight_norm_rows(v: TensorArg, dim) -> int | None:
    """The number of norms weight normalization takes of v: one per index of `dim` (-1: one over all of v)."""
    if not isinstance(dim, int) or isinstance(dim, bool):
        return None
    if dim == -1:
        return 1
    return v.dims[dim % len(v.dims)]


def _norm_size(g: TensorArg) -> int:
    """Bytes per saved norm: float32 for a reduced-precision weight, else its own size."""
    return max(g.itemsize, 4)


@formula("aten::_weight_norm_interface")
def weight_norm_interface(call: OpCall) -> Cost | None:
    """_weight_norm_interface(v, g, dim) -> (w, norms): w = v * g / ||v|| with one norm per index of `dim`.

    Per element of v: square and add into the norm (2) and the scaling multiply (1) = 3; per norm a
    sqrt and the divide of g by it (2). Reads v and g, writes w (v's shape and dtype) and the norms
    (float32 for a reduced-precision weight)."""
    v, g = call.tensor(0), call.tensor(1)
    rows = _weight_norm_rows(v, call.scalar(2)) if v is not None and g is not None else None
    if rows is None:
        return None
    written = v.numel * v.itemsize + rows * _norm_size(g)
    return Cost(3 * v.numel + 2 * rows, v.nbytes_read + g.nbytes_read + written, VECTOR, v.dtype, written=written)


@formula("aten::_weight_norm_interface_backward")
def weight_norm_interface_backward(call: OpCall) -> Cost | None:
    """_weight_norm_interface_backward(grad_w, saved_v, saved_g, saved_norms, dim) -> (grad_v, grad_g).

    With s = sum(grad_w * v) per norm: grad_g = s / norm and grad_v = (g / norm) * (grad_w - v * s / norm^2).
    Per element of v: the product and its sum (2), v times the coefficient (1), the subtract (1) and the
    scaling multiply (1) = 5; per norm grad_g's divide, g / norm, and s / norm^2 (a square and a divide) = 4.
    Reads grad_w, v, g and the norms; writes grad_v (v's shape) and grad_g (g's)."""
    gw, v, g, norms = (call.tensor(i) for i in range(4))
    if gw is None or v is None or g is None or norms is None:
        return None
    rows = _weight_norm_rows(v, call.scalar(4))
    if rows is None:
        return None
    written = v.numel * gw.itemsize + g.numel * g.itemsize
    reads = gw.nbytes_read + v.nbytes_read + g.nbytes_read + norms.nbytes_read
    return Cost(5 * v.numel + 4 * rows, reads + written, VECTOR, v.dtype, written=written)

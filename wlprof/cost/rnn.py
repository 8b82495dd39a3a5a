"""Recurrent layers (cuDNN's and MIOpen's fused RNN, LSTM and GRU) and embedding bags.

RNN FLOPs count the gate matrix products only, the convention of a Linear layer (the gates'
elementwise math, fused into the same kernels, is not counted): per layer and direction,
2 * steps * G * H * (I_l + R) with G gates (LSTM 4, GRU 3, plain RNN 1), H the hidden size,
I_l the layer's input width (the input's for layer 0, H or proj_size times the directions
after) and R the recurrent width (proj_size when set, else H), plus 2 * steps * H * proj_size
for an LSTM's projection; steps = batch x sequence (the packed rows for a packed sequence).
FlopCounterMode does not count these ops. The backward computes the data gradients (the
forward's products again) and, when its output mask asks, the weight gradients (once more).

Bytes: the inputs read once (input, the weights, the initial states; the backward also its
output, the gradients and the forward's reserve) and the outputs written once (the output
and final states; the backward the gradients asked for).

An embedding bag sums (mean, max) the rows its indices name into one row per bag: one add
(or comparison) per indexed element; a weighted bag one multiply more. It reads those rows,
the indices and offsets, and writes one row per bag. Its dense backward adds each bag's
gradient row into the rows its indices name: one add per indexed element, each touched row
written once (as the combining scatters count).
"""

from __future__ import annotations

from wlprof.cost.registry import MATRIX, VECTOR, Cost, OpCall, TensorArg, formula, register_wrapper

# The recurrent layers' entry points: each runs a backend's op (cuDNN's, MIOpen's, oneDNN's
# `mkldnn_rnn_layer` per layer and direction) or, without one, its cells as linear, add and
# activation ops nested inside; the packing helpers copy rows with nested copy_, fill_ and cat.
register_wrapper(
    "aten::lstm", "aten::gru", "aten::rnn_tanh", "aten::rnn_relu",
    "aten::lstm_cell", "aten::gru_cell", "aten::rnn_tanh_cell", "aten::rnn_relu_cell",
    "aten::_pack_padded_sequence", "aten::_pad_packed_sequence",
    # -> _embedding_bag (or its forward-only form); the backward -> _embedding_bag_dense_backward (or the
    # sparse or per-sample-weights forms)
    "aten::embedding_bag", "aten::_embedding_bag_backward",
    # the sparse gradient: grad rows gathered per index (index_select), scaled by per_sample_weights (mul_),
    # then embedding_sparse_backward
    "aten::_embedding_bag_sparse_backward",
)

GATES = {0: 1, 1: 1, 2: 4, 3: 3}  # cuDNN's modes: RNN_RELU, RNN_TANH, LSTM, GRU


def _list_elements(call: OpCall, i: int) -> int:
    """Elements of a recorded tensor list (its dims only: a list's dtype is not recorded)."""
    dims = call.dims[i] if i < len(call.dims) else ()
    total = 0
    for d in dims if isinstance(dims, tuple) else ():
        if isinstance(d, tuple) and all(isinstance(v, int) for v in d):
            n = 1
            for v in d:
                n *= v
            total += n
    return total


def _rnn_flops(x: TensorArg, mode, hidden, proj, layers, batch_first, bidirectional, packed: bool) -> int | None:
    gates = GATES.get(mode)
    if gates is None or not all(isinstance(v, int) for v in (hidden, layers)) or not x.dims:
        return None
    proj = proj if isinstance(proj, int) else 0
    if packed:  # [sum(batch_sizes), I]
        steps, width = x.dims[0], x.dims[-1]
    elif len(x.dims) == 3:
        steps, width = x.dims[0] * x.dims[1], x.dims[2]
    else:  # an unbatched sequence [T, I]
        steps, width = x.dims[0], x.dims[-1]
    dirs = 2 if bidirectional else 1
    rec = proj or hidden
    flops = 0
    for layer in range(layers):
        i_l = width if layer == 0 else rec * dirs
        per_dir = 2 * steps * gates * hidden * (i_l + rec) + (2 * steps * hidden * proj if proj else 0)
        flops += dirs * per_dir
    return flops


def _out_elements(x: TensorArg, hidden, proj, bidirectional, packed: bool) -> int:
    width = (proj or hidden) * (2 if bidirectional else 1)
    rows = x.dims[0] if packed or len(x.dims) < 3 else x.dims[0] * x.dims[1]
    return rows * width


def _packed(call: OpCall, i: int) -> bool:
    sizes = call.scalar(i)
    return isinstance(sizes, list) and len(sizes) > 0


@formula("aten::_cudnn_rnn", "aten::miopen_rnn")
def cudnn_rnn(call: OpCall) -> Cost | None:
    # (input, weight[], weight_stride0, weight_buf?, hx, cx?, mode, hidden_size, proj_size, num_layers,
    #  batch_first, dropout, train, bidirectional, batch_sizes, dropout_state?); MIOpen's has no proj_size
    miopen = call.name == "aten::miopen_rnn"
    at = (lambda i: i - 1 if miopen and i > 7 else i)  # noqa: E731 - the shift past MIOpen's missing arg
    x, hx, cx = call.tensor(0), call.tensor(4), call.tensor(5)
    if x is None or hx is None:
        return None
    mode, hidden, layers = call.scalar(6), call.scalar(7), call.scalar(at(9))
    proj = 0 if miopen else call.scalar(8)
    bidir, packed = bool(call.scalar(at(13))), _packed(call, at(14))
    flops = _rnn_flops(x, mode, hidden, proj, layers, bool(call.scalar(at(10))), bidir, packed)
    if flops is None:
        return None
    s = x.itemsize
    weights = _list_elements(call, 1) * s
    states = hx.numel * s + (cx.numel * s if cx is not None else 0)
    written = _out_elements(x, hidden, proj, bidir, packed) * s + states
    return Cost(flops, x.nbytes_read + weights + states + written, MATRIX, x.dtype, written=written)


@formula("aten::_cudnn_rnn_backward", "aten::miopen_rnn_backward")
def cudnn_rnn_backward(call: OpCall) -> Cost | None:
    # (input, weight[], weight_stride0, weight_buf, hx, cx?, output, grad_output?, grad_hy?, grad_cy?, mode,
    #  hidden_size, proj_size, num_layers, batch_first, dropout, train, bidirectional, batch_sizes,
    #  dropout_state?, reserve, output_mask[4]); MIOpen's has no proj_size
    miopen = call.name == "aten::miopen_rnn_backward"
    at = (lambda i: i - 1 if miopen and i > 11 else i)  # noqa: E731
    x, hx, cx = call.tensor(0), call.tensor(4), call.tensor(5)
    mask = call.scalar(at(21))
    if x is None or hx is None or not (isinstance(mask, list) and len(mask) == 4):
        return None
    mode, hidden, layers = call.scalar(10), call.scalar(11), call.scalar(at(13))
    proj = 0 if miopen else call.scalar(12)
    bidir, packed = bool(call.scalar(at(17))), _packed(call, at(18))
    fwd = _rnn_flops(x, mode, hidden, proj, layers, bool(call.scalar(at(14))), bidir, packed)
    if fwd is None:
        return None
    flops = fwd * (2 if mask[3] is True else 1)
    s = x.itemsize
    weights = _list_elements(call, 1) * s
    reads = x.nbytes_read + weights + sum(t.nbytes_read for i in (4, 5, 6, 7, 8, 9, at(20))
                                          if (t := call.tensor(i)) is not None)
    written = ((x.numel * s if mask[0] is True else 0) + (hx.numel * s if mask[1] is True else 0)
               + (cx.numel * s if mask[2] is True and cx is not None else 0) + (weights if mask[3] is True else 0))
    return Cost(flops, reads + written, MATRIX, x.dtype, written=written)


def _mkldnn_steps(x: TensorArg) -> int:
    """Rows of a oneDNN RNN layer's input ([T, B, I], or a packed or unbatched [rows, I]): one
    gate product each."""
    return x.numel // x.dims[-1] if x.dims and x.dims[-1] else 0


def _workspace_bytes(call: OpCall) -> int:
    """The training workspace a oneDNN RNN layer allocates with a nested `aten::empty` of uint8 (ScalarType
    code 0), [bytes]; 0 when none is recorded (inference, or a trace without the nested calls)."""
    for ch in call.children:
        size = ch.scalar(0)
        if ch.name == "aten::empty" and ch.scalar(1) == 0 and isinstance(size, list) and len(size) == 1 \
                and isinstance(size[0], int):
            return size[0]
    return 0


# The bias pair summed (aten::add), gradients zeroed or made contiguous nested inside: the layer's own
# auxiliary work; they must not make it a dispatcher.
@formula("aten::mkldnn_rnn_layer", aux_children=True, uses_children=True)
def mkldnn_rnn_layer(call: OpCall) -> Cost | None:
    """mkldnn_rnn_layer(input, w_ih [G*H, I], w_hh [G*H, H], b_ih, b_hh, hx, cx, reverse, batch_sizes,
    mode, hidden_size, num_layers, has_biases, bidirectional, batch_first, train) -> (output, hy, cy,
    workspace): one layer in one direction (the CPU's LSTM in float32 or bfloat16).

    FLOPs: the gate products, 2 * steps * G * H * (I + H) = 2 * steps * (|w_ih| + |w_hh|), as
    `_cudnn_rnn` counts. Bytes: input, weights and states read; output [steps, H], hy and cy
    written, and in training the workspace the call allocates nested inside (`_workspace_bytes`; the
    backward reads it at its recorded size).
    """
    x, w_ih, w_hh = call.tensor(0), call.tensor(1), call.tensor(2)
    hx, cx = call.tensor(5), call.tensor(6)
    if x is None or w_ih is None or w_hh is None or hx is None or len(w_hh.dims) != 2:
        return None
    steps, hidden = _mkldnn_steps(x), w_hh.dims[1]
    flops = 2 * steps * (w_ih.numel + w_hh.numel)
    states = hx.numel * hx.itemsize + (cx.numel * cx.itemsize if cx is not None else 0)
    written = steps * hidden * x.itemsize + states + _workspace_bytes(call)
    reads = sum(t.nbytes_read for t in call.tensors)
    return Cost(flops, reads + written, MATRIX, x.dtype, written=written)


@formula("aten::mkldnn_rnn_layer_backward", aux_children=True)
def mkldnn_rnn_layer_backward(call: OpCall) -> Cost | None:
    """mkldnn_rnn_layer_backward(input, w_ih, w_hh, b_ih, b_hh, hx, cx, output, hy, cy, grad_output?,
    grad_hy?, grad_cy?, reverse, mode, hidden_size, num_layers, has_biases, train, bidirectional,
    batch_sizes, batch_first, workspace) -> (grad_input, grad_w_ih, grad_w_hh, grad_b_ih, grad_b_hh,
    grad_hx, grad_cx).

    FLOPs: the data gradients (the forward's gate products again) and the weight gradients (once
    more), 2 * 2 * steps * (|w_ih| + |w_hh|); every gradient is computed. Bytes: every tensor argument
    read once (the workspace at its recorded size), every gradient written once at its tensor's size.
    """
    x, w_ih, w_hh = call.tensor(0), call.tensor(1), call.tensor(2)
    if x is None or w_ih is None or w_hh is None:
        return None
    flops = 2 * 2 * _mkldnn_steps(x) * (w_ih.numel + w_hh.numel)
    grads = [t for i in range(7) if (t := call.tensor(i)) is not None]
    written = sum(t.numel * t.itemsize for t in grads)
    reads = sum(t.nbytes_read for t in call.tensors)
    return Cost(flops, reads + written, MATRIX, x.dtype, written=written)


# On the CPU the offsets are turned into a bag per index (offset2bag: index_add_, sub_, cumsum) and a mean
# divided (div_) by ops nested inside: auxiliary, costed on their own; the gather and sum are its own.
@formula("aten::_embedding_bag", "aten::_embedding_bag_forward_only", aux_children=True)
def embedding_bag(call: OpCall) -> Cost | None:
    # (weight[V, D], indices[N], offsets[B (+1)], scale_grad_by_freq, mode, sparse, per_sample_weights?,
    #  include_last_offset, padding_idx)
    w, idx, offsets = call.tensor(0), call.tensor(1), call.tensor(2)
    if w is None or idx is None or offsets is None or len(w.dims) != 2:
        return None
    d = w.dims[1]
    bags = max(offsets.numel - (1 if call.scalar(7) is True else 0), 0)
    psw = call.tensor(6)
    n = idx.numel
    flops = n * d * (2 if psw is not None else 1)
    written = bags * d * w.itemsize
    reads = n * d * w.itemsize + idx.nbytes_read + offsets.nbytes_read + (psw.nbytes_read if psw is not None else 0)
    return Cost(flops, reads + written, VECTOR, w.dtype, written=written)


@formula("aten::_embedding_bag_dense_backward")
def embedding_bag_dense_backward(call: OpCall) -> Cost | None:
    # (grad[B, D], indices[N], offset2bag[N], bag_size[B], maximum_indices, num_weights, scale_grad_by_freq,
    #  mode, per_sample_weights?, padding_idx)
    g, idx = call.tensor(0), call.tensor(1)
    v = call.scalar(5)
    if g is None or idx is None or len(g.dims) != 2 or not isinstance(v, int):
        return None
    d, n = g.dims[1], idx.numel
    psw = call.tensor(8)
    written = min(n, v) * d * g.itemsize
    reads = g.nbytes_read + sum(t.nbytes_read for i in (1, 2, 3, 4) if (t := call.tensor(i)) is not None) \
        + (psw.nbytes_read if psw is not None else 0)
    return Cost(n * d * (2 if psw is not None else 1), reads + written, VECTOR, g.dtype, written=written)

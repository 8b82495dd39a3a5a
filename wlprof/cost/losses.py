"""Losses and their backward: negative log-likelihood (1-d and 2-d), MSE, smooth L1 / Huber, binary cross-entropy.

FLOPs per element follow the elementwise convention (docs/costs.md), plus one add per
element for a reduced loss (mean or sum; the mean's single divide is not counted):
- nll_loss picks one log-probability per sample: negate (1) and add into the sum (1),
  weighted by its class's weight (1 more); its backward writes -grad * weight / total_weight
  at each sample's target (2, the weight's multiply 1 more).
- mse: subtract, square (2); backward 2 * (x - t) * grad (3).
- smooth L1 / Huber: subtract, abs, compare, then the quadratic or linear branch (5);
  backward subtract, compare, scale or sign, times grad (4).
- binary cross-entropy: -(t log x + (1 - t) log(1 - x)) = 7 (weight 1); backward
  grad * (x - t) / max(x (1 - x), eps) = 6 (weight 1).
Bytes: nll_loss reads the targets and one input element per sample (a gather, as
`indexing.gather` counts), the weight vector whole, and writes the loss (one element, or
one per sample unreduced) and the total weight; its backward reads grad_output, the
targets, the weight and total_weight and writes one element per sample into grad_input,
which a nested fill_ (costed on its own) zeroes first. The other losses read their inputs
once and write the loss (or, backward, a gradient of the input's size) once; where the
loss is reduced by a mean or sum nested inside (CUDA), the call writes the elementwise
loss and the nested reduction is costed on its own.
"""

from __future__ import annotations

from wlprof.cost.registry import VECTOR, Cost, OpCall, TensorArg, formula, register_wrapper

register_wrapper(
    "aten::cross_entropy_loss",  # -> log_softmax + nll_loss_nd
    "aten::nll_loss_nd", "aten::nll_loss", "aten::nll_loss2d",  # -> nll_loss(2d)_forward
    "aten::l1_loss",  # -> abs(sub) and a mean
    "aten::binary_cross_entropy_with_logits",  # runs as log_sigmoid, mul, add, ... ops nested inside
    # composites: their elementwise ops and reductions are nested inside, costed there
    "aten::kl_div", "aten::cosine_similarity", "aten::cosine_embedding_loss", "aten::pairwise_distance",
    "aten::triplet_margin_loss", "aten::margin_ranking_loss", "aten::soft_margin_loss",
    "aten::soft_margin_loss_backward",
    "aten::ctc_loss",  # -> _ctc_loss (or cuDNN's), then a mean or sum
)

NONE, MEAN, SUM = 0, 1, 2  # at::Reduction


def _reduced(reduction, n: int) -> int:
    return n if reduction == NONE else 1


def _cost(flops: int, reads: int, written: int, like: TensorArg) -> Cost:
    return Cost(flops, reads + written, VECTOR, like.dtype, written=written)


def _samples(target: TensorArg) -> int:
    return target.numel if target.dims else 1  # a 0-d target: one unbatched sample


@formula("aten::nll_loss_forward", "aten::nll_loss2d_forward")
def nll_loss_forward(call: OpCall) -> Cost | None:
    # (self, target, weight?, reduction, ignore_index) -> (output, total_weight)
    x, t, w = call.tensor(0), call.tensor(1), call.tensor(2)
    n = _samples(t)
    reduction = call.scalar(3)
    per = 2 + (w is not None)
    reads = t.nbytes_read + n * x.itemsize + (w.nbytes_read if w is not None else 0)
    written = (_reduced(reduction, n) + 1) * x.itemsize
    return _cost(per * n, reads, written, x)


@formula("aten::nll_loss_backward", "aten::nll_loss2d_backward")
def nll_loss_backward(call: OpCall) -> Cost | None:
    # (grad_output, self, target, weight?, reduction, ignore_index, total_weight)
    g, x, t, w, tw = call.tensor(0), call.tensor(1), call.tensor(2), call.tensor(3), call.tensor(6)
    n = _samples(t)
    per = 2 + (w is not None)
    reads = g.nbytes_read + t.nbytes_read + (w.nbytes_read if w is not None else 0) + (tw.nbytes_read if tw else 0)
    return _cost(per * n, reads, n * x.itemsize, x)


_REDUCERS = ("aten::mean", "aten::sum")


def _pointwise_loss(per: int, tensors: int, reduction_at: int):
    def cost(call: OpCall) -> Cost | None:
        ts = [call.tensor(i) for i in range(tensors)]
        ts = [t for t in ts if t is not None]
        x = ts[0]
        n = x.numel
        reduction = call.scalar(reduction_at)
        if any(ch.name in _REDUCERS for ch in call.children):
            # the elementwise loss into a temporary, reduced by a nested mean/sum costed on its own (CUDA)
            return _cost(per * n, sum(t.nbytes_read for t in ts), n * x.itemsize, x)
        flops = per * n + (n if reduction != NONE else 0)
        return _cost(flops, sum(t.nbytes_read for t in ts), _reduced(reduction, n) * x.itemsize, x)

    return cost


def _pointwise_loss_backward(per: int, tensors: int):
    def cost(call: OpCall) -> Cost | None:
        ts = [call.tensor(i) for i in range(tensors)]
        ts = [t for t in ts if t is not None]
        x = call.tensor(1)
        return _cost(per * x.numel, sum(t.nbytes_read for t in ts), x.numel * x.itemsize, x)

    return cost


# A reduced loss computed as an elementwise pass and a nested mean/sum (CUDA's apply_loss_reduction)
# stays costed for its own pass: the nested reduction is auxiliary, costed on its own.
_LOSS = {"aux_children": _REDUCERS, "uses_children": True}
# mse_loss(self, target, reduction); mse_loss_backward(grad_output, self, target, reduction)
formula("aten::mse_loss", **_LOSS)(_pointwise_loss(2, 2, 2))
formula("aten::mse_loss_backward")(_pointwise_loss_backward(3, 3))
# smooth_l1_loss(self, target, reduction, beta); huber_loss(self, target, reduction, delta)
formula("aten::smooth_l1_loss", "aten::huber_loss", **_LOSS)(_pointwise_loss(5, 2, 2))
formula("aten::smooth_l1_loss_backward", "aten::huber_loss_backward")(_pointwise_loss_backward(4, 3))


@formula("aten::binary_cross_entropy", **_LOSS)
def binary_cross_entropy(call: OpCall) -> Cost | None:
    # (self, target, weight?, reduction)
    w = call.tensor(2)
    return _pointwise_loss(7 + (w is not None), 3, 3)(call)


@formula("aten::binary_cross_entropy_backward", aux_children=("aten::div_", "aten::div"))
def binary_cross_entropy_backward(call: OpCall) -> Cost | None:
    # (grad_output, self, target, weight?, reduction)
    w = call.tensor(3)
    return _pointwise_loss_backward(6 + (w is not None), 4)(call)



# CTC: per (sample, time step, extended-label state) a log-sum-exp of up to three predecessors (3 x 4,
# the reductions' logsumexp convention) plus the emission's add: 13. The backward runs the same
# recursion backwards (13), combines alpha and beta per state into its class (add, log-sum-exp: 5) and
# writes each log-probability's gradient (exp, subtract, exp, times grad: 4 per element of log_probs).
_CTC_STATE, _CTC_COMBINE, _CTC_GRAD = 13, 5, 4


def _ctc_lengths(call: OpCall, at: int) -> tuple[list[int], list[int]] | None:
    """input_lengths and target_lengths as the IntList overload records them; the Tensor overload's
    lengths are data the trace does not hold (None: FLOPs unknown)."""
    inp, tgt = call.scalar(at), call.scalar(at + 1)
    if not (isinstance(inp, list) and isinstance(tgt, list) and len(inp) == len(tgt)):
        return None
    if not all(isinstance(v, int) for v in inp + tgt):
        return None
    return inp, tgt


def _ctc_states(lengths: tuple[list[int], list[int]]) -> int:
    return sum(t * (2 * s + 1) for t, s in zip(*lengths, strict=True))


@formula("aten::_ctc_loss")
def ctc_loss(call: OpCall) -> Cost | None:
    """_ctc_loss(log_probs [T, N, C], targets [N, S] or [sum(S)], input_lengths, target_lengths, blank,
    zero_infinity) -> (neg_log_likelihood [N], log_alpha [N, T, 2*S_max + 1]).

    FLOPs: 13 per (sample, step, state) over each sample's own lengths (the IntList overload records
    them; the Tensor overload does not: unknown). Bytes: log_probs and targets read, both results
    written (S_max: the padded targets' width, or the longest target length)."""
    lp, tgt = call.tensor(0), call.tensor(1)
    if lp is None or tgt is None or len(lp.dims) != 3:
        return None
    lengths = _ctc_lengths(call, 2)
    t_max, n = lp.dims[0], lp.dims[1]
    if len(tgt.dims) == 2:
        s_max = tgt.dims[1]
    elif lengths is not None:
        s_max = max(lengths[1], default=0)
    else:
        return Cost(None, None, VECTOR, lp.dtype)
    written = (n + n * t_max * (2 * s_max + 1)) * lp.itemsize
    flops = _CTC_STATE * _ctc_states(lengths) if lengths is not None else None
    return Cost(flops, lp.nbytes_read + tgt.nbytes_read + written, VECTOR, lp.dtype, written=written)


@formula("aten::_ctc_loss_backward")
def ctc_loss_backward(call: OpCall) -> Cost | None:
    """_ctc_loss_backward(grad [N], log_probs [T, N, C], targets, input_lengths, target_lengths,
    neg_log_likelihood, log_alpha, blank, zero_infinity) -> grad_log_probs [T, N, C].

    FLOPs: the beta recursion (13) and the alpha-beta combination (5) per (sample, step, state), and
    4 per log-probability for its gradient. Bytes: every tensor argument read once, the gradient
    written at log_probs' size."""
    lp = call.tensor(1)
    if lp is None or len(lp.dims) != 3:
        return None
    lengths = _ctc_lengths(call, 3)
    flops = ((_CTC_STATE + _CTC_COMBINE) * _ctc_states(lengths) + _CTC_GRAD * lp.numel
             if lengths is not None else None)
    written = lp.numel * lp.itemsize
    return Cost(flops, sum(t.nbytes_read for t in call.tensors) + written, VECTOR, lp.dtype, written=written)

"""`--trace FILE --scale DIM=FACTOR`: an ingested step's op calls with one dimension rewritten.

`DIM` names the dimension to rewrite:

- `batch` (or `rows`, `tokens`): the step's batch, the leading dimension most of its activations
  of three or more dimensions share in memory (a transformer's [batch, sequence, width], a
  convolution's [batch, channels, height, width]), or, where it has none, the rows of its first
  matrix op (an MLP's batch). That batch becomes FACTOR times it wherever it is a tensor's outermost
  dimension in memory, and so do its flattenings with the next dimension (batch x sequence rows, batch
  x heads) that the trace holds: weights and biases (by their position in the ops that take them), the
  optimizer's tensor lists and a matrix op's output width N keep their sizes, and a matrix op's inner K
  follows its first operand's.
- a number: that dimension's value itself (`--scale 4096=2` rewrites every dim of 4096), and its
  flattenings with the dimension next to it in memory that the trace holds (a sequence of 13 in [3,
  13, 48] activations: the [39, 48] rows of their linear layers).

New sizes are rounded (at least 1); strides follow the new sizes in the order their tensor was laid
out (a broadcast stays a broadcast). Other scalars (view sizes, k) are kept. The calls keep their op,
dtypes and order; their durations are dropped, the original ones kept as `measured_us` for the
unscaled step.

`anchored` then predicts the calls the profile holds nothing of (answered from their op's
other layouts, their class or the base alone) and those whose work their shapes do not say
(an index op's unrecorded indices) from their own measured time, times the profile's ratio of
the new shapes to the old: the trace's time is the one measurement of them there is (on the
trace's device, which may not be the profile's).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from wlprof.errors import InputError, did_you_mean

ROW_NAMES = ("batch", "rows", "tokens")


def parse_scale(text: str, arg: str = "--scale") -> tuple[str, float]:
    """'batch=4' -> ('batch', 4.0); '4096=0.5' -> ('4096', 0.5)."""
    dim, sep, raw = str(text or "").partition("=")
    dim = dim.strip().lower()
    try:
        factor = float(raw)
    except ValueError:
        factor = math.nan
    if not sep or not dim or not (factor > 0 and math.isfinite(factor)):
        raise InputError(arg, "must be DIM=FACTOR with DIM batch (rows, tokens) or a dimension's value and "
                         "FACTOR a positive number (e.g. batch=4)", text)
    if dim not in ROW_NAMES and not dim.isdigit():
        hint = did_you_mean(dim, ROW_NAMES) or (
            "a trace names no other dimension: give a sequence, width or head count by its size in the trace "
            "(e.g. 512=2 for a sequence of 512; `wlprof predict --profile P --trace FILE` lists the calls' shapes)")
        raise InputError(arg, f"must name the dimension as {', '.join(ROW_NAMES)} or by its value (e.g. 4096=2)",
                         text, hint=hint)
    if dim.isdigit() and int(dim) < 2:
        raise InputError(arg, "must name a dimension of 2 or more by its value: dimensions of 0 and 1 (broadcasts, "
                         "kept reductions, empty tensors) cannot be told from one another", text)
    return dim, factor


def batch_dim(ops: pd.DataFrame) -> int | None:
    """The rows of the first matrix op of the step (M of its first mm, addmm, bmm or linear, in time order;
    a grouped GEMM's rows are its groups')."""
    from wlprof.analysis.models import matrix_dims

    if "ts_us" in ops:
        ops = ops.sort_values("ts_us", kind="stable")
    for name, dims in zip(ops.op_name, ops.op_input_dims, strict=True):
        if name == "aten::_grouped_mm":
            continue
        m = matrix_dims(str(name), dims)[0]
        if not math.isnan(m):
            return int(m)
    return None


def _strides(old_dims, old_strides, new_dims):
    """New strides for `new_dims` in the memory order of the old ones: zero strides (broadcasts) stay
    zero, the innermost dimension keeps its step, and each other one keeps the gap the old layout left
    after the next inner one (a view into a wider tensor, q of a fused [.., 3 x width] projection, keeps
    the projection's row as its step). Among equal strides a size-1 dimension counts as the inner one:
    its stride says nothing of the layout."""
    if not isinstance(old_strides, list) or len(old_strides) != len(old_dims) or not old_dims:
        return old_strides
    order = sorted(range(len(old_dims)), key=lambda j: (-old_strides[j], old_dims[j] == 1, -j))
    out = [0] * len(new_dims)
    inner = None  # the next inner dimension: (its old span, its new span) in elements
    for j in reversed(order):
        if old_strides[j] == 0:
            continue
        if inner is None:
            out[j] = old_strides[j]
        else:
            old_span, new_span = inner
            if old_span > 0 and old_strides[j] % old_span == 0:
                out[j] = new_span * (old_strides[j] // old_span)
            else:  # a gap that is no multiple of the inner span (padding): kept as it was
                out[j] = new_span + old_strides[j] - old_span
        inner = (old_strides[j] * max(old_dims[j], 1), out[j] * max(new_dims[j], 1))
    return out


def rewrite(ops: pd.DataFrame, value: int, factor: float, mapping: dict[int, int] | None = None) -> pd.DataFrame:
    """`ops` with every input dimension equal to `value` multiplied by `factor` (`mapping`: {old size: new
    size} for every size to rewrite, `value_mapping`'s)."""
    sizes = mapping if mapping is not None else {value: max(1, int(round(value * factor)))}
    out = ops.copy()
    dims_col, strides_col = [], []
    cache: dict[tuple, tuple] = {}
    for d_s, s_s in zip(ops.op_input_dims, ops.op_input_strides, strict=True):
        key = (d_s, s_s)
        if key not in cache:
            try:
                dims = json.loads(d_s) if isinstance(d_s, str) else []
                strides = json.loads(s_s) if isinstance(s_s, str) else []
            except ValueError:
                cache[key] = (d_s, s_s)
            else:
                nd, ns = [], []
                for i, t in enumerate(dims):
                    st = strides[i] if i < len(strides) else []
                    if isinstance(t, list) and all(isinstance(x, int) for x in t):
                        new = [sizes.get(x, x) for x in t]
                        nd.append(new)
                        ns.append(_strides(t, st, new) if new != t else st)
                    else:  # a tensor list: each member
                        if isinstance(t, list):
                            sub_d = [[sizes.get(x, x) for x in m] if isinstance(m, list) else m for m in t]
                            sub_s = [_strides(m, st[j] if isinstance(st, list) and j < len(st) else [], sub_d[j])
                                     if isinstance(m, list) else st for j, m in enumerate(t)]
                            nd.append(sub_d)
                            ns.append(sub_s)
                        else:
                            nd.append(t)
                            ns.append(st)
                cache[key] = (json.dumps(nd, separators=(",", ":")), json.dumps(ns, separators=(",", ":")))
        dims_col.append(cache[key][0])
        strides_col.append(cache[key][1])
    out["op_input_dims"] = dims_col
    out["op_input_strides"] = strides_col
    out["measured_us"] = pd.to_numeric(ops.dur_us, errors="coerce") if "dur_us" in ops else np.nan
    out["dur_us"] = np.nan
    return _costs_dropped(out, ops)


# inputs that are parameters (weights, biases, norm statistics), by position, in the ops that take them
PARAM_POSITIONS = {
    "aten::addmm": (0, 2), "aten::linear": (1, 2), "aten::_grouped_mm": (1,), "aten::embedding": (0,), "aten::embedding_bag": (0,),
    "aten::_embedding_bag": (0,), "aten::_cudnn_rnn": (1, 3), "aten::conv1d": (1, 2), "aten::conv2d": (1, 2), "aten::conv3d": (1, 2),
    "aten::convolution": (1, 2), "aten::_convolution": (1, 2), "aten::cudnn_convolution": (1,),
    "aten::conv_transpose1d": (1, 2), "aten::conv_transpose2d": (1, 2), "aten::conv_transpose3d": (1, 2),
    "aten::cudnn_convolution_transpose": (1,), "aten::convolution_backward": (2,),
    "aten::layer_norm": (2, 3), "aten::native_layer_norm": (2, 3), "aten::native_layer_norm_backward": (5, 6),
    "aten::rms_norm": (2,), "aten::_fused_rms_norm": (2,), "aten::group_norm": (2, 3),
    "aten::native_group_norm": (1, 2), "aten::native_group_norm_backward": (4,),
    "aten::batch_norm": (1, 2, 3, 4), "aten::native_batch_norm": (1, 2, 3, 4),
    "aten::_native_batch_norm_legit": (1, 2, 3, 4), "aten::_native_batch_norm_legit_no_training": (1, 2, 3, 4),
    "aten::cudnn_batch_norm": (1, 2, 3, 4), "aten::native_batch_norm_backward": (2, 3, 4, 5, 6),
    "aten::cudnn_batch_norm_backward": (2, 3, 4, 5, 6),
}
# an embedding bag's 1-D indices (and the tensors of one entry per index) beside the tensor of one entry per
# bag that `--scale batch` rewrites: (indices, bags, the other per-index positions). Its indices number
# bags x mean bag size, so they scale with the bags (the aten signatures' positions).
EMBEDDING_BAGS = {
    "aten::embedding_bag": (1, 2, (6,)), "aten::_embedding_bag": (1, 2, (6,)),
    "aten::_embedding_bag_forward_only": (1, 2, (6,)), "aten::_embedding_bag_backward": (1, 2, (3, 10)),
    "aten::_embedding_bag_sparse_backward": (1, 2, (3,)), "aten::_embedding_bag_dense_backward": (1, 3, (2,)),
    "aten::_embedding_bag_per_sample_weights_backward": (2, 3, (4,)),
}
MATRIX_OPERANDS = {"aten::mm": (0, 1), "aten::bmm": (0, 1), "aten::matmul": (0, 1), "aten::addmm": (1, 2),
                   "aten::baddbmm": (1, 2), "aten::addbmm": (1, 2), "aten::_grouped_mm": (0, 1)}


def _optimizer(name: str) -> bool:
    """An optimizer's op over tensor lists (its tensors are parameters and their states)."""
    return "_foreach_" in name or name.startswith("aten::_fused_adam") or name.startswith("aten::_fused_sgd")


def _int_list(t) -> bool:
    return isinstance(t, list) and all(isinstance(x, int) for x in t)


def _outermost(dims: list[int], strides) -> int | None:
    """The index of a tensor's outermost dimension in memory (the largest stride; size-1 and broadcast
    dimensions skipped; without strides the first one); None for a scalar."""
    idx = [j for j, x in enumerate(dims) if x != 1] or list(range(len(dims)))
    if not idx:
        return None
    if _int_list(strides) and len(strides) == len(dims):
        real = [j for j in idx if strides[j] != 0]
        if real:
            return max(real, key=lambda j: (strides[j], -j))
    return idx[0]


def _tensors(ops: pd.DataFrame):
    """Per call: (op name, [(input position, member, dims, strides)] of its tensor inputs that are not
    parameters, each member of a tensor list on its own (member None: a plain tensor))."""
    for name, d_s, s_s in zip(ops.op_name.astype(str), ops.op_input_dims, ops.op_input_strides, strict=True):
        try:
            dims = json.loads(d_s) if isinstance(d_s, str) else []
            strides = json.loads(s_s) if isinstance(s_s, str) else []
        except ValueError:
            yield name, []
            continue
        if _optimizer(name) or not isinstance(dims, list):
            yield name, []
            continue
        skip = PARAM_POSITIONS.get(name, ())
        out = []
        for i, t in enumerate(dims):
            st = strides[i] if isinstance(strides, list) and i < len(strides) else []
            if i in skip or not isinstance(t, list):
                continue
            if _int_list(t):
                if t:
                    out.append((i, None, t, st))
            else:
                out += [(i, j, m, st[j] if isinstance(st, list) and j < len(st) else [])
                        for j, m in enumerate(t) if _int_list(m) and m]
        yield name, out


def _memory_order(dims: list[int], strides) -> list[int]:
    """A tensor's sizes from its outermost dimension in memory to its innermost (as recorded without
    strides)."""
    if not (_int_list(strides) and len(strides) == len(dims)):
        return list(dims)
    return [dims[j] for j in sorted(range(len(dims)), key=lambda j: (-strides[j], j))]


def _parameters(ops: pd.DataFrame) -> set[tuple[int, ...]]:
    """The step's parameter shapes, in memory order: the tensors of its optimizer's lists and those at the
    parameter positions of the ops that take weights."""
    out: set[tuple[int, ...]] = set()
    for name, d_s, s_s in zip(ops.op_name.astype(str), ops.op_input_dims, ops.op_input_strides, strict=True):
        pos = PARAM_POSITIONS.get(name)
        if not (pos or _optimizer(name)) or not isinstance(d_s, str):
            continue
        try:
            dims = json.loads(d_s)
            strides = json.loads(s_s) if isinstance(s_s, str) else []
        except ValueError:
            continue
        for i, t in enumerate(dims if isinstance(dims, list) else []):
            if pos and i not in pos:
                continue
            st = strides[i] if isinstance(strides, list) and i < len(strides) else []
            if name == "aten::_grouped_mm" and not (_int_list(t) and len(t) == 3):
                continue  # a 2-D second operand is an activation (the weight gradient's)
            members = [(t, st)] if _int_list(t) else [
                (m, st[j] if isinstance(st, list) and j < len(st) else []) for j, m in enumerate(t)
                if _int_list(m)] if isinstance(t, list) else []
            out |= {tuple(_memory_order(m, ms)) for m, ms in members if m}
    return out


def _activation_shapes(calls: list, params: set[tuple[int, ...]]) -> set[tuple[int, ...]]:
    """The step's activation shapes in memory order: every tensor not of a parameter's shape, and a matrix
    op's first operand even where a weight has its shape."""
    return {mo for name, ts in calls for i, _, t, st in ts
            if (mo := tuple(_memory_order(t, st))) not in params or i == MATRIX_OPERANDS.get(name, (None,))[0]}


def batch_mapping(ops: pd.DataFrame, factor: float, batch: int | None = None) -> tuple[int | None, dict[int, int]]:
    """(the step's batch, {old size: new size}) for `--scale batch=FACTOR`: the batch is `batch` where given,
    else the first dimension that leads most of the elements of the activations of three or more dimensions
    (else the first matrix op's rows); the mapping holds it and each flattening of it with the next dimension
    in memory that the trace holds (a [batch, sequence, ...] activation and a [batch x sequence, ...] one)."""
    from collections import Counter

    calls = list(_tensors(ops))
    params = _parameters(ops)
    if batch is None:
        lead, lead2 = Counter(), Counter()  # elements led, by a call's distinct tensors of 3+ and of 2 dimensions
        for name, ts in calls:
            first = MATRIX_OPERANDS.get(name, (None,))[0]
            for t in {tuple(t) for i, _, t, st in ts if i == first or tuple(_memory_order(t, st)) not in params}:
                (lead if len(t) >= 3 else lead2)[t[0]] += math.prod(t)
        top = max(lead.values(), default=0)
        tied = [v for v, w in lead.items() if w >= 0.99 * top]  # a tie: the leader of the 2-D ones (a loss's rows)
        batch = max(tied, key=lambda v: (lead2[v], lead[v])) if lead else batch_dim(ops)
    if batch is None:
        return None, {}
    new = max(1, int(round(batch * factor)))
    mapping = {batch: new}
    # the activations as `lead` reads them: a matrix op's first operand is one even where a weight has its
    # shape (an attention's [batch x sequence, width] input beside its [width, width] projection)
    ordered = _activation_shapes(calls, params)
    for _, ts in calls:
        for _, _, t, st in ts:
            mo = _memory_order(t, st)
            if len(mo) >= 2 and mo[0] == batch and mo[1] > 1:
                flat = batch * mo[1]
                if flat not in mapping and (flat, *mo[2:]) in ordered:
                    mapping[flat] = new * mo[1]
    return batch, mapping


def value_mapping(ops: pd.DataFrame, value: int, factor: float) -> dict[int, int]:
    """{old size: new size} for `--scale VALUE=FACTOR`: the value, and each flattening of it with the
    dimension next to it in memory that the trace holds as a tensor of its own (a sequence of 13 in a [3,
    13, 48] activation and the [39, 48] rows a linear layer reads), activations only, not parameters."""
    new = max(1, int(round(value * factor)))
    mapping = {value: new}
    if value == 1:
        return mapping
    calls = list(_tensors(ops))
    params = _parameters(ops)
    ordered = _activation_shapes(calls, params)
    for mo in ordered:
        for j, x in enumerate(mo):
            if x != value:
                continue
            for a in (j - 1, j):  # merged with the outer neighbour, or with the inner one
                if a < 0 or a + 1 >= len(mo) or min(mo[a], mo[a + 1]) <= 1:
                    continue
                flat = mo[a] * mo[a + 1]
                other = mo[a + 1] if a == j else mo[a]
                if flat not in mapping and (*mo[:a], flat, *mo[a + 2:]) in ordered:
                    mapping[flat] = new * other
    return mapping


STACKED = 3  # a leading dimension this small before the batch stacks tensors (q, k and v), it does not lead


def _rewritten(t: list[int], st, batch: int, mapping: dict[int, int], inner: set[int],
               ambiguous: set[int] = frozenset(), ordered: set[tuple[int, ...]] = frozenset(),
               suffixes: set[tuple[int, ...]] = frozenset()) -> list[int]:
    """One activation's new sizes: the batch at one dimension, the outermost in memory if it is the batch,
    else the first, else the first that only `inner` sizes (those that follow the batch in the step's
    activations: a sequence before its batch) or a stacking precede; a flattening where it is the
    outermost dimension in memory. A flattening whose value also stands behind the batch in the activations
    (`ambiguous`: batch x heads equal to the sequence) is kept in a tensor that is the trailing dimensions of
    a batch-led activation (`suffixes`: a [sequence, sequence] mask, a [sequence, width] position embedding,
    broadcast over the batch) unless the step holds the tensor unflattened (`ordered`: [batch, heads, ...])."""
    out = list(t)
    outer = _outermost(t, st)
    if outer is None:
        return out
    if batch != 1:
        if t[outer] == batch:
            out[outer] = mapping[batch]
        elif t[0] == batch:
            out[0] = mapping[batch]
        else:
            for j, x in enumerate(t):
                if x == batch and all(y in inner or y <= STACKED for y in t[:j]):
                    out[j] = mapping[batch]
                    break
    flat = t[outer]
    if flat != batch and flat in mapping and flat != 1:
        mo = _memory_order(t, st)
        if (flat not in ambiguous or len(mo) < 2 or (batch, flat // batch, *mo[1:]) in ordered
                or tuple(mo) not in suffixes):
            out[outer] = mapping[flat]
    return out


def rewrite_batch(ops: pd.DataFrame, batch: int, mapping: dict[int, int]) -> pd.DataFrame:
    """`ops` with each activation rewritten by `mapping` (`batch_mapping`, `_rewritten`): parameters (by
    position, and tensors of a parameter's shape other than a matrix op's first operand) kept; within a
    call, tensors of a rewritten one's shape rewritten alike; in a matrix op the second operand's N kept
    and its K (and a batched one's batch) following the first's."""
    out = ops.copy()
    params = _parameters(ops)
    inner = {mo[1] for _, ts in _tensors(ops) for _, _, t, st in ts
             if len(mo := _memory_order(t, st)) >= 3 and mo[0] == batch}
    ordered = _activation_shapes(list(_tensors(ops)), params)
    behind = {x for mo in ordered if len(mo) >= 2 and mo[0] == batch for x in mo[1:]}
    ambiguous = {f for f in mapping if f != batch and f in behind}
    suffixes = {mo[j:] for mo in ordered if len(mo) >= 2 and mo[0] == batch for j in range(1, len(mo))
                if mo[j] in ambiguous}
    dims_col, strides_col = [], []
    types_col = ops.op_input_types if "op_input_types" in ops else pd.Series([None] * len(ops), index=ops.index)
    for (name, ts), d_s, s_s, ty_s in zip(_tensors(ops), ops.op_input_dims, ops.op_input_strides, types_col,
                                          strict=True):
        if not ts:
            dims_col.append(d_s)
            strides_col.append(s_s)
            continue
        dims = json.loads(d_s)
        strides = json.loads(s_s) if isinstance(s_s, str) else []
        new_dims = json.loads(d_s)
        operands = MATRIX_OPERANDS.get(name)
        first = operands[0] if operands else None
        moved: dict[tuple, list] = {}
        kept = []
        indices = _index_inputs(ty_s)
        acts = [(i, member, t, st) for i, member, t, st in ts  # a parameter's shape (a [C] weight) held by an
                if i == first or i in indices or tuple(_memory_order(t, st)) not in params]  # index: a loss's targets
        news = [_rewritten(t, st, batch, mapping, inner, ambiguous, ordered, suffixes) for _, _, t, st in acts]
        held = _kept_here(acts, news, batch, ambiguous)
        for (i, member, t, _), t_new in zip(acts, news, strict=True):
            if len(t) == 1 and t[0] in held:
                t_new = t
            if t_new != t:
                moved.setdefault(tuple(t), t_new)
                _put(new_dims, i, member, t_new)
            else:
                kept.append((i, member, t))
        for i, member, t in kept:  # the same shape as a rewritten tensor of the call: the same new shape
            if tuple(t) in moved:
                _put(new_dims, i, member, moved[tuple(t)])
        if name in EMBEDDING_BAGS:
            _indices_follow_bags(EMBEDDING_BAGS[name], dims, new_dims)
        if operands and all(a < len(dims) and _int_list(dims[a]) and len(dims[a]) >= 2 for a in operands):
            a, b = operands
            a_old, a_new, b_old = dims[a], new_dims[a], dims[b]
            b_new = list(b_old)  # N never follows the batch; K and a batch dimension follow the first operand
            if b_old[-2] == a_old[-1]:
                b_new[-2] = a_new[-1]
            if len(b_old) == len(a_old) == 3 and b_old[0] == a_old[0]:
                b_new[0] = a_new[0]
            new_dims[b] = b_new
        ns = []
        for i, t in enumerate(dims):
            st = strides[i] if isinstance(strides, list) and i < len(strides) else []
            nt = new_dims[i]
            if _int_list(t):
                ns.append(_strides(t, st, nt) if nt != t else st)
            elif isinstance(t, list):
                ns.append([_strides(m, st[j] if isinstance(st, list) and j < len(st) else [], nt[j])
                           if _int_list(m) and nt[j] != m else (st[j] if isinstance(st, list) and j < len(st)
                                                                else []) for j, m in enumerate(t)])
            else:
                ns.append(st)
        dims_col.append(json.dumps(new_dims, separators=(",", ":")))
        strides_col.append(json.dumps(ns, separators=(",", ":")))
    out["op_input_dims"] = dims_col
    out["op_input_strides"] = strides_col
    out["measured_us"] = pd.to_numeric(ops.dur_us, errors="coerce") if "dur_us" in ops else np.nan
    out["dur_us"] = np.nan
    return _costs_dropped(out, ops)


def _kept_here(acts: list, news: list, batch: int, ambiguous: set[int]) -> set[int]:
    """The ambiguous flattenings a call's 1-D tensors of that size keep: those a batch-led tensor of the call
    ends with (a [width] weight beside [batch, sequence, width]) and those its tensors of two or more
    dimensions led by them kept (a position embedding's [sequence] indices beside its [sequence, width])."""
    held = set()
    for (_, _, t, st), t_new in zip(acts, news, strict=True):
        mo = _memory_order(t, st)
        if len(mo) >= 2 and mo[0] == batch and mo[-1] in ambiguous:
            held.add(mo[-1])
        if len(mo) >= 2 and mo[0] in ambiguous and t_new == t:
            held.add(mo[0])
    return held


def _indices_follow_bags(positions: tuple, dims: list, new_dims: list) -> None:
    """In place: an embedding bag's 1-D indices, and its other tensors of one entry per index, scaled as
    its bags were (`positions`: `EMBEDDING_BAGS`'); nothing where the bags kept their number or the
    indices are not 1-D (2-D indices lead with the batch themselves)."""
    indices, bags, per_index = positions
    if not all(i < len(dims) and _int_list(dims[i]) and len(dims[i]) == 1 for i in (indices, bags)):
        return
    old_bags, new_bags = dims[bags][0], new_dims[bags][0]
    if new_bags == old_bags or old_bags <= 0:
        return
    n = dims[indices][0]
    n_new = max(1, int(round(n * new_bags / old_bags)))
    for i in (indices, *per_index):
        if i < len(dims) and dims[i] == [n]:
            new_dims[i] = [n_new]


def _costs_dropped(out: pd.DataFrame, before: pd.DataFrame) -> pd.DataFrame:
    """`out` without the recorded costs (FLOPs, bytes, rates, roofline) of the calls whose shapes it
    rewrote: they were the old shapes' costs (`predict` reads a tensor list's recorded bytes)."""
    from wlprof.schema import COST

    moved = (out.op_input_dims.to_numpy(dtype=object) != before.op_input_dims.to_numpy(dtype=object))
    if not moved.any():
        return out
    # the compute roof stays: it names the unit and dtype the call's kernels ran on (TF32), not its size
    for c in (c.name for c in COST if c.name in out and c.name != "compute_roof"):
        col = out[c]
        if pd.api.types.is_numeric_dtype(col):
            out[c] = col.where(~moved, np.nan)
        else:
            out[c] = col.astype(object).where(~moved, None)
    return out


def _index_inputs(types_s) -> set[int]:
    """The input positions whose recorded type is an integer or bool tensor (never a parameter)."""
    from wlprof.predict.calls import INDEX_TYPES

    try:
        types = json.loads(types_s) if isinstance(types_s, str) else []
    except ValueError:
        return set()
    return {i for i, t in enumerate(types if isinstance(types, list) else []) if t in INDEX_TYPES}


def _put(new_dims: list, i: int, member: int | None, t_new: list[int]) -> None:
    if member is None:
        new_dims[i] = t_new
    else:
        new_dims[i][member] = t_new

def ingest_trace(path: str, fallback: dict | None = None) -> pd.DataFrame:
    """The op calls of a torch.profiler trace (the pipeline's ops table, no store written). `fallback`: the
    ceilings (a dict) to place a trace against where this machine holds none of its device, if of its type
    (a profile's: each call is then placed on the GPU it is predicted for, a TF32 GEMM under TF32's roof)."""
    from wlprof import pipeline
    from wlprof.ceilings import Ceilings
    from wlprof.ingest import _ceilings
    from wlprof.trace.identity import device_of

    trace = pipeline.read(path, keep_events=False)
    device_type, device_name = device_of(trace.meta, trace.device, mtia=trace.mtia_events > 0)
    ceilings, _ = _ceilings(device_type, device_name)
    if ceilings is None and fallback and fallback.get("device_type") == device_type:
        try:
            ceilings = Ceilings.from_dict(fallback)
        except (KeyError, TypeError, ValueError):
            ceilings = None
    ident = {"run_id": "trace", "workload": "ingest", "variant": str(path), "point": 0,
             "device_type": device_type, "device_name": device_name}
    ops = pipeline.tables(trace, ceilings=ceilings, identity=ident).ops
    ops.attrs["warnings"] = list(trace.warnings)  # e.g. no step markers: the whole trace is one step
    ops.attrs["recurrent"] = _recurrent_ops(trace)
    return ops


def _recurrent_ops(trace) -> pd.DataFrame:
    """The trace's recurrent ops (`RNN_HX`) with their recorded input dims, working ops or not: the CPU's
    unfused GRU records `aten::gru` only as the parent of its time steps' ops."""
    raw = trace.ops
    rows = raw[raw.name.isin(list(RNN_HX))] if "name" in raw and "args_id" in raw else raw.iloc[:0]
    table = trace.args_table

    def dims(a):
        try:
            d = table[int(a)].get("Input Dims") if a is not None and 0 <= int(a) < len(table) else None
        except (TypeError, ValueError):
            d = None
        return json.dumps(d, separators=(",", ":")) if d is not None else None

    return pd.DataFrame({"op_name": rows.name.astype(str).to_numpy(),
                         "op_input_dims": [dims(a) for a in rows.args_id]}, columns=["op_name", "op_input_dims"])


def scaled(ops: pd.DataFrame, dim: str, factor: float, arg: str = "--scale",
           whole: pd.DataFrame | None = None) -> tuple[pd.DataFrame, int]:
    """(the calls rewritten, the dimension's value that was scaled). `whole`: the trace's every op, where
    `ops` is a selection of them (a CPU trace's calls as a GPU would launch them): a recurrent op left out
    of the selection still tells whether the step runs sequence-first."""
    recorded = ops.op_input_dims.astype(object).map(lambda v: v is not None and str(v).strip("[] ,") != "")
    if not len(ops) or not recorded.any():
        raise InputError(arg, "needs the trace's input shapes, and it recorded none (profile with "
                         "torch.profiler.profile(record_shapes=True))", f"{dim}={factor:g}")
    if dim in ROW_NAMES:
        value, mapping = batch_mapping(ops, factor)
        if value is None:
            raise InputError(arg, "must name a dimension by its value: the trace has no activation of three or "
                             "more dimensions and no matrix op to take the batch from", dim)
        source = ops if whole is None else whole
        rnn = recurrent_batch(pd.concat([source, source.attrs.get("recurrent", source.iloc[:0])], ignore_index=True)
                              [["op_name", "op_input_dims"]])
        if rnn is not None and rnn[1] != value and not rnn[2]:
            # a batch-first recurrent op states the batch (its hx's N) where the leading dimensions need not:
            # the CPU's unfused GRU and LSTM run their time steps on sequence-first copies of the input
            value, mapping = batch_mapping(ops, factor, batch=rnn[1])
        elif rnn is not None and rnn[1] != value:
            name, n, _ = rnn
            raise InputError(arg, f"cannot take the batch from the leading dimension: {name} runs sequence-first "
                             f"(input [S, N, C]), so its batch N = {n} is not the outermost dimension the batch "
                             f"is found by (that is {value}); name the batch by its value", dim,
                             hint=f"--scale {n}={factor:g} scales it")
        if value == 1:
            raise InputError(arg, "cannot rewrite a batch of 1: the trace's size-1 dimensions cannot be told "
                             "from its batch (name another dimension by its value, or predict a trace of a "
                             "batch of 2 or more)", dim)
        new = rewrite_batch(ops, value, mapping)
        new.attrs["scale_mapping"] = mapping
    else:
        value = int(dim)
        mapping = value_mapping(ops, value, factor)
        new = rewrite(ops, value, factor, mapping)
        new.attrs["scale_mapping"] = mapping
    same = (new.op_input_dims.to_numpy(dtype=object) == ops.op_input_dims.to_numpy(dtype=object)).all()
    if value != max(1, int(round(value * factor))) and same:  # compared by value: str and object columns alike
        raise InputError(arg, f"must name a dimension the trace has: no input dimension equals {value}", dim)
    largest = _largest_numel(new.op_input_dims)
    if largest > INT64_MAX:
        raise InputError(arg, f"must keep every tensor within torch's 2^63 - 1 elements: {value} x {factor:g} "
                         f"makes a tensor of {largest:.3g}", f"{dim}={factor:g}")
    return new, value


INT64_MAX = 2**63 - 1
# the recurrent ops that take a whole sequence, and where their initial state hx ([layers x directions, N, H],
# or [N, H] for one layer's op; aten::lstm's a list [hx, cx]) is among their inputs
RNN_HX = {"aten::lstm": 1, "aten::gru": 1, "aten::rnn_tanh": 1, "aten::rnn_relu": 1, "aten::_cudnn_rnn": 4,
          "aten::miopen_rnn": 3, "aten::mkldnn_rnn_layer": 5}


def recurrent_batch(ops: pd.DataFrame) -> tuple[str, int, bool] | None:
    """(op name, batch N, whether its input is sequence-first) of the first recurrent op that records a
    sequence input beside its initial state: N is hx's next-to-last dimension, the input's second where it is
    sequence-first ([S, N, C], nn.LSTM's default) and its first where it is batch-first ([N, S, C]). None
    where no recurrent op records both, or the input is packed."""
    rows = ops[ops.op_name.isin(list(RNN_HX))] if "op_name" in ops else ops.iloc[:0]
    for name, d_s in zip(rows.op_name, rows.op_input_dims, strict=True):
        try:
            dims = json.loads(d_s) if isinstance(d_s, str) else []
        except ValueError:
            continue
        at = RNN_HX[str(name)]
        if len(dims) <= at or not _int_list(dims[0]) or len(dims[0]) != 3:
            continue
        hx = dims[at][0] if dims[at] and isinstance(dims[at][0], list) else dims[at]
        if not _int_list(hx) or len(hx) not in (2, 3):
            continue
        s, n = dims[0][0], hx[-2]
        if dims[0][1] == n and s != n:
            return str(name), int(n), True
        if s == n:
            return str(name), int(n), False
    return None


def _largest_numel(dims_col: pd.Series) -> int:
    """The most elements of any tensor (or tensor-list member) in a column of input dims."""
    def numel(t) -> int:
        if isinstance(t, list) and all(isinstance(x, int) for x in t):
            return math.prod(t)
        return max((numel(m) for m in t), default=0) if isinstance(t, list) else 0

    most = 0
    for d_s in set(dims_col.dropna()):
        try:
            most = max(most, numel(json.loads(d_s)))
        except (TypeError, ValueError):
            continue
    return most


def describe(before: pd.DataFrame, after: pd.DataFrame, dim: str, value: int, factor: float) -> str:
    """The line that says what `--scale` rewrote: the value, the new one (rounded where it is), the calls."""
    new_value = max(1, int(round(value * factor)))
    exact = value * factor
    rounded = "" if exact == new_value else f" ({value} x {factor:g} = {exact:g}, rounded)"
    moved = (before.op_input_dims.reset_index(drop=True) != after.op_input_dims.reset_index(drop=True)).to_numpy()
    changed = int(moved.sum())
    mapping = after.attrs.get("scale_mapping")
    if dim in ROW_NAMES and mapping:
        flats = ", ".join(f"{k} -> {v}" for k, v in mapping.items() if k != value)
        line = (f"--scale {dim}: the batch, {value}, becomes {new_value}{rounded}"
                + (f" (and its flattenings: {flats})" if flats else "")
                + f", in {changed} of {len(after)} calls (where it leads an activation; weights, biases, "
                "optimizer states and a matrix op's output width keep their sizes)")
    else:
        flats = ", ".join(f"{k} -> {v}" for k, v in (mapping or {}).items() if k != value)
        line = (f"--scale {dim}: every input dimension of {value} becomes {new_value}{rounded}"
                + (f" (and its flattenings with the dimension next to it: {flats})" if flats else "")
                + f", in {changed} of {len(after)} calls (one that only equals {value}, a feature map's side say, "
                "changes too)")
    # the calls with a batched input (of three or more dimensions, not a parameter: an optimizer's op on a
    # convolution's weight keeps its size, as it should)
    params = _parameters(before.reset_index(drop=True)) if dim in ROW_NAMES and "op_name" in before else set()
    shaped = before.op_input_dims.reset_index(drop=True).map(lambda d: _leading_dim(d, params))
    batched = shaped.notna().to_numpy()
    kept = shaped[~moved & batched]
    if new_value == value:  # a factor that rounds to the same size: nothing was to scale
        return line
    if (moved & batched).sum() < 0.5 * batched.sum() or not batched.any() and changed < 0.5 * len(after):
        line += "; the other calls keep their sizes, so the step barely scales"
        if len(kept):
            other = int(kept.value_counts().idxmax())
            line += (f": if its batch is another dimension (the most common leading one of the batched inputs "
                     f"left is {other}), name it: `--scale {other}={factor:g}`")
    return line


def _leading_dim(d_s, params: set[tuple[int, ...]] = frozenset()) -> int | None:
    """The first dimension of a call's first input of three or more dimensions ([batch, sequence, width],
    [batch, channels, height, width]) whose shape is none of `params`: None where it has none."""
    try:
        dims = json.loads(d_s) if isinstance(d_s, str) else []
    except ValueError:
        return None
    for t in dims:
        if isinstance(t, list) and len(t) >= 3 and all(isinstance(x, int) for x in t) and tuple(t) not in params:
            return t[0]
    return None


ANCHOR_SOURCES = ("op", "class", "base")  # sources too far from the call to beat its own measured time


def anchored(pred_scaled: np.ndarray, pred_unscaled: np.ndarray, src: np.ndarray, measured: np.ndarray,
             unknown_size: np.ndarray | None = None,
             base_ratio: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(predicted us, which calls were anchored): for the calls whose source is one of ANCHOR_SOURCES
    or whose work the shapes do not say (`unknown_size`: an index op whose index tensors are not
    recorded), the call's measured time x the ratio of its rescaled prediction to its unscaled one.
    `base_ratio` (per call, the rescaled call's physical base time over the recorded one's) bounds that
    ratio between 1 and it: a weak source's time neither moves against its work nor by more than it."""
    from wlprof.predict.model import SOURCES

    measured = np.asarray(measured, dtype=float)
    pu = np.asarray(pred_unscaled, dtype=float)
    far = np.isin(np.asarray(src), [SOURCES.index(s) for s in ANCHOR_SOURCES])
    if unknown_size is not None:
        far |= np.asarray(unknown_size, dtype=bool)
    ok = far & np.isfinite(measured) & (measured > 0) & np.isfinite(pu) & (pu > 0)
    out = np.asarray(pred_scaled, dtype=float).copy()
    ratio = out / np.where(pu > 0, pu, 1.0)
    if base_ratio is not None:
        rb = np.asarray(base_ratio, dtype=float)
        known = np.isfinite(rb) & (rb > 0)
        ratio = np.where(known, np.clip(ratio, np.minimum(1.0, rb), np.maximum(1.0, rb)), ratio)
    out[ok] = measured[ok] * ratio[ok]
    return out, ok

"""Ops the round-6 CPU zoo ran without a cost: logcumsumexp and the running max/min helpers, weight
normalization forward and backward, the scans' and matrix exponential's composites as wrappers,
repeat_interleave's int-repeat form run through a clone, and gloo's reduce-scatter work that runs as an
all-reduce. Bytes by hand (fp32 = 4, bf16 = 2, int64 = 8)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
from cost_calls import BF16, I64, S, T, op

import wlprof.cost  # noqa: F401  (registers every formula)
from wlprof.cost import cost_of, is_view, is_wrapper
from wlprof.cost.attribution import flag_ops
from wlprof.trace.comm import gloo_rows
from wlprof.trace.join import join
from wlprof.trace.parse import read_trace


def test_logcumsumexp_counts_six_per_element():
    # _logcumsumexp of [8, 6] fp32 along -1: 48 elements x 6 (max, min, subtract, exp, log1p, add) = 288;
    # reads 48 floats (192 B), writes 48 (192 B)
    c = cost_of(op("aten::_logcumsumexp", T([8, 6]), S("-1")))
    assert (c.flops, c.bytes, c.written) == (288, 384, 192)
    # bf16 [4, 10]: 40 x 6 = 240 FLOPs; 80 B read, 80 B written
    c = cost_of(op("aten::_logcumsumexp", T([4, 10], BF16), S("1")))
    assert (c.flops, c.bytes, c.written) == (240, 160, 80)


def test_cummax_helper_writes_values_and_indices():
    # _cummax_helper(self [8, 6], values [8, 6], indices [8, 6] int64, dim 1): 48 comparisons; reads 192 B,
    # writes 48 floats (192 B) and 48 int64 (384 B)
    c = cost_of(op("aten::_cummax_helper", T([8, 6]), T([8, 6]), T([8, 6], I64), S("1")))
    assert (c.flops, c.bytes, c.written) == (48, 192 + 576, 576)
    assert cost_of(op("aten::_cummin_helper", T([8, 6]), T([8, 6]), T([8, 6], I64), S("1"))).flops == 48


def test_weight_norm_interface_by_hand():
    # v [8, 3, 5, 5] (600 elements), g [8, 1, 1, 1], dim 0: 8 norms. FLOPs 3 x 600 + 2 x 8 = 1,816;
    # reads 600 + 8 floats (2,432 B), writes w (600 floats, 2,400 B) and 8 fp32 norms (32 B)
    c = cost_of(op("aten::_weight_norm_interface", T([8, 3, 5, 5]), T([8, 1, 1, 1]), S("0")))
    assert (c.flops, c.bytes, c.written) == (1_816, 2_432 + 2_432, 2_432)
    # bf16 v [16, 4], g [16, 1]: 64 x 3 + 16 x 2 = 224 FLOPs; reads 80 x 2 = 160 B; writes 64 x 2 = 128 B
    # and 16 fp32 norms = 64 B
    c = cost_of(op("aten::_weight_norm_interface", T([16, 4], BF16), T([16, 1], BF16), S("0")))
    assert (c.flops, c.bytes, c.written) == (224, 160 + 192, 192)
    # dim -1: one norm over all of v: 3 x 64 + 2 = 194
    assert cost_of(op("aten::_weight_norm_interface", T([16, 4]), T([]), S("-1"))).flops == 194
    assert is_wrapper("aten::_weight_norm")


def test_weight_norm_interface_backward_by_hand():
    # grad_w, v [32, 8, 3, 3] (2,304 each), g and norms [32, 1, 1, 1], dim 0: 5 x 2,304 + 4 x 32 = 11,648
    # FLOPs; reads 2,304 x 2 + 32 x 2 floats = 18,688 B, writes grad_v (2,304 floats) and grad_g (32) = 9,344 B
    c = cost_of(op("aten::_weight_norm_interface_backward", T([32, 8, 3, 3]), T([32, 8, 3, 3]),
                   T([32, 1, 1, 1]), T([32, 1, 1, 1]), S("0")))
    assert (c.flops, c.bytes, c.written) == (11_648, 18_688 + 9_344, 9_344)


def test_scan_backwards_and_matrix_exp_are_wrappers():
    for name in ("aten::cummax", "aten::cummin", "aten::logcumsumexp", "aten::cumprod_backward",
                 "aten::cummaxmin_backward", "aten::linalg_matrix_exp", "aten::matrix_exp",
                 "aten::matrix_exp_backward"):
        assert is_wrapper(name), name
    assert is_view("aten::matrix_H")


def _ops(names, parents):
    return pd.DataFrame({"name": pd.Series(names, dtype=object), "parent": np.array(parents, dtype=np.int64)})


def test_repeat_interleave_with_an_int_repeat_dispatches_to_its_clone():
    # repeat_interleave(x, 2, dim=1): unsqueeze, expand, then a clone (a wrapper of copy_, an op other ops run as
    # setup) copies the expanded view: the copy does the work, repeat_interleave is a dispatcher
    names = ["aten::repeat_interleave", "aten::unsqueeze", "aten::expand", "aten::clone", "aten::copy_",
             "aten::flatten"]
    out = flag_ops(_ops(names, [-1, 0, 0, 0, 3, 0]))
    assert out.dispatcher.tolist() == [True, False, False, False, False, False]
    # the repeats-only form (a cumsum of its own nested) stays costed
    out = flag_ops(_ops(["aten::repeat_interleave", "aten::cumsum", "aten::empty"], [-1, 0, 0]))
    assert not out.dispatcher.iat[0]


def _ev(cat, name, ts, dur, tid, **args):
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": 1, "tid": tid, "args": args}


def test_gloo_reduce_scatter_runs_as_an_all_reduce(tmp_path):
    # thread 1 enqueues allreduce_ (A1), _reduce_scatter_base_ (RS), allreduce_ (A2); gloo's worker thread 2
    # runs three gloo:all_reduce works in that order (the reduce-scatter all-reduces its whole [8, 24] input):
    # the second work is RS's and the third A2's, not A2's and no op's
    f = "float"
    events = [_ev("cpu_op", "c10d::allreduce_", 10, 20, 1), _ev("cpu_op", "c10d::_reduce_scatter_base_", 40, 20, 1),
              _ev("cpu_op", "c10d::allreduce_", 70, 20, 1),
              _ev("user_annotation", "gloo:all_reduce", 12, 5, 2, **{"Input Dims": [[725]], "Input type": [f]}),
              _ev("user_annotation", "gloo:all_reduce", 42, 5, 2, **{"Input Dims": [[8, 24]], "Input type": [f]}),
              _ev("user_annotation", "gloo:all_reduce", 72, 5, 2, **{"Input Dims": [[2]], "Input type": [f]})]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    t = read_trace(path)
    j = join(t)
    rows = gloo_rows(t, j.ops)
    assert [j.ops.name.iat[p] for p in rows.op_pos] == ["c10d::allreduce_", "c10d::_reduce_scatter_base_",
                                                         "c10d::allreduce_"]
    assert rows.op_pos.tolist()[0] != rows.op_pos.tolist()[2]

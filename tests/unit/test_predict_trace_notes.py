"""`predict --trace`'s notes on what the prediction of a trace cannot price."""

from __future__ import annotations

import numpy as np
import pandas as pd

from wlprof.cli.predict_profile import _unpriced_note
from wlprof.predict.model import SOURCES


def test_calls_priced_by_bytes_alone_are_named_with_their_measured_share():
    # a custom fused MoE op (no FLOP formula) and a GEMM: the MoE call is answered by its class, measured 150 us
    # of the trace's 200; the GEMM by its near calls
    g = pd.DataFrame({"op_name": ["vllm::moe_forward", "aten::mm", "vllm::moe_forward"],
                      "flops": [np.nan, 1e9, np.nan], "measured_us": [100.0, 50.0, 50.0]})
    src = np.array([SOURCES.index("class"), SOURCES.index("near"), SOURCES.index("base")])
    note = _unpriced_note(g, np.array([4.0, 48.0, 3.0]), src)
    assert note == ("2 calls of ops with no FLOP formula (vllm::moe_forward) priced by their bytes alone: 7.0 µs "
                    "predicted is a guess at the bytes and the launch floor, whatever work they do; measured "
                    "150.0 µs, 75% of the trace's kernel time")
    # answered by its op's calls in the profile, or with a formula: nothing to say
    assert _unpriced_note(g, np.array([4.0, 48.0, 3.0]), np.full(3, SOURCES.index("op"))) is None
    assert _unpriced_note(g.assign(flops=1.0), np.array([4.0, 48.0, 3.0]), src) is None


def test_a_rescaled_call_of_an_op_with_a_formula_is_not_called_unpriced():
    # `--scale` drops the recorded cost of the calls it rewrote (flops and flops_source empty): a bmm (it has a
    # formula) answered by its class is not "priced by its bytes alone"; a custom op without one still is, and
    # so is an op whose formula found no FLOPs in an unscaled call (flops_source `unknown`)
    g = pd.DataFrame({"op_name": ["aten::bmm", "vllm::moe_forward", "aten::native_layer_norm"],
                      "flops": [np.nan, np.nan, np.nan], "flops_source": [None, None, "unknown"],
                      "measured_us": [10.0, 20.0, 10.0]})
    src = np.full(3, SOURCES.index("class"))
    note = _unpriced_note(g, np.array([5.0, 6.0, 7.0]), src)
    assert note.startswith("2 calls of ops with no FLOP formula (vllm::moe_forward, aten::native_layer_norm) ")
    assert "13.0 µs predicted" in note

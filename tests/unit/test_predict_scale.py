"""`--scale`: one dimension of an ingested step rewritten, strides following the tensors' layouts."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from wlprof.errors import InputError
from wlprof.predict.scale import batch_dim, parse_scale, rewrite


def ops(*calls):
    return pd.DataFrame([{"op_name": n, "op_input_dims": json.dumps(d, separators=(",", ":")),
                          "op_input_strides": json.dumps(s, separators=(",", ":")), "dur_us": 3.0}
                         for n, d, s in calls])


MLP = ops(("aten::addmm", [[16384], [64, 4096], [4096, 16384], [], []], [[1], [4096, 1], [1, 4096], [], []]),
          ("aten::gelu", [[64, 16384], []], [[16384, 1], []]),
          ("aten::addmm", [[4096], [64, 16384], [16384, 4096], [], []], [[1], [16384, 1], [1, 16384], [], []]),
          ("aten::mul", [[64, 4096], [1, 4096]], [[4096, 1], [0, 1]]),
          ("aten::cat", [[[64, 32], [64, 32]], []], [[[32, 1], [32, 1]], []]))


def test_parse_scale():
    assert parse_scale("batch=4") == ("batch", 4.0)
    assert parse_scale("4096=0.5") == ("4096", 0.5)
    for bad in ("batch", "batch=0", "width=2", "=3", "batch=x"):
        with pytest.raises(InputError):
            parse_scale(bad)


def test_the_batch_is_the_first_matrix_ops_rows():
    assert batch_dim(MLP) == 64
    assert batch_dim(ops(("aten::relu", [[8]], [[1]]))) is None


def test_rewrite_scales_every_matching_dim_and_recomputes_strides_in_layout_order():
    out = rewrite(MLP, 64, 4)
    dims = [json.loads(x) for x in out.op_input_dims]
    strides = [json.loads(x) for x in out.op_input_strides]
    assert dims[0] == [[16384], [256, 4096], [4096, 16384], [], []]
    assert strides[0] == [[1], [4096, 1], [1, 4096], [], []]  # the weight is untouched: column-major kept
    assert dims[1][0] == [256, 16384] and strides[1][0] == [16384, 1]
    assert dims[3] == [[256, 4096], [1, 4096]] and strides[3][1] == [0, 1]  # a broadcast stays one
    assert dims[4][0] == [[256, 32], [256, 32]]  # tensor lists too
    assert out.dur_us.isna().all() and (out.measured_us == 3.0).all()


def test_rewrite_of_a_transposed_tensor_keeps_it_transposed():
    t = ops(("aten::copy_", [[64, 8], [64, 8], []], [[8, 1], [1, 64], []]))
    out = rewrite(t, 64, 2)
    assert json.loads(out.op_input_strides.iat[0]) == [[8, 1], [1, 128], []]


def test_a_rescaled_call_the_profile_cannot_answer_is_anchored_on_its_measured_time():
    from wlprof.predict.model import SOURCES
    from wlprof.predict.scale import anchored

    near, base = SOURCES.index("near"), SOURCES.index("base")
    pred_scaled = np.array([20.0, 40.0, 9.0, 5.0])
    pred_unscaled = np.array([10.0, 10.0, 3.0, 5.0])
    measured = np.array([12.0, 7.0, 2.0, np.nan])  # the trace's calls before scaling
    src = np.array([near, base, near, base])
    # anchored: what the profile holds nothing of (base: 7 x 4) or cannot size (the third call: 2 x 3);
    # a near call keeps its prediction, a call without a measured time too
    pred, mask = anchored(pred_scaled, pred_unscaled, src, measured, np.array([False, False, True, False]))
    assert pred.tolist() == [20.0, 28.0, 6.0, 5.0] and mask.tolist() == [False, True, True, False]
    pred, mask = anchored(pred_scaled, pred_unscaled, src, measured)
    assert pred.tolist() == [20.0, 28.0, 9.0, 5.0] and mask.tolist() == [False, True, False, False]


def test_an_anchored_ratio_neither_moves_against_the_work_nor_by_more_than_it():
    from wlprof.predict.model import SOURCES
    from wlprof.predict.scale import anchored

    op = SOURCES.index("op")
    measured = np.array([50.0, 50.0, 50.0, 50.0])
    # the model says: 1.5x slower at a quarter of the work, 8x at twice it, 0.5x at a quarter, 1.5x at twice
    pred_u, pred_s = np.array([10.0, 10.0, 10.0, 10.0]), np.array([15.0, 80.0, 5.0, 15.0])
    base_ratio = np.array([0.25, 2.0, 0.25, 2.0])  # the rescaled calls' physical base over the recorded ones'
    pred, mask = anchored(pred_s, pred_u, np.full(4, op), measured, None, base_ratio)
    # bounded to [0.25, 1] and [1, 2]: 50 x 1, 50 x 2; inside the bounds the model's ratio stays
    assert mask.all() and pred.tolist() == [50.0, 100.0, 25.0, 75.0]


def test_a_scale_of_a_dimension_the_trace_does_not_have_is_refused():
    from wlprof.predict.scale import scaled

    ops = pd.DataFrame({"op_name": ["aten::mm"], "op_input_dims": ["[[8,64],[64,32]]"],
                        "op_input_strides": ["[[64,1],[32,1]]"], "dur_us": [1.0]})
    new, value = scaled(ops, "64", 2.0)
    assert value == 64 and json.loads(new.op_input_dims.iat[0]) == [[8, 128], [128, 32]]
    with pytest.raises(InputError, match="no input dimension equals 999"):
        scaled(ops, "999", 2.0)
    # an ingested trace's column is of object dtype, the rewritten one of str: refused all the same
    ops["op_input_dims"] = ops.op_input_dims.astype(object)
    with pytest.raises(InputError, match="no input dimension equals 999"):
        scaled(ops, "999", 2.0)


def test_describe_names_the_value_the_calls_and_a_rounding():
    from wlprof.predict.scale import describe

    # batch 64 x 3 = 192 in all five calls: each holds a dimension of 64 (the cat in its members);
    # x 0.3 = 19.2, rounded to 19
    line = describe(MLP, rewrite(MLP, 64, 3.0), "batch", 64, 3.0)
    assert "every input dimension of 64 becomes 192, in 5 of 5 calls" in line and "rounded" not in line
    line = describe(MLP, rewrite(MLP, 64, 0.3), "batch", 64, 0.3)
    assert "becomes 19 (64 x 0.3 = 19.2, rounded), in 5 of 5 calls" in line
    # 4096 x 2: the first addmm's weight [4096, 16384], the second's bias, output width and the mul
    line = describe(MLP, rewrite(MLP, 4096, 2.0), "4096", 4096, 2.0)
    assert "in 3 of 5 calls" in line


def test_describe_says_when_the_step_barely_scales_and_names_the_likelier_batch():
    import pandas as pd

    from wlprof.predict.scale import describe

    # a BERT-like step: the first matrix op flattens batch x sequence (16 x 128 = 2048 rows), the other four
    # calls keep [16, 128, 768]; scaling 2048 changes 1 of 5 calls, and 16 leads the four left
    ops = pd.DataFrame({"op_input_dims": ["[[2048,768],[768,768]]"] + ["[[16,128,768],[16,128,768]]"] * 3
                        + ["[[16,12,128,64]]"],
                        "op_input_strides": ["[[768,1],[768,1]]"] + ["[[98304,768,1],[98304,768,1]]"] * 3
                        + ["[[98304,8192,64,1]]"]})
    line = describe(ops, rewrite(ops, 2048, 2.0), "batch", 2048, 2.0)
    assert "in 1 of 5 calls" in line and "the step barely scales" in line and "`--scale 16=2`" in line
    # most calls changed: no such note
    line = describe(ops, rewrite(ops, 16, 2.0), "16", 16, 2.0)
    assert "in 4 of 5 calls" in line and "barely" not in line


def _dims(frame):
    return [json.loads(x) for x in frame.op_input_dims]


# A transformer block's step at batch 4, sequence 1024, width 1024, d_ff 4096: batch x sequence (4096
# rows) equals d_ff, so only positions and layouts tell an activation from a weight
BLOCK = ops(
    ("aten::native_layer_norm", [[4, 1024, 1024], [], [1024], [1024], []],
     [[1048576, 1024, 1], [], [1], [1], []]),
    # x @ W1.T + b1: the bias [4096] and the weight view [1024, 4096] are parameters
    ("aten::addmm", [[4096], [4096, 1024], [1024, 4096], [], []], [[1], [1024, 1], [1, 1024], [], []]),
    ("aten::gelu", [[4, 1024, 4096], []], [[4194304, 4096, 1], []]),
    ("aten::_cudnn_attention_forward", [[4, 16, 1024, 64]] * 3, [[1048576, 64, 1024, 1]] * 3),
    # backward: the weight gradient grad.T @ x (K = 4096 rows), then grad @ W1 (M = 4096 rows)
    ("aten::mm", [[4096, 4096], [4096, 1024]], [[1, 4096], [1024, 1]]),
    ("aten::mm", [[4096, 4096], [4096, 1024]], [[4096, 1], [1024, 1]]),
    # an AMP cast of W1 and the optimizer over the parameters
    ("aten::copy_", [[4096, 1024], [4096, 1024], []], [[1024, 1], [1024, 1], []]),
    ("aten::_foreach_add_", [[[4096, 1024], [4096]], []], [[[1024, 1], [1]], []]))


def test_batch_scales_activations_and_their_flattening_but_not_weights():
    from wlprof.predict.scale import batch_mapping, rewrite_batch

    batch, mapping = batch_mapping(BLOCK, 4)
    # the batch leads the 3-D and 4-D activations; 4 x 1024 = 4096 is its flattening with the sequence,
    # held as [4096, 1024] rows
    assert batch == 4 and mapping == {4: 16, 4096: 16384}
    d = _dims(rewrite_batch(BLOCK, batch, mapping))
    assert d[0][0] == [16, 1024, 1024] and d[0][2:4] == [[1024], [1024]]
    assert d[1][:3] == [[4096], [16384, 1024], [1024, 4096]]  # rows x4; bias and weight kept
    assert d[2][0] == [16, 1024, 4096]
    assert d[3] == [[16, 16, 1024, 64]] * 3
    # grad.T [d_ff, rows] is a transposed view: its outermost dimension in memory, the rows, grows; x's
    # rows are K and follow it; the weight gradient's M and N stay d_ff and width
    assert d[4] == [[4096, 16384], [16384, 1024]]
    # grad @ W1: M grows, K (d_ff) and the weight stay
    assert d[5] == [[16384, 4096], [4096, 1024]]
    assert d[6][:2] == [[4096, 1024], [4096, 1024]]  # a cast of a parameter
    assert d[7][0] == [[4096, 1024], [4096]]


def test_batch_of_a_seq_first_layout_and_a_convnet_whose_channels_equal_it():
    from wlprof.predict.scale import batch_mapping, rewrite_batch

    # seq-first attention (sequence 197, batch 64, width 384): [64, 197, *] leads most elements (the
    # MLP's 1536 wide ones), the in-projection's [197, 64, 1152] and the stacked q, k, v [3, 197, 64, 384]
    # hold the batch behind the sequence
    vit = ops(("aten::native_layer_norm", [[64, 197, 384], [], [384], [384], []], [[75648, 384, 1], [], [1], [1], []]),
              ("aten::gelu", [[64, 197, 1536], []], [[302592, 1536, 1], []]),
              ("aten::add_", [[197, 64, 1152], [1152], []], [[73728, 1152, 1], [1], []]),
              ("aten::copy_", [[3, 197, 64, 384], [3, 197, 64, 384], []],
               [[4841472, 24576, 384, 1], [4841472, 24576, 384, 1], []]))
    batch, mapping = batch_mapping(vit, 2)
    d = _dims(rewrite_batch(vit, batch, mapping))
    assert batch == 64 and d[0][0] == [128, 197, 384] and d[2][:2] == [[197, 128, 1152], [1152]]
    assert d[1][0] == [128, 197, 1536] and d[3][0] == [3, 197, 128, 384]
    # batch 64 and 64 channels on a 64 x 64 image: only the batch grows; the weight [64, 3, 3, 3] stays
    conv = ops(("aten::cudnn_convolution", [[64, 3, 64, 64], [64, 3, 3, 3], []],
                [[12288, 4096, 64, 1], [27, 9, 3, 1], []]),
               ("aten::native_batch_norm", [[64, 64, 64, 64], [64], [64], [64], [64], []],
                [[262144, 4096, 64, 1], [1], [1], [1], [1], []]))
    batch, mapping = batch_mapping(conv, 4)
    d = _dims(rewrite_batch(conv, batch, mapping))
    assert batch == 64 and mapping == {64: 256}
    assert d[0][:2] == [[256, 3, 64, 64], [64, 3, 3, 3]] and d[1][:2] == [[256, 64, 64, 64], [64]]


def test_batch_without_activations_of_three_dimensions_is_the_first_matrix_ops_rows():
    from wlprof.predict.scale import batch_mapping, rewrite_batch

    batch, mapping = batch_mapping(MLP, 4)
    assert batch == 64 and mapping == {64: 256}
    d = _dims(rewrite_batch(MLP, batch, mapping))
    assert d[0][:3] == [[16384], [256, 4096], [4096, 16384]] and d[2][:3] == [[4096], [256, 16384], [16384, 4096]]
    assert d[3] == [[256, 4096], [1, 4096]] and d[4][0] == [[256, 32], [256, 32]]


def test_a_loss_s_targets_scale_with_the_batch_though_a_weight_has_their_shape():
    from wlprof.predict.scale import batch_mapping, rewrite_batch

    # batch 64 and a batch norm over 64 channels: the norm's weight [64] is a parameter and stays; the loss's
    # 64 int64 targets are the batch's and grow with it
    f, i64 = "c10::BFloat16", "long int"
    step = pd.DataFrame([
        {"op_name": "aten::native_batch_norm",
         "op_input_dims": "[[64,64,32,32],[64],[64],[64],[64],[],[],[]]",
         "op_input_strides": "[[65536,1024,32,1],[1],[1],[1],[1],[],[],[]]",
         "op_input_types": json.dumps([f, "float", "float", "float", "float", "Scalar", "Scalar", "Scalar"]),
         "dur_us": 40.0},
        {"op_name": "aten::nll_loss_forward", "op_input_dims": "[[64,100],[64],[],[],[]]",
         "op_input_strides": "[[100,1],[1],[],[],[]]",
         "op_input_types": json.dumps(["float", i64, "", "Scalar", "Scalar"]), "dur_us": 3.0}])
    batch, mapping = batch_mapping(step, 0.25)
    d = _dims(rewrite_batch(step, batch, mapping))
    assert batch == 64 and mapping == {64: 16}
    assert d[0][:2] == [[16, 64, 32, 32], [64]] and d[1][:2] == [[16, 100], [16]]


def test_an_optimizers_ops_on_convolution_weights_do_not_read_as_a_step_that_barely_scales():
    import pandas as pd

    from wlprof.predict.scale import describe

    # a conv net's step at batch 8: two convolutions (input [8, 16, 32, 32], weight [16, 16, 3, 3]) and a
    # single-tensor AdamW's lerp_ on each 4-D weight, three times: 2 of 5 calls change, and the three
    # unchanged ones are the weights' (their leading 16 is channels, not a batch), so no hint
    conv = ("aten::convolution", "[[8,16,32,32],[16,16,3,3],[16]]", "[[16384,1024,32,1],[144,9,3,1],[1]]")
    lerp = ("aten::lerp_", "[[16,16,3,3],[16,16,3,3],[]]", "[[144,9,3,1],[144,9,3,1],[]]")
    ops = pd.DataFrame([conv, conv, lerp, lerp, lerp], columns=["op_name", "op_input_dims", "op_input_strides"])
    line = describe(ops, rewrite(ops, 8, 2.0), "batch", 8, 2.0)
    assert "in 2 of 5 calls" in line and "barely" not in line and "--scale 16" not in line


def test_a_scale_past_torchs_element_count_is_refused():
    from wlprof.predict.scale import scaled

    # batch 64 x 2^57 = 2^63 rows: the GELU's [64, 16384] becomes 2^63 x 2^14 = 2^77 = 1.51e23 elements
    with pytest.raises(InputError, match=r"2\^63 - 1 elements: 64 x 1.44115e\+17 makes a tensor of 1.51e\+23"):
        scaled(MLP, "batch", float(2**57))
    # 2^44 rows: 2^44 x 2^14 = 2^58 elements at most, within it
    new, value = scaled(MLP, "batch", float(2**38))
    assert value == 64 and json.loads(new.op_input_dims.iat[1])[0] == [2**44, 16384]


def test_a_batch_of_one_is_refused_as_what_it_is_not_as_a_missing_dimension():
    # an MLP step at batch 1: every [1, width] activation's 1 is also a size-1 dimension, which the rewrite
    # never changes; the refusal said 'no input dimension equals 1'
    from wlprof.predict.scale import scaled

    def mlp(b):
        return ops(("aten::addmm", [[2048], [b, 512], [512, 2048], [], []], [[1], [512, 1], [1, 512], [], []]),
                   ("aten::gelu", [[b, 2048], []], [[2048, 1], []]))

    with pytest.raises(InputError, match="cannot rewrite a batch of 1") as info:
        scaled(mlp(1), "batch", 4.0)
    assert info.value.arg == "--scale" and info.value.value == "batch"
    new, value = scaled(mlp(8), "batch", 4.0)
    assert value == 8 and json.loads(new.op_input_dims.iat[0]) == [[2048], [32, 512], [512, 2048], [], []]


def test_a_flattening_equal_to_a_weights_shape_still_scales_the_matrix_ops_rows():
    from wlprof.predict.scale import batch_mapping, rewrite_batch

    # batch 4, sequence 8, width 32 (an LSTM's output into a 4-head attention): batch x sequence = 32 rows,
    # the same [32, 32] as the out-projection's weight; the rows are the matrix ops' first operand and grow
    # (4 -> 8: 32 -> 64), the weights [32, 96] and [32, 32] stay
    step = ops(("aten::copy_", [[4, 8, 32], [4, 8, 32], []], [[256, 32, 1], [256, 32, 1], []]),
               ("aten::addmm", [[96], [32, 32], [32, 96], [], []], [[1], [32, 1], [1, 32], [], []]),
               ("aten::addmm", [[32], [32, 32], [32, 32], [], []], [[1], [32, 1], [1, 32], [], []]))
    batch, mapping = batch_mapping(step, 2)
    assert batch == 4 and mapping == {4: 8, 32: 64}
    d = _dims(rewrite_batch(step, batch, mapping))
    assert d[0][:2] == [[8, 8, 32], [8, 8, 32]]
    assert d[1][:3] == [[96], [64, 32], [32, 96]] and d[2][:3] == [[32], [64, 32], [32, 32]]


def test_a_rescaled_call_loses_the_costs_recorded_for_its_old_shapes():
    # a cat of three [3, 13, 48] float32 tensors recorded 44,928 bytes (3 x 1,872 elements read and written,
    # x 4 bytes); `predict` takes a tensor list's bytes from the recorded cost, so the rescaled call (batch
    # 3 -> 6) kept 44,928 where the real [6, 13, 48] cat moves 2 x 3 x 6 x 13 x 48 x 4 = 89,856 bytes
    from wlprof.predict.calls import describe
    from wlprof.predict.scale import scaled

    t = ops(("aten::cat", [[[3, 13, 48]] * 3, []], [[[624, 48, 1]] * 3, []]),
            ("aten::gelu", [[3, 13, 48], []], [[624, 48, 1], []]))
    t = t.assign(op_input_types=[json.dumps(["TensorList", "Scalar"]), json.dumps(["float", ""])],
                 bytes=[44_928.0, 14_976.0], flops=[0.0, 14_976.0], flops_source=["formula", "formula"],
                 dtype="float32")
    assert describe(t).bytes.iat[0] == 44_928
    new, value = scaled(t, "batch", 2)
    assert value == 3 and json.loads(new.op_input_dims.iat[0])[0] == [[6, 13, 48]] * 3
    assert new.bytes.isna().all() and new.flops.isna().all() and new.flops_source.isna().all()
    assert describe(new).bytes.iat[0] == 89_856


def test_a_rescaled_view_keeps_the_step_of_the_tensor_it_views():
    # q of a fused projection: [B, S, 3 x 48] split in three and viewed as [B, 4 heads, S, 12]: its
    # strides are the projection's, [S x 144, 12, 144, 1] (a CPU capture of such a block at B 3, S 13
    # recorded [1872, 12, 144, 1]; at B 6 the same, at S 26 [3744, 12, 144, 1]). The rewrite laid it out
    # dense, [S x 48, 12, 48, 1]: 624 at B 6 and 1248 at S 26, a third of the real steps
    q = ops(("aten::_scaled_dot_product_flash_attention_for_cpu", [[3, 4, 13, 12]] * 3 + [[]],
             [[1872, 12, 144, 1]] * 3 + [[]]))
    assert json.loads(rewrite(q, 3, 2).op_input_strides.iat[0])[0] == [1872, 12, 144, 1]
    assert json.loads(rewrite(q, 13, 2).op_input_strides.iat[0])[0] == [3744, 12, 144, 1]


def test_a_rescaled_tensor_with_size_one_dims_keeps_their_strides():
    # a layer norm's mean [B, 13, 1] is contiguous, strides [13, 1, 1], and so is a pooled sum's output
    # [B, 20, 1, 1], [20, 1, 1, 1]; the rewrite ordered the size-1 dims outside the others of equal stride
    # and gave [13, 1, 13] and [20, 1, 20, 20] (the CPU captures at batch 6 recorded [13, 1, 1] and
    # [20, 1, 1, 1])
    t = ops(("aten::native_layer_norm_backward", [[3, 13, 48], [3, 13, 1]], [[624, 48, 1], [13, 1, 1]]),
            ("aten::sum", [[3, 20, 9, 9], [3, 20, 1, 1]], [[1620, 81, 9, 1], [20, 1, 1, 1]]))
    out = [json.loads(s) for s in rewrite(t, 3, 2).op_input_strides]
    assert out[0] == [[624, 48, 1], [13, 1, 1]] and out[1] == [[1620, 81, 9, 1], [20, 1, 1, 1]]


def test_a_dimension_named_by_value_scales_its_flattenings_too():
    # `--scale 13=2` on a block of batch 3 and sequence 13: its linear layers read the [3, 13, 48]
    # activation flattened to [39, 48] rows, and its loss the [39, 97] logits and [39] targets; a CPU capture
    # at sequence 26 recorded [78, 48], [78, 97] and [78]. The weight [48, 97] keeps its sizes (97 and 48 are
    # not 13), the flattening 3 x 13 = 39 becomes 3 x 26 = 78
    from wlprof.predict.scale import scaled

    t = ops(("aten::gelu", [[3, 13, 48], []], [[624, 48, 1], []]),
            ("aten::mm", [[39, 48], [48, 97]], [[48, 1], [1, 48]]),
            ("aten::nll_loss_forward", [[39, 97], [39], [], [], []], [[97, 1], [1], [], [], []]))
    new, value = scaled(t, "13", 2)
    dims = [json.loads(d) for d in new.op_input_dims]
    assert value == 13 and new.attrs["scale_mapping"] == {13: 26, 39: 78}
    assert dims == [[[3, 26, 48], []], [[78, 48], [48, 97]], [[78, 97], [78], [], [], []]]


def test_a_factor_that_keeps_the_size_gives_no_advice_to_scale_another_dimension():
    # --scale 64=1 (or 64=1.001, rounded back to 64) rewrites nothing: the line says so and does not tell the
    # user that "the step barely scales" nor to name another dimension
    from wlprof.predict.scale import describe, scaled

    new, value = scaled(MLP, "64", 1.001)
    line = describe(MLP, new, "64", value, 1.001)
    assert line.startswith("--scale 64: every input dimension of 64 becomes 64 (64 x 1.001 = 64.064, rounded)")
    assert "barely scales" not in line and "name it" not in line


def test_a_scale_of_a_trace_without_shapes_says_it_recorded_none():
    # a capture without record_shapes: every call's dims are None (the CPU path) or "[]"; the batch was said to
    # be missing for want of "an activation of three or more dimensions", a value to be absent from the trace
    from wlprof.predict.scale import scaled

    for empty in (None, "[]", "[[],[]]"):
        ops = pd.DataFrame({"op_name": ["aten::mm", "aten::relu"], "op_input_dims": [empty, empty],
                            "op_input_strides": [empty, empty], "dur_us": [1.0, 1.0]})
        for dim, text in (("batch", "batch=2"), ("4096", "4096=2")):
            with pytest.raises(InputError) as e:
                scaled(ops, dim, 2.0)
            assert str(e.value) == ("--scale needs the trace's input shapes, and it recorded none (profile with "
                                    f"torch.profiler.profile(record_shapes=True)) (got '{text}')")


def test_a_misspelt_row_name_gets_the_close_one():
    with pytest.raises(InputError) as e:
        parse_scale("bacth=2")
    assert str(e.value).endswith("(got 'bacth=2'); did you mean 'batch'?")
    with pytest.raises(InputError) as e:
        parse_scale("width=2")
    assert "did you mean" not in str(e.value)


def _embedding_bag_capture(path, bags: int, per_bag: int = 3):
    """A CPU capture of EmbeddingBag(50, 8, sum) over `bags` bags of `per_bag` indices each, with per-sample
    weights, then Linear(8, 4), forward and backward."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.manual_seed(0)
    bag, lin = torch.nn.EmbeddingBag(50, 8, mode="sum"), torch.nn.Linear(8, 4)
    idx = torch.randint(0, 50, (bags * per_bag,))
    offsets = torch.arange(0, bags * per_bag, per_bag)
    weights = torch.rand(bags * per_bag)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        lin(bag(idx, offsets, per_sample_weights=weights)).sum().backward()
    prof.export_chrome_trace(str(path))
    return path


def test_an_embedding_bags_indices_scale_with_its_bags(tmp_path):
    # `--scale batch=3` rewrote an EmbeddingBag's offsets (one per bag) but not its indices (bags x mean bag
    # size), so the scaled call had as many indices as bags
    from wlprof.predict.scale import ingest_trace, scaled

    small = ingest_trace(str(_embedding_bag_capture(tmp_path / "b6.json", 6)))
    large = ingest_trace(str(_embedding_bag_capture(tmp_path / "b18.json", 18)))
    new, value = scaled(small, "batch", 3)
    assert value == 6

    def bag_calls(frame):
        return {n: json.loads(d) for n, d in zip(frame.op_name, frame.op_input_dims, strict=True)
                if "embedding_bag" in n}

    got, want = bag_calls(new), bag_calls(large)
    assert got and set(got) == set(want)
    # 6 bags of 3 -> 18 bags of 3: weight [50, 8] kept, indices 18 -> 54, offsets 6 -> 18, per-sample weights
    # (position 6) 18 -> 54, as a capture of 18 bags records them
    assert got["aten::_embedding_bag"][:3] == [[50, 8], [54], [18]] and got["aten::_embedding_bag"][6] == [54]
    assert got == want


def test_a_sequence_first_rnns_batch_is_named_by_its_value_not_taken_from_the_leading_dimension():
    from wlprof.predict.scale import recurrent_batch, scaled

    # nn.LSTM(32, 64) over x [S 50, N 8, 32] (batch_first=False), one layer: hx and cx [1, 8, 64]; the
    # activations around it are [50, 8, *], so the outermost dimension is the sequence, 50
    def lstm(x, hx):
        return ops(("aten::lstm", [x, [hx, hx], [[256, 32], [256, 64], [256], [256]], [], [], [], [], [], []],
                    [[x[1] * x[2], x[2], 1], [[512, 64, 1], [512, 64, 1]], [[32, 1], [64, 1], [1], [1]], [], [], [],
                     [], [], []]),
                   ("aten::tanh", [[x[0], x[1], 64]], [[x[1] * 64, 64, 1]]),
                   ("aten::mul", [[x[0], x[1], 64], [x[0], x[1], 64]], [[x[1] * 64, 64, 1], [x[1] * 64, 64, 1]]))

    seq_first = lstm([50, 8, 32], [1, 8, 64])
    assert recurrent_batch(seq_first) == ("aten::lstm", 8, True)
    with pytest.raises(InputError) as exc:
        scaled(seq_first, "batch", 2)
    text = str(exc.value) + str(getattr(exc.value, "hint", ""))
    assert "sequence-first" in text and "N = 8" in text and "(that is 50)" in text and "--scale 8=2" in text
    new, value = scaled(seq_first, "8", 2)  # named by its value: the batch of every tensor doubles
    assert value == 8 and json.loads(new.op_input_dims.iloc[0])[1] == [[1, 16, 64], [1, 16, 64]]
    assert json.loads(new.op_input_dims.iloc[0])[0] == [50, 16, 32]
    # batch_first=True: x [8, 50, 32], the same hx: the batch leads and scales as usual
    batch_first = lstm([8, 50, 32], [1, 8, 64])
    assert recurrent_batch(batch_first) == ("aten::lstm", 8, False)
    new, value = scaled(batch_first, "batch", 2)
    assert value == 8 and json.loads(new.op_input_dims.iloc[0])[0] == [16, 50, 32]
    # the CPU's one-layer op (hx [N, H] at input 5) and cuDNN's (hx at input 4), as torch records them
    cpu = ops(("aten::mkldnn_rnn_layer", [[50, 8, 32], [256, 32], [256, 64], [256], [256], [8, 64], [8, 64]],
               [[256, 32, 1], [32, 1], [64, 1], [1], [1], [64, 1], [64, 1]]))
    assert recurrent_batch(cpu) == ("aten::mkldnn_rnn_layer", 8, True)
    cudnn = ops(("aten::_cudnn_rnn", [[64, 128, 256], [[2048, 256], [2048, 512]], [], [3678208], [2, 64, 512],
                                      [2, 64, 512]], [[32768, 256, 1], [[256, 1], [512, 1]], [], [1], [32768, 512, 1],
                                                      [32768, 512, 1]]))
    assert recurrent_batch(cudnn) == ("aten::_cudnn_rnn", 64, False)  # batch-first: x [64, 128, 256], hx [2, 64, 512]


def test_a_batch_first_rnns_batch_is_its_hx_batch_where_the_steps_run_sequence_first():
    from wlprof.predict.scale import scaled

    # nn.GRU(24, 40, batch_first=True) over x [N 7, S 9, 24] on the CPU's unfused path: aten::gru records the
    # batch-first input and hx [1, 7, 40], and its time steps run on a sequence-first copy: the input
    # projection's [9, 7, 120] and each step's [7, 40] gates. The 3-D activations lead with the sequence, 9;
    # the batch is hx's 7
    x = ops(("aten::gru", [[7, 9, 24], [1, 7, 40], [[120, 24], [120, 40], [120], [120]], [], [], [], [], [], []],
             [[216, 24, 1], [280, 40, 1], [[24, 1], [40, 1], [1], [1]], [], [], [], [], [], []]),
            ("aten::contiguous", [[9, 7, 24]], [[24, 216, 1]]),
            ("aten::add", [[9, 7, 120], [120], []], [[840, 120, 1], [1], []]),
            ("aten::sigmoid", [[7, 40]], [[40, 1]]),
            ("aten::tanh", [[9, 7, 40]], [[280, 40, 1]]))
    new, value = scaled(x, "batch", 4)
    assert value == 7
    got = [json.loads(d) for d in new.op_input_dims]
    assert got[0][0] == [28, 9, 24] and got[0][1] == [1, 28, 40]
    assert got[2][0] == [9, 28, 120] and got[3][0] == [28, 40] and got[4][0] == [9, 28, 40]


def _contiguous(*calls):
    """ops() of calls whose tensors are all contiguous."""
    def strides(t):
        if not t or not isinstance(t[0], int):
            return []
        out, acc = [], 1
        for x in reversed(t):
            out.append(acc)
            acc *= x
        return out[::-1]
    return ops(*[(n, d, [strides(t) for t in d]) for n, d in calls])


def test_a_flattening_equal_to_the_sequence_keeps_the_sequence_s_tensors():
    from wlprof.predict.scale import scaled

    # a GPT block at batch 8, 4 heads, sequence 32, width 128: batch x heads = 32 = the sequence. The
    # [32, 32, 32] batched matmul is batch x heads (its [8, 4, 32, 32] form is in the step) and doubles; the
    # causal mask [32, 32], the position embedding's [32, 128] and its [32] indices are the sequence's and
    # stay, as they must to broadcast against [16, 4, 32, 32] and [16, 32, 128]
    gpt = _contiguous(("aten::addmm", [[384], [256, 128], [128, 384], [], []]),
                      ("aten::bmm", [[32, 32, 32], [32, 32, 32]]),
                      ("aten::_softmax", [[8, 4, 32, 32], [], []]),
                      ("aten::tril", [[32, 32], []]),
                      ("aten::masked_fill_", [[8, 4, 32, 32], [32, 32], []]),
                      ("aten::add", [[8, 32, 128], [32, 128], []]),
                      ("aten::embedding_dense_backward", [[32, 128], [32], [], [], []]),
                      ("aten::native_layer_norm", [[8, 32, 128], [], [128], [128], []]),
                      ("aten::nll_loss_forward", [[256, 1000], [256], [], [], []]))
    out, value = scaled(gpt, "batch", 2.0)
    assert value == 8 and out.attrs["scale_mapping"] == {8: 16, 256: 512, 32: 64}
    assert [json.loads(d) for d in out.op_input_dims] == [
        [[384], [512, 128], [128, 384], [], []],
        [[64, 32, 32], [64, 32, 32]],
        [[16, 4, 32, 32], [], []],
        [[32, 32], []],  # before: [64, 32]
        [[16, 4, 32, 32], [32, 32], []],  # before: [64, 32], which cannot broadcast
        [[16, 32, 128], [32, 128], []],  # before: [64, 128]
        [[32, 128], [32], [], [], []],  # before: [[64, 128], [64]]
        [[16, 32, 128], [], [128], [128], []],
        [[512, 1000], [512], [], [], []]]
    assert json.loads(out.op_input_strides.iat[4]) == [[4096, 1024, 32, 1], [32, 1], []]


def test_a_flattening_equal_to_the_width_still_scales_the_rows_and_keeps_the_width_vectors():
    from wlprof.predict.scale import scaled

    # batch 2, sequence 16, width 32: batch x sequence = 32 = the width. The rows ([32, 32] into a linear,
    # the loss's [32, 11] logits and [32] targets, a mask over them) double; a [32] weight that multiplies
    # [2, 16, 32] stays (it broadcasts over the width)
    step = _contiguous(("aten::addmm", [[32], [32, 32], [32, 32], [], []]),
                       ("aten::native_layer_norm", [[2, 16, 32], [], [32], [32], []]),
                       ("aten::mul", [[2, 16, 32], [32]]),
                       ("aten::_softmax", [[2, 4, 16, 16], [], []]),
                       ("aten::nll_loss_forward", [[32, 11], [32], [], [], []]),
                       ("aten::eq", [[32], []]))
    # the targets are integer tensors (a [32] float would be taken for the width's weight)
    step["op_input_types"] = [json.dumps(t) for t in (
        ["float", "float", "float", "Scalar", "Scalar"], ["float", "", "float", "float", "Scalar"],
        ["float", "float"], ["float", "Scalar", "Scalar"], ["float", "long int", "", "Scalar", "Scalar"],
        ["long int", "Scalar"])]
    out, value = scaled(step, "batch", 2.0)
    assert value == 2 and out.attrs["scale_mapping"][32] == 64
    assert [json.loads(d) for d in out.op_input_dims] == [
        [[32], [64, 32], [32, 32], [], []],
        [[4, 16, 32], [], [32], [32], []],
        [[4, 16, 32], [32]],  # before: [64], which cannot broadcast
        [[4, 4, 16, 16], [], []],
        [[64, 11], [64], [], [], []],
        [[64], []]]

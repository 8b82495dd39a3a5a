"""cuDNN/MIOpen RNN and embedding-bag formulas, checked by hand on the H200 fixtures' own calls."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pytest

from wlprof.cost import cost_of
from wlprof.cost.attribution import flag_ops
from wlprof.cost.registry import OpCall

LSTM_WEIGHTS = [[2048, 256], [2048, 512], [2048], [2048], [2048, 512], [2048, 512], [2048], [2048]]


def call(name, dims, types, concrete):
    return OpCall.from_args(name, {"Input Dims": dims, "Input type": types, "Concrete Inputs": concrete})


def lstm_forward():
    # nn.LSTM(256, 512, num_layers=2, batch_first=True) on [64, 128, 256] (tests/fixtures/h200_training/lstm)
    return call("aten::_cudnn_rnn",
                [[64, 128, 256], LSTM_WEIGHTS, [], [3678208], [2, 64, 512], [2, 64, 512]] + [[]] * 10,
                ["float", "TensorList", "Scalar", "float", "float", "float"] + ["Scalar"] * 8 + ["ScalarList", ""],
                ["", "", "4", "", "", "", "2", "512", "0", "2", "True", "0.", "True", "False", "[]", ""])


def test_lstm_forward_counts_its_gate_products_and_reads_weights_once():
    c = cost_of(lstm_forward())
    # steps = 64 * 128 = 8192; 4 gates; layer 0: 2 * 8192 * 4 * 512 * (256 + 512), layer 1: ... * (512 + 512)
    assert c.flops == 2 * 8192 * 4 * 512 * 768 + 2 * 8192 * 4 * 512 * 1024 == 60_129_542_144
    # reads: input 64*128*256*4 = 8,388,608; the weight list's 3,678,208 floats = 14,712,832; hx and cx
    # 2 * (2*64*512) * 4 = 524,288; writes: output 8192*512*4 = 16,777,216 and hy, cy 524,288
    assert c.written == 16_777_216 + 524_288
    assert c.bytes == 8_388_608 + 14_712_832 + 524_288 + 17_301_504
    assert c.unit == "matrix" and c.dtype == "float32"


def test_lstm_backward_adds_the_weight_gradient_when_its_mask_asks():
    dims = [[64, 128, 256], LSTM_WEIGHTS, [], [3678208], [2, 64, 512], [2, 64, 512], [64, 128, 512],
            [64, 128, 512], [], [], [], [], [], [], [], [], [], [], [], [], [184549632], []]
    types = (["float", "TensorList", "Scalar", "float", "float", "float", "float", "float", "", ""]
             + ["Scalar"] * 8 + ["ScalarList", "", "unsigned char", "ScalarList"])
    conc = ["", "", "4", "", "", "", "", "", "", "", "2", "512", "0", "2", "True", "0.", "True", "False", "[]",
            "", "", "[True, False, False, True]"]
    c = cost_of(call("aten::_cudnn_rnn_backward", dims, types, conc))
    assert c.flops == 2 * 60_129_542_144  # data gradients (the forward's products) and weight gradients
    # writes: grad_input 64*128*256*4 = 8,388,608 and the weight gradients 14,712,832 (no state gradients)
    assert c.written == 8_388_608 + 14_712_832
    # reads: input, weights, hx, cx, output and grad_output (8,388,608 + 14,712,832 + 2 * 262,144 + 2 *
    # 16,777,216) and the 184,549,632-byte reserve
    assert c.bytes == 8_388_608 + 14_712_832 + 524_288 + 33_554_432 + 184_549_632 + c.written
    conc[-1] = "[True, True, True, False]"
    c = cost_of(call("aten::_cudnn_rnn_backward", dims, types, conc))
    assert c.flops == 60_129_542_144 and c.written == 8_388_608 + 524_288


def test_a_bidirectional_gru_counts_both_directions():
    # GRU(8, 16), one layer, bidirectional, [T=10, B=4, 8]: 40 steps, 3 gates, per direction
    # 2 * 40 * 3 * 16 * (8 + 16) = 92,160
    c = cost_of(call("aten::_cudnn_rnn", [[10, 4, 8], [[48, 8], [48, 16], [48], [48]] * 2, [], [], [2, 4, 16]]
                     + [[]] * 11, ["float", "TensorList", "Scalar", "", "float", ""] + ["Scalar"] * 8
                     + ["ScalarList", ""], ["", "", "4", "", "", "", "3", "16", "0", "1", "False", "0.", "False",
                                            "True", "[]", ""]))
    assert c.flops == 2 * 92_160
    assert c.written == 10 * 4 * 32 * 4 + 2 * 4 * 16 * 4  # output [10, 4, 2*16] and hy


def test_embedding_bag_sums_its_rows_and_its_backward_adds_them_back():
    # 8 tables of [100000, 64] floats, 2048 bags of 20 indices (tests/fixtures/h200_training/dlrm)
    fwd = cost_of(call("aten::_embedding_bag", [[100000, 64], [40960], [2048], [], [], [], [], [], []],
                       ["float", "long int", "long int", "Scalar", "Scalar", "Scalar", "", "Scalar", "Scalar"],
                       ["", "", "", "False", "0", "False", "", "False", "-1"]))
    assert fwd.flops == 40960 * 64  # one add per indexed element
    # reads: 40,960 rows of 64 floats (10,485,760), indices and offsets (40960 + 2048) * 8; writes 2048 rows
    assert fwd.written == 2048 * 64 * 4
    assert fwd.bytes == 10_485_760 + (40960 + 2048) * 8 + 524_288
    bwd = cost_of(call("aten::_embedding_bag_dense_backward",
                       [[2048, 64], [40960], [40960], [2048], [0], [], [], [], [], []],
                       ["float", "long int", "long int", "long int", "long int", "Scalar", "Scalar", "Scalar", "",
                        "Scalar"], ["", "", "", "", "", "100000", "False", "0", "", "-1"]))
    assert bwd.flops == 40960 * 64
    # at most min(40960, 100000) rows written; reads: grad 2048*64*4, indices, offset2bag, bag_size
    assert bwd.written == 40960 * 64 * 4
    assert bwd.bytes == 524_288 + (40960 + 40960 + 2048) * 8 + bwd.written


def test_embedding_bag_stays_costed_with_its_offset_helpers_nested():
    # nn.EmbeddingBag(mode="mean") on the CPU: offset2bag built by index_add_, sub_ and cumsum nested, the
    # mean divided by a nested div_; the gather and sum are the op's own (it was a dispatcher: its self
    # time, the bags' work, was no row)
    ops = pd.DataFrame({"name": ["aten::embedding_bag", "aten::_embedding_bag", "aten::index_add_", "aten::sub_",
                                 "aten::cumsum", "aten::div_"], "parent": [-1, 0, 1, 1, 1, 1]})
    f = flag_ops(ops)
    assert f.is_wrapper[0] and not f.dispatcher[1] and f.has_formula[1]


def test_an_rnn_call_without_its_mode_is_left_unknown():
    c = cost_of(call("aten::_cudnn_rnn", [[64, 128, 256], LSTM_WEIGHTS, [], [], [2, 64, 512]],
                     ["float", "TensorList", "Scalar", "", "float"], ["", "", "4", "", ""]))
    assert c is None or c.flops is None


@pytest.mark.parametrize("name", ["aten::_cudnn_rnn", "aten::_embedding_bag", "aten::_embedding_bag_dense_backward"])
def test_the_formulas_are_registered(name):
    from wlprof.cost.registry import has_formula

    assert has_formula(name)


def test_dropout_draws_compares_and_scales_and_its_backward_masks():
    # the GAT fixture's dropout of [16384, 96] floats in training: 3 per element; output and bool mask written
    c = cost_of(call("aten::native_dropout", [[16384, 96], [], []], ["float", "Scalar", "Scalar"],
                     ["", "0.10000000000000001", "True"]))
    n = 16384 * 96
    assert c.flops == 3 * n and c.written == n * 4 + n and c.bytes == n * 4 + c.written
    b = cost_of(call("aten::native_dropout_backward", [[212983, 4], [212983, 4], []], ["float", "bool", "Scalar"],
                     ["", "", "1.1111111111111112"]))
    m = 212983 * 4
    assert b.flops == 2 * m and b.written == m * 4 and b.bytes == m * 4 + m + m * 4


def rnn(x, hx, cx=None, mode="3", layers=1, bidirectional=False, proj="0", batch_sizes="[]"):
    # _cudnn_rnn(input, weight[] (none here), weight_stride0, weight_buf, hx, cx, mode, hidden_size=16,
    # proj_size, num_layers, batch_first, dropout, train, bidirectional, batch_sizes, dropout_state)
    dims = [x, [], [], [], hx, cx or []] + [[]] * 10
    types = ["float", "TensorList", "Scalar", "", "float", "float" if cx else ""] + ["Scalar"] * 8 + ["ScalarList", ""]
    conc = ["", "", "4", "", "", "", mode, "16", proj, str(layers), "False", "0.", "False", str(bidirectional),
            batch_sizes, ""]
    return cost_of(call("aten::_cudnn_rnn", dims, types, conc))


def test_rnn_shapes_projection_layers_packed_and_unbatched():
    # LSTM(8, 16, proj_size=4) on [T=10, B=4, 8]: 40 steps, 4 gates, the recurrent width is proj_size:
    # 2 * 40 * 4 * 16 * (8 + 4) = 61,440 plus the projection 2 * 40 * 16 * 4 = 5,120; writes the output
    # [10, 4, 4] 640 bytes, hy [1, 4, 4] 64 and cy [1, 4, 16] 256
    c = rnn([10, 4, 8], [1, 4, 4], [1, 4, 16], mode="2", proj="4")
    assert (c.flops, c.written) == (66_560, 640 + 64 + 256)
    # GRU(8, 16), 2 layers, bidirectional: layer 0 2 * 40 * 3 * 16 * (8 + 16) = 92,160 per direction, layer 1
    # reads both directions' outputs, 2 * 40 * 3 * 16 * (32 + 16) = 184,320; output [10, 4, 32], hy [4, 4, 16]
    c = rnn([10, 4, 8], [4, 4, 16], layers=2, bidirectional=True)
    assert (c.flops, c.written) == (2 * (92_160 + 184_320), 5120 + 1024)
    assert type(c.flops) is int
    # proj_size not recorded: none (92,160 for one layer, one direction)
    assert rnn([10, 4, 8], [1, 4, 16], proj="").flops == 92_160
    # a packed sequence [sum(batch_sizes) = 25, 8]: 25 steps, 2 * 25 * 3 * 16 * 24 = 57,600; output [25, 16]
    c = rnn([25, 8], [1, 10, 16], batch_sizes="[10, 8, 7]")
    assert (c.flops, c.written) == (57_600, 25 * 16 * 4 + 10 * 16 * 4)
    # an unbatched sequence [T = 10, 8]: 10 steps, 23,040; output [10, 16], hy [1, 16]
    c = rnn([10, 8], [1, 16])
    assert (c.flops, c.written) == (23_040, 640 + 64)


def test_rnn_helpers_refuse_what_they_cannot_count():
    from cost_calls import T

    from wlprof.cost.rnn import _list_elements, _rnn_flops

    x = T([10, 4, 8])
    assert _rnn_flops(x, 3, 16, 0, 1, False, False, False) == 92_160
    assert _rnn_flops(x, 9, 16, 0, 1, False, False, False) is None  # no cuDNN mode 9
    assert _rnn_flops(x, 3, None, 0, 1, False, False, False) is None  # hidden size not recorded
    assert _rnn_flops(T([]), 3, 16, 0, 1, False, False, False) is None  # a 0-d input
    c = call("aten::_cudnn_rnn", [[10, 4, 8], [[48, 8], [48]]], ["float", "TensorList"], ["", ""])
    assert _list_elements(c, 1) == 48 * 8 + 48
    assert _list_elements(c, 0) == 0  # a tensor is no list
    assert _list_elements(c, 2) == 0  # past the last argument


def test_mkldnn_rnn_layer_counts_one_layer_and_direction():
    # nn.LSTM(16, 24, num_layers=2, bidirectional=True) on the CPU, [4, 12, 16] batch first: layer 0's
    # forward call, input [T=12, B=4, 16], w_ih [96, 16], w_hh [96, 24] (4 gates x 24)
    forward = call("aten::mkldnn_rnn_layer",
                     [[12, 4, 16], [96, 16], [96, 24], [96], [96], [4, 24], [4, 24]] + [[]] * 9,
                     ["float"] * 7 + ["Scalar", "ScalarList"] + ["Scalar"] * 7,
                     [""] * 7 + ["False", "[]", "2", "24", "2", "True", "True", "True", "True"])
    c = cost_of(forward)
    # 48 steps, 2 * 48 * 4 * 24 * (16 + 24) = 2 * 48 * (1536 + 2304) = 368,640
    assert c.flops == 368_640 and c.unit == "matrix"
    # reads: input 768*4 = 3,072, weights (1536 + 2304 + 96 + 96)*4 = 16,128, hx and cx 2*96*4 = 768;
    # writes: output 48*24*4 = 4,608, hy and cy 768
    assert c.written == 4_608 + 768
    assert c.bytes == 3_072 + 16_128 + 768 + c.written == 25_344
    # in training it allocates its workspace nested inside (aten::empty([102400], uint8)): written too; the
    # bias pair summed by a nested aten::add does not make it a dispatcher
    workspace = call("aten::empty", [[], [], [], [], [], []], ["ScalarList", "Scalar", "Scalar", "", "", ""],
                     ["[102400]", "0", "0", "", "", ""])
    bias_add = call("aten::add", [[96], [96], []], ["float", "float", "Scalar"], ["", "", "1"])
    trained = cost_of(replace(forward, children=(workspace, bias_add)))
    assert trained.written == c.written + 102_400 and trained.flops == c.flops
    ops = pd.DataFrame({"name": ["aten::mkldnn_rnn_layer", "aten::add", "aten::mkldnn_rnn_layer_backward",
                                 "aten::add"], "parent": [-1, 0, -1, 2]})
    assert not flag_ops(ops).dispatcher.any()


def test_mkldnn_rnn_layer_backward_counts_data_and_weight_gradients():
    # layer 1's backward: input [12, 4, 48], w_ih [96, 48], w_hh [96, 24]; workspace 114,688 bytes
    dims = [[12, 4, 48], [96, 48], [96, 24], [96], [96], [4, 24], [4, 24], [12, 4, 24], [4, 24], [4, 24],
            [12, 4, 24], [], []] + [[]] * 9 + [[114688]]
    types = ["float"] * 11 + ["", ""] + ["Scalar"] * 7 + ["ScalarList", "Scalar", "unsigned char"]
    conc = [""] * 13 + ["True", "2", "24", "2", "True", "True", "True", "[]", "True", ""]
    c = cost_of(call("aten::mkldnn_rnn_layer_backward", dims, types, conc))
    # 2 * (2 * 48 * (4608 + 2304)): the data gradients and the weight gradients
    assert c.flops == 1_327_104
    # writes the gradients of input (2304), w_ih (4608), w_hh (2304), both biases (192), hx and cx (192):
    # 9,600 floats = 38,400 bytes
    assert c.written == 38_400
    # reads: those seven tensors (38,400), output and grad_output (2 * 4,608), hy and cy (768), workspace
    assert c.bytes == 38_400 + 9_216 + 768 + 114_688 + c.written

"""Communication costed by the nccl-tests conventions, numbers derived by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from wlprof import collectives as C
from wlprof.cost import OpCall, cost_of
from wlprof.cost.comm import annotate_comm


@pytest.mark.parametrize("name,want", [
    ("allreduce", "all_reduce"), ("_allgather_base", "all_gather"), ("all_gather_into_tensor_coalesced", "all_gather"),
    ("_reduce_scatter_base", "reduce_scatter"), ("all_to_allv", "all_to_all"), ("c10d::alltoall_base_", "all_to_all"),
    ("gloo:all_to_all", "all_to_all"), ("c10d::recv_", "recv"), ("gloo:send", "send"), ("broadcast", "broadcast"),
    ("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "all_gather"),
    ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)", "all_reduce"),
    ("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL", "reduce_scatter"),
    ("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*)", "sendrecv"), ("record_param_comms", None),
    ("wait", None), (None, None)])
def test_names_normalize(name, want):
    assert C.normalize(name) == want


def test_busbw_factors_and_sizes():
    assert C.busbw_factor("all_reduce", 8) == pytest.approx(2 * 7 / 8)
    for c in ("all_gather", "reduce_scatter", "all_to_all"):
        assert C.busbw_factor(c, 4) == pytest.approx(3 / 4)
    for c in ("broadcast", "reduce", "send", "recv"):
        assert C.busbw_factor(c, 4) == 1.0
    # the buffer that is S: all_gather's output, reduce_scatter's input, all_to_all's send buffer
    assert C.size_elements("all_gather", 25136, 201088, 8) == 201088
    assert C.size_elements("all_gather", 25136, None, 8) == 201088
    assert C.size_elements("reduce_scatter", 800, 100, 8) == 800
    assert C.size_elements("all_to_all", 1000, 400, 2) == 1000
    assert C.size_elements("recv", None, 160, 2) == 160
    assert C.reduction_flops("all_reduce", 1024, 4) == 768  # (n-1)/n adds per element
    assert C.reduction_flops("all_gather", 1024, 4) == 0


def test_record_param_comms_cost():
    # an all_reduce of 1,024 floats over 4 ranks: 768 FLOPs; bytes 4,096 read + 4,096 written
    call = OpCall("record_param_comms", extra=(("Collective name", "allreduce"), ("In msg nelems", 1024),
                                               ("Out msg nelems", 1024), ("Group size", 4), ("dtype", "Float")))
    c = cost_of(call)
    assert (c.flops, c.bytes, c.written, c.dtype) == (768.0, 8192.0, 4096.0, "float32")
    gather = OpCall("record_param_comms", extra=(("Collective name", "_allgather_base"), ("In msg nelems", 100),
                                                 ("Out msg nelems", 800), ("Group size", 8), ("dtype", "BFloat16")))
    assert (cost_of(gather).flops, cost_of(gather).bytes) == (0.0, 1800.0)
    assert cost_of(OpCall("record_param_comms", extra=(("Collective name", "wait"),))) is None


def _kernel_rows(name, dur_us, args):
    k = pd.DataFrame({"kind": ["kernel"], "name": [name], "op_name": [None], "dur_us": [dur_us]})
    rows = pd.DataFrame({"args_id": [0], "op_pos": [-1]})
    ops = pd.DataFrame({"name": pd.Series([], dtype=object), "args_id": np.zeros(0, np.int64),
                        "parent": np.zeros(0, np.int64)})
    return k, rows, ops, [args]


def test_busbw_of_a_known_message():
    # an all_reduce of 1 MiB of floats over 8 ranks in 100 µs: algbw 1,048,576 B / 100 µs = 10.49 GB/s;
    # busbw = 10.49 x 2 x 7 / 8 = 18.35 GB/s
    k, rows, ops, table = _kernel_rows("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 100.0, {
        "Collective name": "allreduce", "In msg nelems": 262144, "Out msg nelems": 262144, "Group size": 8,
        "dtype": "Float", "Process Group Name": "0"})
    annotate_comm(k, rows, ops, table, {})
    r = k.iloc[0]
    assert r.comm_class == "collective" and r.collective == "all_reduce" and r.group_size == 8
    assert r.comm_bytes == 1048576
    assert r.algbw_gbps == pytest.approx(10.48576)
    assert r.busbw_gbps == pytest.approx(10.48576 * 1.75)


def test_group_size_from_distributed_info():
    # a gloo work row on the CPU carries only its tensor: the group comes from the trace's distributedInfo
    k = pd.DataFrame({"kind": ["comm"], "name": ["gloo:all_gather"], "op_name": ["c10d::allgather_"],
                      "dur_us": [10.0]})
    rows = pd.DataFrame({"args_id": [0], "op_pos": [-1]})
    ops = pd.DataFrame({"name": pd.Series([], dtype=object), "args_id": np.zeros(0, np.int64),
                        "parent": np.zeros(0, np.int64)})
    meta = {"distributedInfo": {"world_size": 4, "pg_config": [{"pg_name": "0", "pg_size": 4}]}}
    annotate_comm(k, rows, ops, [{"Input Dims": [[4, 8]], "Input type": ["float"]}], meta)
    r = k.iloc[0]
    # all_gather's S is the output: 4 ranks x 32 floats x 4 bytes = 512; busbw = 512 B / 10 µs x 3/4
    assert r.group_size == 4 and r.process_group == "0" and r.comm_bytes == 512
    assert r.busbw_gbps == pytest.approx(512 / 10 / 1e3 * 0.75)


def test_group_from_meta_prefers_the_named_group_then_a_single_one_then_the_world():
    from wlprof.cost.comm import _group_from_meta

    two = {"world_size": 8, "pg_config": [{"pg_name": "0", "pg_size": 2}, {"pg_name": "1", "pg_size": 4}]}
    assert _group_from_meta({"distributedInfo": two}, "1") == (4, "1")  # the named group, not the first
    assert _group_from_meta({"distributedInfo": two}, "0") == (2, "0")
    # a name in no config: the world, even though the first config has a size
    assert _group_from_meta({"distributedInfo": two}, "7") == (8, "7")
    # no name and two configs: which one is unknown, the world
    assert _group_from_meta({"distributedInfo": two}, None) == (8, None)
    # no name and one config: that one, its name as text
    one = {"world_size": 8, "pg_config": [{"pg_name": 0, "pg_size": 2}]}
    assert _group_from_meta({"distributedInfo": one}, None) == (2, "0")
    assert _group_from_meta({"distributedInfo": {"world_size": 8}}, None) == (8, None)
    assert _group_from_meta({"distributedInfo": {"world_size": "8"}}, "x") == (None, "x")  # not an int
    assert _group_from_meta({"distributedInfo": [8]}, "x") == (None, "x")
    assert _group_from_meta(None, "x") == (None, "x")  # no trace metadata at all


def test_message_element_counts_and_a_recv_sized_by_its_output():
    from wlprof.cost.comm import _numel, size_bytes

    assert _numel([[2, 3], [4]]) == 6.0  # a TensorList: its first tensor
    assert _numel([2, 3]) == 6.0
    assert _numel([]) is None and _numel([2, None]) is None and _numel(5) is None
    # recv's S is its output buffer: 64 floats = 256 bytes, with no input count recorded
    assert size_bytes({"collective": "recv", "in_nelems": None, "out_nelems": 64, "dtype": "Float"}, 2) == 256


def test_message_takes_the_first_collective_named_and_gloos_tensor_only_without_counts():
    from wlprof.cost.comm import message

    # the recorded collective name wins over the op, its ancestors and the kernel
    m = message({"Collective name": "allreduce", "Process Group Name": "0"}, ("c10d::broadcast_",),
                op_name="c10d::allgather_", kernel="ncclDevKernel_AllGather_RING_LL")
    assert (m["collective"], m["process_group"]) == ("all_reduce", "0")
    # no name recorded: the op's, before its ancestors'; then the kernel's
    assert message({}, ("c10d::broadcast_",), op_name="c10d::allgather_")["collective"] == "all_gather"
    assert message({}, ("c10d::broadcast_",), op_name="aten::mm")["collective"] == "broadcast"
    assert message({}, kernel="ncclDevKernel_AllGather_RING_LL")["collective"] == "all_gather"
    # counts recorded: the input tensor is not read for them
    m = message({"In msg nelems": 100, "Out msg nelems": 400, "dtype": "Float", "Input Dims": [[4, 8]],
                 "Input type": ["float"]})
    assert (m["in_nelems"], m["out_nelems"], m["dtype"]) == (100, 400, "Float")
    m = message({"Out msg nelems": 64, "Input Dims": [[4, 8]], "Input type": ["float"]})
    assert (m["in_nelems"], m["out_nelems"], m["dtype"]) == (None, 64, None)
    # gloo's work: the input tensor's 32 elements and C++ type; an empty or non-tensor input gives neither
    m = message({"Input Dims": [[4, 8]], "Input type": ["float"]})
    assert (m["in_nelems"], m["dtype"]) == (32, "float")
    m = message({"Input Dims": [], "Input type": []})
    assert (m["in_nelems"], m["dtype"]) == (None, None)
    assert message({"Input Dims": [[]], "Input type": ["Scalar"]})["dtype"] is None


def test_numbers_dtype_names_and_split_sizes():
    from wlprof.cost.comm import _number, canonical_dtype, split_sizes

    assert _number("3") == 3.0 and _number(2) == 2.0
    for v in (None, True, "x", "inf", float("nan"), [1]):
        assert _number(v) is None, v
    # c10 ScalarType names (NCCL's record_param_comms) and C++ types (gloo) to one vocabulary
    names = {"Float": "float32", "Double": "float64", "Half": "float16", "BFloat16": "bfloat16", "Long": "int64",
             "Int": "int32", "Short": "int16", "Char": "int8", "Byte": "uint8", "Bool": "bool", "float": "float32",
             "c10::BFloat16": "bfloat16", "Foo": "Foo", "": None, None: None}
    assert {k: canonical_dtype(k) for k in names} == names
    assert split_sizes("[400, 600]") == [400, 600] and split_sizes([1.0, 2]) == [1, 2]
    for text in ("[]", "x", "5", '["a"]', None):
        assert split_sizes(text) is None, text


def test_communication_without_arithmetic_is_zero_flops_not_unknown():
    # rows as annotate_comm leaves them, FLOPs unknown (the trace recorded no message sizes):
    # all_gather and all_to_all do no arithmetic -> 0 FLOPs, source comm; an all_reduce adds
    # (n-1)/n x S elements of an unknown S -> stays unknown; a compute kernel and a memcpy are not touched
    import numpy as np
    import pandas as pd

    from wlprof.cost.comm import zero_comm_flops

    k = pd.DataFrame({"comm_class": ["collective", "collective", "collective", None, "memcpy", "p2p"],
                      "collective": ["all_gather", "all_to_all", "all_reduce", None, None, "send"],
                      "flops": [np.nan, np.nan, np.nan, np.nan, np.nan, 5.0],
                      "flops_source": ["unknown", "unknown", "unknown", "unknown", "unknown", "formula"]})
    zero_comm_flops(k)
    assert k.flops.tolist()[:2] == [0.0, 0.0] and np.isnan(k.flops.tolist()[2:5]).all() and k.flops[5] == 5.0
    assert k.flops_source.tolist() == ["comm", "comm", "unknown", "unknown", "unknown", "formula"]

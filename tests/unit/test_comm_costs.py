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


# ---------------------------------------------------------------- messages without record_param_comms


def test_a_c10d_ops_tensors_by_its_signature():
    from wlprof.cost.comm import host_message

    # _allgather_base_(Tensor output, Tensor input, ...): the output is the first recorded tensor
    m = host_message("c10d::_allgather_base_", [[1024], [16], []], ["signed char", "signed char", ""])
    assert (m["collective"], m["in_nelems"], m["out_nelems"], m["dtype"]) == ("all_gather", 16, 1024, "signed char")
    # coalesced ops record tensor lists (nested sizes, dtype TensorList): every tensor counts, no dtype
    m = host_message("c10d::reduce_scatter_tensor_coalesced_", [[[2, 8], [2, 4]], [[4, 8], [4, 4]], [], []],
                     ["TensorList", "TensorList", "", ""])
    assert (m["collective"], m["in_nelems"], m["out_nelems"], m["dtype"]) == ("reduce_scatter", 48, 24, None)
    # allreduce_ reduces its tensors in place; a tensor list recorded without sizes counts nothing
    assert host_message("c10d::allreduce_", [[[256]], [], []], ["TensorList", "", ""])["out_nelems"] == 256
    assert host_message("c10d::allreduce_", [[], [], [], []], ["TensorList", "", "", "Scalar"])["in_nelems"] is None
    assert host_message("c10d::send", [[[8]], [], []], ["TensorList"])["in_nelems"] == 8
    assert host_message("c10d::recv_", [[[8]], [], []], ["TensorList"])["out_nelems"] == 8
    # functional collectives: the input first, the output from the group size they record
    m = host_message("_c10d_functional::all_gather_into_tensor", [[2048, 8], [], []], ["float", "Scalar", ""],
                     ["", "4", ""])
    assert (m["in_nelems"], m["out_nelems"], m["dtype"], m["group_size"]) == (16384, 65536, "float", 4)
    m = host_message("_c10d_functional::reduce_scatter_tensor", [[4096], [], [], []],
                     ["c10::BFloat16", "", "Scalar", ""], ["", "", "2", ""])
    assert (m["in_nelems"], m["out_nelems"], m["group_size"]) == (4096, 2048, 2)
    assert host_message("_c10d_functional::wait_tensor", [[4]], ["float"]) is None
    assert host_message("aten::mm", [[2, 2], [2, 2]], ["float", "float"]) is None


@pytest.mark.parametrize(("kernel", "dtype"), [
    ("ncclDevKernel_ReduceScatter_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", "Float"),
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "BFloat16"),
    ("ncclKernel_AllReduce_RING_LL_Sum_half(ncclDevComm*, unsigned long, ncclWork*)", "Half"),
    ("ncclKernel_ReduceScatter_RING_SIMPLE_Sum_int64_t(ncclDevComm*)", "Long"),
    ("ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", None),  # moves bytes
    ("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)", None),  # bytes too
    ("void at::native::vectorized_elementwise_kernel<4, float>", None),
    ("void at::native::reduce_f32_kernel", None),  # names a reduction but is no NCCL kernel
    ("ncclKernel_AllReduce_RING_LL(int8_t* buf, unsigned long n)", None),  # its parameters name no element type
])
def test_a_reducing_nccl_kernel_names_its_element_type(kernel, dtype):
    from wlprof.cost.comm import kernel_dtype

    assert kernel_dtype(kernel) == dtype


def test_a_kernel_of_a_c10d_op_is_sized_by_the_ops_output_not_the_world():
    # HTA's 2023 two-rank trace: an NCCL kernel launched by c10d::_allgather_base_(out [1073741824],
    # in [16777216]) of int8 in a world of 128. S is the output, 1 GiB; the group, out / in = 64,
    # is a sub-group (it used to be 128 x the first tensor: 1.37e11 bytes, 2,159 GB/s)
    k = pd.DataFrame({"kind": ["kernel"], "name": ["ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*)"],
                      "op_name": ["c10d::_allgather_base_"], "dur_us": [63644.0]})
    rows = pd.DataFrame({"args_id": [0], "op_pos": [0]})
    ops = pd.DataFrame({"name": pd.Series(["c10d::_allgather_base_"], dtype=object), "args_id": np.array([1]),
                        "parent": np.array([-1])})
    table = [{"External id": 9, "correlation": 9},
             {"Input Dims": [[1073741824], [16777216], []], "Input type": ["signed char", "signed char", ""]}]
    annotate_comm(k, rows, ops, table, {"distributedInfo": {"rank": 0, "world_size": 128}})
    r = k.iloc[0]
    assert (r.collective, r.group_size, r.comm_dtype, r.comm_bytes) == ("all_gather", 64, "int8", 1073741824)
    assert r.algbw_gbps == pytest.approx(1073741824 / 63644.0 / 1e3)
    assert r.busbw_gbps == pytest.approx(r.algbw_gbps * 63 / 64)


def test_a_coalesced_op_takes_its_dtype_from_the_functional_op_around_it():
    # torch 2.3's FSDP2: _c10d_functional::reduce_scatter_tensor (float) -> c10d::reduce_scatter_tensor_coalesced_
    # (tensor lists, no dtype) -> the NCCL kernel: input 4096 x 8 floats, output half of it over 2 ranks
    k = pd.DataFrame({"kind": ["kernel"], "name": ["ncclDevKernel_ReduceScatter_Sum_f32_RING_LL(ncclDevComm*)"],
                      "op_name": ["c10d::reduce_scatter_tensor_coalesced_"], "dur_us": [100.0]})
    rows = pd.DataFrame({"args_id": [0], "op_pos": [1]})
    ops = pd.DataFrame({"name": pd.Series(["_c10d_functional::reduce_scatter_tensor",
                                           "c10d::reduce_scatter_tensor_coalesced_"], dtype=object),
                        "args_id": np.array([1, 2]), "parent": np.array([-1, 0])})
    table = [{},
             {"Input Dims": [[4096, 8], [], [], []], "Input type": ["float", "", "Scalar", ""],
              "Concrete Inputs": ["", "", "2", ""]},
             {"Input Dims": [[[2048, 8]], [[4096, 8]], [], [], []],
              "Input type": ["TensorList", "TensorList", "", "", "Scalar"]}]
    annotate_comm(k, rows, ops, table, {})
    r = k.iloc[0]
    # S = the input, 32,768 floats = 131,072 bytes; the group from the counts, 2
    assert (r.collective, r.group_size, r.comm_dtype, r.comm_bytes) == ("reduce_scatter", 2, "float32", 131072)


def test_a_c10d_op_that_launched_an_nccl_kernel_is_costed_by_its_tensors():
    nccl = ("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevComm*)",)
    rs = OpCall.from_args("c10d::reduce_scatter_tensor_coalesced_",
                          {"Input Dims": [[[1024]], [[4096]], [], []], "Input type": ["TensorList", "TensorList"]},
                          kernels=nccl)
    # bf16 from the kernel: 4,096 x 2 read + 1,024 x 2 written; the group 4096 / 1024 = 4: 3/4 x 4,096 adds
    c = cost_of(rs)
    assert (c.bytes, c.written, c.flops, c.dtype) == (10240.0, 2048.0, 3072.0, "bfloat16")
    ag = OpCall.from_args("c10d::_allgather_base_", {"Input Dims": [[1048576], [16384], []],
                                                      "Input type": ["signed char", "signed char", ""]},
                          kernels=("ncclDevKernel_AllGather_RING_LL(ncclDevComm*)",))
    c = cost_of(ag)
    assert (c.bytes, c.written, c.flops, c.dtype) == (1064960.0, 1048576.0, 0.0, "int8")
    # an all_reduce records no group size: its bytes, 2 x 256 floats, and no FLOPs
    ar = OpCall.from_args("c10d::allreduce_", {"Input Dims": [[[256]], [], []], "Input type": ["TensorList"]},
                          kernels=("ncclDevKernel_AllReduce_Sum_f32_RING_LL",))
    assert (cost_of(ar).bytes, cost_of(ar).flops) == (2048.0, None)
    # the same op with a record_param_comms inside (it costs the message), without a kernel (gloo, on
    # the CPU: gloo's work rows carry it), or a tensor list without a dtype anywhere: not costed here
    child = OpCall("record_param_comms")
    assert cost_of(OpCall.from_args(rs.name, {"Input Dims": [[[1024]], [[4096]]]}, kernels=nccl,
                                    children=(child,))) is None
    assert cost_of(OpCall.from_args(ag.name, {"Input Dims": [[1048576], [16384]],
                                              "Input type": ["signed char", "signed char"]})) is None
    assert cost_of(OpCall.from_args("c10d::allgather_into_tensor_coalesced_", {
        "Input Dims": [[[4096]], [[2048]], []], "Input type": ["TensorList", "TensorList", ""]},
        kernels=("ncclDevKernel_AllGather_RING_LL",))) is None


def test_an_fsdp2_reduce_scatter_without_record_param_comms_through_the_pipeline(tmp_path):
    import json

    from wlprof import pipeline

    def ev(cat, name, ts, dur, pid=1, tid=1, **args):
        return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": pid, "tid": tid, "args": args}

    events = [
        ev("cpu_op", "_c10d_functional::reduce_scatter_tensor", 0, 50, **{
            "External id": 1, "Input Dims": [[4096, 8], [], [], []], "Input type": ["float", "", "Scalar", ""],
            "Concrete Inputs": ["", "", "2", ""]}),
        ev("cpu_op", "c10d::reduce_scatter_tensor_coalesced_", 5, 40, **{
            "External id": 2, "Input Dims": [[[2048, 8]], [[4096, 8]], [], [], []],
            "Input type": ["TensorList", "TensorList", "", "", "Scalar"]}),
        ev("cuda_runtime", "cudaLaunchKernelExC", 10, 5, **{"External id": 2, "correlation": 30}),
        ev("kernel", "ncclDevKernel_ReduceScatter_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
           20, 100, pid=0, tid=7, **{"External id": 2, "correlation": 30, "stream": 7, "device": 0,
                                     "grid": [4, 1, 1], "block": [544, 1, 1]}),
    ]
    path = tmp_path / "fsdp2.json"
    path.write_text(json.dumps({"traceEvents": events}))
    k = pipeline.costed(pipeline.read(path)).kernels
    r = k.iloc[0]
    # 32,768 floats read, 16,384 written: 196,608 bytes in 100 µs; the reduction's adds, (2-1)/2 x 32,768
    assert (r.op_name, r.flops_source, r.bytes, r.flops) == ("c10d::reduce_scatter_tensor_coalesced_", "formula",
                                                            196608.0, 16384.0)
    assert r.achieved_gbps == pytest.approx(1.96608)
    assert (r.collective, r.group_size, r.comm_bytes) == ("reduce_scatter", 2, 131072)


def test_element_counts_of_an_unrecorded_tensor_and_functional_ops_without_a_group():
    from wlprof.cost.comm import _count, host_message

    assert _count([[4], [2, 3]]) == 10.0  # a tensor list: 4 + 6
    assert _count([4, None]) is None and _count([[4], [2, "x"]]) is None  # a size missing
    assert host_message("c10d::allgatherX", [[8], [2]], ["float", "float"]) is None  # no c10d op of that name
    # send records only its input, recv only its output: the dtype of the one tensor it has
    assert host_message("c10d::send", [[8]], ["float"])["dtype"] == "float"
    assert host_message("c10d::recv_", [[8]], ["float"])["dtype"] == "float"
    # functional all_reduce: out = in (256); the collective by name
    m = host_message("_c10d_functional::all_reduce", [[256], [], []], ["float", "", ""], ["", "sum", "0"])
    assert (m["collective"], m["in_nelems"], m["out_nelems"]) == ("all_reduce", 256, 256)
    # no group size recorded: all_gather's and reduce_scatter's outputs are unknown; all_to_all's too
    for name in ("all_gather_into_tensor", "reduce_scatter_tensor", "all_to_all_single"):
        m = host_message("_c10d_functional::" + name, [[64]], ["float"])
        assert (m["in_nelems"], m["out_nelems"], m["group_size"]) == (64, None, None), name
    assert host_message("_c10d_functional::reduce_scatter_tensor", [[]], ["float"])["out_nelems"] is None


def test_message_from_the_host_ops_alone():
    from wlprof.cost.comm import message

    send = ("c10d::send", {"Input Dims": [[8], [], []], "Input type": ["float", "", ""]})
    recv = ("c10d::recv_", {"Input Dims": [[8], [], []], "Input type": ["float", "", ""]})
    # no record_param_comms, no op name or kernel: all from the host op (send: input only, recv: output only)
    m = message({}, hosts=[send])
    assert (m["collective"], m["in_nelems"], m["out_nelems"], m["dtype"]) == ("send", 8, None, "float")
    m = message({}, hosts=[recv])
    assert (m["collective"], m["in_nelems"], m["out_nelems"], m["dtype"]) == ("recv", None, 8, "float")
    # a functional all_gather of 1,024 floats over 2 ranks (Concrete Inputs): out 2,048, group 2; the
    # kernel moves bytes, so it names no dtype and the op's stays
    ag = ("_c10d_functional::all_gather_into_tensor", {"Input Dims": [[1024], [], []],
                                                       "Input type": ["float", "Scalar", ""],
                                                       "Concrete Inputs": ["", "2", "0"]})
    m = message({}, kernel="ncclDevKernel_AllGather_RING_LL", hosts=[ag])
    assert (m["in_nelems"], m["out_nelems"], m["group_size"], m["dtype"]) == (1024, 2048, 2, "float")
    # no dtype on any op (tensor lists): the reducing kernel's f32; a kernel of another collective names none
    rs = ("c10d::reduce_scatter_tensor_coalesced_", {"Input Dims": [[[1024]], [[4096]], []],
                                                      "Input type": ["TensorList", "TensorList", ""]})
    m = message({}, kernel="ncclDevKernel_ReduceScatter_Sum_f32_RING_LL", hosts=[rs])
    assert (m["collective"], m["in_nelems"], m["out_nelems"], m["dtype"]) == ("reduce_scatter", 4096, 1024, "Float")
    m = message({}, op_name=rs[0], kernel="ncclDevKernel_AllReduce_Sum_f32_RING_LL", hosts=[rs])
    assert (m["collective"], m["dtype"]) == ("reduce_scatter", None)


def test_a_group_of_one_from_equal_buffers():
    from wlprof.cost.comm import group_from_counts

    # an all_gather whose output is its input: a group of 1 rank; 3 / 2 is no group
    assert group_from_counts({"collective": "all_gather", "in_nelems": 16, "out_nelems": 16}) == 1
    assert group_from_counts({"collective": "reduce_scatter", "in_nelems": 32, "out_nelems": 16}) == 2
    assert group_from_counts({"collective": "all_gather", "in_nelems": 2, "out_nelems": 3}) is None


def test_an_fsdp2_all_gather_takes_its_dtype_from_the_functional_op_around_it():
    # _c10d_functional::all_gather_into_tensor (bf16, group 2) -> c10d::allgather_into_tensor_coalesced_
    # (tensor lists) -> an all_gather kernel, which names no dtype; world 8 in the trace's metadata
    k = pd.DataFrame({"kind": ["kernel"], "name": ["ncclDevKernel_AllGather_RING_LL(ncclDevComm*)"],
                      "op_name": ["c10d::allgather_into_tensor_coalesced_"], "dur_us": [10.0]})
    rows = pd.DataFrame({"args_id": [0], "op_pos": [1]})
    ops = pd.DataFrame({"name": pd.Series(["_c10d_functional::all_gather_into_tensor",
                                           "c10d::allgather_into_tensor_coalesced_"], dtype=object),
                        "args_id": np.array([1, 2]), "parent": np.array([-1, 0])})
    table = [{},
             {"Input Dims": [[512], [], []], "Input type": ["c10::BFloat16", "Scalar", ""],
              "Concrete Inputs": ["", "2", "0"]},
             {"Input Dims": [[[1024]], [[512]], []], "Input type": ["TensorList", "TensorList", ""]}]
    annotate_comm(k, rows, ops, table, {"distributedInfo": {"world_size": 8}})
    r = k.iloc[0]
    # S = the output, 1,024 bf16 = 2,048 bytes; the group from the counts, 1024 / 512 = 2
    assert (r.collective, r.group_size, r.comm_dtype, r.comm_bytes) == ("all_gather", 2, "bfloat16", 2048)


def test_a_functional_collective_that_launched_the_kernel_is_sized_by_its_group():
    # _c10d_functional::all_gather_into_tensor(in [1024] float, group 2) right above its kernel, world 8:
    # out 2,048 floats = 8,192 bytes over 2 ranks (not 1,024 x 8 ranks)
    k = pd.DataFrame({"kind": ["kernel"], "name": ["ncclDevKernel_AllGather_RING_LL(ncclDevComm*)"],
                      "op_name": ["_c10d_functional::all_gather_into_tensor"], "dur_us": [10.0]})
    rows = pd.DataFrame({"args_id": [0], "op_pos": [0]})
    ops = pd.DataFrame({"name": pd.Series(["_c10d_functional::all_gather_into_tensor"], dtype=object),
                        "args_id": np.array([1]), "parent": np.array([-1])})
    table = [{}, {"Input Dims": [[1024], [], []], "Input type": ["float", "Scalar", ""],
                  "Concrete Inputs": ["", "2", "0"]}]
    annotate_comm(k, rows, ops, table, {"distributedInfo": {"world_size": 8}})
    r = k.iloc[0]
    assert (r.collective, r.group_size, r.comm_dtype, r.comm_bytes) == ("all_gather", 2, "float32", 8192)

"""Copies across the host link in real H200 traces: the ops table says which way each op's copies went
(`transfer`), and a copy to or from host memory counts the bytes the device moved once."""

from __future__ import annotations

from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _ops(path):
    from wlprof.pipeline import costed, read

    return costed(read(path)).ops


def test_a_pinned_copy_to_the_device_and_a_device_copy():
    # streams: each step copies 2^25 fp32 from pinned host memory to the device (Memcpy HtoD (Pinned -> Device))
    # and 2^26 fp32 device to device. The device writes 2^25 x 4 = 134,217,728 bytes of the first and reads
    # nothing of it; it reads and writes 2^26 x 4 = 268,435,456 bytes each of the second
    o = _ops(FIXTURES / "h200_training" / "streams.pt.trace.json.gz")
    copies = o[o.op_name == "aten::copy_"]
    htod, dtod = copies[copies.transfer == "HtoD"], copies[copies.transfer == "DtoD"]
    assert len(htod) == 2 and len(dtod) == 2
    assert htod["bytes"].tolist() == [134_217_728.0] * 2 and htod.bytes_written.tolist() == [134_217_728.0] * 2
    assert dtod["bytes"].tolist() == [536_870_912.0] * 2 and dtod.bytes_written.tolist() == [268_435_456.0] * 2
    # ops that ran no copy have none
    assert o[o.op_name == "aten::mm"].transfer.isna().all()


def test_pageable_copies_and_a_count_read_back():
    # the GCN step's nonzero reads its count back to the host beside its kernels (DtoH); its bytes stay its
    # formula's. The losses' CTC lengths go to the device from Python lists through pageable memory (int64
    # [2]: 16 bytes written on the device) and come back to the host ([2, 3] int64: 48 bytes read, none written)
    o = _ops(FIXTURES / "h200_training" / "gcn.pt.trace.json.gz")
    nz = o[o.op_name == "aten::nonzero"]
    assert set(nz.transfer) == {"DtoH"} and (nz.kernel_count > 1).all()
    o = _ops(FIXTURES / "h200_zoo" / "losses-train.json.gz")
    to = o[(o.transfer == "HtoD pageable") & (o.op_input_dims == "[[2],[2],[]]") & o.op_input_types.str.startswith('["long int"')]
    back = o[(o.transfer == "DtoH pageable") & (o.op_input_dims == "[[2,3],[2,3],[]]")]
    assert len(to) >= 2 and set(to["bytes"]) == {16.0} and set(to.bytes_written) == {16.0}
    assert len(back) == 2 and set(back["bytes"]) == {48.0} and set(back.bytes_written) == {0.0}

"""Model families no earlier capture holds, captured on the CPU (tests/fixtures/cpu_zoo4, torch 2.13): every
working op costed but for the ones whose bytes a CPU trace cannot tell, and FLOPs per op equal to
FlopCounterMode's.

Each fixture is one profiled step (CPU activity, record_shapes) of a model of
`benchmarks/capture_zoo4.py` at its CPU sizes (MobileNet-like with squeeze-excite and an EMA,
the same under torch.compile, Swin windows, a Mamba-like scan, a DDPM UNet, Whisper-like
decoding, sampling, a detector's post-processing, int8 GEMMs, linear algebra, CTC speech),
beside FlopCounterMode's per-op count of one more step (NAME.flops.json).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fcm_credit import Zoo

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "cpu_zoo4"
ZOO = Zoo(FIXTURES)
NAMES = ZOO.names
# Rows whose bytes a CPU trace cannot tell: Inductor's C++ kernels, which run inside the spans of the
# compiled graph without `cpp.enable_kernel_profile` (and Dynamo's and AOTAutograd's own spans); a cat
# whose TensorList's dtype no op around it records (the GRU's own cats of its packed steps, which the
# next op does not read whole; clip_grad_norm_'s stack of norms over a list the profiler recorded as
# []); the packed-sequence backward, which has no formula.
COMPILED_SPANS = {"CompiledFunction", "CompiledFunctionBackward", "Torch-Compiled Region: 0/0",
                  "TorchDynamo Cache Lookup", "AOTDispatcher Runtime Wrapper Prologue", "Pregraph bytecode",
                  "autograd::engine::evaluate_function: CompiledFunctionBackward"}
UNKNOWN_BYTES = {
    "mobilenet-compiled": COMPILED_SPANS,
    "speech-ctc-train": {"aten::cat", "aten::_pack_padded_sequence_backward"},
    "swin-train": {"aten::cat"},
}
# FlopCounterMode sees the encoder's cross-attention key and value projections (nn.Linear over a
# [1, 20, 32] input under inference_mode) as bmm, the profiled step ran them as mm: the totals agree
SAME_TOTAL_ONLY = {"whisper-infer"}


@pytest.fixture(scope="module")
def costed():
    return ZOO.costed


def test_fixtures_are_the_zoo_on_the_cpu():
    ZOO.assert_captured_on_cpu(11)


@pytest.mark.parametrize("name", NAMES)
def test_every_row_is_a_working_op_with_its_bytes_known(name):
    k = ZOO.working_rows(name)  # the autograd engine's bookkeeping and composites are no rows
    unknown = set(k[k["bytes"].isna()].op_name)
    assert unknown <= UNKNOWN_BYTES.get(name, set()), unknown - UNKNOWN_BYTES.get(name, set())


@pytest.mark.parametrize("name", NAMES)
def test_flops_per_op_equal_flop_counter(name):
    # e.g. mobilenet-train: convolution (and its backward) of the strided depthwise and 1x1 convolutions and the
    # squeeze-excite's, and the classifier's addmm: 89,759,232 in all
    ZOO.assert_flops_equal_flop_counter(name, "registry" if name in SAME_TOTAL_ONLY else None)


def test_linear_algebra_by_lapack_counts(costed):
    # linalg-step at its CPU sizes, g [16, 32], left = g g^T + eps I [16, 16]: eigh with vectors
    # 9 * 16^3 = 36,864; cholesky 16^3 / 3 = 1,365.3 -> 1,365; qr of g^T [32, 16] (reduced) 27,307
    # (tests/unit/test_costs_linalg.py); svd of g[:, :8] [16, 8], thin: 14 * 16 * 64 + 8 * 512 = 18,432;
    # cholesky_solve of g [16, 32]: 2 * 256 * 32 = 16,384; solve(left, g): lu 2 * 16^3 / 3 = 2,730.7 -> 2,731
    # and lu_solve 16,384; inv(left): lu 2,731 and lu_solve against the identity 2 * 256 * 16 = 8,192
    o = costed("linalg-step").ops
    flops = o.groupby("op_name").flops.sum()
    assert flops["aten::_linalg_eigh"] == 36_864
    assert flops["aten::linalg_cholesky_ex"] == 1_365
    assert flops["aten::linalg_qr"] == 27_307
    assert flops["aten::_linalg_svd"] == 18_432
    assert flops["aten::_cholesky_solve_helper"] == 16_384
    assert flops["aten::linalg_lu_factor_ex"] == 2 * 2_731
    assert flops["aten::linalg_lu_solve"] == 16_384 + 8_192
    # the solve and the inverse dispatch to those LU ops: no row of their own
    assert not {"aten::_linalg_solve_ex", "aten::linalg_solve_ex", "aten::linalg_inv_ex"} & set(o.op_name)

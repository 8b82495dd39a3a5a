"""Dense linear algebra: LAPACK operation counts (LAWN 41, Golub and Van Loan) and bytes, by hand."""

from __future__ import annotations

from cost_calls import F64, I32, NONE, S, T, op

import wlprof.cost  # noqa: F401  (registers every formula)
from wlprof.cost import cost_of, is_wrapper

C64 = "c10::complex<float>"


def test_eigh_with_and_without_vectors():
    # _linalg_eigh(A [512, 512] fp32, 'L', True): 9 * 512^3 = 1,207,959,552 FLOPs; reads 512^2 * 4 = 1,048,576,
    # writes 512 eigenvalues (2,048) and 512^2 vectors (1,048,576)
    c = cost_of(op("aten::_linalg_eigh", T([512, 512]), NONE, S(True)))
    assert (c.flops, c.bytes, c.written, c.unit) == (1_207_959_552, 1_048_576 + 1_050_624, 1_050_624, "matrix")
    # values only, a batch of 3 [8, 8] fp64: 3 * 4 * 512 / 3 = 2,048; reads 3 * 512 = 1,536, writes 3 * 64 = 192
    c = cost_of(op("aten::_linalg_eigh", T([3, 8, 8], F64), NONE, S(False)))
    assert (c.flops, c.bytes, c.written) == (2_048, 1_728, 192)
    # complex: 4 real FLOPs per real one; real eigenvalues (4 bytes each), complex vectors (8)
    c = cost_of(op("aten::_linalg_eigh", T([4, 4], C64), NONE, S(True)))
    assert (c.flops, c.written) == (4 * 9 * 64, 4 * 4 + 16 * 8)
    assert cost_of(op("aten::_linalg_eigh", T([4, 5]), NONE, S(True))) is None  # not square


def test_svd_thin_full_and_values():
    # _linalg_svd(A [16, 8], full_matrices False, compute_uv True): p = 16, q = 8:
    # 14 * 16 * 64 + 8 * 512 = 14,336 + 4,096 = 18,432; reads 512; writes S 8 + U 16x8 + Vh 8x8 = 200 floats
    c = cost_of(op("aten::_linalg_svd", T([16, 8]), S(False), S(True), NONE))
    assert (c.flops, c.bytes, c.written) == (18_432, 512 + 800, 800)
    # full U [16, 16] and Vh [8, 8]: 4 * 256 * 8 + 8 * 16 * 64 + 9 * 512 = 8,192 + 8,192 + 4,608 = 20,992;
    # writes 8 + 256 + 64 floats
    c = cost_of(op("aten::_linalg_svd", T([16, 8]), S(True), S(True), NONE))
    assert (c.flops, c.written) == (20_992, 328 * 4)
    # values only of the wide [8, 16] (p, q = 16, 8): 4 * 16 * 64 - 4 * 512 / 3 = 4,096 - 682.7 = 3,413
    c = cost_of(op("aten::_linalg_svd", T([8, 16]), S(False), S(False), NONE))
    assert (c.flops, c.written) == (3_413, 32)


def test_qr_modes():
    # linalg_qr(A [32, 16]) in the default 'reduced' mode (the trace records no mode): geqrf
    # 2 * 32 * 256 - 2 * 4096 / 3 = 16,384 - 2,730.7; orgqr of 16 columns from 16 reflectors:
    # 4 * 32 * 16 * 16 - 2 * 48 * 256 + 4 * 4096 / 3 = 32,768 - 24,576 + 5,461.3; in all 13,653.3 + 13,653.3
    # = 27,306.7 -> 27,307.
    # Writes Q [32, 16] and R [16, 16]: 768 floats
    c = cost_of(op("aten::linalg_qr", T([32, 16]), NONE))
    assert (c.flops, c.bytes, c.written) == (27_307, 2_048 + 3_072, 3_072)
    # 'complete': Q [32, 32] from 16 reflectors: 4 * 32 * 32 * 16 - 2 * 64 * 256 + 5,461.3 = 38,229.3;
    # R [32, 16]; 'r': R [16, 16] alone, geqrf only
    c = cost_of(op("aten::linalg_qr", T([32, 16]), S("complete")))
    assert (c.flops, c.written) == (round(16_384 - 4096 * 2 / 3 + 65_536 - 32_768 + 4 * 4096 / 3), (1024 + 512) * 4)
    c = cost_of(op("aten::linalg_qr", T([32, 16]), S("r")))
    assert (c.flops, c.written) == (round(16_384 - 4096 * 2 / 3), 256 * 4)


def test_cholesky_lu_and_their_solves():
    # linalg_cholesky_ex(A [64, 64] fp32): 64^3 / 3 = 87,381; reads 16,384, writes 16,384 + 4 (info)
    c = cost_of(op("aten::linalg_cholesky_ex", T([64, 64]), S(False), S(False)))
    assert (c.flops, c.bytes, c.written) == (87_381, 32_772, 16_388)
    # its nested tril (zeroing the other triangle) is its own work: it stays costed
    from wlprof.cost.registry import aux_ops

    assert "aten::tril" in aux_ops("aten::linalg_cholesky_ex")
    # _cholesky_solve_helper(B [64, 32], L [64, 64], upper): 2 * 64^2 * 32 = 262,144;
    # reads 8,192 + 16,384, writes 8,192
    c = cost_of(op("aten::_cholesky_solve_helper", T([64, 32]), T([64, 64]), S(False)))
    assert (c.flops, c.bytes, c.written) == (262_144, 32_768, 8_192)
    # linalg_lu_factor_ex(A [64, 64]): 2 * 64^3 / 3 = 174,762.7; writes LU 16,384 + 64 int32 pivots + info
    c = cost_of(op("aten::linalg_lu_factor_ex", T([64, 64]), S(True), S(False)))
    assert (c.flops, c.written) == (174_763, 16_384 + 256 + 4)
    # tall [96, 64]: 96 * 64^2 - 64^3 / 3 = 393,216 - 87,381.3
    assert cost_of(op("aten::linalg_lu_factor_ex", T([96, 64]), S(True), S(False))).flops == 305_835
    # linalg_lu_solve(LU [64, 64], pivots [64] int32, B [64, 8], left, adjoint): 2 * 4096 * 8 = 65,536;
    # reads 16,384 + 256 + 2,048, writes 2,048
    c = cost_of(op("aten::linalg_lu_solve", T([64, 64]), T([64], I32), T([64, 8]), S(True), S(False)))
    assert (c.flops, c.bytes, c.written) == (65_536, 18_688 + 2_048, 2_048)
    # B from the right ([8, 64]): the same 8 right-hand sides
    c = cost_of(op("aten::linalg_lu_solve", T([64, 64]), T([64], I32), T([8, 64]), S(False), S(False)))
    assert c.flops == 65_536
    # a batch of 4 vectors [4, 64] against a batch of 4 [4, 64, 64]: 4 * (2 * 4096 * 1) = 32,768
    c = cost_of(op("aten::linalg_lu_solve", T([4, 64, 64]), T([4, 64], I32), T([4, 64]), S(True), S(False)))
    assert (c.flops, c.written) == (32_768, 4 * 64 * 4)


def test_solve_triangular_solve_and_inverse():
    # linalg_solve_triangular(A [32, 32], B [32, 4], upper, left, unitriangular): 32^2 * 4 = 4,096
    c = cost_of(op("aten::linalg_solve_triangular", T([32, 32]), T([32, 4]), S(True), S(True), S(False)))
    assert (c.flops, c.bytes, c.written) == (4_096, 4_096 + 512 + 512, 512)
    # legacy triangular_solve(B, A, ...): the same numbers
    c = cost_of(op("aten::triangular_solve", T([32, 4]), T([32, 32]), S(True), S(False), S(False)))
    assert c.flops == 4_096
    # _linalg_solve_ex(A [32, 32], B [32, 4], left, check_errors): getrf 2 * 32^3 / 3 = 21,845.3 plus
    # getrs 2 * 1024 * 4 = 8,192
    c = cost_of(op("aten::_linalg_solve_ex", T([32, 32]), T([32, 4]), S(True), S(False)))
    assert c.flops == round(2 * 32 ** 3 / 3 + 8_192)
    # linalg_inv_ex(A [32, 32]): 8 * 32^3 / 3 = 87,381.3; writes the inverse and info
    c = cost_of(op("aten::linalg_inv_ex", T([32, 32]), S(False)))
    assert (c.flops, c.written) == (87_381, 4_096 + 4)


def test_composites_are_wrappers_and_diag_embed_writes_its_matrix():
    for name in ("aten::linalg_eigh", "aten::linalg_svd", "aten::linalg_solve", "aten::linalg_inv",
                 "aten::cholesky_solve", "aten::linalg_cholesky", "aten::_linalg_check_errors", "aten::diag"):
        assert is_wrapper(name), name
    # diag_embed(x [3, 16]): three zeroed 16 x 16 matrices with x on their diagonals:
    # reads 192, writes 3 * 256 * 4 = 3,072
    c = cost_of(op("aten::diag_embed", T([3, 16]), S(0), S(-2), S(-1)))
    assert (c.flops, c.bytes, c.written) == (0, 192 + 3_072, 3_072)
    # offset 1: 17 x 17
    assert cost_of(op("aten::diag_embed", T([16]), S(1), S(-2), S(-1))).written == 289 * 4


def test_solve_is_the_dispatcher_of_its_nested_lu_ops():
    # where _linalg_solve_ex runs linalg_lu_factor_ex and linalg_lu_solve nested, they carry the cost
    import pandas as pd

    from wlprof.cost.attribution import flag_ops

    ops = pd.DataFrame({"name": ["aten::linalg_solve", "aten::linalg_solve_ex", "aten::_linalg_solve_ex",
                                 "aten::linalg_lu_factor_ex", "aten::linalg_lu_solve", "aten::gt"],
                        "parent": [-1, 0, 1, 2, 2, 4]})
    flagged = flag_ops(ops)
    # the pivots' range check nested in lu_solve is its own work: lu_solve stays costed
    assert flagged.dispatcher.tolist() == [False, True, True, False, False, False]
    assert flagged.is_wrapper.tolist() == [True, False, False, False, False, False]
    # an eigendecomposition whose info check (an any inside _linalg_check_errors) and input copy are
    # nested stays costed
    ops = pd.DataFrame({"name": ["aten::linalg_eigh", "aten::_linalg_eigh", "aten::copy_",
                                 "aten::_linalg_check_errors", "aten::any"],
                        "parent": [-1, 0, 1, 1, 3]})
    assert flag_ops(ops).dispatcher.tolist() == [False] * 5

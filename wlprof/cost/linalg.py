"""Dense linear algebra: factorizations, solves and decompositions (`torch.linalg`, LAPACK/cuSOLVER/MAGMA).

FLOPs are the textbook operation counts of the LAPACK routine each op runs, per matrix, times
the batch (the product of the leading dims); they are a convention, not a count of what the
library executed (its blocking, pivoting and iteration counts vary), and FlopCounterMode has no
entry for any of these ops. For an m x n matrix with k = min(m, n):

- Cholesky (potrf): n^3 / 3; its inverse from the factor (potri): 2 n^3 / 3.
- LU with partial pivoting (getrf): m n^2 - n^3 / 3 for m >= n (2 n^3 / 3 square), m and n swapped
  otherwise; a determinant is its LU.
- Solves with r right-hand sides: triangular (trsm) n^2 r; from an LU (getrs) or a Cholesky factor
  (potrs) two triangular solves, 2 n^2 r; a general solve (gesv) getrf + getrs; an inverse
  (getrf + getrs against the identity) 8 n^3 / 3.
- QR (geqrf): 2 m n^2 - 2 n^3 / 3 for m >= n (2 n m^2 - 2 m^3 / 3 otherwise); forming Q of q columns
  from k reflectors (orgqr, `householder_product`): 4 m q k - 2 (m + q) k^2 + 4 k^3 / 3.
  (LAPACK Working Note 41, Blackford and Dongarra, "Installation Guide for LAPACK", Appendix C.)
- Symmetric eigendecomposition (syevd): 4 n^3 / 3 for the eigenvalues alone, 9 n^3 with the
  eigenvectors; general eigendecomposition with vectors (geev): 25 n^3. SVD (Golub-Reinsch),
  m >= n: values only 4 m n^2 - 4 n^3 / 3; thin U and V 14 m n^2 + 8 n^3; full U and V
  4 m^2 n + 8 m n^2 + 9 n^3. (Golub and Van Loan, Matrix Computations, 3rd ed., sections 5.4.5,
  7.5.6 and 8.3.)

A complex matrix counts 4 real FLOPs per real one (a complex multiply-add is four real ones).

Bytes: every input read once, every output written once (factors, eigenvectors, pivots and the
int32 `info`), workspace excluded. A mode the trace does not record (`linalg_qr`'s mode string) is
taken as the default one ('reduced').
"""

from __future__ import annotations

import math

from wlprof.cost.registry import MATRIX, VECTOR, Cost, OpCall, TensorArg, formula, register_wrapper

# composite ops that run one of the ops below nested inside (or matmuls, costed on their own)
register_wrapper(
    "aten::linalg_eigh", "aten::linalg_eigvalsh", "aten::linalg_svd", "aten::linalg_svdvals", "aten::svd",
    "aten::linalg_cholesky", "aten::cholesky_solve", "aten::linalg_solve", "aten::linalg_inv",
    "aten::inverse", "aten::linalg_lu_factor", "aten::linalg_det", "aten::det", "aten::logdet",
    "aten::linalg_slogdet", "aten::slogdet", "aten::linalg_pinv", "aten::pinverse", "aten::linalg_matrix_rank",
    "aten::linalg_eigvals", "aten::orgqr", "aten::linalg_cond",
    # the check of `info` after a factorization (an any and an item nested) and diag (diag_embed or a clone)
    "aten::_linalg_check_errors", "aten::diag",
    # the matrix exponential: norms, a degree chosen per matrix, its Taylor products by bmm, and squarings
    "aten::linalg_matrix_exp", "aten::matrix_exp", "aten::matrix_exp_backward",
)

_INT32 = 4
# What a factorization or solve runs nested beside its library call, its own auxiliary work (costed on
# its own where it has a formula): the check of `info` (an any and an item), copies of its inputs and
# outputs, the zeroing of a factor's other triangle, the pivots' range checks. A nested op of another
# name (an LU inside a solve) makes it a dispatcher.
_AUX = ("aten::_linalg_check_errors", "aten::any", "aten::all", "aten::item", "aten::_local_scalar_dense",
        "aten::gt", "aten::le", "aten::clone", "aten::copy_", "aten::zeros", "aten::zero_", "aten::fill_",
        "aten::tril", "aten::triu", "aten::resize_")


def _square(t: TensorArg | None) -> tuple[int, int] | None:
    """(batch, n) of a batch of square matrices, or None."""
    if t is None or len(t.dims) < 2 or t.dims[-1] != t.dims[-2]:
        return None
    return math.prod(t.dims[:-2]), t.dims[-1]


def _matrix(t: TensorArg | None) -> tuple[int, int, int] | None:
    """(batch, m, n) of a batch of matrices, or None."""
    if t is None or len(t.dims) < 2:
        return None
    return math.prod(t.dims[:-2]), t.dims[-2], t.dims[-1]


def _real_factor(t: TensorArg) -> int:
    return 4 if t.dtype and t.dtype.startswith("complex") else 1


def _cost(a: TensorArg, flops: float, read: float, written: float) -> Cost:
    """`flops` per real matrix (times the complex factor), `read` and `written` in bytes."""
    return Cost(round(flops * _real_factor(a)), read + written, MATRIX, a.dtype, written=written)


def _getrf(m: int, n: int) -> float:
    return m * n * n - n ** 3 / 3 if m >= n else n * m * m - m ** 3 / 3


def _geqrf(m: int, n: int) -> float:
    return 2 * m * n * n - 2 * n ** 3 / 3 if m >= n else 2 * n * m * m - 2 * m ** 3 / 3


def _orgqr(m: int, q: int, k: int) -> float:
    return 4 * m * q * k - 2 * (m + q) * k * k + 4 * k ** 3 / 3


def _rhs(a: TensorArg, rhs: TensorArg, left: bool = True) -> int | None:
    """Right-hand sides per matrix of a solve against A [.., n, n]: B [.., n, r] (left) or [.., r, n]
    (right); B of one dim fewer than A is a (batch of) vector(s), one each."""
    if len(rhs.dims) == len(a.dims) - 1 and rhs.dims:
        return 1
    if len(rhs.dims) < 2:
        return None
    return rhs.dims[-1] if left else rhs.dims[-2]


def _batch(*ts: TensorArg) -> int:
    """The broadcast batch of matrices (the largest product of leading dims)."""
    return max(math.prod(t.dims[:-2]) for t in ts)


@formula("aten::_linalg_eigh", "aten::_linalg_eigvalsh", aux_children=_AUX)
def eigh(call: OpCall) -> Cost | None:
    # _linalg_eigh(A [.., n, n], UPLO, compute_v): 9 n^3 with vectors, 4 n^3 / 3 without;
    # reads A, writes the n eigenvalues (real) and, with vectors, n x n
    a = call.tensor(0)
    sq = _square(a)
    if sq is None:
        return None
    b, n = sq
    vectors = call.scalar(2) is not False
    real = a.itemsize // 2 if a.dtype and a.dtype.startswith("complex") else a.itemsize
    written = b * (n * real + (n * n * a.itemsize if vectors else 0))
    return _cost(a, b * (9 * n ** 3 if vectors else 4 * n ** 3 / 3), a.nbytes_read, written)


@formula("aten::linalg_eig", aux_children=_AUX)
def eig(call: OpCall) -> Cost | None:
    # linalg_eig(A [.., n, n]): 25 n^3; writes complex eigenvalues and eigenvectors
    a = call.tensor(0)
    sq = _square(a)
    if sq is None:
        return None
    b, n = sq
    cplx = a.itemsize * (1 if a.dtype and a.dtype.startswith("complex") else 2)
    return _cost(a, b * 25 * n ** 3, a.nbytes_read, b * (n + n * n) * cplx)


@formula("aten::_linalg_svd", aux_children=_AUX)
def svd(call: OpCall) -> Cost | None:
    # _linalg_svd(A [.., m, n], full_matrices, compute_uv, driver): Golub-Reinsch counts with p >= q
    # the larger and smaller side; writes S (k reals) and U, Vh (thin k columns, or full)
    a = call.tensor(0)
    mat = _matrix(a)
    if mat is None:
        return None
    b, m, n = mat
    p, q = max(m, n), min(m, n)
    full, uv = call.scalar(1) is True, call.scalar(2) is not False
    real = a.itemsize // 2 if a.dtype and a.dtype.startswith("complex") else a.itemsize
    if not uv:
        flops, out = 4 * p * q * q - 4 * q ** 3 / 3, 0
    elif full:
        flops, out = 4 * p * p * q + 8 * p * q * q + 9 * q ** 3, m * m + n * n
    else:
        flops, out = 14 * p * q * q + 8 * q ** 3, m * q + q * n
    return _cost(a, b * flops, a.nbytes_read, b * (q * real + out * a.itemsize))


@formula("aten::linalg_qr", aux_children=_AUX)
def qr(call: OpCall) -> Cost | None:
    # linalg_qr(A [.., m, n], mode): geqrf, then orgqr for Q ('reduced': m x k, 'complete': m x m,
    # 'r': none); writes Q and R (k x n, or m x n when complete)
    a = call.tensor(0)
    mat = _matrix(a)
    if mat is None:
        return None
    b, m, n = mat
    k = min(m, n)
    mode = call.scalar(1) or "reduced"
    mode = mode.strip("'\"") if isinstance(mode, str) else "reduced"
    q_cols = {"reduced": k, "complete": m, "r": 0}.get(mode)
    if q_cols is None:
        return None
    r_rows = m if mode == "complete" else k
    flops = _geqrf(m, n) + (_orgqr(m, q_cols, k) if q_cols else 0)
    return _cost(a, b * flops, a.nbytes_read, b * (m * q_cols + r_rows * n) * a.itemsize)


@formula("aten::geqrf", aux_children=_AUX)
def geqrf(call: OpCall) -> Cost | None:
    # geqrf(A [.., m, n]): the reflectors in place of A and k scalars tau
    a = call.tensor(0)
    mat = _matrix(a)
    if mat is None:
        return None
    b, m, n = mat
    return _cost(a, b * _geqrf(m, n), a.nbytes_read, b * (m * n + min(m, n)) * a.itemsize)


@formula("aten::linalg_householder_product", aux_children=_AUX)
def householder_product(call: OpCall) -> Cost | None:
    # linalg_householder_product(A [.., m, q], tau [.., k]): Q's q columns from k reflectors
    a, tau = call.tensor(0), call.tensor(1)
    mat = _matrix(a)
    if mat is None or tau is None or not tau.dims:
        return None
    b, m, q = mat
    k = tau.dims[-1]
    return _cost(a, b * _orgqr(m, q, k), a.nbytes_read + tau.nbytes_read, b * m * q * a.itemsize)


@formula("aten::linalg_cholesky_ex", "aten::cholesky", aux_children=_AUX)
def cholesky(call: OpCall) -> Cost | None:
    # linalg_cholesky_ex(A [.., n, n], upper, check_errors): n^3 / 3; writes the factor and info.
    # The zeroing of the other triangle (a nested tril/triu, costed on its own) is its own work.
    a = call.tensor(0)
    sq = _square(a)
    if sq is None:
        return None
    b, n = sq
    return _cost(a, b * n ** 3 / 3, a.nbytes_read, b * (n * n * a.itemsize + _INT32))


@formula("aten::cholesky_inverse", aux_children=_AUX)
def cholesky_inverse(call: OpCall) -> Cost | None:
    # cholesky_inverse(L [.., n, n], upper): potri, 2 n^3 / 3; writes the inverse
    a = call.tensor(0)
    sq = _square(a)
    if sq is None:
        return None
    b, n = sq
    return _cost(a, b * 2 * n ** 3 / 3, a.nbytes_read, b * n * n * a.itemsize)


@formula("aten::linalg_lu_factor_ex", "aten::linalg_lu", "aten::_linalg_det", "aten::_linalg_slogdet",
         "aten::lu_factor_ex", aux_children=_AUX)
def lu(call: OpCall) -> Cost | None:
    # getrf of A [.., m, n]: the LU factors (or P, L and U), k int32 pivots and info (a determinant's
    # LU and pivots too, beside its value)
    a = call.tensor(0)
    mat = _matrix(a)
    if mat is None:
        return None
    b, m, n = mat
    k = min(m, n)
    if call.name == "aten::linalg_lu":
        out = (m * m + m * k + k * n) * a.itemsize  # P, L, U
    else:
        out = m * n * a.itemsize + k * _INT32 + _INT32
    return _cost(a, b * _getrf(m, n), a.nbytes_read, b * out)


def _solve_cost(a: TensorArg, rhs: TensorArg, n: int, per_rhs: float, extra_flops: float,
                extra_read: float = 0.0, left: bool = True) -> Cost | None:
    """A solve against A [.., n, n] with `per_rhs` n^2 FLOPs per right-hand side, plus `extra_flops` per
    matrix (its factorization); X, written, has the broadcast batch and B's matrix shape."""
    r = _rhs(a, rhs, left)
    if r is None:
        return None
    b = _batch(a, rhs) if len(rhs.dims) >= len(a.dims) else math.prod(a.dims[:-2])
    written = b * n * r * rhs.itemsize
    return _cost(a, b * (per_rhs * n * n * r + extra_flops), a.nbytes_read + rhs.nbytes_read + extra_read, written)


@formula("aten::linalg_lu_solve", "aten::lu_solve", aux_children=_AUX)
def lu_solve(call: OpCall) -> Cost | None:
    # linalg_lu_solve(LU [.., n, n], pivots [.., n], B, left, adjoint): getrs, 2 n^2 r; writes X like B
    a, piv, rhs = call.tensor(0), call.tensor(1), call.tensor(2)
    sq = _square(a)
    if sq is None or rhs is None:
        return None
    left = call.scalar(3) is not False
    return _solve_cost(a, rhs, sq[1], 2, 0, piv.nbytes_read if piv is not None else 0, left)


@formula("aten::_cholesky_solve_helper", aux_children=_AUX)
def cholesky_solve(call: OpCall) -> Cost | None:
    # _cholesky_solve_helper(B [.., n, r], L [.., n, n], upper): potrs, 2 n^2 r; writes X like B
    rhs, a = call.tensor(0), call.tensor(1)
    sq = _square(a)
    if sq is None or rhs is None:
        return None
    return _solve_cost(a, rhs, sq[1], 2, 0)


@formula("aten::linalg_solve_triangular", "aten::triangular_solve", aux_children=_AUX)
def solve_triangular(call: OpCall) -> Cost | None:
    # linalg_solve_triangular(A [.., n, n], B, upper, left, unitriangular): trsm, n^2 r;
    # triangular_solve(B, A, upper, transpose, unitriangular): the same with B first (and A's copy out)
    legacy = call.name == "aten::triangular_solve"
    a, rhs = (call.tensor(1), call.tensor(0)) if legacy else (call.tensor(0), call.tensor(1))
    sq = _square(a)
    if sq is None or rhs is None:
        return None
    left = True if legacy else call.scalar(3) is not False
    return _solve_cost(a, rhs, sq[1], 1, 0, left=left)


@formula("aten::_linalg_solve_ex", "aten::linalg_solve_ex", aux_children=_AUX)
def solve(call: OpCall) -> Cost | None:
    # _linalg_solve_ex(A [.., n, n], B, left, check_errors): getrf + getrs, 2 n^3 / 3 + 2 n^2 r. Where it
    # runs linalg_lu_factor_ex and linalg_lu_solve nested (costed there) it is their dispatcher.
    a, rhs = call.tensor(0), call.tensor(1)
    sq = _square(a)
    if sq is None or rhs is None:
        return None
    left = call.scalar(2) is not False
    return _solve_cost(a, rhs, sq[1], 2, _getrf(sq[1], sq[1]), left=left)


@formula("aten::linalg_inv_ex", aux_children=_AUX)
def inv(call: OpCall) -> Cost | None:
    # linalg_inv_ex(A [.., n, n], check_errors): getrf + getrs against the identity, 8 n^3 / 3; writes
    # the inverse and info. Where it runs linalg_solve_ex nested (costed there) it is its dispatcher.
    a = call.tensor(0)
    sq = _square(a)
    if sq is None:
        return None
    b, n = sq
    return _cost(a, b * 8 * n ** 3 / 3, a.nbytes_read, b * (n * n * a.itemsize + _INT32))


@formula("aten::diag_embed", aux_children=True)
def diag_embed(call: OpCall) -> Cost | None:
    # diag_embed(x [.., n], offset, dim1, dim2): a zeroed [.., n + |offset|, n + |offset|] output with x
    # on its diagonal; reads x, writes the whole output (its nested copy of x onto the diagonal is
    # costed on its own)
    x = call.tensor(0)
    if x is None or not x.dims:
        return None
    offset = call.scalar(1) if isinstance(call.scalar(1), int) else 0
    side = x.dims[-1] + abs(offset)
    written = math.prod(x.dims[:-1]) * side * side * x.itemsize
    return Cost(0, x.nbytes_read + written, VECTOR, x.dtype, written=written)

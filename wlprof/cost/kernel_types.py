"""Element types named by the launched kernels' template arguments.

The profiler records a TensorList argument's shapes but not its dtype (`Input type` is
'TensorList'). The CUDA (and hipified ROCm) kernels that process such lists name the
element type in their template arguments, which the kernel event's name spells out:

- multi-tensor apply (`_foreach_*`, `_fused_adam_`, `_fused_sgd_`):
  `multi_tensor_apply_kernel<TensorListMetadata<1>, BinaryOpScalarFunctor<c10::BFloat16, 1, 1, 0>,
  std::multiplies<float>, float>`: the functor's first argument is the lists' scalar type
  (the metadata's and the op's `float` are the opmath type, not the storage type);
- concatenation (`cat`): `CatArrayBatchedCopy<OpaqueType<2u>, unsigned int, 4, 64, 64>`:
  the element size in bytes (the copy does not care which 2-byte type it moves).

These are the only sources used; a name that does not match gives None (bytes unknown).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from wlprof.cost import dtypes

# the functor after the metadata argument; its first template argument (up to ',' or '>')
_MTA = re.compile(r"multi_tensor_apply_kernel<.*?Metadata<[^<>]*>\s*,\s*"
                  r"(?:[\w:]+|\(anonymous namespace\)::)*?(\w+Functor)<\s*([\w:]+(?:<[\w:]+>)?)\s*[,>]")
_OPAQUE = re.compile(r"OpaqueType<(\d+)u?>")


def multi_tensor_dtype(kernels: Iterable[str]) -> str | None:
    """The canonical dtype a multi-tensor-apply kernel works on ('bfloat16'), or None."""
    for name in kernels:
        m = _MTA.search(name)
        if m:
            dt = dtypes.canonical(m.group(2))
            if dt is not None:
                return dt
    return None


def opaque_size(kernels: Iterable[str], kernel_prefix: str) -> int | None:
    """Bytes per element of the first kernel whose name contains `kernel_prefix` and an
    `OpaqueType<N>` argument (`CatArrayBatchedCopy`), or None."""
    for name in kernels:
        if kernel_prefix in name:
            m = _OPAQUE.search(name)
            if m:
                return int(m.group(1))
    return None

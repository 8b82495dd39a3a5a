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


# element types a kernel's template arguments name, as `Input type` spells them; index types
# (`unsigned int` in reductions and concatenations) are left out
_ELEMENT_TOKENS = {
    "float": "float", "double": "double", "c10::Half": "c10::Half", "at::Half": "c10::Half",
    "__half": "c10::Half", "half": "c10::Half", "c10::BFloat16": "c10::BFloat16",
    "at::BFloat16": "c10::BFloat16", "__nv_bfloat16": "c10::BFloat16", "long": "long",
    "int64_t": "long", "int": "int", "bool": "bool", "signed char": "signed char",
    "unsigned char": "unsigned char", "short": "short",
}
# cuBLAS / cuDNN kernels name their type by a letter: volta_sgemm_128x64_nt, volta_scudnn_128x64_relu,
# turing_h1688gemm_256x128: s float, h half, d double
_BLAS = re.compile(r"(?:^|_)([shd])(?:\d{3,5})?(?:gemm|cudnn)(?:_|$)")
_BLAS_TYPES = {"s": "float", "h": "c10::Half", "d": "double"}


_SIGNATURE = re.compile(r"(?<!lambda)\([^()]*\)")
# a pointer parameter's pointee: `float const*`, `long*`, `unsigned char const*`
_POINTER = re.compile(r"((?:signed |unsigned )?[\w:]+)\s*(?:const\s*)?\*")


def _split_parameters(name: str) -> tuple[str, str]:
    """A kernel's name split before its parameter list: `void f<float, 4>(int, float*)` ->
    (`void f<float, 4>`, `(int, float*)`)."""
    depth = 0
    for i, ch in enumerate(name):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth <= 0 and i > 0:
            return name[:i], name[i:]
    return name, ""


def element_type(kernels: Iterable[str]) -> str | None:
    """The one element type the kernels' names spell ('float', 'c10::Half', 'long'), or None.

    Read from template arguments (`AddFunctor<float>`, `bn_fw_tr_1C11_kernel_NCHW<float, float, ...>`),
    pointer parameters (the data a kernel reads and writes: `long const*` for a pooling's indices)
    and cuBLAS/cuDNN prefixes (`volta_sgemm`). The type is the one every kernel that names a type
    names: cuDNN's `im2col4d_kernel<float, long>` beside `explicit_convolve_sgemm<float, int, ...>`
    give float (their index types differ); a kernel that names several types alone (an embedding's
    `<float, float, long>`) or kernels that disagree (a float and a half GEMM) give None.
    """
    common: set[str] | None = None
    for name in kernels:
        own = _kernel_types(name)
        if own:
            common = own if common is None else common & own
    return common.pop() if common is not None and len(common) == 1 else None


def _kernel_types(name: str) -> set[str]:
    """The element types one kernel's name spells."""
    found: set[str] = set()
    m = _BLAS.search(name)
    if m:
        found.add(_BLAS_TYPES[m.group(1)])
    template, params = _split_parameters(name)
    # a function's parameters inside the template (`copy_device_to_device(at::TensorIterator&, bool)`)
    # are not element types; a lambda's (`{lambda(float)#1}`) are
    while (stripped := _SIGNATURE.sub("", template)) != template:
        template = stripped
    tokens = re.split(r"[<>,(){}]", template) + _POINTER.findall(params)
    found.update(t for tok in tokens if (t := _ELEMENT_TOKENS.get(tok.strip())) is not None)
    return found

"""Element sizes and canonical names of the dtype strings torch.profiler records.

`record_shapes=True` writes each input's C++ type name into `Input type`
(e.g. 'float', 'c10::BFloat16', 'long int'); non-tensor arguments are written
as 'Scalar', 'ScalarList', 'TensorList', 'GenericList' or ''. The name is the
compiler's spelling: a 64-bit integer is 'long int' from GCC (Linux), 'long long'
from Clang (macOS) and '__int64' from MSVC (Windows).
"""

from __future__ import annotations

# C++ type name in the trace -> (canonical torch dtype name, bytes per element)
_TYPES: dict[str, tuple[str, int]] = {
    "double": ("float64", 8),
    "float": ("float32", 4),
    "c10::Half": ("float16", 2),
    "c10::BFloat16": ("bfloat16", 2),
    "c10::Float8_e4m3fn": ("float8_e4m3fn", 1),
    "c10::Float8_e5m2": ("float8_e5m2", 1),
    "c10::Float8_e4m3fnuz": ("float8_e4m3fnuz", 1),
    "c10::Float8_e5m2fnuz": ("float8_e5m2fnuz", 1),
    "c10::Float8_e8m0fnu": ("float8_e8m0fnu", 1),
    "c10::Float4_e2m1fn_x2": ("float4_e2m1fn_x2", 1),  # two FP4 values per element
    "c10::complex<float>": ("complex64", 8),
    "c10::complex<double>": ("complex128", 16),
    "c10::complex<c10::Half>": ("complex32", 4),
    "long int": ("int64", 8),
    "long": ("int64", 8),
    "int64_t": ("int64", 8),
    "long long": ("int64", 8),  # Clang (macOS builds)
    "long long int": ("int64", 8),
    "__int64": ("int64", 8),  # MSVC (Windows builds)
    "int": ("int32", 4),
    "short int": ("int16", 2),
    "short": ("int16", 2),
    "signed char": ("int8", 1),
    "unsigned char": ("uint8", 1),
    "bool": ("bool", 1),
    "unsigned short": ("uint16", 2),
    "short unsigned int": ("uint16", 2),  # as torch 2.x records uint16
    "unsigned int": ("uint32", 4),
    "unsigned long": ("uint64", 8),
    "long unsigned int": ("uint64", 8),  # as torch 2.x records uint64
    "unsigned long long": ("uint64", 8),  # Clang
    "long long unsigned int": ("uint64", 8),
    "unsigned __int64": ("uint64", 8),  # MSVC
    "c10::qint8": ("qint8", 1),
    "c10::quint8": ("quint8", 1),
    "c10::qint32": ("qint32", 4),
}

# torch.dtype name -> bytes per element, for code that starts from torch dtypes
_CANONICAL_SIZES: dict[str, int] = {name: size for name, size in _TYPES.values()}

# c10::ScalarType enum values as printed in `Concrete Inputs` (c10/core/ScalarType.h)
SCALAR_TYPE_CODES: dict[int, str] = {
    0: "uint8", 1: "int8", 2: "int16", 3: "int32", 4: "int64", 5: "float16", 6: "float32",
    7: "float64", 8: "complex32", 9: "complex64", 10: "complex128", 11: "bool", 15: "bfloat16",
    23: "float8_e5m2", 24: "float8_e4m3fn", 25: "float8_e5m2fnuz", 26: "float8_e4m3fnuz",
    27: "uint16", 28: "uint32", 29: "uint64", 44: "float8_e8m0fnu", 45: "float4_e2m1fn_x2",
}

FLOATING = {"float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2",
            "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu", "float4_e2m1fn_x2"}
COMPLEX = {"complex32", "complex64", "complex128"}


def spellings(*names: str) -> frozenset[str]:
    """Every C++ type name the profiler may record for the canonical dtypes `names`
    ('int64' -> 'long int', 'long long', '__int64', ...)."""
    return frozenset(t for t, (name, _) in _TYPES.items() if name in names)


# integer and bool tensors: indices, masks and counters
INTEGER_SPELLINGS = spellings("int64", "int32", "int16", "int8", "uint8", "bool")


def is_tensor_type(type_str: str) -> bool:
    """True for a tensor argument's type string (its dtype), False for Scalar, lists, None."""
    return type_str in _TYPES


def element_size(type_str: str) -> int | None:
    entry = _TYPES.get(type_str)
    return entry[1] if entry else None


def canonical(type_str: str) -> str | None:
    """'c10::BFloat16' -> 'bfloat16'; None when the string is not a tensor dtype."""
    entry = _TYPES.get(type_str)
    return entry[0] if entry else None


def size_of_dtype(name: str) -> int:
    """Bytes per element of a canonical dtype name ('bfloat16' -> 2)."""
    try:
        return _CANONICAL_SIZES[name]
    except KeyError:
        raise KeyError(f"unknown dtype name {name!r}") from None

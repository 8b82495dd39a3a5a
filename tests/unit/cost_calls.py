"""Build an `OpCall` the way torch.profiler records it (record_shapes=True), for formula tests.

`Input Dims`, `Input type`, `Input Strides` and `Concrete Inputs` per argument; fp32 = 4
bytes, bf16 = 2, int64 = 8, bool = 1 in the arithmetic of the tests that use these.
"""

from __future__ import annotations

from dataclasses import dataclass

from wlprof.cost import OpCall

BF16, F16, F32, F64, I64, I32, U8, BOOL = (
    "c10::BFloat16", "c10::Half", "float", "double", "long int", "int", "unsigned char", "bool",
)


@dataclass(frozen=True)
class Arg:
    dims: list
    type: str
    strides: list
    concrete: str


def contiguous(dims) -> list[int]:
    strides, acc = [], 1
    for d in reversed(dims):
        strides.insert(0, acc)
        acc *= d
    return strides


def T(dims, type=F32, strides=None) -> Arg:
    """A tensor input; contiguous strides unless given (0 marks a broadcast dim)."""
    return Arg(list(dims), type, list(strides) if strides is not None else contiguous(dims), "")


def S(value) -> Arg:
    """A scalar input as the profiler writes it: '2', '0.', 'False', '[1, 1]' ..."""
    text = str(value) if not isinstance(value, bool) else ("True" if value else "False")
    if isinstance(value, list):
        text = "[" + ", ".join("True" if v is True else "False" if v is False else str(v) for v in value) + "]"
    kind = "ScalarList" if isinstance(value, list) else "Scalar"
    return Arg([], kind, [], text)


NONE = Arg([], "", [], "")  # an absent optional (None) or a string argument


def TL(*dims) -> Arg:
    """A TensorList: the shapes are recorded, the dtype is not."""
    return Arg([list(d) for d in dims], "TensorList", [contiguous(d) for d in dims], "")


def op(name: str, *args: Arg, ancestors=(), kernels=(), **extra) -> OpCall:
    return OpCall.from_args(
        name,
        {
            "Input Dims": [a.dims for a in args],
            "Input type": [a.type for a in args],
            "Input Strides": [a.strides for a in args],
            "Concrete Inputs": [a.concrete for a in args],
            **extra,
        },
        ancestors,
        kernels,
    )


def mta_kernel(scalar_type: str, functor: str = "BinaryOpScalarFunctor", depth: int = 1) -> str:
    """A multi-tensor-apply kernel's name as the CUDA trace spells it."""
    ns = "at::native::(anonymous namespace)::"
    return (f"void {ns}multi_tensor_apply_kernel<{ns}TensorListMetadata<{depth}>, "
            f"{ns}{functor}<{scalar_type}, {depth}, 1, 0>, std::multiplies<float>, float>"
            f"({ns}TensorListMetadata<{depth}>, {ns}{functor}<{scalar_type}, {depth}, 1, 0>, "
            f"std::multiplies<float>, float)")

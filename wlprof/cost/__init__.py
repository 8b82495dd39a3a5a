"""Cost registry: FLOPs and compulsory bytes per op call, from recorded shapes and dtypes.

Importing this package registers every formula (the modules below register at import).
"""

from wlprof.cost import (  # noqa: F401  (registration)
    activations,
    attention,
    comm,
    convolution,
    distances,
    elementwise,
    elementwise_extra,
    gemm,
    indexing,
    indexing_data,
    inductor,
    linalg,
    losses,
    norms,
    optimizers,
    pooling,
    quantized,
    reductions,
    resampling,
    rnn,
    serving,
    spectral,
)
from wlprof.cost.registry import (
    MATRIX,
    SUPPORT_OPS,
    VECTOR,
    Cost,
    OpCall,
    TensorArg,
    aux_children,
    cost_of,
    has_formula,
    is_view,
    is_wrapper,
    registered_ops,
    wrappers,
)

__all__ = [
    "MATRIX", "VECTOR", "Cost", "OpCall", "TensorArg", "SUPPORT_OPS", "aux_children", "cost_of",
    "has_formula", "is_view", "is_wrapper", "registered_ops", "wrappers",
]

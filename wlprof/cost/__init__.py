"""Cost registry: FLOPs and compulsory bytes per op call, from recorded shapes and dtypes.

Importing this package registers every formula (the modules below register at import).
"""

from wlprof.cost import elementwise, gemm, indexing, reductions  # noqa: F401  (registration)
from wlprof.cost.registry import (
    MATRIX,
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

# Data-movement and initialization ops that other ops run as setup (a bias copied into
# the output, an output zero-filled). Nested inside a costed op they are auxiliary work
# of their own: they do not make their parent a dispatcher.
SUPPORT_OPS = frozenset(
    "aten::" + n
    for n in "copy_ fill_ zero_ normal_ uniform_ bernoulli_ random_ exponential_ arange".split()
)

__all__ = [
    "MATRIX", "VECTOR", "Cost", "OpCall", "TensorArg", "SUPPORT_OPS", "aux_children", "cost_of",
    "has_formula", "is_view", "is_wrapper", "registered_ops", "wrappers",
]

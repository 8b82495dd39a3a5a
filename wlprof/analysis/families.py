"""Workload families and op categories: how the report groups sweep points and op calls.

A family groups points whose latency one would hope FLOPs explain in the same way;
each workload says which family its points belong to (`Workload.family`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def add_family(df: pd.DataFrame) -> pd.DataFrame:
    """A copy of `df` (steps, ops or kernels table) with a `family` column."""
    from wlprof import workloads

    out = df.copy()
    wl = out["workload"].astype(object).to_numpy()
    fam = np.array([str(w) for w in wl], dtype=object)
    for w in workloads.all_workloads():
        mask = wl == w.name
        if mask.any():
            fam[mask] = w.family(out[mask])
    out["family"] = fam
    return out


def workload_label(name: str) -> str:
    """How the report names a workload: its declared label, else its name."""
    from wlprof import workloads

    for w in workloads.all_workloads():
        if w.name == name:
            return w.label or w.name
    return name


# Op categories, for `compare` and the L1 model: what kind of work an op does.
_CATEGORIES = {
    "matmul": {"mm", "addmm", "bmm", "baddbmm", "_grouped_mm", "_scaled_mm", "_int_mm", "mv", "addmv", "addmv_", "dot",
               "vdot", "cudnn_convolution", "mkldnn_convolution", "_convolution", "_slow_conv2d_forward"},
    "elementwise": {"add", "add_", "sub", "mul", "mul_", "div", "div_", "clamp_min", "clamp", "relu", "gelu",
                    "silu", "sigmoid", "tanh", "exp", "where", "masked_fill", "neg", "pow", "rsqrt", "sqrt",
                    "maximum", "minimum", "eq", "ne", "lt", "gt", "le", "ge"},
    "reduction/norm": {"sum", "mean", "max", "min", "amax", "amin", "argmax", "argmin", "_softmax",
                       "_log_softmax", "native_layer_norm", "_fused_rms_norm", "norm", "cumsum", "prod"},
    "gather/scatter": {"index_select", "gather", "scatter_add_", "scatter_add", "scatter_reduce_",
                       "scatter_reduce", "scatter_", "scatter", "index_add_", "index_add", "embedding",
                       "index", "index_put_", "_index_put_impl_", "segment_reduce", "_segment_reduce"},
    "copy/fill": {"copy_", "fill_", "zero_", "cat", "normal_", "uniform_", "arange", "_to_copy"},
    "sort/select": {"sort", "topk", "argsort", "nonzero", "unique", "_unique2", "bincount", "histc"},
}
_LOOKUP = {f"aten::{op}": cat for cat, ops in _CATEGORIES.items() for op in ops}
COMMUNICATION = "communication"  # collectives and P2P: c10d's ops, NCCL's kernels, gloo's work
_COMM_CLASSES = ("collective", "p2p")  # the kernels table's comm_class values that are communication


def op_category(op_name) -> str:
    """What kind of work an op does: matmul, elementwise, ..., communication, other."""
    if op_name is None or (isinstance(op_name, float) and np.isnan(op_name)):
        return "no op (graph replay)"
    from wlprof.collectives import is_comm_op
    from wlprof.cost.inductor import gemm_template

    if gemm_template(str(op_name)) is not None:  # an Inductor GEMM template launch is a matmul
        return "matmul"
    if is_comm_op(str(op_name)):
        return COMMUNICATION
    return _LOOKUP.get(str(op_name), "other")


def add_category(df: pd.DataFrame) -> pd.DataFrame:
    """A copy of `df` (ops or kernels) with a `category` column; a kernels row that communicates (its
    comm_class, or a communication kernel's name) is communication whatever op launched it."""
    from wlprof.collectives import is_comm_kernel

    out = df.copy()
    category = np.array([op_category(x) for x in out["op_name"]], dtype=object)
    comm = np.zeros(len(out), dtype=bool)
    if "comm_class" in out:
        comm |= out["comm_class"].isin(_COMM_CLASSES).to_numpy(dtype=bool)
    if "name" in out:
        comm |= np.array([isinstance(n, str) and is_comm_kernel(n) for n in out["name"]], dtype=bool)
    category[comm] = COMMUNICATION
    out["category"] = category
    return out

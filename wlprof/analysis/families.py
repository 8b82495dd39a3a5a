"""Workload families: the rows of the seed note's spectrum, from large dense GEMMs to GNN aggregation.

A family groups sweep points whose latency one would hope FLOPs explain in the
same way: large dense GEMMs and MLPs, small-batch MLPs and skinny GEMMs, the
roofline micro-kernels, MoE layers by routing, GNN aggregation by backend.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

# MLP batches below this are "small batch": their GEMMs are skinny (M < 512 rows)
SMALL_BATCH = 512


def add_family(df: pd.DataFrame) -> pd.DataFrame:
    """A copy of `df` (steps, ops or kernels table) with a `family` column."""
    out = df.copy()
    wl = out["workload"].astype(object).to_numpy()
    get = lambda c: out[c].to_numpy() if c in out else np.full(len(out), None)  # noqa: E731
    batch = pd.to_numeric(pd.Series(get("batch")), errors="coerce").to_numpy()
    routing = get("routing")
    backend = get("backend")
    fam = np.full(len(out), "other", dtype=object)
    # one family for the GEMM study: its point is the spread between shapes of equal FLOPs
    fam[wl == "gemm"] = "GEMM shapes"
    is_mlp = wl == "mlp"
    fam[is_mlp] = np.where(batch[is_mlp] >= SMALL_BATCH, "dense MLP (large batch)", "MLP (small batch)")
    fam[wl == "elementwise"] = "roofline micro-kernels"
    is_moe = wl == "moe"
    fam[is_moe] = [f"MoE ({str(r).split(':')[0]})" for r in routing[is_moe]]
    is_gnn = wl == "gnn"
    fam[is_gnn] = [f"GNN ({b})" for b in backend[is_gnn]]
    other = fam == "other"
    fam[other] = [str(w) for w in wl[other]]
    out["family"] = fam
    return out


# Op categories, for `compare` and the L1 model: what kind of work an op does.
_CATEGORIES = {
    "matmul": {"mm", "addmm", "bmm", "baddbmm", "_grouped_mm", "_scaled_mm", "mv", "addmv", "addmv_", "dot",
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


def op_category(op_name) -> str:
    if op_name is None or (isinstance(op_name, float) and np.isnan(op_name)):
        return "no op (graph replay)"
    return _LOOKUP.get(str(op_name), "other")


def add_category(df: pd.DataFrame) -> pd.DataFrame:
    out = df.copy()
    out["category"] = [op_category(x) for x in out["op_name"]]
    return out

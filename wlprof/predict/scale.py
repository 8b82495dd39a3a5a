"""`--trace FILE --scale DIM=FACTOR`: an ingested step's op calls with one dimension rewritten.

`DIM` names the dimension to rewrite: `batch` (or `rows`, `tokens`) is the rows of the
step's first matrix op (an MLP's batch, a transformer's batch x sequence), a number is
that dimension's value itself (`--scale 4096=2` rewrites every dim of 4096). Every input
dimension equal to it becomes FACTOR times it (rounded, at least 1); strides follow the
new sizes in the order their tensor was laid out (a broadcast stays a broadcast). Other
scalars (view sizes, k) are kept. The calls keep their op, dtypes and order; their
durations are dropped, the original ones kept as `measured_us` for the unscaled step.

`anchored` then predicts the calls the profile holds nothing of (answered from their op's
other layouts, their class or the base alone) and those whose work their shapes do not say
(an index op's unrecorded indices) from their own measured time, times the profile's ratio of
the new shapes to the old: the trace's time is the one measurement of them there is (on the
trace's device, which may not be the profile's).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from wlprof.errors import InputError

ROW_NAMES = ("batch", "rows", "tokens")


def parse_scale(text: str, arg: str = "--scale") -> tuple[str, float]:
    """'batch=4' -> ('batch', 4.0); '4096=0.5' -> ('4096', 0.5)."""
    dim, sep, raw = str(text or "").partition("=")
    dim = dim.strip().lower()
    try:
        factor = float(raw)
    except ValueError:
        factor = math.nan
    if not sep or not dim or not (factor > 0 and math.isfinite(factor)):
        raise InputError(arg, "must be DIM=FACTOR with DIM batch (rows, tokens) or a dimension's value and "
                         "FACTOR a positive number (e.g. batch=4)", text)
    if dim not in ROW_NAMES and not dim.isdigit():
        raise InputError(arg, f"must name the dimension as {', '.join(ROW_NAMES)} or by its value (e.g. 4096=2)",
                         text)
    return dim, factor


def batch_dim(ops: pd.DataFrame) -> int | None:
    """The rows of the first matrix op of the step (M of its first mm, addmm, bmm or linear)."""
    from wlprof.analysis.models import matrix_dims

    for name, dims in zip(ops.op_name, ops.op_input_dims, strict=True):
        m = matrix_dims(str(name), dims)[0]
        if not math.isnan(m):
            return int(m)
    return None


def _strides(old_dims, old_strides, new_dims):
    """New strides for `new_dims` in the memory order of the old ones (zero strides stay zero)."""
    if not isinstance(old_strides, list) or len(old_strides) != len(old_dims) or not old_dims:
        return old_strides
    order = sorted(range(len(old_dims)), key=lambda j: (-old_strides[j], -j))
    out = [0] * len(new_dims)
    acc = 1
    for j in reversed(order):
        if old_strides[j] == 0:
            out[j] = 0
            continue
        out[j] = acc
        acc *= max(new_dims[j], 1)
    return out


def rewrite(ops: pd.DataFrame, value: int, factor: float) -> pd.DataFrame:
    """`ops` with every input dimension equal to `value` multiplied by `factor`."""
    new_value = max(1, int(round(value * factor)))
    out = ops.copy()
    dims_col, strides_col = [], []
    cache: dict[tuple, tuple] = {}
    for d_s, s_s in zip(ops.op_input_dims, ops.op_input_strides, strict=True):
        key = (d_s, s_s)
        if key not in cache:
            try:
                dims = json.loads(d_s) if isinstance(d_s, str) else []
                strides = json.loads(s_s) if isinstance(s_s, str) else []
            except ValueError:
                cache[key] = (d_s, s_s)
            else:
                nd, ns = [], []
                for i, t in enumerate(dims):
                    st = strides[i] if i < len(strides) else []
                    if isinstance(t, list) and all(isinstance(x, int) for x in t):
                        new = [new_value if x == value else x for x in t]
                        nd.append(new)
                        ns.append(_strides(t, st, new) if new != t else st)
                    else:  # a tensor list: each member
                        if isinstance(t, list):
                            sub_d = [[new_value if x == value else x for x in m] if isinstance(m, list) else m
                                     for m in t]
                            sub_s = [_strides(m, st[j] if isinstance(st, list) and j < len(st) else [], sub_d[j])
                                     if isinstance(m, list) else st for j, m in enumerate(t)]
                            nd.append(sub_d)
                            ns.append(sub_s)
                        else:
                            nd.append(t)
                            ns.append(st)
                cache[key] = (json.dumps(nd, separators=(",", ":")), json.dumps(ns, separators=(",", ":")))
        dims_col.append(cache[key][0])
        strides_col.append(cache[key][1])
    out["op_input_dims"] = dims_col
    out["op_input_strides"] = strides_col
    out["measured_us"] = pd.to_numeric(ops.dur_us, errors="coerce") if "dur_us" in ops else np.nan
    out["dur_us"] = np.nan
    return out


def ingest_trace(path: str) -> pd.DataFrame:
    """The op calls of a torch.profiler trace (the pipeline's ops table, no store written)."""
    from wlprof import pipeline
    from wlprof.ingest import _ceilings
    from wlprof.trace.identity import device_of

    trace = pipeline.read(path, keep_events=False)
    device_type, device_name = device_of(trace.meta, trace.device)
    ceilings, _ = _ceilings(device_type, device_name)
    ident = {"run_id": "trace", "workload": "ingest", "variant": str(path), "point": 0,
             "device_type": device_type, "device_name": device_name}
    ops = pipeline.tables(trace, ceilings=ceilings, identity=ident).ops
    ops.attrs["warnings"] = list(trace.warnings)  # e.g. no step markers: the whole trace is one step
    return ops


def scaled(ops: pd.DataFrame, dim: str, factor: float, arg: str = "--scale") -> tuple[pd.DataFrame, int]:
    """(the calls rewritten, the dimension's value that was scaled)."""
    if dim in ROW_NAMES:
        value = batch_dim(ops)
        if value is None:
            raise InputError(arg, "must name a dimension by its value: the trace has no matrix op to take the "
                             "batch from", dim)
    else:
        value = int(dim)
    new = rewrite(ops, value, factor)
    if value != max(1, int(round(value * factor))) and new.op_input_dims.equals(ops.op_input_dims):
        raise InputError(arg, f"must name a dimension the trace has: no input dimension equals {value}", dim)
    return new, value


def describe(before: pd.DataFrame, after: pd.DataFrame, dim: str, value: int, factor: float) -> str:
    """The line that says what `--scale` rewrote: the value, the new one (rounded where it is), the calls."""
    new_value = max(1, int(round(value * factor)))
    exact = value * factor
    rounded = "" if exact == new_value else f" ({value} x {factor:g} = {exact:g}, rounded)"
    moved = (before.op_input_dims.reset_index(drop=True) != after.op_input_dims.reset_index(drop=True)).to_numpy()
    changed = int(moved.sum())
    line = (f"--scale {dim}: every input dimension of {value} becomes {new_value}{rounded}, in {changed} of "
            f"{len(after)} calls (one that only equals {value}, a feature map's side say, changes too)")
    shaped = before.op_input_dims.reset_index(drop=True).map(_leading_dim)
    kept = shaped[~moved & shaped.notna()]
    if changed < 0.5 * len(after):
        line += "; the other calls keep their sizes, so the step barely scales"
        if len(kept):
            other = int(kept.value_counts().idxmax())
            line += (f": if its batch is another dimension (the most common leading one of the batched inputs "
                     f"left is {other}), name it: `--scale {other}={factor:g}`")
    return line


def _leading_dim(d_s) -> int | None:
    """The first dimension of a call's first input of three or more dimensions ([batch, sequence, width],
    [batch, channels, height, width]): None where it has none."""
    try:
        dims = json.loads(d_s) if isinstance(d_s, str) else []
    except ValueError:
        return None
    for t in dims:
        if isinstance(t, list) and len(t) >= 3 and all(isinstance(x, int) for x in t):
            return t[0]
    return None


ANCHOR_SOURCES = ("op", "class", "base")  # sources too far from the call to beat its own measured time


def anchored(pred_scaled: np.ndarray, pred_unscaled: np.ndarray, src: np.ndarray, measured: np.ndarray,
             unknown_size: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(predicted us, which calls were anchored): for the calls whose source is one of ANCHOR_SOURCES
    or whose work the shapes do not say (`unknown_size`: an index op whose index tensors are not
    recorded), the call's measured time x the ratio of its rescaled prediction to its unscaled one."""
    from wlprof.predict.model import SOURCES

    measured = np.asarray(measured, dtype=float)
    pu = np.asarray(pred_unscaled, dtype=float)
    far = np.isin(np.asarray(src), [SOURCES.index(s) for s in ANCHOR_SOURCES])
    if unknown_size is not None:
        far |= np.asarray(unknown_size, dtype=bool)
    ok = far & np.isfinite(measured) & (measured > 0) & np.isfinite(pu) & (pu > 0)
    out = np.asarray(pred_scaled, dtype=float).copy()
    out[ok] = measured[ok] * out[ok] / pu[ok]
    return out, ok

"""The ladder of performance models, Level 0 (FLOPs over the peak) to 3 (offline profiling).

Each model predicts the device time of one launching op (the summed time of its
kernels) and, summed over a step's ops, the step's kernel time; `score` compares the
predictions with held-out runs per family. The models and the L3 lookup: `docs/models.md`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from wlprof.analysis.families import add_category, add_family
from wlprof.cost.dtypes import INTEGER_SPELLINGS
from wlprof.schema import columns_with

MODELS = ["L0 peak", "L0 fitted", "L1 shape", "L2 roofline", "L2 fitted", "L3 profile"]
_MATRIX = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::_grouped_mm", "aten::mv",
           "aten::addmv", "aten::addmv_", "aten::dot", "aten::_scaled_mm"}


def matrix_dims(op_name: str, dims_json) -> tuple[float, float, float, float]:
    """(M, N, K, batch) of a recorded matrix op; NaNs for other ops or unreadable dims."""
    nan = (math.nan,) * 4
    if op_name not in _MATRIX or dims_json is None or (isinstance(dims_json, float) and math.isnan(dims_json)):
        return nan
    try:
        d = json.loads(dims_json) if isinstance(dims_json, str) else dims_json
        if op_name in ("aten::mm", "aten::_scaled_mm"):
            (m, k), (_, n) = d[0], d[1]
            return m, n, k, 1
        if op_name == "aten::addmm":
            (m, k), (_, n) = d[1], d[2]
            return m, n, k, 1
        if op_name == "aten::bmm":
            (b, m, k), (_, _, n) = d[0], d[1]
            return m, n, k, b
        if op_name == "aten::baddbmm":
            (b, m, k), (_, _, n) = d[1], d[2]
            return m, n, k, b
        if op_name == "aten::_grouped_mm":
            a, w = d[0], d[1]
            if len(a) == 2 and len(w) == 3:
                return a[0] / w[0], w[2], a[1], w[0]  # mean rows per group
            return nan
        if op_name == "aten::mv":
            (m, k) = d[0]
            return m, 1, k, 1
        if op_name in ("aten::addmv", "aten::addmv_"):
            (m, k) = d[1]
            return m, 1, k, 1
        if op_name == "aten::dot":
            return 1, 1, d[0][0], 1
    except (ValueError, TypeError, IndexError, KeyError):
        pass
    return nan


def shape_class(row) -> str:
    if row.category != "matmul" or math.isnan(row.M):
        return row.category
    skinny = min(row.M, row.N)
    for limit, label in ((1, "1"), (16, "<=16"), (128, "<=128"), (1024, "<=1024")):
        if skinny <= limit:
            return f"matmul {label}"
    return "matmul >1024"


def features(ops: pd.DataFrame) -> pd.DataFrame:
    """The op rows the ladder can score (known FLOPs and bytes, positive time), with model features."""
    o = add_family(add_category(ops))
    o = o[o.flops.notna() & o["bytes"].notna() & (o.dur_us > 0) & o.ceiling_tflops.notna()].copy()
    for c in ("op_input_types", "op_concrete_inputs"):
        if c not in o:
            o[c] = None
    if "intensity_flop_per_byte" not in o:
        o["intensity_flop_per_byte"] = o.flops / o["bytes"].where(o["bytes"] > 0)
    dims = [matrix_dims(n, d) for n, d in zip(o.op_name, o.op_input_dims, strict=True)]
    o[["M", "N", "K", "B"]] = pd.DataFrame(dims, index=o.index, columns=["M", "N", "K", "B"])
    o["shape_class"] = [shape_class(r) for r in o[["category", "M", "N"]].itertuples()]
    o["itemsize"] = o.cost_dtype.map({"bfloat16": 2, "float16": 2, "float32": 4, "float64": 8, "int64": 8,
                                      "int32": 4}).fillna(4)
    return o


def _peak_us(o: pd.DataFrame) -> np.ndarray:
    return o.flops.to_numpy() / (o.ceiling_tflops.to_numpy() * 1e6)


# Workload columns that change a data-dependent op's time where its shapes do not: the data drawn,
# and the backend or dispatch that ordered it (a scatter over destination-sorted edges, as a CSR
# backend leaves them, contends more than over source-sorted ones: 2,577 against 1,545 us for the
# same shapes and graph, PyG GAT on the H200).
# The columns are the workloads' own declarations (`Column(data=True)`, `distribution=True`).
DATA_COLUMNS = columns_with("data")
# The distribution the data was drawn from, without the draw: a nearest neighbour must share it.
DISTRIBUTION_COLUMNS = columns_with("distribution")
FEATURE_COLUMNS = columns_with("feature")
# Ops whose index inputs are recorded as "" (a tensor list), whose output size is data, or whose
# time follows the values (topk over [128, 64] router logits took 5.15 us on one draw and 7.81 us
# on another, each within 3% over 15 calls: torch 2.11 on the H200).
_INDEX_OPS = {"aten::index", "aten::index_put_", "aten::_index_put_impl_", "aten::nonzero", "aten::masked_select",
              "aten::_unique2", "aten::unique_consecutive", "aten::unique_dim", "aten::_local_scalar_dense",
              "aten::topk", "aten::sort", "aten::argsort", "aten::kthvalue", "aten::median", "aten::mode"}
_INDEX_TYPES = INTEGER_SPELLINGS
NEAREST_MAX_RATIO = 2.0  # a neighbour's every dimension within this factor of the call's
SOURCES = ("same point", "same call", "nearest", "regression")


def _text(col: pd.Series) -> pd.Series:
    # missing values become "" (pandas' string dtype would keep them missing, and a
    # missing part would make the whole key missing)
    return col.astype(object).where(col.notna(), "").map(str)


def _join(parts: list[pd.Series]) -> pd.Series:
    key = parts[0]
    for p in parts[1:]:
        key = key + "|" + p
    return key


def call_key(o: pd.DataFrame) -> pd.Series:
    """What identifies an op call for the profile lookup: op, shapes, dtypes, scalars and, for a
    data-dependent call (`data_dependent`), its data (DATA_COLUMNS: the graph drawn, the expert
    counts, the seed, the backend or dispatch that ordered the indices)."""
    parts = [_text(o[c]) for c in ("op_name", "op_input_dims", "op_input_types", "op_concrete_inputs")]
    parts += _data_parts(o, DATA_COLUMNS)
    return _join(parts)


def data_dependent(o: pd.DataFrame) -> pd.Series:
    """Whether a call's time can depend on its data, not only its shapes: it takes an integer or
    bool tensor (indices, offsets, masks), a sparse tensor (dims recorded without strides: a CSR
    adjacency), or is an index or selection op. A dense GEMM's or an activation's time depends on shapes alone."""
    def load(v):
        try:
            return json.loads(v) if isinstance(v, str) else v
        except ValueError:
            return None

    def one(name, types, dims, strides) -> bool:
        if name in _INDEX_OPS:
            return True
        t = load(types)
        if not isinstance(t, list) or any(x in _INDEX_TYPES for x in t):
            return True
        d, st = load(dims), load(strides)
        if isinstance(d, list) and isinstance(st, list) and len(d) == len(st):
            return any(isinstance(a, list) and len(a) > 0 and b == [] for a, b in zip(d, st, strict=True))
        return False

    strides = o.op_input_strides if "op_input_strides" in o else pd.Series(None, index=o.index)
    keys = pd.Series(list(zip(o.op_name, o.op_input_types, o.op_input_dims, strides, strict=True)), index=o.index)
    verdict = {k: one(*k) for k in keys.unique()}
    return keys.map(verdict).astype(bool)


def _data_parts(o: pd.DataFrame, columns: list[str]) -> list[pd.Series]:
    """The data columns of data-dependent calls; blank for the others (their time ignores the data)."""
    dep = data_dependent(o) if len(o) else pd.Series(dtype=bool)
    return [_text(o[c]).where(dep, "") for c in columns if c in o]


def point_key(o: pd.DataFrame, key: pd.Series | None = None) -> pd.Series:
    """`call_key` within its sweep point (workload and variant): the same call in the same step
    context, as a profile of the same study made earlier would have it."""
    key = call_key(o) if key is None else key
    blank = pd.Series("", index=o.index)
    return _join([key, *(_text(o[c]) if c in o else blank for c in ("workload", "variant"))])


def _flat_dims(dims_json) -> tuple[str, list[float]]:
    """(the nesting of a call's input dims, their numbers): '[[64,4096],[4096]]' -> ('2,1', [64, 4096, 4096])."""
    try:
        d = json.loads(dims_json) if isinstance(dims_json, str) else dims_json
    except ValueError:
        return "?", []
    if not isinstance(d, list):
        return "?", []
    shape, nums = [], []
    for t in d:
        if isinstance(t, list):
            shape.append(str(len(t)))
            nums.extend(float(x) for x in t if isinstance(x, (int, float)))
        else:
            shape.append("s")
    return ",".join(shape), nums


def neighbour_key(o: pd.DataFrame) -> tuple[pd.Series, list[np.ndarray]]:
    """(the group a call's nearest neighbour must come from, the call's log2 dims).

    The group: op, dtypes, scalars, the nesting of its input dims and the data's
    distribution (never the draw).
    """
    flat = [_flat_dims(d) for d in o.op_input_dims]
    parts = [_text(o[c]) for c in ("op_name", "op_input_types", "op_concrete_inputs")]
    parts.append(pd.Series([f for f, _ in flat], index=o.index))
    parts += _data_parts(o, DISTRIBUTION_COLUMNS)
    logs = [np.log2(np.maximum(np.asarray(n, dtype=float), 0) + 1) for _, n in flat]
    return _join(parts), logs


@dataclass
class Ladder:
    throughput: float  # L0 fitted, FLOP/us
    class_efficiency: dict[str, float]  # L1
    category_roofline: dict[str, float]  # L2 fitted
    l3: object | None  # sklearn estimator
    l3_columns: list[str]
    l3_profile: dict[str, float] | None = None  # call key -> median measured time (us)
    l3_point: dict[str, float] | None = None  # call key in its sweep point -> median measured time (us)
    # neighbour key -> (log2 dims [calls, dims], median time (us), roofline time (us)) of the profiled calls
    l3_neighbours: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] | None = None

    def predict(self, o: pd.DataFrame) -> dict[str, np.ndarray]:
        peak = _peak_us(o)
        eff = o.shape_class.map(self.class_efficiency).fillna(np.nan).to_numpy()
        fallback = o.flops.to_numpy() / self.throughput
        l1 = np.where(np.isnan(eff), fallback, peak / np.where(np.isnan(eff), 1, eff))
        rf = o.category.map(self.category_roofline).to_numpy(dtype=float)
        l2f = o.roofline_us.to_numpy() / np.where(np.isnan(rf) | (rf <= 0), 1.0, rf)
        out = {
            "L0 peak": peak,
            "L0 fitted": o.flops.to_numpy() / self.throughput,
            "L1 shape": l1,
            "L2 roofline": o.roofline_us.to_numpy(),
            "L2 fitted": l2f,
        }
        if self.l3 is not None:
            out["L3 profile"] = self.l3_predict(o)[0]
        return out

    def l3_predict(self, o: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        """(L3's prediction, the source that answered: an index into SOURCES) per call."""
        key = call_key(o)
        pred = point_key(o, key).map(self.l3_point or {}).to_numpy(dtype=float, copy=True)
        miss = np.isnan(pred)
        source = np.where(miss, -1, 0)
        pred[miss] = key[miss].map(self.l3_profile or {}).to_numpy(dtype=float)
        source[miss & ~np.isnan(pred)] = 1
        todo = np.flatnonzero(np.isnan(pred))
        if len(todo) and self.l3_neighbours:
            sub = o.iloc[todo]
            keys, logs = neighbour_key(sub)
            roof = sub.roofline_us.to_numpy(dtype=float)
            limit = math.log2(NEAREST_MAX_RATIO) + 1e-9
            for i, (k, x) in enumerate(zip(keys, logs, strict=True)):
                group = self.l3_neighbours.get(k)
                if group is None or group[0].shape[1] != len(x):
                    continue
                dist = np.abs(group[0] - x).max(axis=1) if len(x) else np.zeros(len(group[0]))
                near = np.flatnonzero(dist <= limit)
                if len(near):
                    pred[todo[i]] = _interpolate(roof[i], group[2][near], group[1][near], dist[near])
                    source[todo[i]] = 2
        rest = np.flatnonzero(np.isnan(pred))
        if len(rest):
            with _threads(len(rest)):
                pred[rest] = 10 ** self.l3.predict(_l3_matrix(o.iloc[rest], self.l3_columns))
            source[rest] = 3
        return pred, source

    def sources(self, o: pd.DataFrame) -> dict[str, float]:
        """Share of `o`'s op calls each L3 source answers (SOURCES)."""
        if self.l3 is None or not len(o):
            return {s: float("nan") for s in SOURCES}
        src = self.l3_predict(o)[1]
        return {s: float((src == i).mean()) for i, s in enumerate(SOURCES)}


def _l3_frame(o: pd.DataFrame) -> pd.DataFrame:
    lg = lambda s: np.log10(np.maximum(s.to_numpy(dtype=float), 0) + 1)  # noqa: E731

    def col(name):
        return pd.to_numeric(o[name], errors="coerce").fillna(0) if name in o else pd.Series(0.0, index=o.index)

    tiles = np.ceil(o.M.fillna(0) / 128) * np.ceil(o.N.fillna(0) / 128) * o.B.fillna(1)
    f = pd.DataFrame({
        "log_flops": lg(o.flops),
        "log_bytes": lg(o["bytes"]),
        "log_roofline_ns": lg(o.roofline_us * 1e3),
        "log_M": lg(o.M.fillna(0)),
        "log_N": lg(o.N.fillna(0)),
        "log_K": lg(o.K.fillna(0)),
        "log_B": lg(o.B.fillna(0)),
        "itemsize": o.itemsize.to_numpy(dtype=float),
        "kernels": o.kernel_count.to_numpy(dtype=float),
        "log_tiles": lg(tiles),
        "log_intensity": lg(o.intensity_flop_per_byte.fillna(0) * 1e3),
    }, index=o.index)
    for name in FEATURE_COLUMNS:  # the workloads' declared numeric features (in-degrees, imbalance)
        f[f"log_{name}"] = lg(col(name))
    for cat in sorted(o.category.unique()):
        f[f"cat={cat}"] = (o.category == cat).to_numpy(dtype=float)
    for op in sorted(o.op_name.astype(str).unique()):
        f[f"op={op}"] = (o.op_name == op).to_numpy(dtype=float)
    return f


def _l3_matrix(o: pd.DataFrame, columns: list[str]) -> np.ndarray:
    f = _l3_frame(o)
    return f.reindex(columns=columns, fill_value=0.0).to_numpy()


ONE_THREAD_ROWS = 50_000  # below this many rows the regression fits and predicts on one OpenMP thread


def _threads(rows: int):
    """One OpenMP thread for the gradient-boosted regression of fewer than ONE_THREAD_ROWS rows (a
    context manager): its threads wait for each other on every split, and on a small training set
    that waiting, on a machine other processes share, takes longer than the work."""
    import contextlib

    if rows >= ONE_THREAD_ROWS:
        return contextlib.nullcontext()
    from threadpoolctl import threadpool_limits

    return threadpool_limits(1, "openmp")


def fit(train: pd.DataFrame, l3: bool = True, seed: int = 0) -> Ladder:
    """Fit the ladder's free parameters on training ops (output of `features`)."""
    if train.empty:
        raise ValueError("the training selection has no op with known FLOPs and bytes")
    throughput = float(train.flops.sum() / train.dur_us.sum())
    achieved_vs_peak = _peak_us(train) / train.dur_us.to_numpy()
    class_eff = (pd.Series(achieved_vs_peak, index=train.index).groupby(train.shape_class).median()
                 .replace(0, np.nan).dropna().to_dict())
    cat_roof = train.roofline_fraction.groupby(train.category).median().dropna().to_dict()
    if not l3:
        return Ladder(throughput, class_eff, cat_roof, None, [])
    from sklearn.ensemble import HistGradientBoostingRegressor

    f = _l3_frame(train)
    cols = list(f.columns)
    est = HistGradientBoostingRegressor(max_iter=800, learning_rate=0.05, max_leaf_nodes=31,
                                        min_samples_leaf=3, l2_regularization=1e-3, random_state=seed)
    with _threads(len(f)):
        est.fit(f.to_numpy(), np.log10(train.dur_us.to_numpy()))
    key = call_key(train)
    profile = train.dur_us.groupby(key).median().to_dict()
    point = train.dur_us.groupby(point_key(train, key)).median().to_dict()
    return Ladder(throughput, class_eff, cat_roof, est, cols, profile, point, _neighbours(train, key))


def _interpolate(roof: float, roofs: np.ndarray, times: np.ndarray, dist: np.ndarray) -> float:
    """A call's time from profiled neighbours of the same op: the nearest neighbour below and
    above its roofline time, joined by a straight line t = a + b * roofline (the intercept a is
    the launch and latency floor that small kernels sit on); on one side only, the two nearest
    on that side (slope >= 0); a single neighbour, its time plus the difference in roofline time
    (never under the call's own roofline time)."""
    exact = dist == 0
    if exact.any():  # the same shapes on another draw of the data
        return float(np.median(times[exact]))
    order = np.argsort(dist, kind="stable")
    lo = [k for k in order if roofs[k] <= roof]
    hi = [k for k in order if roofs[k] >= roof]
    if lo and hi and roofs[hi[0]] > roofs[lo[0]]:
        a, b = lo[0], hi[0]
    else:
        side = lo or hi
        pts = [side[0]] + [k for k in side[1:] if roofs[k] != roofs[side[0]]][:1]
        if len(pts) < 2:
            k = side[0]
            return float(max(times[k] + roof - roofs[k], roof, 1e-3))
        a, b = pts
    slope = max((times[b] - times[a]) / (roofs[b] - roofs[a]), 0.0)
    return float(max(times[a] + slope * (roof - roofs[a]), 1e-3))


def _neighbours(train: pd.DataFrame, key: pd.Series) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The profiled calls by neighbour group: one row per distinct call (median time and roofline)."""
    # positions, not labels: a training set concatenated from several runs repeats index labels
    per_call = train.assign(_key=key, _pos=np.arange(len(train))).groupby("_key", sort=False).agg(
        dur=("dur_us", "median"), roof=("roofline_us", "median"), first=("_pos", "first"))
    firsts = train.iloc[per_call["first"].to_numpy()]
    keys, logs = neighbour_key(firsts)
    out: dict[str, tuple[list, list, list]] = {}
    for k, x, d, r in zip(keys, logs, per_call.dur.to_numpy(), per_call.roof.to_numpy(), strict=True):
        g = out.setdefault(k, ([], [], []))
        if g[0] and len(g[0][0]) != len(x):
            continue  # same nesting, different numbers of dims: cannot happen for one op's calls
        g[0].append(x), g[1].append(d), g[2].append(r)
    return {k: (np.array(x, dtype=float).reshape(len(x), -1), np.array(d), np.array(r)) for k, (x, d, r) in out.items()}


def _ape(pred: np.ndarray, true: np.ndarray) -> np.ndarray:
    return np.abs(pred - true) / true


NOISE_FLOOR = "noise floor"


def remeasured(test: pd.DataFrame) -> np.ndarray:
    """The noise floor: each call predicted by the same call (`call_key`) measured in the other
    profiled steps of its own run (their median), NaN where it ran in one step only. No model
    that predicts one kernel time per call can beat a re-measurement on the same device state."""
    out = np.full(len(test), np.nan)
    df = pd.DataFrame({"run": test.run_id.to_numpy(), "key": call_key(test).to_numpy(),
                       "step": test.step.to_numpy(), "dur": test.dur_us.to_numpy(), "pos": np.arange(len(test))})
    for _, g in df.groupby(["run", "key"], sort=False):
        steps = g.step.to_numpy()
        if len(np.unique(steps)) < 2:
            continue
        dur, pos = g.dur.to_numpy(), g.pos.to_numpy()
        for s in np.unique(steps):
            out[pos[steps == s]] = np.median(dur[steps != s])
    return out


def score(ladder: Ladder, test: pd.DataFrame, noise_floor: bool = True) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per-op scores, per-step scores), each per model and family (plus an 'all' family); with
    `noise_floor`, a last row per family scores the re-measurement (`remeasured`)."""
    preds = ladder.predict(test)
    if noise_floor:
        preds[NOISE_FLOOR] = remeasured(test)
    return score_predictions(test, preds)


def score_predictions(test: pd.DataFrame, preds: dict[str, np.ndarray]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Score named predictions of `test`'s op calls, per family: share within +-10% (of the calls,
    and of their kernel time), median |error|, and the step time composed by summing a step's calls. Calls a prediction leaves
    NaN are left out of its scores, and so are the steps holding any."""
    true = test.dur_us.to_numpy()
    op_rows, step_rows = [], []
    keys = ["run_id", "point", "step"]
    for model, p in preds.items():
        t = test.assign(pred=p, ape=_ape(p, true))
        for fam, g in [("all", t), *t.groupby("family")]:
            known = g[g.pred.notna()]
            ok = known.ape <= 0.10
            op_rows.append({"model": model, "family": fam, "ops": len(known),
                            "within_10pct": float(ok.mean()) if len(known) else np.nan,
                            "time_within_10pct": float(known.dur_us[ok].sum() / known.dur_us.sum())
                            if len(known) else np.nan,
                            "median_ape": float(known.ape.median()) if len(known) else np.nan})
            steps = g.groupby(keys).agg(pred=("pred", lambda x: x.sum(min_count=len(x))), true=("dur_us", "sum"))
            steps = steps[steps.pred.notna()]
            sape = _ape(steps.pred.to_numpy(), steps.true.to_numpy())
            step_rows.append({"model": model, "family": fam, "steps": len(steps),
                              "step_within_5pct": float((sape <= 0.05).mean()) if len(sape) else np.nan,
                              "step_median_ape": float(np.median(sape)) if len(sape) else np.nan})
    return pd.DataFrame(op_rows), pd.DataFrame(step_rows)

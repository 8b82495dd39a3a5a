"""The cross-run report: the spectrum, phases, and the data behind the figures."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pandas as pd

from wlprof.analysis.families import add_family
from wlprof.analysis.spectrum import spectrum

# what the report says where a spectrum has no row, in place of a table with a header only
EMPTY_SPECTRUM = ("no sweep point of these runs has this timing (an ingested trace records kernel time, "
                  "not one call's latency)")


@dataclass
class Report:
    steps: pd.DataFrame
    ops: pd.DataFrame
    spectrum_latency: pd.DataFrame
    spectrum_kernel: pd.DataFrame
    phases: dict[str, pd.DataFrame] = field(default_factory=dict)
    fitted_tflops: float | None = None
    ceilings: object | None = None  # the Ceilings the roofline figure's lines are drawn from
    ceilings_findings: list[str] = field(default_factory=list)  # which runs used which, mixed, stale


def natural_key(text) -> list:
    """'F64' < 'F128'; 'zipf:0.5' < 'zipf:1.2': numbers inside a label sort as numbers."""
    return [float(t) if re.fullmatch(r"\d+(\.\d+)?", t) else t for t in re.split(r"(\d+(?:\.\d+)?)", str(text))]


# the order a reader expects routings and dispatches in (the rest sort naturally after them)
_ORDER = {"concentrated": 0, "balanced": 1, "dispersed": 2, "zipf": 3, "explicit": 4, "router": 5,
          "loop": 0, "padded": 1, "grouped": 2}


def _rank(value) -> tuple:
    text = str(value)
    return (_ORDER.get(text.split(":")[0], 9), natural_key(text))


def _value_key(v) -> tuple:
    if v is None or v is pd.NA or (isinstance(v, float) and v != v):
        return (1,)
    if isinstance(v, str):
        return (0, 1, _rank(v))
    return (0, 0, float(v))


def point_order(steps: pd.DataFrame) -> pd.DataFrame:
    """The steps rows sorted the way a reader compares them: numbers as numbers (token counts, sizes),
    routings from concentrated to zipf by exponent, dispatches loop, padded, grouped."""
    keys = [c for c in ("tokens", "top_k", "routing", "dispatch", "graph", "scale", "features", "backend", "batch",
                        "m", "numel") if c in steps and steps[c].notna().any()]
    rows = steps.astype(object)
    order = sorted(steps.index, key=lambda i: (*(_value_key(rows.at[i, k]) for k in keys),
                                               str(rows.at[i, "run_id"]), _value_key(rows.at[i, "point"])))
    return steps.loc[order]


_CONTEXT = {"tokens": "{} tok", "top_k": "top-{}", "experts": "{} experts", "d_model": "d_model {}",
            "scale": "scale {}", "edge_factor": "edge factor {}", "batch": "batch {}", "dtype": "{}"}


def _fmt_value(v) -> str:
    return str(int(v)) if isinstance(v, float) and v.is_integer() else str(v)


def run_context(steps: pd.DataFrame) -> pd.Series:
    """Per steps row, what tells its run apart from the other runs of the table (their token counts and
    top-k for MoE runs, say), or '' for a single run."""
    if steps.run_id.nunique() <= 1:
        return pd.Series("", index=steps.index)
    cols = [c for c in _CONTEXT if c in steps and steps.groupby("run_id")[c].nunique(dropna=False).max() <= 1
            and steps[c].nunique(dropna=True) > 1]
    if not cols:
        return steps.run_id.astype(str)
    return pd.Series([", ".join(_CONTEXT[c].format(_fmt_value(r[c])) for c in cols if pd.notna(r[c]))
                      for _, r in steps.iterrows()], index=steps.index)


def phase_table(kernels: pd.DataFrame, steps: pd.DataFrame | None = None) -> pd.DataFrame:
    """Kernel time per step by region: one row per sweep point, one column per region.

    Rows are labelled by variant; where the points come from several runs the index is (context,
    variant), the context naming what tells the runs apart (`run_context`: '128 tok, top-1'). With the
    steps table the rows follow `point_order`. `attrs["points"]` holds each row's (run_id, point).
    """
    k = kernels[kernels.step >= 0].copy()
    k["region"] = k.region.fillna("(none)")
    steps_n = k.groupby(["run_id", "point"]).step.nunique()
    t = k.groupby(["run_id", "point", "region"]).dur_us.sum().unstack("region").fillna(0.0)
    t = t.div(steps_n, axis=0)
    first = k.drop_duplicates(["run_id", "point"]).set_index(["run_id", "point"])
    if steps is not None and len(steps):
        meta = steps.drop_duplicates(["run_id", "point"])
        meta = point_order(meta)
        idx = [i for i in zip(meta.run_id, meta.point, strict=True) if i in t.index]
        idx += [i for i in t.index if i not in set(idx)]
        t = t.loc[idx]
        context = run_context(meta).set_axis(pd.MultiIndex.from_arrays([meta.run_id, meta.point])).reindex(t.index)
        labels = meta.set_index(["run_id", "point"]).variant.astype(str).reindex(t.index)
    else:
        labels = first.variant.astype(str).reindex(t.index)
        context = pd.Series([run if labels.duplicated(keep=False).any() else "" for run, _ in t.index],
                            index=t.index)
    labels = labels.fillna(first.variant.astype(str).reindex(t.index))
    context = context.fillna(pd.Series([r for r, _ in t.index], index=t.index)).astype(str)
    regions = sorted(t.columns, key=lambda r: (r == "(none)", r))
    t = t[regions]
    points = list(t.index)  # (run_id, point) of each row, for joining the steps table back
    if (context != "").any():
        pairs = list(zip(context, labels, strict=True))
        if len(set(pairs)) < len(pairs):  # the same variant and context twice: the run tells them apart
            runs_of: dict[str, set] = {}
            for (c, _), (run, _) in zip(pairs, t.index, strict=True):
                runs_of.setdefault(c, set()).add(run)
            pairs = [(f"{c} ({run})" if len(runs_of[c]) > 1 else c, v)
                     for (c, v), (run, _) in zip(pairs, t.index, strict=True)]
        # one block per context, in the order the blocks first appear
        first_seen = {c: i for i, (c, _) in reversed(list(enumerate(pairs)))}
        order = sorted(range(len(pairs)), key=lambda i: (first_seen[pairs[i][0]], i))
        t, pairs, points = t.iloc[order], [pairs[i] for i in order], [points[i] for i in order]
        t.index = pd.MultiIndex.from_tuples(pairs, names=["context", "variant"])
    else:
        t.index = pd.Index(labels.to_numpy(), name="variant")
    t.attrs["points"] = points
    return t


def build_report(steps: pd.DataFrame, ops: pd.DataFrame, kernels: pd.DataFrame | None = None) -> Report:
    s = add_family(steps)
    o = add_family(ops)
    fitted = None
    ok = s[(s.flops > 0) & (s.latency_us > 0)]
    if len(ok):
        fitted = float(ok.flops.sum() / ok.latency_us.sum() / 1e6)  # time-weighted TFLOP/s
    phases = {}
    if kernels is not None:
        from wlprof import workloads

        for w in workloads.all_workloads():
            kw = kernels[kernels.workload == w.name]
            if w.phases and len(kw) and kw.region.notna().any():
                phases[w.name] = phase_table(kw, s[s.workload == w.name])
    return Report(steps=s, ops=o, spectrum_latency=spectrum(s, "latency_us"),
                  spectrum_kernel=spectrum(s, "kernel_us"), phases=phases, fitted_tflops=fitted)

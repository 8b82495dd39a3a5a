"""The cross-run report: the spectrum, phases, and the data behind the figures."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from wlprof.analysis.families import add_family
from wlprof.analysis.spectrum import spectrum


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


def phase_table(kernels: pd.DataFrame) -> pd.DataFrame:
    """Kernel time per step by region: one row per variant, one column per region."""
    k = kernels[kernels.step >= 0].copy()
    k["region"] = k.region.fillna("(none)")
    # the same variant name in several runs (MoE routings at 128 and 8192 tokens): label by tokens
    dup = k.groupby("variant").run_id.nunique() > 1
    if dup.any():
        extra = k.tokens.map(lambda v: f" · {int(v)} tok") if "tokens" in k and k.tokens.notna().all() \
            else " · " + k.run_id.astype(str)
        k["variant"] = k.variant.where(~k.variant.map(dup), k.variant + extra)
    steps = k.groupby(["run_id", "variant"]).step.nunique()
    t = k.groupby(["run_id", "variant", "region"]).dur_us.sum().unstack("region").fillna(0.0)
    t = t.div(steps, axis=0)
    t.index = [v for _, v in t.index]
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
                phases[w.name] = phase_table(kw)
    return Report(steps=s, ops=o, spectrum_latency=spectrum(s, "latency_us"),
                  spectrum_kernel=spectrum(s, "kernel_us"), phases=phases, fitted_tflops=fitted)

"""Per-kernel and per-run summaries for `wlprof show` and `wlprof ls`."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

_TEMPLATE = re.compile(r"<[^<>]*>")


def short_kernel_name(name: str, limit: int = 70) -> str:
    """'void at::native::vectorized_elementwise_kernel<4, ...>(int, ...)' -> 'at::native::vectorized_elementwise_kernel'."""
    s = str(name).replace("(anonymous namespace)::", "")  # its '(' is no argument list
    if s.startswith("void "):
        s = s[5:]
    prev = None
    while prev != s:  # strip nested template arguments, innermost first
        prev = s
        s = _TEMPLATE.sub("", s)
    s = s.split("(", 1)[0].strip()
    return s if len(s) <= limit else s[: limit - 1] + "…"


def profiled_steps(kernels: pd.DataFrame) -> int:
    """How many profiled steps the rows hold: one per step and rank (a distributed run's ranks each profile
    every step, so a per-step mean over the steps alone would add the ranks' kernels together)."""
    k = kernels[kernels.step >= 0]
    if "rank" in k and k["rank"].notna().any():
        return max(len(k[["rank", "step"]].drop_duplicates()), 1)
    return max(k.step.nunique(), 1)


def kernel_summary(kernels: pd.DataFrame) -> pd.DataFrame:
    """One row per (op, kernel, region) of one variant: per-step count, time, costs, rates, roofline
    (the roof most of its calls were placed against, and every roof note of its calls). Per step means per
    step of one rank: a distributed run's ranks are averaged, not added."""
    from wlprof.steps import note_union

    k = kernels[kernels.step >= 0].copy()
    if k.empty:
        return pd.DataFrame()
    n_steps = profiled_steps(k)
    k["kernel"] = k.name.map(short_kernel_name)
    k["op_name"] = k.op_name.fillna("(no op)")
    k["region"] = k.region.fillna("")
    total = k.dur_us.sum()
    g = k.groupby(["op_name", "kernel", "region"], sort=False)
    roof_dur = k.dur_us.where(k.roofline_us.notna())
    out = pd.DataFrame({
        "count_per_step": g.size() / n_steps,
        "dur_us_per_step": g.dur_us.sum() / n_steps,
        "time_share": g.dur_us.sum() / total if total > 0 else np.nan,
        "flops_per_step": g.flops.sum(min_count=1) / n_steps,
        "bytes_per_step": g["bytes"].sum(min_count=1) / n_steps,
        "roofline_us": g.roofline_us.sum(min_count=1),
        "roof_dur": roof_dur.groupby([k.op_name, k.kernel, k.region], sort=False).sum(min_count=1),
        "bound": g.bound.agg(lambda s: s.mode().iloc[0] if s.notna().any() else None),
        "roof": (g.roof.agg(lambda s: s.mode().iloc[0] if s.notna().any() else None) if "roof" in k
                 else g.bound.agg(lambda s: None)),
        "roof_note": (g.roof_note.agg(note_union) if "roof_note" in k else g.bound.agg(lambda s: None)),
        "flops_source": g.flops_source.agg(lambda s: ",".join(sorted(s.dropna().unique()))),
    }).reset_index()
    with np.errstate(divide="ignore", invalid="ignore"):
        dur = out.dur_us_per_step
        out["achieved_tflops"] = out.flops_per_step / dur / 1e6
        out["achieved_gbps"] = out.bytes_per_step / dur / 1e3
        out["intensity_flop_per_byte"] = out.flops_per_step / out.bytes_per_step
        out["roofline_fraction"] = out.roofline_us / out.roof_dur
    return out.drop(columns=["roofline_us", "roof_dur"]).sort_values("dur_us_per_step", ascending=False,
                                                                      ignore_index=True)


def run_source(manifest: dict[str, Any]) -> tuple[str, str | None]:
    """Where a run came from: 'ingested' (`wlprof ingest`) or 'generated' (a workload run by wlprof), and the
    file it came from (the trace or folder ingested, the study file swept; None for `wlprof run`)."""
    study = manifest.get("study") or {}
    named = Path(str(study["source"])).name if study.get("source") else None
    return ("ingested" if manifest.get("workload") == "ingest" else "generated"), named


def runs_overview(manifests: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per run: what `wlprof ls` lists."""
    rows = []
    for m in manifests:
        pts = m.get("points", [])
        ok = sum(1 for p in pts if p.get("status") == "ok")
        rows.append({
            "run_id": m.get("run_id"),
            "workload": m.get("workload"),
            "source": run_source(m)[0],
            "from": run_source(m)[1],
            "device": (m.get("device") or {}).get("name", "?"),
            "dtype": m.get("dtype", "?"),
            "points": f"{ok}/{len(pts)}",
            "status": m.get("status", "?"),
            "created": (m.get("created_at") or "").replace("+00:00", ""),
        })
    return pd.DataFrame(rows, columns=["run_id", "workload", "source", "from", "device", "dtype", "points", "status", "created"])

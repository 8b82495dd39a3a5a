"""The runs' ceilings in a cross-run analysis: which runs share which, whether they are stale against
this machine's current calibration (`ceiling_stale`), and re-placing runs against one set of ceilings.

Pure functions over DataFrames and `RunCeilings` (`store.selection.run_ceilings` reads them).
Rules: `docs/ceilings.md`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from wlprof.ceilings import Ceilings
from wlprof.store.selection import RunCeilings, describe


def ceiling_groups(rc: dict[str, RunCeilings]) -> list[tuple[Ceilings | None, list[str]]]:
    """The runs grouped by the ceilings they were placed against (the same values), in run order."""
    groups: list[tuple[Ceilings | None, list[str]]] = []
    for run_id, r in rc.items():
        for c, ids in groups:
            if (c is None and r.ceilings is None) or (c is not None and r.ceilings is not None
                                                      and c.same_values(r.ceilings)):
                ids.append(run_id)
                break
        else:
            groups.append((r.ceilings, [run_id]))
    return groups


def ceilings_findings(rc: dict[str, RunCeilings]) -> list[str]:
    """What a reader must know about the runs' ceilings: which runs share which, whether a selection
    mixes different ones, and which runs' are stale against this machine's current calibration."""
    groups = ceiling_groups(rc)
    lines = []
    if len(groups) > 1:
        lines.append(f"mixed ceilings: these {len(rc)} runs were placed against {len(groups)} different sets of "
                     "ceilings, so their roofline fractions are not against the same roofs")
    for c, ids in groups:
        lines.append(f"{', '.join(ids)}: " + (describe(c) if c is not None else "no ceilings (no roofline placement)"))
    stale: dict[tuple, list[str]] = {}  # runs whose ceilings are stale in the same way: one line
    for run_id, r in rc.items():
        if r.stale:
            stale.setdefault((r.current.measured_at, tuple(r.stale)), []).append(run_id)
    for (when, why), ids in stale.items():
        who = (f"{ids[0]}'s ceilings are" if len(ids) == 1 else
               f"the ceilings of {len(ids)} runs ({_some(ids)}) are")
        lines.append(f"ceiling_stale: {who} older than this machine's current ones ({when}) and {'; '.join(why)}")
    return lines


def _some(ids: list[str], n: int = 3) -> str:
    return ", ".join(ids[:n]) + (f" and {len(ids) - n} more" if len(ids) > n else "")


def mark_stale(df: pd.DataFrame, rc: dict[str, RunCeilings]) -> pd.DataFrame:
    """The rows of runs whose ceilings are stale, with `ceiling_stale` added to their roof_note (a copy)."""
    stale = [r for r, v in rc.items() if v.stale]
    if not stale or "run_id" not in df or "roof_note" not in df:
        return df
    from wlprof.steps import note_union

    out = df.copy()
    rows = (out.run_id.isin(stale) & out.roofline_fraction.notna()).to_numpy(dtype=bool)
    notes = np.array(out["roof_note"].to_numpy(dtype=object), dtype=object)
    notes[rows] = [note_union(pd.Series([v, "ceiling_stale"], dtype=object)) for v in notes[rows]]
    out["roof_note"] = pd.Series(notes, index=out.index, dtype=object)
    return out


def legacy_runs(df: pd.DataFrame) -> list[str]:
    """Runs placed by a wlprof that named no roofs (schema < 2.4): roofline fractions, no `roof`."""
    if df is None or df.empty or "roofline_fraction" not in df:
        return []
    roof = df["roof"] if "roof" in df else pd.Series([None] * len(df), index=df.index)
    placed = df.roofline_fraction.notna().groupby(df.run_id).any()
    named = roof.notna().groupby(df.run_id).any()
    return sorted(r for r in placed.index if placed[r] and not named.get(r, False))


def replace_all(kernels: pd.DataFrame | None, ops: pd.DataFrame | None, steps: pd.DataFrame | None,
                rc: dict[str, RunCeilings], which: str | Ceilings) -> tuple:
    """The tables (any may be None) with runs re-placed against one set of ceilings per
    device: this machine's current ones for each run's device (`which='current'`), each run's own
    (`which='own'`: to name the roofs of runs placed before roofs had names), its GPU's datasheet peaks
    (`which='datasheet'`) or the given ones.
    Runs of another device, or with no current calibration here, keep theirs. Returns the kernels,
    ops and steps, and lines saying which runs were re-placed against what. A steps row's placement
    is recomputed from its re-placed kernels (without kernels it keeps its own)."""
    from wlprof.cost.roofline import replace_roofline
    from wlprof.steps import replace_steps_roofline

    lines: list[str] = []
    groups: dict[object, tuple[Ceilings, list[str]]] = {}
    for run_id, r in rc.items():
        target = {"current": r.current, "own": r.ceilings, "datasheet": _datasheet(r)}.get(which, which) \
            if isinstance(which, str) else which
        name = r.ceilings.device_name if r.ceilings is not None else r.device_name
        if target is None or target.device_name != name:
            if isinstance(which, str):
                why = {"current": "no current calibration of its device here",
                       "datasheet": f"no datasheet is known for {name}"}.get(which, "no ceilings recorded")
            else:
                why = f"the ceilings given are of {which.device_name}, it ran on {name}"
            lines.append(f"{run_id}: kept its own ceilings ({why})")
            continue
        same = ("datasheet", name, target.method.get("datasheet")) if target.source == "datasheet" else id(target)
        groups.setdefault(same, (target, []))[1].append(run_id)
    placed = [r for _, ids in groups.values() for r in ids]

    def kept(df):
        return [df[~df.run_id.isin(placed)]] if df is not None else []

    k_parts, o_parts, s_parts = kept(kernels), kept(ops), kept(steps)
    for target, ids in groups.values():
        lines.append(f"re-placed against {describe(target)}: {', '.join(ids)}")
        if ops is not None:
            o = ops[ops.run_id.isin(ids)]
            o_parts.append(replace_roofline(o, target, _tf32(o, rc)))
        if kernels is not None:
            k = kernels[kernels.run_id.isin(ids)]
            k2 = replace_roofline(k, target, _tf32(k, rc))
            k_parts.append(k2)
            if steps is not None:
                s_parts.append(replace_steps_roofline(steps[steps.run_id.isin(ids)], k2))
        elif steps is not None:
            s_parts.append(steps[steps.run_id.isin(ids)])

    def cat(parts):
        return pd.concat(parts, ignore_index=True) if parts else None

    return cat(k_parts), cat(o_parts), cat(s_parts), lines


def _datasheet(r: RunCeilings) -> Ceilings | None:
    """The datasheet ceilings of a run's GPU, or None (a CPU run, a GPU with no sheet)."""
    from wlprof.ceilings import datasheet_ceilings

    if r.device_type != "cuda" or not r.device_name:
        return None
    return datasheet_ceilings(r.device_name, r.properties)


def _tf32(df: pd.DataFrame, rc: dict[str, RunCeilings]):
    """Which fp32 matrix rows ran with TF32: placed under compute:tf32 (schema >= 2.4), or, for older
    tables, placed against the run's recorded tf32 rate (where that differs from its fp32 one)."""
    tf = np.array((df["compute_roof"] == "compute:tf32").fillna(False), dtype=bool) if "compute_roof" in df \
        else np.zeros(len(df), dtype=bool)  # a copy: pandas may hand out read-only arrays
    fp32_matrix = ((df.cost_unit == "matrix") & (df.cost_dtype == "float32")).fillna(False).to_numpy(dtype=bool)
    if not fp32_matrix.any() or "ceiling_tflops" not in df:
        return tf
    recorded = df.ceiling_tflops.to_numpy(dtype=float)
    for run_id, r in rc.items():
        c = r.ceilings
        if c is None or "tf32" not in c.matrix_tflops or c.matrix_tflops["tf32"] == c.matrix_tflops.get("float32"):
            continue
        rows = fp32_matrix & (df.run_id == run_id).to_numpy() & np.isclose(recorded, c.matrix_tflops["tf32"])
        tf |= rows
    return tf

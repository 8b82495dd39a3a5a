"""The `--ceilings` choice of `wlprof report` and `wlprof roofline`: the tables as placed against the runs'
own ceilings (stale ones marked) or re-placed against one set, and what a reader must be told about it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from wlprof.ceilings import Ceilings


@dataclass
class Placed:
    kernels: pd.DataFrame | None
    ops: pd.DataFrame | None
    steps: pd.DataFrame | None
    lines_ceilings: Ceilings | None  # the ceilings the figure's roof lines are drawn from
    findings: list[str] = field(default_factory=list)  # what the report says about the ceilings


def place(traces: Path, choice: str, ops: pd.DataFrame | None, kernels: pd.DataFrame | None = None,
          steps: pd.DataFrame | None = None) -> Placed:
    """The tables as the reader should see them under `--ceilings` (`choice`: 'run', 'current', 'datasheet'
    or a file), the ceilings to draw the roof lines from, and the findings about the runs' ceilings."""
    from wlprof.analysis.ceilings import (
        _datasheet,
        ceiling_groups,
        ceilings_findings,
        legacy_runs,
        mark_stale,
        replace_all,
    )
    from wlprof.ceilings import load_file
    from wlprof.store.selection import run_ceilings

    placed_table = ops if ops is not None else kernels
    run_ids = sorted(placed_table.run_id.unique()) if len(placed_table) else []
    rc = run_ceilings(traces, run_ids)
    findings = ceilings_findings(rc)
    if choice in (None, "", "run"):
        old = legacy_runs(placed_table)
        if old:  # placed before roofs had names: named now, against the run's own recorded ceilings
            part = {r: rc[r] for r in old}
            rest = [r for r in rc if r not in part]
            k, o, s, _ = replace_all(_only(kernels, old), _only(ops, old), _only(steps, old), part, "own")
            kernels, ops, steps = (_join(_only(kernels, rest), k), _join(_only(ops, rest), o),
                                   _join(_only(steps, rest), s))
            findings.append(f"{', '.join(old)}: placed by an older wlprof that named no roofs; placed again against "
                            "their own recorded ceilings to name each roof and the reason for a fraction above 1")
        groups = ceiling_groups(rc)
        first = next((c for c, _ in groups if c is not None), None)
        if len(groups) > 1 and first is not None:
            owner = next(ids for c, ids in groups if c is first)
            findings.append(f"the figure's roof lines are those of {owner[0]}'s ceilings")
        return Placed(*(mark_stale(t, rc) if t is not None else None for t in (kernels, ops, steps)), first, findings)
    target = choice if choice in ("current", "datasheet") else load_file(choice)
    if target == "datasheet":
        _check_datasheets(rc)
    k, o, s, lines = replace_all(kernels, ops, steps, rc, target)
    if isinstance(target, Ceilings):
        drawn = target
    else:
        pick = _datasheet if target == "datasheet" else (lambda r: r.current)
        drawn = next((c for c in map(pick, rc.values()) if c is not None), None)
    return Placed(k, o, s, drawn, ["recorded: " + f for f in findings] + lines)


def _check_datasheets(rc) -> None:
    """An InputError naming --ceilings datasheet where no run's GPU has a datasheet (a CPU run, an unknown GPU)."""
    from wlprof.analysis.ceilings import _datasheet
    from wlprof.datasheets import known
    from wlprof.errors import InputError

    if not rc or any(_datasheet(r) is not None for r in rc.values()):
        return
    gpus = sorted({str(r.device_name) for r in rc.values()})
    raise InputError("--ceilings", f"datasheet needs runs of a GPU with a known datasheet: these ran on "
                     f"{', '.join(gpus)}, which has none; known: {', '.join(known())}", "datasheet",
                     hint="pass ceilings measured on that device (`wlprof calibrate --out FILE` there) instead")


def _only(df: pd.DataFrame | None, runs: list[str]) -> pd.DataFrame | None:
    return None if df is None else df[df.run_id.isin(runs)]


def _join(a: pd.DataFrame | None, b: pd.DataFrame | None) -> pd.DataFrame | None:
    if a is None or b is None:
        return b if a is None else a
    return pd.concat([a, b], ignore_index=True)

"""Selecting runs from the traces folder for cross-run analysis, with the checks that keep it honest."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from wlprof.errors import InputError, did_you_mean


def ls_hint(root: str | Path) -> str:
    """'see `wlprof ls`', naming the traces folder where it is not the default one."""
    root = Path(root)
    return "see `wlprof ls`" if root == Path("traces") else f"see `wlprof ls --traces {root}`"


def split_runs(values) -> list[str]:
    """Run ids given as repeated arguments and/or comma-separated lists."""
    out: list[str] = []
    for v in values or []:
        out += [x.strip() for x in str(v).split(",") if x.strip()]
    return out


def load_runs(root: str | Path, table: str, runs: list[str] | None = None, arg: str = "RUNS",
              workload: str | None = None, allow_mixed_devices: bool = False) -> pd.DataFrame:
    """One table of the selected runs (all runs when `runs` is empty), refusing empty or mixed selections."""
    import wlprof
    from wlprof.store.runs import list_runs, run_dir

    known = {m["run_id"] for m in list_runs(root)}
    for r in runs or []:
        run_dir(root, r)  # refuses ids that would leave the folder
        if r not in known:
            raise InputError(arg, f"must name runs in {root}/ ({ls_hint(root)})", r,
                             hint=did_you_mean(r, known))
    if workload:
        from wlprof import workloads

        names = sorted({*workloads.names(), "ingest"})
        if workload not in names:
            raise InputError("--workload", f"must be one of {', '.join(names)}", workload,
                             hint=did_you_mean(workload, names))
    filters = {}
    if runs:
        filters["run_id"] = list(runs)
    if workload:
        filters["workload"] = workload
    df = wlprof.load(root, table=table, **filters)
    if "status" in df:
        df = df[df.status.fillna("ok") == "ok"]
    if df.empty:
        what = f"runs {runs}" if runs else f"the runs in {root}/"
        raise InputError(arg, "must select at least one finished sweep point", f"{what}" +
                         (f" with workload {workload}" if workload else ""))
    devices = sorted(df.device_name.dropna().unique())
    if len(devices) > 1 and not allow_mixed_devices:
        raise InputError(arg, "must come from one device, or pass --allow-mixed-devices", devices)
    return df


def ceilings_of(root: str | Path, run_id: str) -> dict:
    from wlprof.store.runs import read_manifest, run_dir

    return read_manifest(run_dir(root, run_id)).get("ceilings", {})

"""Selecting runs from the traces folder for cross-run analysis, with the checks that keep it honest."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from wlprof.ceilings import Ceilings
from wlprof.errors import InputError, did_you_mean


def ls_hint(root: str | Path) -> str:
    """'see `wlprof ls`', naming the traces folder where it is not the default one."""
    root = Path(root)
    return "see `wlprof ls`" if root == Path("traces") else f"see `wlprof ls --traces {root}`"


def require_folder(root: str | Path, arg: str = "--traces") -> None:
    """Refuse a traces folder given on the command line that does not exist (the default may be absent)."""
    from wlprof.store.runs import refuse_run_folder

    if Path(root) != Path("traces") and not Path(root).is_dir():
        raise InputError(arg, "must be an existing traces folder", str(root))
    refuse_run_folder(root, arg)


def split_runs(values) -> list[str]:
    """Run ids given as repeated arguments and/or comma-separated lists."""
    out: list[str] = []
    for v in values or []:
        out += [x.strip() for x in str(v).split(",") if x.strip()]
    return out


def load_runs(root: str | Path, table: str, runs: list[str] | None = None, arg: str = "RUNS",
              workload: str | None = None, allow_mixed_devices: bool = False,
              folder_arg: str = "--traces") -> pd.DataFrame:
    """One table of the selected runs (all runs when `runs` is empty), refusing empty or mixed selections."""
    import wlprof
    from wlprof.store.runs import list_runs, run_dir

    require_folder(root, folder_arg)
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
        if table != "steps" and not wlprof.load(root, table="steps", **filters).empty:
            raise InputError(arg, f"must select runs with {table} rows; these have none (a trace without CPU ops "
                             "records no op calls, one without GPU kernels no kernel rows)", what)
        raise InputError(arg, "must select at least one finished sweep point", f"{what}" +
                         (f" with workload {workload}" if workload else ""))
    devices = sorted(df.device_name.dropna().unique())
    if len(devices) > 1 and not allow_mixed_devices:
        raise InputError(arg, "must come from one device, or pass --allow-mixed-devices", devices,
                         hint=_runs_by_device(df, arg))
    return df


def _runs_by_device(df: pd.DataFrame, arg: str) -> str:
    """Which runs hold each device, so that the user can name one device's runs."""
    per = df.dropna(subset=["device_name"]).groupby("device_name").run_id.unique()
    parts = []
    for dev, ids in per.items():
        ids = sorted(ids)
        more = f" and {len(ids) - 3} more" if len(ids) > 3 else ""
        parts.append(f"{dev}: {' '.join(ids[:3])}{more}")
    return f"to keep to one device, name its runs as {arg} ({'; '.join(parts)})"


def ceilings_of(root: str | Path, run_id: str) -> dict:
    from wlprof.store.runs import read_manifest, run_dir

    return read_manifest(run_dir(root, run_id)).get("ceilings", {})


@dataclass
class RunCeilings:
    """The ceilings a run was placed against, and how they compare with this machine's current ones."""

    run_id: str
    device_type: str | None
    device_name: str | None
    ceilings: Ceilings | None  # None: the run had none (an ingest without a calibration)
    current: Ceilings | None  # this machine's cached ceilings for the run's device, where comparable
    stale: list[str] = field(default_factory=list)  # why the run's are stale against `current`
    properties: dict = field(default_factory=dict)  # its GPU's deviceProperties (what tells a datasheet variant)

    def describe(self) -> str:
        return describe(self.ceilings) if self.ceilings is not None else "no ceilings (no roofline placement)"


def describe(c: Ceilings) -> str:
    """One line: when (or which datasheet), the memory roofs and the compute ceilings."""
    mem = ", ".join(f"{k} {_rate(v, 0)}" for k, v in c.memory_roofs().items())
    mat = ", ".join(f"{k} {_rate(v, 1)}" for k, v in sorted(c.matrix_tflops.items()))
    fmt = f"format {c.migrated_from}, migrated" if c.migrated_from else f"format {c.format_version}"
    when = (f"datasheet of the {c.method.get('datasheet')} ({c.method.get('document')}), not measured"
            if c.source == "datasheet" else f"measured {c.measured_at} ({fmt})")
    return f"{when}: {mem} GB/s; {mat} TFLOP/s; vector {_rate(c.vector_tflops, 1)}"


def device_properties(dev: dict) -> dict:
    """A manifest's device entry as Kineto's deviceProperties names it: an ingest records them
    (`properties`), a run made here its own fields (`memory_bytes`, `sm_count`, `compute_capability`)."""
    if dev.get("properties"):
        return dict(dev["properties"])
    out = {"totalGlobalMem": dev.get("memory_bytes"), "numSms": dev.get("sm_count")}
    major, _, minor = str(dev.get("compute_capability") or "").partition(".")
    if major.isdigit() and minor.isdigit():
        out.update(computeMajor=int(major), computeMinor=int(minor))
    return {k: v for k, v in out.items() if v is not None}


def _rate(v: float, decimals: int) -> str:
    """A ceiling with `decimals` decimals, or 2 significant digits where those would show fewer (a CPU's
    0.055 TFLOP/s reads '0.055', not '0.1'; 0.004 reads '0.004', not '0.0')."""
    if v and abs(v) < 10 ** (1 - decimals):
        return f"{v:.2g}"
    return f"{v:,.{decimals}f}"


def run_ceilings(root: str | Path, run_ids: list[str]) -> dict[str, RunCeilings]:
    """Each run's ceilings (from its manifest) against this machine's cache for its device.

    A CPU run is compared only where it was made on this host (another host's CPU of the same
    name is another machine).
    """
    import socket

    from wlprof import ceilings as C
    from wlprof.store.runs import read_manifest, run_dir

    out: dict[str, RunCeilings] = {}
    current_cache: dict[tuple, Ceilings | None] = {}
    for run_id in run_ids:
        m = read_manifest(run_dir(root, run_id))
        dev = m.get("device") or {}
        d = m.get("ceilings") or {}
        try:
            c = C.Ceilings.from_dict(d) if d.get("device_type") else None
        except (ValueError, TypeError, KeyError):
            c = None
        dtype, name = dev.get("type") or (c.device_type if c else None), dev.get("name") or (c.device_name if c else None)
        comparable = dtype == "cuda" or (dtype == "cpu" and m.get("host") == socket.gethostname())
        cur = None
        if comparable and dtype and name:
            key = (dtype, c.device_name if c else name)
            if key not in current_cache:
                current_cache[key] = C.load_cached(*key)
            cur = current_cache[key]
        stale = C.stale_against(c, cur) if c is not None and cur is not None else []
        out[run_id] = RunCeilings(run_id, dtype, name, c, cur, stale, device_properties(dev))
    return out

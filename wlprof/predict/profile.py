"""Build an offline profile: run the grid (`grid`) within a time budget, check it, fit it, write it down.

A profile folder holds

- `traces/`: the grid's runs (the store's layout: `wlprof ls -t DIR/traces`);
- `profile.json`: the command, device, versions, the GPU time each section took and the
  whole grid's, the SM clocks the points ran at, the points flagged noisy or throttled,
  the sections the budget left out;
- `predictor.json`: the fitted predictor (`model.Predictor`) and host timeline (`steps.Host`).

A point is flagged `noisy` when more than a fifth of its kernel time is in calls whose
samples (the same call over its profiled steps) spread by more than 15% (max - min over
median), and `throttled` when its SM clock at the end was under 90% of the grid's median;
flagged points stay in the profile, down-weighted where their calls spread
(`model.NOISY_WEIGHT`).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

PROFILE_FILE = "profile.json"
OPS_FILE = "ops.parquet"  # every run's ops table in one file
STEPS_FILE = "steps.parquet"
PREDICTOR_FILE = "predictor.json"
NOISY_CALL_SPREAD = 0.15
NOISY_TIME_SHARE = 0.2
THROTTLED = 0.9
FORMAT = 4  # of predictor.json: a file of another format is refitted from the traces


def _section_hint(name: str, known: list[str]) -> str | None:
    """'did you mean ...?' for a section name: every section it begins ('gemm'), else the closest."""
    from wlprof.errors import did_you_mean

    known = list(dict.fromkeys(known))
    more = [k for k in known if k.startswith(f"{name} ")]
    return f"did you mean {' or '.join(repr(k) for k in more)}?" if more else did_you_mean(name, known)


def run_profile(out: str | Path, device: str | None = None, scale: str | None = None, budget_s: float = 360.0,
                sections: list[str] | None = None, progress: Callable[[str], None] | None = None,
                command: str | None = None, extend: bool = False) -> dict:
    """Run the grid into `out` (a new or empty folder), then check and fit it; returns profile.json's content.
    `extend`: `out` is an existing profile; run the grid's studies it has not measured (left out by its
    budget, or added to the grid since), add them and fit again."""
    from wlprof.device import resolve_device
    from wlprof.errors import InputError, Key
    from wlprof.predict import grid
    from wlprof.study import versions

    out = Path(out)
    if not budget_s > 0:  # the command line's unit is minutes
        raise InputError(Key("budget_minutes", "store"), "must be a positive number of minutes", budget_s / 60)
    previous = None
    if extend:
        if not (out / PROFILE_FILE).is_file():
            raise InputError(Key("out", "store"), "must be a profile folder made by `wlprof profile` to extend "
                             f"(with {PROFILE_FILE})", str(out))
        previous = json.loads((out / PROFILE_FILE).read_text())
    elif out.exists() and not out.is_dir():
        raise InputError(Key("out", "store"), "must be a new or empty folder (it names a file)", str(out))
    elif (blocked := next((d for d in out.parents if d.exists() and not d.is_dir()), None)) is not None:
        raise InputError(Key("out", "store"), f"must be a folder wlprof can write into ({str(blocked)!r} is a "
                         "file)", str(out))
    elif out.exists() and any(out.iterdir()):
        raise InputError(Key("out", "store"), "must be a new or empty folder (a profile is never mixed with "
                         "another; --extend adds to one)", str(out))
    dev = resolve_device(device, Key("device", "study"))
    if previous is not None and (previous.get("device") or {}).get("name") != _device_name(dev):
        raise InputError(Key("out", "store"), f"must be a profile of this device ({_device_name(dev)}) to extend",
                         (previous.get("device") or {}).get("name"))
    scale = (previous or {}).get("scale") or scale or ("gpu" if dev.type == "cuda" else "cpu")
    secs = grid.sections(scale, str(dev))
    if previous is not None:  # the grid's studies it has not measured, in the grid's order
        measured = {_study_key(x) for x in [*previous.get("sections", []), *previous.get("failed", [])]}
        secs = [s for s in secs if (s.study.name, s.points) not in measured]
        if not secs:
            raise InputError(Key("out", "store"), "must be a profile with studies of the grid left to measure "
                             "(this one measured its whole grid)", str(out))
    if sections:
        unknown = sorted(set(sections) - {s.name for s in grid.sections(scale, str(dev))})
        if unknown:
            raise InputError(Key("section", "store"), f"must be sections of the grid "
                             f"({', '.join(dict.fromkeys(s.name for s in grid.sections(scale, str(dev))))})",
                             ", ".join(unknown), hint=_section_hint(unknown[0], [s.name for s in grid.sections(scale, str(dev))]))
        secs = [s for s in secs if s.name in sections]
    old_ops, old_steps = profile_tables(out) if previous is not None else (None, None)
    traces = out / "traces"
    made = [d for d in (traces, out, *out.parents) if not d.exists()]  # inner first
    traces.mkdir(parents=True, exist_ok=True)
    # the device's ceilings before the grid (measured now where none are cached): the calibration is
    # recorded on its own, not in the first section's seconds
    from wlprof.ceilings import get_ceilings

    t_c = time.monotonic()
    try:
        _, origin = get_ceilings(dev)
        calibration = {"origin": origin, "seconds": round(time.monotonic() - t_c, 1)}
        started = time.time()
        done, skipped, failed, grid_s = _run_grid(secs, traces, budget_s, progress, command)
    except KeyboardInterrupt:
        raise _interrupted(out, traces, made, extend) from None
    if not done:
        for d in made:  # nothing was measured: leave no empty folder behind
            with contextlib.suppress(OSError):
                d.rmdir()
        raise InputError(Key("budget_minutes", "store"), "must leave time for at least one section",
                         budget_s / 60)
    new_runs = {d["run_id"] for d in done}
    from wlprof.device import device_info

    memory = device_info(dev).get("memory_bytes")  # a GPU's: what `predict --spec` and `--scale` must fit in
    info = {"command": command, "device": {"type": dev.type, "name": _device_name(dev),
                                           **({"memory_bytes": int(memory)} if memory else {})}, "scale": scale,
            "ceilings": _ceilings_of(traces),
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
            "grid_seconds": round(grid_s, 1), "gpu_minutes": round(grid_s / 60, 2) if dev.type == "cuda" else None,
            "budget_seconds": budget_s, "calibration": calibration, "versions": versions(), "sections": done,
            "skipped": skipped, "failed": failed}
    t1 = time.monotonic()
    ops, steps = _load(traces, "ops"), _load(traces, "steps")
    if previous is not None:
        ops, steps = ops[ops.run_id.isin(new_runs)], steps[steps.run_id.isin(new_runs)]
        ops = pd.concat([old_ops, compact(ops)], ignore_index=True)
        steps = pd.concat([old_steps, steps], ignore_index=True)
        grid_total = round(float(previous.get("grid_seconds") or 0) + grid_s, 1)
        info = {**previous, "grid_seconds": grid_total,
                "gpu_minutes": round(grid_total / 60, 2) if dev.type == "cuda" else None,
                "sections": [*previous.get("sections", []), *done],
                "skipped": _still_skipped(previous.get("skipped", []), done, skipped),
                "failed": [*previous.get("failed", []), *failed],
                "extended": [*previous.get("extended", []), {k: info[k] for k in (
                    "command", "started", "grid_seconds", "budget_seconds", "calibration", "versions")}],
                "ceilings": previous.get("ceilings") or info["ceilings"]}
    _write_parquet(compact(ops), out / OPS_FILE)  # what predict needs, to ship
    _write_parquet(steps, out / STEPS_FILE)
    info.update(check(ops, steps))
    predictor, host = fit_profile(ops, steps, traces if previous is None else None, info["ceilings"])
    info["fit_seconds"] = round(time.monotonic() - t1, 1)
    write_predictor(out, predictor, host)
    from wlprof.store.atomic import atomic_write_bytes

    atomic_write_bytes(out / PROFILE_FILE, (json.dumps(info, indent=1, default=str) + "\n").encode())
    return info


def drop_studies(out: str | Path, patterns: list[str], reason: str) -> tuple[dict, list[str]]:
    """Leave the measured studies whose names match `patterns` (fnmatch globs) out of the profile `out`:
    their calls and steps go, profile.json lists them as skipped with `reason` (their seconds no longer
    counted in the grid's), and the predictor is fitted again. Returns (profile.json's new content, the
    studies left out)."""
    import fnmatch

    from wlprof.errors import InputError, Key
    from wlprof.store.atomic import atomic_write_bytes

    out = Path(out)
    if not (out / PROFILE_FILE).is_file() or not (out / OPS_FILE).is_file():
        raise InputError(Key("out", "store"), f"must be a profile folder made by `wlprof profile` (with "
                         f"{PROFILE_FILE} and {OPS_FILE})", str(out))
    info = json.loads((out / PROFILE_FILE).read_text())
    sections = info.get("sections", [])
    gone = [x for x in sections if any(fnmatch.fnmatchcase(str(x.get("study")), p) for p in patterns)]
    if not gone:
        raise InputError(Key("drop", "store"), "must match measured studies of the profile ("
                         + ", ".join(sorted({str(x.get("study")) for x in sections})) + ")", patterns)
    runs = {x.get("run_id") for x in gone}
    ops, steps = profile_tables(out)
    ops, steps = ops[~ops.run_id.isin(runs)], steps[~steps.run_id.isin(runs)] if len(steps) else steps
    grid_s = round(float(info.get("grid_seconds") or 0) - sum(float(x.get("seconds") or 0) for x in gone), 1)
    dropped = [{"section": x.get("section"), "pass": x.get("pass"), "study": x.get("study"),
                "points": x.get("points"), "expected_s": x.get("seconds"), "dropped": reason} for x in gone]
    info = {**info, "sections": [x for x in sections if x not in gone], "skipped": [*info.get("skipped", []), *dropped],
            "grid_seconds": grid_s}
    if info.get("gpu_minutes") is not None:
        info["gpu_minutes"] = round(grid_s / 60, 2)
    info.update(check(ops, steps))
    _write_parquet(ops.reset_index(drop=True), out / OPS_FILE)
    _write_parquet(steps.reset_index(drop=True), out / STEPS_FILE)
    predictor, host = fit_profile(ops, steps, None, info.get("ceilings"))
    write_predictor(out, predictor, host)
    atomic_write_bytes(out / PROFILE_FILE, (json.dumps(info, indent=1, default=str) + "\n").encode())
    return info, [str(x.get("study")) for x in gone]


def refit(out: str | Path) -> dict:
    """Fit the predictor of the profile `out` again from its tables (after a change to the model's code);
    measures nothing. Returns profile.json's new content (its fit time and when it was refitted)."""
    from wlprof.errors import InputError, Key
    from wlprof.store.atomic import atomic_write_bytes

    out = Path(out)
    if not (out / PROFILE_FILE).is_file() or not (out / OPS_FILE).is_file():
        raise InputError(Key("out", "store"), f"must be a profile folder made by `wlprof profile` (with "
                         f"{PROFILE_FILE} and {OPS_FILE})", str(out))
    info = json.loads((out / PROFILE_FILE).read_text())
    ops, steps = profile_tables(out)
    t1 = time.monotonic()
    predictor, host = fit_profile(ops, steps, None, info.get("ceilings"))
    write_predictor(out, predictor, host)
    info = {**info, "fit_seconds": round(time.monotonic() - t1, 1),
            "refitted": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    atomic_write_bytes(out / PROFILE_FILE, (json.dumps(info, indent=1, default=str) + "\n").encode())
    return info


def supplement_ceilings(out: str | Path, ceilings_file: str | Path) -> tuple[dict, list[str]]:
    """Add to the profile `out`'s ceilings what they lack and a later calibration of the same device
    (`wlprof calibrate --out FILE`) measured (a dtype's matrix peak, the host link's bandwidth), then fit
    its predictor again; the ceilings it holds are kept. profile.json records what came from where.
    Returns its new content and the ceilings added (`matrix_tflops.int8`; none: nothing was changed)."""
    from wlprof import ceilings as C
    from wlprof.errors import InputError, Key
    from wlprof.store.atomic import atomic_write_bytes

    out = Path(out)
    if not (out / PROFILE_FILE).is_file() or not (out / OPS_FILE).is_file():
        raise InputError(Key("out", "store"), f"must be a profile folder made by `wlprof profile` (with "
                         f"{PROFILE_FILE} and {OPS_FILE})", str(out))
    info = json.loads((out / PROFILE_FILE).read_text())
    have = dict(info.get("ceilings") or {})
    later = C.load_file(ceilings_file, choices=()).to_dict()
    if later.get("device_name") != have.get("device_name"):
        raise InputError("--ceilings", f"must be a calibration of the profile's device, {have.get('device_name')}",
                         f"{ceilings_file} ({later.get('device_name')})")
    added = []
    for field in ("matrix_tflops", "bandwidth_gbps"):
        mine, theirs = dict(have.get(field) or {}), later.get(field) or {}
        for key, value in theirs.items():
            if key not in mine and value:
                mine[key] = value
                added.append(f"{field}.{key}")
        have[field] = mine
    if not added:
        return info, []
    ops, steps = profile_tables(out)
    t1 = time.monotonic()
    predictor, host = fit_profile(ops, steps, None, have)
    write_predictor(out, predictor, host)
    entry = {"from": str(ceilings_file), "measured_at": later.get("measured_at"), "added": added}
    info = {**info, "ceilings": have, "ceilings_supplemented": [*info.get("ceilings_supplemented", []), entry],
            "fit_seconds": round(time.monotonic() - t1, 1),
            "refitted": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    atomic_write_bytes(out / PROFILE_FILE, (json.dumps(info, indent=1, default=str) + "\n").encode())
    return info, added


def _study_key(entry: dict) -> tuple:
    """A grid study as profile.json lists it: its name and points (two studies of a section may share a name)."""
    return entry.get("study"), entry.get("points")


def _still_skipped(before: list[dict], done: list[dict], now: list[dict]) -> list[dict]:
    """The studies an extended profile still lacks: those left out before and not measured now, and
    those this run left out."""
    ran = {_study_key(d) for d in done}
    out = [x for x in before if _study_key(x) not in ran]
    listed = {_study_key(x) for x in out}
    return out + [x for x in now if _study_key(x) not in listed]


def _interrupted(out: Path, traces: Path, made: list[Path], extend: bool):
    """What an interrupt of the grid leaves, said as it is (a profile has no --resume): an extended profile
    as it was; a new one without profile.json, its studies so far in traces/ (or, with none, no folder)."""
    from wlprof.errors import Interrupted

    if extend:
        return Interrupted(f"the profile in {out}/ is as it was (its {PROFILE_FILE}, {OPS_FILE} and "
                           f"{PREDICTOR_FILE} unchanged); the same command measures the studies it still lacks")
    if not any(p.is_dir() and not p.name.startswith(".") for p in traces.iterdir()):
        for d in made:  # nothing was measured: no folder left behind
            with contextlib.suppress(OSError):
                d.rmdir()
        return Interrupted(f"no profile was written to {out}/")
    return Interrupted(f"the profile in {out}/ is unfinished: no {PROFILE_FILE}, its studies so far in {traces}/ "
                       f"(`wlprof predict --profile {out}` fits from them); --extend adds only to a finished profile, "
                       f"so remove {out}/ and run the command again to measure the grid")


def _run_grid(secs, traces: Path, budget_s: float, progress, command) -> tuple[list, list, list, float]:
    """Run the grid's studies in order while the budget lasts: (done, skipped, failed, seconds)."""
    from wlprof.study import run_study

    t0 = time.monotonic()
    per_point: dict[str, float] = {}
    done, skipped, failed = [], [], []
    for s in secs:
        est = s.points * per_point.get(s.name, s.cost_s)
        elapsed = time.monotonic() - t0
        if elapsed + est > budget_s:
            skipped.append({"section": s.name, "pass": s.passno, "study": s.study.name, "points": s.points,
                            "expected_s": round(est, 1)})
            if progress:
                why = (f"{elapsed:.0f} s spent of the {budget_s:.0f} s budget" if elapsed >= budget_s else
                       f"{elapsed:.0f} of {budget_s:.0f} s spent, {est:.0f} s more would pass the budget")
                progress(f"skip {s.study.name}: {why}")
            continue
        if progress:
            progress(f"{s.study.name}: {s.points} points ({elapsed:.0f}/{budget_s:.0f} s)")
        ts = time.monotonic()
        try:
            res = run_study(s.study, traces, command=command)
        except Exception as exc:  # noqa: BLE001 - a section that cannot run (memory, a dtype) must not lose the grid
            failed.append({"section": s.name, "pass": s.passno, "study": s.study.name, "points": s.points,
                           "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"})
            if progress:
                progress(f"failed {s.study.name}: {failed[-1]['error']}")
            continue
        dt = time.monotonic() - ts
        per_point[s.name] = dt / max(s.points, 1)
        done.append({"section": s.name, "pass": s.passno, "study": s.study.name, "run_id": res.run_id,
                     "status": res.status, "points": s.points, "seconds": round(dt, 2)})
    return done, skipped, failed, time.monotonic() - t0


def _write_parquet(df: pd.DataFrame, path: Path) -> None:
    """A profile table, zstd-compressed, written under a temporary name and renamed into place."""
    tmp = path.with_name(f".{path.name}.tmp")
    df.to_parquet(tmp, index=False, compression="zstd")
    tmp.replace(path)


# what the consolidated ops file drops: rates and placements derived from the kept columns, host ids
DROPPED = ("achieved_tflops", "achieved_gbps", "intensity_flop_per_byte", "bound", "ridge_flop_per_byte",
           "external_id", "cpu_dur_us", "bytes_written", "source_file", "rank", "device_type")


def compact(ops: pd.DataFrame) -> pd.DataFrame:
    """The ops table as the profile ships it: without derived or empty columns, times as float32."""
    keep = [c for c in ops.columns if c not in DROPPED and ops[c].notna().any()]
    out = ops[keep].copy()
    for c in ("dur_us", "roofline_us", "roofline_fraction"):
        if c in out:
            out[c] = out[c].astype("float32")
    return out


def _ceilings_of(traces: Path) -> dict:
    """The ceilings the grid's runs used (the last run's manifest), with the device's SM count."""
    from wlprof.store.runs import list_runs

    out: dict = {}
    for m in list_runs(traces):
        out = {**(m.get("ceilings") or {}), "sm_count": (m.get("device") or {}).get("sm_count")}
    return out


def _device_name(dev) -> str:
    from wlprof.device import device_name

    return device_name(dev)


def _load(traces: Path, table: str) -> pd.DataFrame:
    import wlprof

    df = wlprof.load(traces, table=table)
    if "status" in df:
        df = df[df.status.fillna("ok") == "ok"]
    return df


def check(ops: pd.DataFrame, steps: pd.DataFrame) -> dict:
    """The profile's quality: clocks, and the points flagged noisy or throttled."""
    from wlprof.predict.calls import describe

    out: dict = {"points": int(len(steps)), "op_calls": int(len(ops))}
    clocks = steps[["sm_clock_mhz_start", "sm_clock_mhz_end"]].apply(pd.to_numeric, errors="coerce")
    flags = []
    if clocks.notna().any().any():
        end = clocks.sm_clock_mhz_end
        med = float(np.nanmedian(end))
        out["sm_clock_mhz"] = {"start_min": float(np.nanmin(clocks.sm_clock_mhz_start)),
                               "start_max": float(np.nanmax(clocks.sm_clock_mhz_start)),
                               "end_min": float(np.nanmin(end)), "end_median": med, "end_max": float(np.nanmax(end))}
        for r in steps[end < THROTTLED * med].itertuples():
            flags.append({"run_id": r.run_id, "point": int(r.point), "variant": r.variant, "flag": "throttled",
                          "sm_clock_mhz_end": float(r.sm_clock_mhz_end)})
    if len(ops):
        d = describe(ops)
        key = d.group.astype(str)
        for j in range(5):
            key = key + "|" + d[f"c{j}"].round(4).astype(str)
        frame = pd.DataFrame({"run_id": ops.run_id.to_numpy(), "point": ops.point.to_numpy(),
                              "step": ops.step.to_numpy(), "key": key.to_numpy(),
                              "dur": ops.dur_us.to_numpy(dtype=float)})
        per_step = frame.groupby(["run_id", "point", "key", "step"], sort=False).dur.median()
        g = per_step.groupby(level=["run_id", "point", "key"], sort=False)
        spread = ((g.max() - g.min()) / g.median()).rename("spread")
        time_ = g.median().rename("t")
        calls = pd.concat([spread, time_], axis=1).reset_index()
        calls["noisy_t"] = calls.t * (calls.spread > NOISY_CALL_SPREAD)
        pts = calls.groupby(["run_id", "point"]).agg(t=("t", "sum"), noisy=("noisy_t", "sum"),
                                                     spread=("spread", "max"))
        pts["share"] = pts.noisy / pts.t
        variants = steps.set_index(["run_id", "point"]).variant
        for (run, point), r in pts[pts.share > NOISY_TIME_SHARE].iterrows():
            flags.append({"run_id": run, "point": int(point), "variant": variants.get((run, point)),
                          "flag": "noisy", "noisy_time_share": round(float(r.share), 3),
                          "largest_spread": round(float(r.spread), 3)})
    out["flagged"] = flags
    out["noisy_points"] = sum(f["flag"] == "noisy" for f in flags)
    out["throttled_points"] = sum(f["flag"] == "throttled" for f in flags)
    return out


def fit_profile(ops: pd.DataFrame, steps: pd.DataFrame, traces: Path | None = None, ceilings: dict | None = None):
    """(Predictor, Host) fitted on a profile's op calls and steps (the ceilings from its runs' manifests)."""
    from wlprof.predict import model
    from wlprof.predict.calls import describe
    from wlprof.predict.steps import fit_host

    ceilings, sms = dict(ceilings or {}), (ceilings or {}).get("sm_count")
    if traces is not None:
        from wlprof.store.runs import list_runs

        for m in list_runs(traces):
            ceilings = m.get("ceilings") or ceilings
            sms = (m.get("device") or {}).get("sm_count") or sms
    constants = model.Constants.from_ceilings(ceilings, sms)
    ops = ops.reset_index(drop=True)
    predictor = model.fit(ops, constants, meta={"device": str(ops.device_name.iloc[0]) if len(ops) else None})
    host = fit_host(ops, describe(ops), steps)
    return predictor, host


def write_predictor(out: Path, predictor, host) -> None:
    from wlprof.store.atomic import atomic_write_bytes

    doc = {"format": FORMAT, "predictor": predictor.to_dict(), "host": host.to_dict()}
    atomic_write_bytes(Path(out) / PREDICTOR_FILE, json.dumps(doc).encode())


def load_profile(path: str | Path, refit: bool = False):
    """(Predictor, Host, profile.json's content) of a profile folder; fitted from its traces when
    predictor.json is missing (or `refit`)."""
    from wlprof.errors import InputError, Key
    from wlprof.predict.model import Predictor
    from wlprof.predict.steps import Host

    path = Path(path)
    traces = path / "traces"
    if not path.is_dir() or not (traces.is_dir() or (path / OPS_FILE).is_file()):
        raise InputError(Key("profile", "store"), "must be a profile folder made by `wlprof profile` (with "
                         f"{OPS_FILE} or a traces/ folder)", str(path))
    info = json.loads((path / PROFILE_FILE).read_text()) if (path / PROFILE_FILE).exists() else {}
    fitted = path / PREDICTOR_FILE
    if fitted.exists() and not refit:
        doc = json.loads(fitted.read_text())
        if doc.get("format") == FORMAT:  # else fitted by another version of the model: fit again
            return Predictor.from_dict(doc["predictor"]), Host.from_dict(doc["host"]), info
    ops, steps = profile_tables(path)
    if ops.empty:
        raise InputError(Key("profile", "store"), "must hold profiled op calls", str(path))
    predictor, host = fit_profile(ops, steps, traces if traces.is_dir() else None, info.get("ceilings"))
    return predictor, host, info


def profile_tables(path: str | Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(ops, steps) of a profile folder: its consolidated files, else its traces."""
    path = Path(path)
    if (path / OPS_FILE).is_file():
        steps = pd.read_parquet(path / STEPS_FILE) if (path / STEPS_FILE).is_file() else pd.DataFrame()
        return pd.read_parquet(path / OPS_FILE), steps
    return _load(path / "traces", "ops"), _load(path / "traces", "steps")

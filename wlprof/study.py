"""Studies: a workload, its parameter sweep and capture settings, run point by point into the store.

A study file (TOML, `[study]`, `[params]`, `[capture]`: see `docs/studies.md`) pins down
the sweep behind a result, so anyone can re-run it with `wlprof sweep FILE`. Bad input
raises before anything is written; a point that fails is recorded and the sweep goes on.
"""

from __future__ import annotations

import gc
import platform
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from wlprof.capture import CaptureConfig
from wlprof.errors import InputError, Interrupted, Key, WlprofError, did_you_mean

_STUDY_KEYS = {"name", "workload", "device", "dtype", "description"}
_CPU_KEYS = {"dtype", "params", "capture"}


@dataclass(frozen=True)
class CpuScale:
    """A study's `[cpu]` section: the same sweep at sizes a laptop CPU runs in seconds. On a CPU its
    params replace the study's (those given with --set excepted), its dtype the study's, its capture
    settings the study's; [params] keeps the GPU sizes behind the committed results."""

    params: Mapping[str, Any] = field(default_factory=dict)
    dtype: str | None = None
    capture: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"params": dict(self.params), "dtype": self.dtype, "capture": dict(self.capture)}


@dataclass(frozen=True)
class Study:
    workload: str
    params: Mapping[str, Any] = field(default_factory=dict)
    device: str | None = None
    dtype: str | None = None
    capture: CaptureConfig = field(default_factory=CaptureConfig)
    name: str | None = None
    description: str | None = None
    source: str | None = None  # the study file it came from
    cpu: CpuScale | None = None  # the [cpu] section, until the study is scaled to a device
    overrides: tuple[str, ...] = ()  # params (and dtype) given with --set: a scale never replaces them
    scale: str | None = None  # "cpu" once the [cpu] section was applied

    def to_dict(self) -> dict[str, Any]:
        out = {"name": self.name, "workload": self.workload, "device": self.device, "dtype": self.dtype,
               "description": self.description, "source": self.source, "params": dict(self.params),
               "capture": self.capture.to_dict()}
        if self.scale:
            out["scale"] = self.scale
        if self.cpu is not None:
            out["cpu"] = self.cpu.to_dict()
        if self.overrides:
            out["overrides"] = list(self.overrides)
        return out


def at_scale(study: Study, device_type: str) -> tuple[Study, str | None]:
    """The study as it runs on `device_type`: on a CPU, with its [cpu] section applied; and a note saying so."""
    from dataclasses import replace

    from wlprof.params import show

    if device_type != "cpu" or study.cpu is None:
        return replace(study, cpu=None), None
    cpu = study.cpu
    params = dict(study.params)
    changed = {k: v for k, v in cpu.params.items() if k not in study.overrides and params.get(k) != v}
    params.update(changed)
    capture = replace(study.capture, **dict(cpu.capture))
    dtype = study.dtype if "dtype" in study.overrides else (cpu.dtype or study.dtype)
    parts = [f"{k} {show(v)}" for k, v in changed.items()]
    if dtype != study.dtype:
        parts.append(f"dtype {dtype}")
    parts += [f"capture.{k} {show(v)}" for k, v in cpu.capture.items()]
    note = ("CPU: the study's [cpu] scale" + (f" ({'; '.join(parts)})" if parts else "")
            + "; [params] holds the GPU sizes")
    return replace(study, params=params, capture=capture, dtype=dtype, cpu=None, scale="cpu"), note


def load_study(path: str | Path) -> Study:

    path = Path(path)
    if path.is_dir():
        studies = [p for p in path.glob("*.toml") if p.is_file() and b"[study]" in p.read_bytes()]
        raise InputError("STUDY_FILE", "must be a study file (TOML), not a folder", str(path),
                         hint=f"its study files: {path}/*.toml" if studies else None)
    if not path.is_file():
        # compared by stem: the '.toml' every name shares made any short name look close to one
        # ('nope.toml' -> 'gnn_pyg.toml')
        near = sorted(p.stem for p in path.parent.glob("*.toml")) if path.parent.is_dir() else []
        stem = path.stem if path.suffix == ".toml" else path.name
        hint = did_you_mean(stem, near)
        raise InputError("STUDY_FILE", "must be an existing study file (TOML)", str(path),
                         hint=hint.replace(repr(hint.split("'")[1]),
                                           repr(str(path.parent / (hint.split("'")[1] + ".toml"))))
                         if hint else None)
    return study_from_toml(path.read_bytes(), str(path))


def study_from_toml(data: bytes, source: str) -> Study:
    """A study from the bytes of a study file (`source` names it in errors)."""
    import tomllib

    from wlprof.params import toml_loads

    path = Path(source)
    try:
        doc = toml_loads(data.decode())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError("STUDY_FILE", f"must be valid TOML ({exc})", str(path)) from None
    sections = ("study", "params", "capture", "cpu")
    unknown = set(doc) - set(sections)
    if unknown:
        first = sorted(unknown)[0]
        raise InputError(f"{path.name}: [{first}]", "is not a section of a study file "
                         "(sections: study, params, capture, cpu)", first, hint=did_you_mean(first, sections))
    for section in ("study", "params", "capture", "cpu"):
        _table(doc, section, section)
    head = doc.get("study", {})
    bad = set(head) - _STUDY_KEYS
    if bad:
        key = sorted(bad)[0]
        raise InputError(f"study.{key}", f"is not a study key (keys: {', '.join(sorted(_STUDY_KEYS))})", head[key])
    if "workload" not in head:
        raise InputError(Key("workload", "study"), "is required", None)
    for key in sorted(_STUDY_KEYS & set(head)):
        if not isinstance(head[key], str):
            raise InputError(f"study.{key}", "must be a string (in quotes)", head[key])
    cap_raw = _capture_settings(doc.get("capture", {}), "capture")
    cpu = None
    if "cpu" in doc:
        raw = doc["cpu"]
        _table(raw, "params", "cpu.params")
        _table(raw, "capture", "cpu.capture")
        if "dtype" in raw and not isinstance(raw["dtype"], str):
            raise InputError("cpu.dtype", "must be a string (in quotes)", raw["dtype"])
        bad = set(raw) - _CPU_KEYS
        if bad:
            key = sorted(bad)[0]
            raise InputError(f"cpu.{key}", f"is not a key of [cpu] (keys: {', '.join(sorted(_CPU_KEYS))})",
                             raw[key])
        cpu_cap = _capture_settings(raw.get("capture", {}), "cpu.capture")
        CaptureConfig(**{**cap_raw, **cpu_cap})  # checked now, named as capture settings
        cpu = CpuScale(params=dict(raw.get("params", {})), dtype=raw.get("dtype"), capture=cpu_cap)
    return Study(workload=head["workload"], params=dict(doc.get("params", {})), device=head.get("device"),
                 dtype=head.get("dtype"), capture=CaptureConfig(**cap_raw), name=head.get("name"),
                 description=head.get("description"), source=source, cpu=cpu)


def _table(doc: Mapping[str, Any], key: str, name: str) -> None:
    """Refuse `key = value` where a study file needs a [table] (`study = "gemm"` instead of [study])."""
    if key in doc and not isinstance(doc[key], dict):
        raise InputError(f"[{name}]", f"must be a table ([{name}] followed by KEY = VALUE lines), not a "
                         f"{type(doc[key]).__name__}", doc[key])


def _capture_settings(raw: Mapping[str, Any], section: str) -> dict[str, Any]:
    known = {f.name for f in fields(CaptureConfig)}
    for key in raw:
        if key not in known:
            raise InputError(f"{section}.{key}", "is not a capture setting (settings: "
                             f"{', '.join(sorted(known))})", raw[key], hint=did_you_mean(key, known))
    return dict(raw)


def override_params(study: Study, assignments: list[str], arg: str = "--set") -> Study:
    """The study with [params] overridden by KEY=VALUE strings (VALUE as TOML, else a string); KEY `dtype`
    overrides the study's dtype (its [cpu] section's too)."""
    from dataclasses import replace

    from wlprof.params import toml_value

    params = dict(study.params)
    dtype = study.dtype
    for a in assignments:
        key, sep, raw = a.partition("=")
        key = key.strip()
        if not sep or not key or not key.replace("_", "").isalnum():
            raise InputError(arg, "must be KEY=VALUE with KEY a parameter name or dtype (e.g. seed=1)", a)
        if key == "dtype":
            from wlprof.device import DTYPE_ALIASES, DTYPES

            dtype = str(toml_value(raw)).strip()
            if dtype.lower() not in DTYPE_ALIASES:
                raise InputError(arg, f"dtype must be one of {', '.join(DTYPES)}", a,
                                 hint=did_you_mean(dtype.lower(), list(DTYPE_ALIASES)))
        else:
            params[key] = toml_value(raw)
    return replace(study, params=params, dtype=dtype, overrides=tuple(dict.fromkeys((*study.overrides, *(
        a.partition("=")[0].strip() for a in assignments)))))


@dataclass
class RunResult:
    run_id: str
    path: Path
    status: str
    steps: Any  # pandas DataFrame: one row per point
    notes: list[str]
    ceilings_origin: str


def versions(import_torch: bool = True) -> dict[str, Any]:
    """Versions of what a run used; `import_torch=False` reads torch's from package metadata
    (ingesting a trace needs no torch, and importing it costs seconds and hundreds of MB)."""
    import importlib.metadata as md

    import wlprof

    def ver(pkg):
        try:
            return md.version(pkg)
        except md.PackageNotFoundError:
            return None

    if import_torch:
        import torch

        torch_v, cuda_v = torch.__version__, torch.version.cuda
        cudnn_v = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    else:
        torch_v, cuda_v, cudnn_v = ver("torch"), None, None
    return {
        "wlprof": wlprof.__version__,
        "torch": torch_v,
        "cuda": cuda_v,
        "cudnn": cudnn_v,
        "torch_geometric": ver("torch-geometric") or ver("torch_geometric"),
        "pandas": ver("pandas"),
        "pyarrow": ver("pyarrow"),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


# (points done, a fraction inside the running point included; total; variant; state), and at the end of a
# point `row=` its steps row
Progress = Callable[..., None]

# Rough shares of a point's time per phase, for progress inside a point (an ETA needs only rough ones)
PHASE_WEIGHTS = {"building": 0.05, "warm-up": 0.05, "one call": 0.15, "graph replay": 0.10, "back to back": 0.20,
                 "profiling": 0.20, "parsing": 0.20, "writing": 0.05}


def phase_fraction(phase: str, done: int, total: int) -> float:
    """How far into a point a phase's `done` of `total` samples is (0-1), by PHASE_WEIGHTS."""
    names = list(PHASE_WEIGHTS)
    if phase not in PHASE_WEIGHTS:
        return 0.0
    start = sum(PHASE_WEIGHTS[n] for n in names[:names.index(phase)])
    return min(0.99, start + PHASE_WEIGHTS[phase] * (done / total if total else 0.0))


def prepare(study: Study):
    """Validate everything a run needs before anything is written: device, dtype, workload, points."""
    from wlprof import workloads
    from wlprof.device import resolve_device, resolve_dtype

    wl = workloads.get(study.workload)
    try:
        device = resolve_device(study.device, Key("device", "study"))
    except InputError as exc:
        if str(study.device).startswith("cuda") and "has none" in exc.rule_text():
            hint = ("pass --device cpu to run it on this CPU"
                    + (" at the study's [cpu] scale" if study.cpu is not None else ""))
            raise InputError(exc.arg, exc.rule, exc.value, hint=hint) from None
        raise
    study, scale_note = at_scale(study, device.type)
    dtype = resolve_dtype(study.dtype, device, Key("dtype", "study"))
    parsed = wl.parse(study.params, device, dtype)
    if scale_note:
        parsed = type(parsed)(parsed.spec, (scale_note, *parsed.notes))
    points = wl.points(parsed.spec)
    labels = [p.variant for p in points]
    if len(set(labels)) != len(labels):
        raise InputError(Key(wl.params[0].name), "must not repeat a sweep point",
                         sorted({x for x in labels if labels.count(x) > 1}))
    free = _free_memory(device)
    if free is not None:
        for p in points:
            need = wl.estimate_bytes(p, dtype)
            if need > MEMORY_SHARE * free:
                sizes = [Key(n) for n in wl.size_params() if n in study.params] or [Key(n) for n in wl.size_params()]
                sizes = sizes or [Key("params", "study")]
                rule = (f"must fit in {'device' if device.type == 'cuda' else 'host'} memory: point '{p.variant}' "
                        f"needs about {need / 2**30:,.1f} GiB, more than {MEMORY_SHARE:.0%} of the "
                        f"{free / 2**30:,.1f} GiB free; lower ",)
                for i, k in enumerate(sizes):
                    rule += (", " if i else "", k)
                first = sizes[0].name  # its value as given (the point's where the study leaves it to the default)
                raise InputError(sizes[0], rule, study.params.get(first, p.params.get(first, p.variant)))
    return wl, device, dtype, parsed, points, study


MEMORY_SHARE = 0.9  # a point may use at most this share of the free memory


def _free_memory(device) -> int | None:
    """Bytes free on the device (GPU) or in RAM (CPU), or None where it cannot be told."""
    import os

    if device.type == "cuda":
        import torch

        return torch.cuda.mem_get_info(device)[0]
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def run_study(study: Study, traces: str | Path = "traces", progress: Progress | None = None,
              command: str | None = None, resume: str | None = None) -> RunResult:
    """Run every point of `study` and write it under `out`; bad input raises before anything is written.

    `resume=RUN_ID` finishes an interrupted run of the same study: points already written
    are kept, the others are run, with the ceilings the run started with.
    """
    from wlprof.ceilings import Ceilings, get_ceilings
    from wlprof.device import device_info, dtype_name
    from wlprof.store.runs import RunWriter, check_writable, effective_status, read_manifest, run_dir

    try:  # until the run's folder is made, an interrupt leaves nothing behind
        wl, device, dtype, parsed, points, study = prepare(study)
        if resume is not None and not run_dir(traces, resume).is_dir():
            # before the traces folder is made: a run that is not there leaves nothing behind
            raise InputError(Key("resume", "store"),
                             f"must name a run in {Path(traces).resolve()}/ (see `wlprof ls`)", resume)
        if resume is None:  # the ceilings are cached before the sweep: an unwritable cache is said first
            from wlprof.ceilings import check_cache_writable

            check_cache_writable()
        root = check_writable(traces, Key("traces", "store"))
        info = device_info(device)
        if resume is not None:
            path = run_dir(root, resume)
            m = read_manifest(path)
            if effective_status(m) == "running":
                raise InputError(Key("resume", "store"), f"must name a run that is not running (its process "
                                 f"{m.get('pid')} is)", resume)
            same = (m.get("workload") == wl.name and m.get("spec") == _jsonable_roundtrip(parsed.spec)
                    and m.get("dtype") == dtype_name(dtype) and (m.get("device") or {}).get("name") == info["name"]
                    and [p.get("variant") for p in m.get("points", [])] == [p.variant for p in points])
            if not same:
                raise InputError(Key("resume", "store"), "must name a run of this same study (workload, "
                                 "parameters, device, dtype)", resume)
            differ = _capture_differences(m.get("capture"), study.capture.to_dict())
            if differ:
                raise InputError(Key("resume", "store"), "must name a run captured as this command captures "
                                 f"(its finished points would differ from the rest): {differ}", resume)
            writer = RunWriter.reopen(root, resume)
            ceilings = Ceilings.from_dict(m["ceilings"])
            origin = f"the run's own: {m['ceilings'].get('origin')}"
            return _run_points(writer, wl, device, dtype, points, study, ceilings, origin, info, parsed, progress)
        ceilings, origin = get_ceilings(device)
        manifest = {
            "command": command if command is not None else " ".join(sys.argv),
            "study": study.to_dict(),
            "spec": _jsonable(parsed.spec),
            "notes": list(parsed.notes),
            "versions": versions(),
            "device": info,
            "dtype": dtype_name(dtype),
            "ceilings": {**ceilings.to_dict(), "origin": origin},
            "capture": study.capture.to_dict(),
            "points": [{"index": i, "variant": p.variant, "params": dict(p.params), "status": "pending"}
                       for i, p in enumerate(points)],
        }
    except RunInterrupted:
        raise
    except KeyboardInterrupt:
        kept = f"run {resume} is as it was" if resume is not None else "no run was written"
        raise Interrupted(f"{kept} in {Path(traces)}/ (stopped before a point began)") from None
    writer = RunWriter(root, wl.name, manifest)
    return _run_points(writer, wl, device, dtype, points, study, ceilings, origin, info, parsed, progress)


def _capture_differences(recorded: dict | None, wanted: dict) -> str:
    """The capture settings (`CaptureConfig` fields) in which a run's manifest differs from this command's,
    'profiled_steps 10 in the run, 11 here'; empty where they agree or the manifest records none."""
    if not isinstance(recorded, dict):
        return ""
    wanted = _jsonable_roundtrip(wanted)
    return "; ".join(f"capture.{k} {recorded[k]!r} in the run, {wanted[k]!r} here" for k in wanted
                     if k in recorded and recorded[k] != wanted[k])


def _jsonable_roundtrip(spec) -> Any:
    """The spec as the manifest stores it (tuples come back from JSON as lists)."""
    from wlprof import jsonio

    return jsonio.loads(jsonio.dumps(_jsonable(spec)))


class RunInterrupted(KeyboardInterrupt):
    """An interrupt that stopped a run after its writer marked it incomplete: which run, and where."""

    def __init__(self, run_id: str, path: Path):
        super().__init__(run_id)
        self.run_id, self.path = run_id, path


class _Interrupts:
    """SIGINT, noted as well as raised: an interrupt that lands inside a callback the interpreter runs
    for C code (a finalizer, a profiler hook) is printed and dropped there, so the sweep checks the
    note between points instead of relying on the KeyboardInterrupt alone."""

    def __init__(self):
        self.seen = False
        self._old = None

    def _handler(self, signum, frame):
        self.seen = True
        signal.default_int_handler(signum, frame)

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self._old = signal.signal(signal.SIGINT, self._handler)
        return self

    def __exit__(self, *exc):
        if self._old is not None:
            signal.signal(signal.SIGINT, self._old)
        return False

    def check(self) -> None:
        if self.seen:
            raise KeyboardInterrupt


def _run_points(writer, wl, device, dtype, points, study, ceilings, origin, info, parsed, progress) -> RunResult:
    with _Interrupts() as interrupts, _older_objects_frozen():
        return _run_points_noting(writer, wl, device, dtype, points, study, ceilings, origin, info, parsed, progress,
                                  interrupts)


@contextmanager
def _older_objects_frozen():
    """The objects that exist before the sweep are left out of the collections between its points (they
    free only what the points made; a full collection of a large process, a notebook or a test session, can
    take longer than a small point). Nothing is frozen when something else froze objects already."""
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _run_points_noting(writer, wl, device, dtype, points, study, ceilings, origin, info, parsed, progress,
                       interrupts: _Interrupts) -> RunResult:
    import pandas as pd

    from wlprof.device import dtype_name

    identity = {"run_id": writer.run_id, "workload": wl.name, "device_type": device.type,
                "device_name": info["name"], "dtype": dtype_name(dtype), "rank": 0}
    rows = []
    failures = 0
    try:
        for i, point in enumerate(points):
            interrupts.check()
            entry = writer.manifest["points"][i]
            if writer.point_done(i):  # a resumed run: this point is already written
                rows.append(pd.read_parquet(writer.path / entry["files"]["steps"]).iloc[0].to_dict())
                if progress:
                    progress(i + 1, len(points), point.variant, "kept", row=rows[-1])
                continue

            def on_phase(phase: str, done: int, total: int, i=i, point=point) -> None:
                if progress:
                    label = phase if total <= 1 else f"{phase} {done + 1}/{total}"
                    progress(i + phase_fraction(phase, done, total), len(points), point.variant, label)

            on_phase("building", 0, 1)
            try:
                row, files = _run_point(wl, point, i, device, dtype, study.capture, writer, ceilings, identity,
                                        on_phase)
                entry.update(status="ok", files=files)
                rows.append(row)
            except WlprofError:
                raise
            except Exception as exc:  # noqa: BLE001 - one failed point must not lose the others
                failures += 1
                reason = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:500]
                entry.update(status="failed", error=reason, traceback=traceback.format_exc()[-4000:])
                failed = {**identity, **point.params, "variant": point.variant, "point": i,
                          "status": "failed", "error": reason}
                writer.write_point(i, point.variant, {"steps": pd.DataFrame([failed])}, None)
                rows.append(failed)
                _free(device)
            writer.write_manifest()
            if progress:
                progress(i + 1, len(points), point.variant, entry["status"], row=rows[-1])
    except KeyboardInterrupt:
        writer.finish("incomplete")
        raise RunInterrupted(writer.run_id, writer.path) from None
    except BaseException:
        writer.finish("incomplete")
        raise
    status = "complete" if failures == 0 else ("failed" if failures == len(points) else "partial")
    writer.finish(status)
    steps = pd.DataFrame(rows)
    return RunResult(writer.run_id, writer.path, status, steps, list(parsed.notes), origin)


def _jsonable(spec) -> Any:
    from dataclasses import asdict, is_dataclass

    return asdict(spec) if is_dataclass(spec) else spec


def _free(device) -> None:
    gc.collect()
    if device.type == "cuda":
        import torch

        torch.cuda.empty_cache()


def _run_point(wl, point, index, device, dtype, cfg, writer, ceilings, identity, on_phase=None):
    import pandas as pd

    from wlprof import pipeline
    from wlprof.capture import capture
    from wlprof.schema import SCHEMA_VERSION
    from wlprof.timing import no_phase

    on_phase = on_phase or no_phase
    raw = writer.path / f".raw-p{index:03d}.json"
    try:
        built = wl.build(point, device, dtype)
        cap = capture(built.step, device, cfg, raw, graph_safe=built.graph_safe, on_phase=on_phase)
        on_phase("parsing", 0, 1)
        del built.step  # the step's closure holds the point's tensors: free them before parsing
        columns = {**identity, **dict(point.params), **built.facts, "variant": point.variant, "point": index}
        tables = pipeline.process(raw, ceilings=ceilings, identity=columns, stated=built.stated,
                                  timings=cap.timings, profiled_steps=cap.profiled_steps,
                                  useful_flops=built.useful_flops, executed_regions=built.executed_regions,
                                  tf32=cap.tf32, lists=built.tensor_lists)
        step_row = tables.steps.iloc[0].to_dict()
        step_row["note"] = built.note
        step_row["sm_clock_mhz_start"], step_row["sm_clock_mhz_end"] = cap.sm_clock_mhz
        on_phase("writing", 0, 1)
        chrome = pipeline.chrome(tables, {
            "run_id": identity["run_id"], "variant": point.variant, "schema_version": SCHEMA_VERSION,
            "ceilings": {"copy_gbps": ceilings.copy_gbps, "matrix_tflops": ceilings.matrix_tflops,
                         "vector_tflops": ceilings.vector_tflops, "bandwidth_gbps": ceilings.bandwidth_gbps,
                         "cache_bytes": ceilings.cache_bytes, "measured_at": ceilings.measured_at,
                         "source": ceilings.source},
        })
        files = writer.write_point(index, point.variant, {"kernels": tables.kernels, "ops": tables.ops,
                                                          "steps": pd.DataFrame([step_row]),
                                                          "overlap": tables.overlap}, chrome)
        if cfg.keep_raw_trace:
            files["raw_chrome"] = writer.write_raw_trace(index, point.variant, raw)
        return step_row, files
    finally:
        raw.unlink(missing_ok=True)
        _free(device)

"""`wlprof ingest`: any torch.profiler trace (or a folder of per-rank traces) through the pipeline.

The run is staged under a hidden name and appears only once every file was read.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wlprof.errors import InputError, Interrupted, Key, TraceFormatError

TRACE_SUFFIXES = (".json", ".json.gz")


@dataclass
class IngestedFile:
    path: str
    rank: int
    events: int
    kernels: int
    kernel_us: float
    unknown_us: float
    top_unknown: list[tuple[str, float]] = field(default_factory=list)
    chrome: str | None = None
    shapes: bool = True  # its ops carry recorded shapes (`record_shapes=True`)
    notes: list[str] = field(default_factory=list)  # what the parser could not read, or read otherwise
    no_flops_us: float = 0.0  # kernel time without FLOPs: unknown ops, and kernels costed by bytes alone
    ops: bool = True  # it recorded CPU ops (a profile without ProfilerActivity.CPU records kernels only)
    replayed_us: float = 0.0  # kernel time without FLOPs replayed from CUDA/HIP graphs (no op launched it)
    top_bytes_only: list[tuple[str, float]] = field(default_factory=list)  # the longest costed by bytes alone


@dataclass
class IngestResult:
    run_id: str
    path: Path
    files: list[IngestedFile]
    ceilings_origin: str
    skipped: list[str] = field(default_factory=list)  # JSON files of the folder that are not traces

    @property
    def unknown_share(self) -> float:
        total = sum(f.kernel_us for f in self.files)
        return sum(f.unknown_us for f in self.files) / total if total else float("nan")

    @property
    def bytes_only_share(self) -> float:
        """The share of kernel time whose bytes are costed and FLOPs not (a fused Triton kernel, a pooling
        window the trace does not record)."""
        total = sum(f.kernel_us for f in self.files)
        return sum(f.no_flops_us - f.unknown_us for f in self.files) / total if total else float("nan")


SNIFF_BYTES = 4 << 20  # a trace's metadata before its events is small


def looks_like_trace(path: Path) -> bool:
    """Whether a JSON file of a folder can be a Chrome trace: its (gunzipped) start is an object that
    names `traceEvents` or an event's `ph`, or an array that names `ph`. A gzip file that cannot be
    read, and text that is not UTF-8 (a UTF-16 trace), say yes, so that the parser reports on them;
    an empty file, or one that starts with anything else, says no."""
    import gzip

    head = b""
    try:
        with open(path, "rb") as fh:
            magic = fh.read(2)
            fh.seek(0)
            stream = gzip.GzipFile(fileobj=fh) if magic == b"\x1f\x8b" else fh
            while len(head) < SNIFF_BYTES:  # a trace names its events within its first kilobytes
                chunk = stream.read(64 << 10)
                head += chunk
                start = head.lstrip(b"\xef\xbb\xbf \t\r\n")
                if not chunk or start[:1] not in (b"{", b"[") or b'"traceEvents"' in head or b'"ph"' in head:
                    break
    except (OSError, EOFError):
        return True
    if head[:2] in (b"\xff\xfe", b"\xfe\xff") or b"\x00" in head[:4]:  # UTF-16 or UTF-32 text
        return True
    start = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if start[:1] == b"{":
        return b'"traceEvents"' in head or b'"ph"' in head
    return start[:1] == b"[" and b'"ph"' in head


def unreadable(path: str | Path, exc: TraceFormatError) -> str:
    """The rule a file of `path` (the file itself, or one of a folder's) broke, for an InputError on PATH."""
    what = "hold torch.profiler traces" if Path(path).is_dir() else "be a torch.profiler trace"
    return f"must {what}; {Path(exc.path).name}: {exc.problem}"


def trace_files(path: str | Path, arg: str = "PATH", skipped: list[Path] | None = None) -> list[Path]:
    """The trace files of a file or folder argument, sorted; an InputError when there are none.

    In a folder, a JSON file that is no Chrome trace (a run's config or metrics beside its traces)
    is left out, and appended to `skipped` where given.
    """
    p = Path(path)
    if p.is_file():
        return [p]
    if p.is_dir():
        files, other = [], []
        for f in sorted(p.iterdir()):
            if f.is_file() and not f.name.startswith((".", "_")) and f.name.endswith(TRACE_SUFFIXES):
                (files if looks_like_trace(f) else other).append(f)
        if not files:
            why = f" ({', '.join(f.name for f in other[:3])}{', ...' if len(other) > 3 else ''} are not traces)" \
                if other else ""
            raise InputError(arg, f"must be a trace file or a folder holding *.json or *.json.gz traces{why}", str(p),
                             hint=_sub_folders_hint(p))
        if skipped is not None:
            skipped.extend(other)
        return files
    raise InputError(arg, "must be an existing trace file or folder", str(p))


DATASHEET = "datasheet"  # the --ceilings word for the GPU's datasheet peaks
PROPERTY_KEYS = ("totalGlobalMem", "numSms", "computeMajor", "computeMinor")  # what tells a GPU's variant


def _sub_folders_hint(folder: Path) -> str | None:
    """Where a folder holds no trace but its sub-folders do (tensorboard_trace_handler's `./log` of one
    folder per model), which of them to ingest."""
    subs = []
    for d in sorted(folder.iterdir()):
        if d.is_dir() and not d.name.startswith((".", "_")):
            n = sum(1 for f in d.iterdir() if f.is_file() and not f.name.startswith((".", "_"))
                    and f.name.endswith(TRACE_SUFFIXES) and looks_like_trace(f))
            if n:
                subs.append((d, n))
    if not subs:
        return None
    listed = ", ".join(f"{d.name}/ ({n} trace{'s' if n > 1 else ''})" for d, n in subs[:5])
    more = f" and {len(subs) - 5} more" if len(subs) > 5 else ""
    return (f"its sub-folders hold traces, which a folder's ingest does not read: {listed}{more}; ingest one "
            f"of them (wlprof ingest {subs[0][0]})")


def _ceilings(device_type: str, device_name: str, ceilings_file: str | None = None, props: dict | None = None):
    """The ceilings for the trace's device and where they came from: from `ceilings_file` where it holds that
    device's, else from this machine's cache; the GPU's datasheet peaks only where `ceilings_file` is
    'datasheet' (refused for a device with no sheet)."""
    from wlprof import ceilings as C
    from wlprof.datasheets import known, sheet_for

    if ceilings_file == DATASHEET:
        return _datasheet(device_type, device_name, props)
    other = ""
    if ceilings_file:
        given = C.load_file(ceilings_file, choices=())
        if (given.device_type, given.device_name) == (device_type, device_name):
            return given, f"file: {ceilings_file}"
        other = f"--ceilings {ceilings_file} holds {given.device_name}'s, not {device_name}'s; "
    cached = C.load_cached(device_type, device_name)
    if cached is not None:
        return cached, f"{other}cache: {C.cache_path(device_type, device_name)}"
    sheet = sheet_for(device_name, props) if device_type == "cuda" else None
    hint = (f"; `--ceilings datasheet` places them against the {sheet.key}'s datasheet peaks ({sheet.source}), "
            "not measured ones" if sheet is not None else
            f"; no datasheet is known for {device_name} either (known: {', '.join(known())})"
            if device_type == "cuda" else "")
    return None, (f"{other}no measured ceilings for {device_name} (run `wlprof calibrate` on that device, or pass "
                  f"its ceilings with --ceilings FILE): the roofline columns are empty{hint}")


def _datasheet(device_type: str, device_name: str, props: dict | None):
    """The GPU's datasheet ceilings and their origin line; an InputError where it has no sheet."""
    from wlprof import ceilings as C
    from wlprof.datasheets import known

    made = C.datasheet_ceilings(device_name, props) if device_type == "cuda" else None
    if made is None:
        mem = (props or {}).get("totalGlobalMem")
        told = f" ({mem / 2**30:.0f} GiB)" if isinstance(mem, (int, float)) and mem > 0 else ""
        unnamed = device_type == "cuda" and device_name.startswith("unknown ")  # `trace.identity.device_of`
        what = ("the trace does not name its GPU (no deviceProperties name or compute capability)" if unnamed
                else f"the trace ran on {device_name}{told}, which has none" if device_type == "cuda"
                else f"the trace ran on a CPU ({device_name})")
        raise InputError("--ceilings", f"datasheet needs a GPU with a known datasheet: {what}; known: "
                         f"{', '.join(known())}", DATASHEET,
                         hint="pass ceilings measured on that device (`wlprof calibrate --out FILE` there) instead")
    m = made.method
    cached = C.load_cached(device_type, device_name)
    also = (f"; measured ceilings of {device_name} are cached here ({C.cache_path(device_type, device_name)}): "
            "without --ceilings they are used" if cached is not None else "")
    halved = ", its sparse rates halved" if m["sparsity_halved"] else ""
    return made, (f"datasheet: {m['datasheet']} ({m['document']}{halved}): vendor peaks, not measured; "
                  f"a fraction above 1 is noted above_datasheet{also}")


_NOTHING_WRITTEN = "nothing was written to {traces}/ (an ingest appears only once every file is read)"


def ingest(path: str | Path, traces: str | Path = "traces", name: str | None = None,
           chrome_top: int | None = None, command: str | None = None,
           progress: Callable[[int, int, str], None] | None = None, jobs: int | None = None,
           ceilings_file: str | Path | None = None) -> IngestResult:
    """Read every trace of `path` into a new run under `traces`; nothing is written unless all succeed.

    The files of a folder are read in parallel by `jobs` processes (default: one per core,
    at most one per file). `ceilings_file`: ceilings measured by `wlprof calibrate` (its `--out`), used
    for the traces of the device they were measured on, or 'datasheet': the GPU's datasheet peaks.
    """
    import os

    from wlprof import study
    from wlprof.store.atomic import slug
    from wlprof.store.runs import RUN_ID_RE, RunWriter, check_writable

    if name is not None and not (re.search(r"[A-Za-z0-9]", name) and RUN_ID_RE.match(slug(name))):
        raise InputError(Key("name", "store"), "must contain letters or digits", name)
    if chrome_top is not None and chrome_top < 1:
        raise InputError(Key("chrome_top", "store"), "must be a positive number of kernels", chrome_top)
    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1):
        raise InputError(Key("jobs", "store"), "must be a positive number of processes", jobs)
    if ceilings_file is not None and str(ceilings_file) != DATASHEET:
        from wlprof import ceilings as C

        C.load_file(ceilings_file, choices=(DATASHEET,))  # refused now, before any file is read
    ceilings_file = str(ceilings_file) if ceilings_file is not None else None
    skipped: list[Path] = []
    made = [d for d in (Path(traces), *Path(traces).parents) if not d.exists()]  # deepest first
    try:
        files = trace_files(path, skipped=skipped)
        root = check_writable(traces, Key("traces", "store"))
    except KeyboardInterrupt:
        _remove_empty(made)
        raise Interrupted(_NOTHING_WRITTEN.format(traces=Path(traces))) from None
    manifest: dict[str, Any] = {
        "command": command, "study": {"name": name, "workload": "ingest", "source": str(path)},
        "versions": study.versions(import_torch=False),
        "notes": [f"skipped {f.name}: a JSON file that is not a Chrome trace" for f in skipped],
        "points": [{"index": i, "variant": f.name, "source_file": str(f), "status": "pending"}
                   for i, f in enumerate(files)],
    }
    writer = RunWriter(root, "ingest", manifest, prefix=name or "ingest", staged=True)
    jobs = min(jobs or os.cpu_count() or 1, len(files))
    tasks = [(writer.path, writer.run_id, i, f, chrome_top, ceilings_file) for i, f in enumerate(files)]
    done: list[IngestedFile] = []
    devices: dict[int, dict] = {}
    origin = ""
    try:
        with _pool(jobs) as pool:
            comm = []
            for n, (i, entry, summary, dev, ceil, coll) in enumerate(_run_all(tasks, pool)):
                if progress:
                    progress(n + 1, len(files), files[i].name)
                writer.manifest["points"][i].update(entry)
                writer.manifest.setdefault("device", dev)
                devices[i] = dev
                origin = ceil["origin"]
                writer.manifest["ceilings"] = ceil  # written when the staged run is finished
                done.append(summary)
                comm.append(coll)
            _check_one_device(path, [(files[i].name, d) for i, d in sorted(devices.items())])
            _distinct_variants(writer.path, writer.manifest["points"], files)
            points = writer.manifest["points"]
            # the dtype the matrix units computed in, where the trace has matrix work; else the one of most time
            writer.manifest["dtype"] = (dominant_dtype(p.get("matrix_dtype_us") for p in points)
                                        or dominant_dtype(p.get("dtype_us") for p in points))
            hosts = {p.get("rank"): p.get("host") for p in writer.manifest["points"]}
            variants = {p["index"]: p["variant"] for p in writer.manifest["points"]}
            _finish_collectives(writer.path, [c for c in comm if c], hosts, variants, pool)
        writer.finish("complete")
    except BaseException as exc:
        # `finish` publishes the run by a rename: an interrupt that lands once it is done is still raised here
        published = writer.published
        writer.abort()
        if not published:
            _remove_empty(made)
        if isinstance(exc, KeyboardInterrupt):
            if published:
                raise Interrupted(f"run {writer.run_id} was written whole to {root}/ before the interrupt") from None
            raise Interrupted(_NOTHING_WRITTEN.format(traces=root)) from None
        raise
    done.sort(key=lambda f: files.index(Path(f.path)))
    return IngestResult(writer.run_id, writer.path, done, origin, [str(f) for f in skipped])


def _check_one_device(path, devices: list[tuple[str, dict]]) -> None:
    """Refuse a folder whose traces ran on different kinds of device (one job's ranks run on one):
    different device types, or GPUs the traces name differently. CPU names are not compared (the
    ranks of one job on several hosts name their hosts), nor a GPU the trace does not name."""
    kinds = {d["type"] for _, d in devices}
    named = {}
    for f, d in devices:
        if d["type"] != "cpu" and not d["name"].startswith("unknown"):
            named.setdefault(d["name"], f)
    if len(kinds) < 2 and len(named) < 2:
        return
    seen = {}
    for f, d in devices:
        seen.setdefault(d["name"] if d["type"] != "cpu" else "a CPU", f)
    found = ", ".join(f"{n} ({f})" for n, f in seen.items())
    raise InputError("PATH", "must hold the traces of one device (a folder is one job's per-rank traces): "
                     f"its traces ran on {found}; ingest each file on its own", str(path))


def _finish_collectives(run_path: Path, parts: list[bytes], hosts: dict, variants: dict, pool) -> None:
    """Match the files' collective rows (each file's pickled frame) across ranks and write the run's
    collectives table: in a worker where the files were read by workers, so that this process never
    loads pandas (its memory adds to theirs while they run)."""
    if not parts:
        return
    if pool is None:
        _write_collectives(run_path, parts, hosts, variants)
        return
    pool.submit(_write_collectives, run_path, parts, hosts, variants).result()


def _write_collectives(run_path: Path, parts: list[bytes], hosts: dict, variants: dict) -> int:
    """The collectives table from every file's collective rows, with the variant each point was given."""
    import pickle

    import pandas as pd

    from wlprof.store.collectives import write_collectives

    rows = pd.concat([pickle.loads(p) for p in parts], ignore_index=True)
    rows["variant"] = rows["point"].map(variants)
    return write_collectives(run_path, None, hosts, "collectives", rows=rows)


def _remove_empty(folders: list[Path]) -> None:
    """Remove the folders an ingest created (deepest first) where they are still empty: a refused
    ingest leaves no traces folder behind."""
    for d in folders:
        try:
            d.rmdir()
        except OSError:
            return


def _distinct_variants(run_path: Path, points: list[dict], files: list[Path]) -> None:
    """Give points that share a variant (two captures of one rank) their file's name, in tables and manifest.

    Each file is read by a worker that cannot see the other files' ranks, so the names are made
    distinct here, in the staged run before it is published.
    """
    from collections import Counter

    from wlprof.store.atomic import atomic_write_parquet

    counts = Counter(p["variant"] for p in points)
    for i, p in enumerate(points):
        if counts[p["variant"]] < 2:
            continue
        import pandas as pd

        p["variant"] = f"{p['variant']} ({files[i].name})"
        for table, rel in p.get("files", {}).items():
            if not rel.endswith(".parquet"):
                continue
            df = pd.read_parquet(run_path / rel)
            if "variant" in df:
                df["variant"] = p["variant"]
            atomic_write_parquet(run_path / rel, df, table)


def _time_by_dtype(kernels, unit: str | None = None) -> dict[str, float]:
    """Kernel time (a CPU trace: its ops' time) per dtype the cost formulas read, in us; `unit`: only
    the rows of that cost unit (`matrix`)."""
    if kernels.empty or "cost_dtype" not in kernels:
        return {}
    read = ["cost_dtype", "dur_us", *(["cost_unit"] if unit is not None and "cost_unit" in kernels else [])]
    kernels = kernels[read]  # the columns read, not the wide frame (a row filter copies every column)
    if unit is not None:
        kernels = kernels[kernels.cost_unit == unit] if "cost_unit" in kernels else kernels.iloc[:0]
    t = kernels.groupby(kernels.cost_dtype.astype(object).where(kernels.cost_dtype.notna(), None)).dur_us.sum()
    return {str(k): round(float(v), 3) for k, v in t.items() if k and float(v) > 0}


def dominant_dtype(per_file) -> str | None:
    """The dtype that carries the most time over every file (None when no time has a dtype)."""
    total: dict[str, float] = {}
    for d in per_file:
        for k, v in (d or {}).items():
            total[k] = total.get(k, 0.0) + v
    return max(total, key=total.get) if total else None


# what a worker imports to read, cost and write a file: loaded once, in the server it forks from
WORKER_MODULES = ["wlprof.ingest", "wlprof.pipeline", "wlprof.store.runs", "wlprof.memory", "wlprof.cost.annotate",
                  "wlprof.analysis.collectives", "pyarrow.parquet"]


def _context():
    """The process pool's start method: forkserver where the platform has it (workers fork from a clean
    server process, not from this one and its library threads), else spawn."""
    import multiprocessing

    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(WORKER_MODULES)
    return ctx


def prestart_workers() -> None:
    """Start the workers' fork server now, so that it loads their modules while this process loads its
    own (the pool started later forks from it at once). Nothing happens without forkserver."""
    import multiprocessing

    ctx = _context()
    if ctx.get_start_method() == "forkserver":
        _start_forkserver()
    del multiprocessing


def _start_forkserver() -> None:
    """Start the fork server with SIGINT ignored, which it inherits through exec: a Ctrl-C to the process
    group while it loads the workers' modules no longer prints its import's traceback beside this process's
    own message (once loaded it ignores SIGINT anyway). Here SIGINT is blocked meanwhile, so that one that
    comes is held, not lost, and delivered to the usual handler after; the workers take it again
    (`_worker_init`)."""
    import signal
    from multiprocessing import forkserver

    if not hasattr(signal, "pthread_sigmask"):
        forkserver.ensure_running()
        return
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    handler = signal.signal(signal.SIGINT, signal.SIG_IGN)  # a blocked signal stays pending, even ignored
    try:
        forkserver.ensure_running()
    finally:
        signal.signal(signal.SIGINT, handler)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def _worker_init() -> None:
    """In each worker: SIGINT raises KeyboardInterrupt again (the fork server ignores it, and its workers
    inherit that), so that a Ctrl-C to the process group stops a worker's file as it stops this process."""
    import signal

    from wlprof.memory import keep_heap

    signal.signal(signal.SIGINT, signal.default_int_handler)
    keep_heap()


def stop_workers() -> None:
    """Stop the fork server `prestart_workers` started, at once (a process about to exit need not
    wait while it unloads its modules). Only once no pool uses it; a later pool starts a new one."""
    import sys

    forkserver = sys.modules.get("multiprocessing.forkserver")
    server = getattr(forkserver, "_forkserver", None)
    pid = getattr(server, "_forkserver_pid", None)
    if pid is None or not hasattr(server, "_stop"):
        return
    import os
    import signal

    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    server._stop()  # closes its pipe and reaps it


def _pool(jobs: int):
    """The worker processes for `jobs` > 1 (a context manager), else a context holding None: one
    job runs in this process."""
    import contextlib

    if jobs <= 1:
        return contextlib.nullcontext()
    from concurrent.futures import ProcessPoolExecutor

    ctx = _context()
    if ctx.get_start_method() == "forkserver":
        _start_forkserver()  # a no-op where prestart_workers started it
    return ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=_worker_init)


def _run_all(tasks: list, pool):
    """Each task's result as it finishes: in `pool`, or in this process where it is None."""
    if pool is None:
        for t in tasks:
            yield _ingest_file(*t)
        return
    from concurrent.futures import FIRST_EXCEPTION, wait

    futures = [pool.submit(_ingest_file, *t) for t in tasks]
    pending = set(futures)
    while pending:
        finished, pending = wait(pending, return_when=FIRST_EXCEPTION)
        for fut in finished:
            if fut.exception() is not None:
                for other in pending:
                    other.cancel()
                raise fut.exception()
            yield fut.result()


def _ingest_file(run_path: Path, run_id: str, i: int, f: Path, chrome_top: int | None,
                 ceilings_file: str | None = None):
    """Read, join and cost one trace file and write its point into the staged run folder."""
    import pickle

    from wlprof import pipeline
    from wlprof.analysis.collectives import COLLECTIVE_COLUMNS, collective_rows
    from wlprof.memory import release
    from wlprof.store.runs import write_point
    from wlprof.trace.identity import device_of, device_properties, rank_of

    trace = pipeline.read(f, keep_events=False)
    device_type, device_name = device_of(trace.meta, trace.device, trace.gpu_work_without_device is not None,
                                         trace.mtia_events > 0)
    props = {k: v for k, v in device_properties(trace.meta, trace.device).items() if k in PROPERTY_KEYS} \
        if device_type == "cuda" else {}
    ceilings, origin = _ceilings(device_type, device_name, ceilings_file, props)
    rank = rank_of(trace.meta, i, f.name, _communicates(trace))
    variant = f"rank {rank}" if "distributedInfo" in trace.meta else f.name
    ident = {"run_id": run_id, "workload": "ingest", "variant": variant, "point": i,
             "device_type": device_type, "device_name": device_name, "rank": rank, "source_file": str(f)}
    tables = pipeline.tables(trace, ceilings=ceilings, identity=ident)
    kernels = tables.kernels
    by_dtype, matrix_by_dtype = _time_by_dtype(kernels), _time_by_dtype(kernels, "matrix")
    dtype = dominant_dtype([matrix_by_dtype]) or dominant_dtype([by_dtype])
    if dtype is not None:  # the file's compute dtype, by the rule the run's is chosen by (docs/trace-formats.md)
        for df in (kernels, tables.ops, tables.steps, tables.overlap):
            df["dtype"] = dtype
    tables.steps["note"] = "; ".join(trace.warnings) or None
    chrome = _top_chrome(f, trace.meta, kernels, tables.joined, chrome_top, run_id, variant) if chrome_top else None
    meta, notes, events = trace.meta, list(trace.warnings), trace.event_count
    notes += _noisy_notes(tables.steps)
    opless = trace.device_work_without_ops is not None
    point = {"kernels": kernels, "ops": tables.ops, "steps": tables.steps, "overlap": tables.overlap}
    del trace, tables  # the event tables and the join are not written: free them before the writing does
    release()
    some = kernels[[c for c in ("dur_us", "op_name", "join_method") if c in kernels]]  # what the summary reads
    unknown = some[(kernels.flops_source == "unknown").to_numpy()]
    no_flops = some[kernels.flops.isna().to_numpy()]
    top_unknown = no_flops.groupby(unknown_labels(no_flops)).dur_us.sum().sort_values(ascending=False).head(5)
    bytes_only = some[(kernels.flops.isna() & (kernels.flops_source != "unknown")).to_numpy()]
    top_bytes_only = bytes_only.groupby(unknown_labels(bytes_only)).dur_us.sum().sort_values(ascending=False).head(3)
    files = write_point(run_path, i, variant, point, chrome)
    import pandas as pd

    entry = {"variant": variant, "status": "ok", "files": files, "rank": rank, "events": events,
             "host": meta.get("host_name"), "dtype_us": by_dtype, "matrix_dtype_us": matrix_by_dtype}

    ops = point["ops"]
    dims = ops.op_input_dims if "op_input_dims" in ops else pd.Series([], dtype=object)
    shapes = any(str(d).strip("[] ") for d in pd.unique(dims.dropna())) or ops.empty  # per distinct dims
    replayed = float(unknown.dur_us[_replayed(unknown)].sum())
    if replayed > 0 and kernels.dur_us.sum() > 0:
        notes.append(f"{replayed / kernels.dur_us.sum():.1%} of kernel time was replayed from CUDA/HIP graphs: a "
                     "replay records no op, so its kernels carry no shapes to cost (profile a step with graphs "
                     "off, or the capture itself, to cost them)")
    summary = IngestedFile(str(f), rank, events, len(kernels), float(kernels.dur_us.sum()),
                           float(unknown.dur_us.sum()), list(top_unknown.items()), files.get("chrome"), shapes,
                           notes, float(no_flops.dur_us.sum()), not opless, replayed, list(top_bytes_only.items()))
    ceil = {**(ceilings.to_dict() if ceilings else {}), "origin": origin}
    coll = collective_rows(kernels)
    coll = pickle.dumps(coll[[c for c in COLLECTIVE_COLUMNS if c in coll]]) if len(coll) else None
    del point, ops, kernels
    release()
    dev = {"type": device_type, "name": device_name, **({"properties": props} if props else {})}
    return i, entry, summary, dev, ceil, coll


def _noisy_notes(steps) -> list[str]:
    """A note for each point whose profiled steps' kernel times spread past `steps.NOISY_SPREAD`."""
    from wlprof.steps import NOISY_SPREAD

    out = []
    if "noisy" not in steps:
        return out
    # the three columns read (itertuples makes a named tuple class of every column, each call)
    for noisy, profiled, spread in zip(steps["noisy"], steps["profiled_steps"], steps["timing_spread"], strict=True):
        if noisy is True:
            out.append(f"noisy: its {profiled} profiled steps' kernel times spread "
                       f"{spread:.0%} of their median (above {NOISY_SPREAD:.0%}): the median step is not "
                       "stable (profile more steps, or on a quieter machine)")
    return out


def _replayed(kernels):
    """The rows replayed from a CUDA/HIP graph that no op launched."""
    import numpy as np

    from wlprof.trace.join import GRAPH

    if "join_method" not in kernels:
        return np.zeros(len(kernels), bool)
    return (kernels.join_method == GRAPH).fillna(False).to_numpy(dtype=bool)


def unknown_labels(kernels):
    """What to call each row without FLOPs: its op ('Triton kernels' for Inductor's launches, each named
    after its kernel), else '(graph replay)' or '(no op)'."""
    import numpy as np
    import pandas as pd

    from wlprof.columns import per_distinct

    ops = kernels.op_name.to_numpy(dtype=object)
    named = kernels.op_name.notna().to_numpy()
    labels = ops.copy()
    labels[named & per_distinct(ops, lambda n: str(n).startswith("triton_"))] = "Triton kernels"  # per distinct op
    labels[~named] = np.where(_replayed(kernels)[~named], "(graph replay)", "(no op)").astype(object)
    return pd.Series(labels, index=kernels.index, dtype=object)


def _communicates(trace) -> bool:
    """Whether a trace has collective or P2P work: NCCL-like kernels, c10d or gloo ops."""
    from wlprof.collectives import is_comm_kernel, is_comm_op

    ops = [*trace.names_in("ops"), *trace.names_in("annotations")]
    return any(is_comm_kernel(str(k)) for k in trace.names_in("device")) or any(is_comm_op(str(o)) for o in ops)


def _top_chrome(path: Path, meta: dict, kernels, joined, top: int, run_id: str, variant: str) -> bytes:
    """An enriched trace of the `top` longest kernels, their launches and ops, and every annotation."""
    import numpy as np

    from wlprof.schema import SCHEMA_VERSION
    from wlprof.trace.enrich import enriched_trace
    from wlprof.trace.parse import select_events

    k = kernels.nlargest(top, "dur_us")
    wanted = set(int(i) for i in k._event_idx)
    launches = joined.trace.launches
    corr = set(int(c) for c in k.correlation if c >= 0)
    wanted |= set(int(i) for i in launches.idx[launches.correlation.isin(corr)])
    pos = k._op_pos.to_numpy()
    wanted |= set(int(i) for i in joined.ops.idx.to_numpy()[pos[pos >= 0]])
    wanted |= set(int(i) for i in joined.trace.annotations.idx)
    meta2, events = select_events(path, wanted)
    order = sorted(wanted)
    position = {e: p for p, e in enumerate(order)}
    kept = [e for e in events if not (isinstance(e, dict) and e.get("ph") == "M")]
    metas = [e for e in events if isinstance(e, dict) and e.get("ph") == "M"]
    sub = k.assign(_event_idx=np.array([position[int(i)] + len(metas) for i in k._event_idx]))
    return enriched_trace(meta2 or meta, metas + kept, sub, {"run_id": run_id, "variant": variant,
                                                             "schema_version": SCHEMA_VERSION,
                                                             "top_kernels": top})

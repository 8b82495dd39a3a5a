"""Run folders in the traces folder: created, written and listed, every file atomically.

A run folder appears only with its manifest (it is built under a hidden name and
renamed); a point's files are written kernels-last, so a reader never sees a point
whose other tables are missing. The folder layout is in the README.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import secrets
import socket
import tempfile
from pathlib import Path
from typing import Any

from wlprof import jsonio
from wlprof.errors import InputError, Key, StoreError
from wlprof.schema_version import SCHEMA_VERSION
from wlprof.store.atomic import atomic_write_bytes, atomic_write_parquet, slug


def _schema():
    """wlprof.schema, imported where a table is written or read (it loads pyarrow: a process that only
    writes manifests, as an ingest's main process, never needs it)."""
    from wlprof import schema

    return schema

MANIFEST = "_manifest.json"
TABLE_DIRS = {"kernels": "", "ops": "_ops", "steps": "_steps", "overlap": "_overlap", "collectives": "_collectives"}
RUN_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")

def check_writable(root: str | Path, arg: str | Key = Key("traces", "store"), what: str = "traces") -> Path:
    """The folder `what` goes into (the traces folder), created if needed; an InputError when it cannot be
    written."""
    root = Path(root)
    if root.exists() and not root.is_dir():
        raise InputError(arg, f"must be a folder wlprof can write {what} into, not a file", str(root))
    if what == "traces":
        refuse_run_folder(root, arg)
    try:
        root.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".wlprof-write-probe-", dir=root)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise InputError(arg, f"must be a folder wlprof can write into ({exc.strerror})", str(root)) from None
    return root


def refuse_run_folder(root: str | Path, arg: str | Key = Key("traces", "store")) -> None:
    """Refuse a run's own folder (it holds a manifest) given where a traces folder, the folder of the
    runs, is wanted: runs written there would nest inside that run, and none are listed there."""
    root = Path(root)
    if (root / MANIFEST).is_file():
        raise InputError(arg, f"must be a traces folder (one sub-folder per run), not the folder of run {root.name}",
                         str(root), hint=("pass the folder that holds it: ", arg, f" {root.parent}"))


def check_writable_file(out: str | Path, arg: str, kind: str, what: str) -> None:
    """An InputError naming `arg` when the file `out` (`kind`: 'a JSON file') cannot be written: its folder
    is created if needed; the error names the file as given ('afile/c.json'), not its folder ('afile')."""
    out = Path(out)
    if out.is_dir():
        raise InputError(arg, f"must be {kind}, not a folder", str(out))
    folder = out.parent if str(out.parent) else Path(".")
    try:
        check_writable(folder, arg, what)
    except InputError as exc:
        why = f"{str(folder)!r} is a file" if folder.is_file() else str(exc.rule).split("(", 1)[-1].rstrip(")")
        raise InputError(arg, f"must be {kind} in a folder wlprof can write into ({why})", str(out)) from None


def run_dir(root: str | Path, run_id: str) -> Path:
    """The folder of `run_id` under `root`; refuses ids that would leave it."""
    if not RUN_ID_RE.match(run_id) or run_id in (".", ".."):
        given = Path(run_id)
        hint = (f"that is a run's folder: its id is {given.name}, in the traces folder {given.parent} "
                f"(--traces {given.parent})") if (given / MANIFEST).is_file() else None
        raise InputError("RUN_ID", "must be a run id made of letters, digits, '.', '_' and '-'", run_id, hint=hint)
    root = Path(root).resolve()
    path = (root / run_id).resolve()
    if path.parent != root:
        raise InputError("RUN_ID", "must name a run inside the traces folder", run_id)
    return path


def utcnow() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


class RunWriter:
    """Creates a run folder and writes its points and manifest, each file atomically.

    A run folder is built under a hidden name (`.staging-<run_id>`, skipped by every
    reader) with its manifest and sub-folders, then renamed into place: a reader never
    sees a run folder without its manifest. With `staged=True` it stays hidden until
    `finish` (`abort` removes it): `wlprof ingest` stages, so a failed ingest leaves the
    store as it was.
    """

    def __init__(self, root: str | Path, workload: str, manifest: dict[str, Any], prefix: str | None = None,
                 staged: bool = False):
        root = Path(root)
        stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
        for _ in range(100):
            run_id = f"{slug(prefix or workload, 24)}-{stamp}-{secrets.token_hex(2)}"
            final = root / run_id
            path = root / f".staging-{run_id}"
            if final.exists():
                continue
            try:
                path.mkdir(parents=True)  # exclusive: concurrent runs never share an id
            except FileExistsError:
                continue
            if not final.exists():  # not taken meanwhile by a run that already published it
                break
            path.rmdir()
        else:  # pragma: no cover
            raise StoreError(f"could not create a new run folder under {root}")
        self.root = root
        self.run_id = run_id
        self.path = path
        self.final_path = final
        self.staged = staged
        try:  # a folder without its manifest is no run: one that cannot get it (or an interrupt) is removed
            for sub in ("_ops", "_steps", "_overlap", "_collectives", "_chrome"):
                (self.path / sub).mkdir()
            self.manifest = dict(manifest)
            self.manifest.update(
                schema_version=SCHEMA_VERSION, run_id=run_id, workload=workload, status="running",
                created_at=utcnow(), finished_at=None, pid=os.getpid(), host=socket.gethostname(),
            )
            self.manifest.setdefault("points", [])
            self.write_manifest()
        except BaseException:
            import shutil

            shutil.rmtree(path, ignore_errors=True)
            raise
        if not staged:
            self._publish()

    def _publish(self) -> None:
        """Rename the hidden folder to its run id (atomic on one file system; never over an existing run)."""
        os.rename(self.path, self.final_path)
        self.path = self.final_path

    def write_manifest(self) -> None:
        atomic_write_bytes(self.path / MANIFEST, jsonio.dumps(self.manifest, indent=True))

    def write_point(self, index: int, variant: str, tables: dict[str, Any], chrome: bytes | None) -> dict:
        """Write one finished point's tables (DataFrames) and Chrome trace; return its file map."""
        return write_point(self.path, index, variant, tables, chrome)

    @classmethod
    def reopen(cls, root: str | Path, run_id: str) -> RunWriter:
        """An existing run, to finish its pending points (`--resume`)."""
        path = run_dir(root, run_id)
        manifest = read_manifest(path)
        self = cls.__new__(cls)
        self.root, self.run_id, self.path, self.final_path, self.staged = Path(root), run_id, path, path, False
        self.manifest = manifest
        self.manifest.update(status="running", pid=os.getpid(), host=socket.gethostname(), resumed_at=utcnow())
        self.write_manifest()
        return self

    def point_done(self, index: int) -> bool:
        """True when point `index` finished: marked ok, with its files on disk."""
        pts = self.manifest.get("points", [])
        if index >= len(pts) or pts[index].get("status") != "ok":
            return False
        files = pts[index].get("files") or {}
        return all(k in files and (self.path / files[k]).exists() for k in ("kernels", "ops", "steps"))

    def write_raw_trace(self, index: int, variant: str, raw: Path) -> str:
        """Keep torch.profiler's own trace beside the enriched one, gzipped."""
        import gzip

        path = self.path / "_chrome" / f"{point_stem(index, variant)}.raw.json.gz"
        atomic_write_bytes(path, gzip.compress(raw.read_bytes(), compresslevel=6))
        return str(path.relative_to(self.path))

    def finish(self, status: str) -> None:
        self.manifest["status"] = status
        self.manifest["finished_at"] = utcnow()
        self.write_manifest()
        if self.staged:
            self._publish()

    @property
    def published(self) -> bool:
        """Whether the run is visible under its id: a staged run once renamed into place (its id is new, so
        nothing else stands there), a direct one from the start."""
        return self.final_path.exists()

    def abort(self) -> None:
        """Remove a staged run not yet published (nothing of it was ever visible); a published one stays."""
        import shutil

        if self.staged and self.path != self.final_path and self.path.exists():
            shutil.rmtree(self.path, ignore_errors=True)


def point_stem(index: int, variant: str) -> str:
    return f"p{index:03d}-{slug(variant)}"


def write_point(run_path: Path, index: int, variant: str, tables: dict[str, Any], chrome: bytes | None) -> dict:
    """Write one finished point's tables and Chrome trace into a run folder; return its file map.

    Safe from several processes at once for different points (`wlprof ingest` of a rank folder).
    """
    stem = point_stem(index, variant)
    files: dict[str, str] = {}
    if chrome is not None:
        path = run_path / "_chrome" / f"{stem}.json.gz"
        atomic_write_bytes(path, chrome)
        files["chrome"] = str(path.relative_to(run_path))
    # the kernels file last: `pandas.read_parquet(traces)` never sees a point whose other
    # tables are missing (a process killed in between leaves only hidden-folder files)
    for table in sorted(tables, key=lambda t: t == "kernels"):
        sub = TABLE_DIRS[table]
        path = (run_path / sub / f"{stem}.parquet") if sub else (run_path / f"{stem}.parquet")
        path.parent.mkdir(exist_ok=True)  # a run written before the table existed (--resume)
        atomic_write_parquet(path, tables[table], table)
        files[table] = str(path.relative_to(run_path))
    return files


def read_manifest(path: Path) -> dict[str, Any]:
    try:
        data = jsonio.loads((path / MANIFEST).read_bytes())
    except FileNotFoundError:
        raise StoreError(f"{path} is not a wlprof run: it has no {MANIFEST}") from None
    except jsonio.JSONDecodeError as exc:
        raise StoreError(f"{path / MANIFEST} is not valid JSON ({exc})") from None
    _schema().check_version(data.get("schema_version", "0"), str(path / MANIFEST))
    return data


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def effective_status(manifest: dict[str, Any]) -> str:
    """'running' only while the writing process lives; a run whose writer died is 'incomplete'."""
    status = manifest.get("status", "unknown")
    if status == "running" and manifest.get("host") == socket.gethostname():
        pid = manifest.get("pid")
        if isinstance(pid, int) and not _pid_alive(pid):
            return "incomplete"
    return status


def list_runs(root: str | Path, skipped: list[str] | None = None) -> list[dict[str, Any]]:
    """Manifests of every run under `root`, oldest first (unreadable folders skipped; why, in `skipped`
    where it is given)."""
    root = Path(root)
    if not root.is_dir():
        return []
    runs = []
    for child in sorted(root.iterdir()):
        if child.name.startswith((".", "_")):
            continue  # staged (being written) or not a run
        if child.is_dir() and (child / MANIFEST).exists():
            try:
                m = read_manifest(child)
            except StoreError as exc:
                if skipped is not None:
                    skipped.append(str(exc))
                continue
            m["status"] = effective_status(m)
            m["_path"] = str(child)
            runs.append(m)
    runs.sort(key=lambda m: (m.get("created_at") or "", m.get("run_id")))
    return runs



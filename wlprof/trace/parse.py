"""Read a torch.profiler Chrome trace into typed event tables.

One parser for every trace: wlprof's own runs and foreign traces (`wlprof ingest`)
go through `read_trace`. Times become integer nanoseconds (Kineto writes
microseconds with nanosecond decimals; float microseconds near 5e12 keep about
one nanosecond of precision, integers keep it exactly).

Categories read (FIELD-NOTES, torch 2.11 on the H200 and 2.13 on the CPU):
- `cpu_op`: aten ops, with `External id` and, with record_shapes, their inputs;
- `user_annotation`: `record_function` regions and `ProfilerStep#N`;
- `cuda_runtime` / `cuda_driver`: API calls; launches carry `correlation`;
- `kernel`, `gpu_memcpy`, `gpu_memset`: device activity, with `correlation`.
Everything else (flows, python functions, metadata) is kept in `events` for the
enriched trace but not tabulated.
"""

from __future__ import annotations

import gzip
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from wlprof.errors import TraceFormatError
from wlprof.trace import jsonio

DEVICE_CATS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
LAUNCH_CATS = {"cuda_runtime", "cuda_driver"}
NO_ID = -1


@dataclass
class RawTrace:
    """The tables of one trace file, plus its raw events for writing an enriched copy."""

    path: str
    meta: dict[str, Any]
    events: list[dict]
    ops: pd.DataFrame  # cpu_op
    annotations: pd.DataFrame  # user_annotation
    launches: pd.DataFrame  # cuda_runtime / cuda_driver
    device: pd.DataFrame  # kernel / gpu_memcpy / gpu_memset
    warnings: list[str] = field(default_factory=list)

    @property
    def has_device_activity(self) -> bool:
        return len(self.device) > 0


def _ns(us) -> int:
    return int(round(float(us) * 1000.0))


def load_events(path: str | Path) -> tuple[dict, list[dict]]:
    """The trace's top-level metadata and its event list, or a TraceFormatError saying why not."""
    path = Path(path)
    try:
        data = jsonio.read_bytes(path)
    except FileNotFoundError:
        raise TraceFormatError(str(path), "no such file") from None
    except IsADirectoryError:
        raise TraceFormatError(str(path), "is a folder, not a trace file") from None
    except (gzip.BadGzipFile, EOFError, zlib.error, OSError) as exc:
        raise TraceFormatError(str(path), f"not a readable gzip file ({exc})") from None
    if not data.strip():
        raise TraceFormatError(str(path), "is empty")
    try:
        doc = jsonio.loads(data)
    except jsonio.JSONDecodeError as exc:
        pos = getattr(exc, "pos", None)
        where = f" at byte {pos}" if pos is not None else ""
        raise TraceFormatError(str(path), f"invalid JSON{where} ({exc})") from None
    except UnicodeDecodeError as exc:
        raise TraceFormatError(str(path), f"not UTF-8 text at byte {exc.start}") from None
    if isinstance(doc, list):  # the JSON Array Format of the Trace Event spec
        meta, events = {}, doc
    elif isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list):
        meta = {k: v for k, v in doc.items() if k != "traceEvents"}
        events = doc["traceEvents"]
    else:
        raise TraceFormatError(
            str(path), "not a Chrome trace: expected an object with a 'traceEvents' list"
        )
    return meta, events


def _int(v, default=NO_ID) -> int:
    if v is None:
        return default
    try:
        return int(v)
    except (TypeError, ValueError):
        return default


def _triple(v) -> tuple[int, int, int]:
    if isinstance(v, list) and len(v) == 3:
        try:
            return int(v[0]), int(v[1]), int(v[2])
        except (TypeError, ValueError):
            pass
    return (0, 0, 0)


def read_trace(path: str | Path) -> RawTrace:
    """Parse a Chrome trace written by torch.profiler into event tables."""
    meta, events = load_events(path)
    return tabulate(str(path), meta, events)


def tabulate(path: str, meta: dict, events: list) -> RawTrace:
    ops: dict[str, list] = {k: [] for k in ("idx", "name", "pid", "tid", "ts_ns", "dur_ns", "ext_id")}
    ann: dict[str, list] = {k: [] for k in ("idx", "name", "pid", "tid", "ts_ns", "dur_ns")}
    lau: dict[str, list] = {
        k: [] for k in ("idx", "name", "pid", "tid", "ts_ns", "dur_ns", "correlation", "ext_id")
    }
    dev_cols = ("idx", "kind", "name", "pid", "tid", "ts_ns", "dur_ns", "correlation", "ext_id",
                "stream", "device_index", "grid_x", "grid_y", "grid_z", "block_x", "block_y",
                "block_z", "registers_per_thread", "shared_memory_bytes", "blocks_per_sm",
                "warps_per_sm", "transfer_bytes")
    dev: dict[str, list] = {k: [] for k in dev_cols}
    skipped = 0
    for i, ev in enumerate(events):
        if not isinstance(ev, dict) or ev.get("ph") != "X":
            continue
        cat = ev.get("cat")
        try:
            ts, dur = _ns(ev["ts"]), _ns(ev.get("dur", 0))
        except (KeyError, TypeError, ValueError):
            skipped += 1
            continue
        args = ev.get("args")
        if not isinstance(args, dict):
            args = {}
        name = ev.get("name")
        if not isinstance(name, str):
            name = str(name)
        if cat == "cpu_op":
            ops["idx"].append(i)
            ops["name"].append(name)
            ops["pid"].append(ev.get("pid"))
            ops["tid"].append(ev.get("tid"))
            ops["ts_ns"].append(ts)
            ops["dur_ns"].append(dur)
            ops["ext_id"].append(_int(args.get("External id")))
        elif cat == "user_annotation":
            ann["idx"].append(i)
            ann["name"].append(name)
            ann["pid"].append(ev.get("pid"))
            ann["tid"].append(ev.get("tid"))
            ann["ts_ns"].append(ts)
            ann["dur_ns"].append(dur)
        elif cat in LAUNCH_CATS:
            lau["idx"].append(i)
            lau["name"].append(name)
            lau["pid"].append(ev.get("pid"))
            lau["tid"].append(ev.get("tid"))
            lau["ts_ns"].append(ts)
            lau["dur_ns"].append(dur)
            lau["correlation"].append(_int(args.get("correlation")))
            lau["ext_id"].append(_int(args.get("External id")))
        elif cat in DEVICE_CATS:
            gx, gy, gz = _triple(args.get("grid"))
            bx, by, bz = _triple(args.get("block"))
            dev["idx"].append(i)
            dev["kind"].append(DEVICE_CATS[cat])
            dev["name"].append(name)
            dev["pid"].append(ev.get("pid"))
            dev["tid"].append(ev.get("tid"))
            dev["ts_ns"].append(ts)
            dev["dur_ns"].append(dur)
            dev["correlation"].append(_int(args.get("correlation")))
            dev["ext_id"].append(_int(args.get("External id")))
            dev["stream"].append(_int(args.get("stream", ev.get("tid"))))
            dev["device_index"].append(_int(args.get("device", ev.get("pid"))))
            dev["grid_x"].append(gx)
            dev["grid_y"].append(gy)
            dev["grid_z"].append(gz)
            dev["block_x"].append(bx)
            dev["block_y"].append(by)
            dev["block_z"].append(bz)
            dev["registers_per_thread"].append(_int(args.get("registers per thread"), 0))
            dev["shared_memory_bytes"].append(_int(args.get("shared memory"), 0))
            dev["blocks_per_sm"].append(float(args.get("blocks per SM", np.nan) or 0.0))
            dev["warps_per_sm"].append(float(args.get("warps per SM", np.nan) or 0.0))
            dev["transfer_bytes"].append(_int(args.get("bytes"), 0))
    warnings = []
    if skipped:
        warnings.append(f"{skipped} complete events without a usable ts/dur were skipped")
    return RawTrace(
        path=path,
        meta=meta,
        events=events,
        ops=_frame(ops, ints=("idx", "ts_ns", "dur_ns", "ext_id")),
        annotations=_frame(ann, ints=("idx", "ts_ns", "dur_ns")),
        launches=_frame(lau, ints=("idx", "ts_ns", "dur_ns", "correlation", "ext_id")),
        device=_frame(dev, ints=("idx", "ts_ns", "dur_ns", "correlation", "ext_id", "stream",
                                 "device_index", "grid_x", "grid_y", "grid_z", "block_x",
                                 "block_y", "block_z", "registers_per_thread",
                                 "shared_memory_bytes", "transfer_bytes")),
        warnings=warnings,
    )


def _frame(cols: dict[str, list], ints: tuple[str, ...]) -> pd.DataFrame:
    df = pd.DataFrame(cols)
    for c in ints:
        df[c] = df[c].astype("int64") if len(df) else pd.Series([], dtype="int64")
    # pid/tid are ints in Kineto's output but strings in some viewers' traces
    for c in ("pid", "tid"):
        if c in df:
            df[c] = df[c].astype(str)
    return df

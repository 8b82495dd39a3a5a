"""Public traces: `wlprof ingest` on every trace under a folder, checked against the raw JSON.

For each trace file (*.json, *.json.gz, searched recursively), runs `wlprof.ingest.ingest` (the
command's own code, one process) into a scratch store and reports one row: whether it ingested
(or the error it gave), the device, the device rows (kernel, memcpy, memset, MTIA CCP) against
the raw device events counted by a plain `json` load of the file (ph X, or B for a begin/end
pair, of a device category), their summed time against the raw durations, the share of device
time joined to an op (has_op), the shares of kernel time with known FLOPs and known bytes (on a
CPU trace: of the working ops' self time), and the join methods used, with their row counts.

    python benchmarks/public_traces.py FOLDER [--markdown OUT.md] [--json OUT.json] [--sources SOURCES.tsv]

`--sources`: a tab-separated file of (file path relative to FOLDER, repository, path, commit) giving
each row its origin in the table.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# Device activity categories, as torch.profiler (and PyTorch 1.8-1.10) write them
RAW_DEVICE = {"kernel": "kernel", "Kernel": "kernel",
              "gpu_memcpy": "memcpy", "Memcpy": "memcpy", "gpu_memset": "memset", "Memset": "memset"}


def raw_kind(cat, name) -> str | None:
    """The kind of device row an event stands for, or None. MTIA's `mtia_ccp_events` are kernels, but
    `dma_request` (a copy) and `event_record`/`event_wait` (synchronization, no row)."""
    if cat == "mtia_ccp_events":
        return None if name in ("event_record", "event_wait") else "memcpy" if name == "dma_request" else "kernel"
    return RAW_DEVICE.get(cat) if isinstance(cat, str) else None


@dataclass
class Row:
    trace: str
    source: str = ""
    status: str = "ok"  # "ok", or the error `wlprof ingest` gave
    device: str = ""
    raw: dict = field(default_factory=dict)  # raw device events by kind
    raw_us: float = 0.0
    rows: dict = field(default_factory=dict)  # device rows by kind
    rows_us: float = 0.0
    cpu_rows: int = 0  # a CPU trace's working-op rows
    has_op: float = float("nan")
    flops_known: float = float("nan")
    bytes_known: float = float("nan")
    joins: dict = field(default_factory=dict)
    raw_error: str = ""  # the plain JSON load failed: the raw counts are unknown
    seconds: float = 0.0


def trace_paths(folder: Path) -> list[Path]:
    """Every *.json and *.json.gz file under `folder`, sorted."""
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.name.endswith((".json", ".json.gz")))


def raw_device_events(path: Path) -> tuple[dict, float]:
    """The device events of a trace by kind and their summed duration (µs), from a plain json load."""
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    doc = json.loads(data.decode("utf-8-sig"))
    events = doc.get("traceEvents", []) if isinstance(doc, dict) else doc
    counts: dict[str, int] = {}
    total = 0.0
    open_at: dict[tuple, list] = {}
    for e in events if isinstance(events, list) else []:
        if not isinstance(e, dict):
            continue
        ph = e.get("ph")
        kind = raw_kind(e.get("cat"), e.get("name"))
        if kind is None:
            continue
        if ph == "X":
            counts[kind] = counts.get(kind, 0) + 1
            dur = e.get("dur", 0)
            total += float(dur) if isinstance(dur, (int, float)) else 0.0
        elif ph in ("B", "E"):  # a begin/end pair on one thread stands for one complete event
            key = (e.get("pid"), e.get("tid"))
            if ph == "B":
                open_at.setdefault(key, []).append(e.get("ts"))
            elif open_at.get(key):
                start = open_at[key].pop()
                counts[kind] = counts.get(kind, 0) + 1
                if isinstance(start, (int, float)) and isinstance(e.get("ts"), (int, float)):
                    total += float(e["ts"]) - float(start)
    return counts, total


def check(path: Path, source: str = "") -> Row:
    """One trace through `wlprof ingest`, beside its raw device events."""
    import wlprof
    from wlprof.ingest import ingest, stop_workers
    from wlprof.store.runs import MANIFEST

    row = Row(trace=path.name, source=source)
    try:
        row.raw, row.raw_us = raw_device_events(path)
    except Exception as exc:  # noqa: BLE001  (a file json cannot read: wlprof's verdict is still told)
        row.raw_error = f"{type(exc).__name__}: {str(exc)[:100]}"
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as store:
        try:
            result = ingest(path, traces=store, jobs=1)
        except Exception as exc:  # noqa: BLE001  (any refusal or crash is the finding)
            text = str(exc).splitlines()[0] if str(exc) else ""
            row.status = f"{type(exc).__name__}: {text[:220]}"
            row.seconds = time.perf_counter() - t0
            return row
        finally:
            stop_workers()
        k = wlprof.load(store)
        dev = json.loads((result.path / MANIFEST).read_text()).get("device") or {}
    row.seconds = time.perf_counter() - t0
    row.device = f"{dev.get('type')}: {dev.get('name')}"
    dev = k[k.kind.isin(["kernel", "memcpy", "memset"])]
    row.rows = {str(kind): int(n) for kind, n in dev.kind.value_counts().items()}
    row.rows_us = float(dev.dur_us.sum())
    row.cpu_rows = int((k.kind == "cpu_op").sum())
    work = dev[dev.kind == "kernel"] if len(dev) else k[k.kind == "cpu_op"]
    if len(dev) and dev.dur_us.sum() > 0:
        row.has_op = float(dev.dur_us[dev.has_op].sum() / dev.dur_us.sum())
    if len(work) and work.dur_us.sum() > 0:
        us = work.dur_us.sum()
        row.flops_known = float(work.dur_us[work.flops.notna()].sum() / us)
        row.bytes_known = float(work.dur_us[work["bytes"].notna()].sum() / us)
    row.joins = {str(m): int(n) for m, n in dev.join_method.value_counts().items()}
    return row


def _pct(x: float) -> str:
    return "—" if x != x else f"{100 * x:.1f}%"


def _counts(d: dict) -> str:
    return "/".join(str(d.get(k, 0)) for k in ("kernel", "memcpy", "memset"))


def equal(r: Row) -> bool:
    """Whether the device rows are the raw device events, in number by kind and in summed time: to 1e-6,
    or to half a nanosecond per event, where a file writes durations finer than the whole nanoseconds
    wlprof keeps (no profiler clock measures them; a rescaled or converted trace writes them)."""
    rounding = 0.0005 * sum(r.raw.values())
    return (not r.raw_error and r.rows == {k: v for k, v in r.raw.items() if v}
            and abs(r.rows_us - r.raw_us) <= max(1e-6 * max(r.raw_us, 1.0), rounding))


def render(rows: list[Row]) -> str:
    """The markdown table of `rows`."""
    out = ["| # | trace | source | ingest | device | raw kernel/memcpy/memset | rows | rows = raw | has_op "
           "| FLOPs known | bytes known | joins |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for i, r in enumerate(rows, 1):
        raw = r.raw_error or f"{_counts(r.raw)} ({r.raw_us:,.3f} µs)"
        if r.status != "ok":
            out.append(f"| {i} | `{r.trace}` | {r.source} | {r.status} | | {raw} | | | | | | |")
            continue
        rows_text = f"{_counts(r.rows)} ({r.rows_us:,.3f} µs)" + (f"; {r.cpu_rows} cpu_op" if r.cpu_rows else "")
        joins = ", ".join(f"{m} {n}" for m, n in sorted(r.joins.items())) or "—"
        out.append(f"| {i} | `{r.trace}` | {r.source} | ok | {r.device} | {raw} | {rows_text} | "
                   f"{'yes' if equal(r) else '**no**'} | {_pct(r.has_op)} | {_pct(r.flops_known)} | "
                   f"{_pct(r.bytes_known)} | {joins} |")
    return "\n".join(out)


def _sources(path: Path | None) -> dict[str, str]:
    if path is None:
        return {}
    out = {}
    for line in path.read_text().splitlines():
        parts = line.split("\t")
        if len(parts) == 4 and not line.startswith("#"):
            out[parts[0]] = f"{parts[1]} `{parts[2]}` @ {parts[3][:12]}"
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", type=Path, help="a folder of traces (searched recursively)")
    ap.add_argument("--markdown", type=Path, help="also write the table to this file")
    ap.add_argument("--json", type=Path, help="also write the rows as JSON")
    ap.add_argument("--sources", type=Path, help="TSV of (relative file, repository, path, commit)")
    a = ap.parse_args(argv)
    if not a.folder.is_dir():
        ap.error(f"FOLDER must be an existing folder of traces (got {str(a.folder)!r})")
    src = _sources(a.sources)
    rows = []
    for p in trace_paths(a.folder):
        rel = str(p.relative_to(a.folder))
        r = check(p, src.get(rel, ""))
        rows.append(r)
        print(f"{rel}: {r.status} ({r.seconds:.1f} s)", file=sys.stderr)
    table = render(rows)
    print(table)
    if a.markdown:
        a.markdown.write_text(table + "\n")
    if a.json:
        a.json.write_text(json.dumps([asdict(r) for r in rows], indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

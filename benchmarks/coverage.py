"""Cost coverage: the share of kernel time whose bytes and FLOPs wlprof knows, per trace.

For every trace given (a file, or a folder searched for *.json / *.json.gz), runs the
pipeline's join, attribution and costs (no ceilings: coverage does not depend on them)
and prints one row: kernels (events of category `kernel`), kernel time, the share of that
time on kernels with known bytes and with known FLOPs, and the ops that launched the
uncosted (bytes unknown) kernel time, largest first. A trace that does not parse (streamed,
then whole) is listed with the reason. Memcpys and memsets are left out of the shares (they are costed
by the bytes the trace records whenever their op has no formula).

    python benchmarks/coverage.py TRACE_OR_FOLDER... [--top 5] [--markdown OUT.md]
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


@dataclass
class Row:
    trace: str
    kernels: int = 0
    kernel_us: float = 0.0
    bytes_known: float = float("nan")
    flops_known: float = float("nan")
    inductor: float = 0.0  # share of kernel time costed from Inductor's metadata
    top: list[tuple[str, float]] = field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0


def traces(paths: list[str]) -> list[Path]:
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            out += sorted(q for q in p.rglob("*") if q.is_file() and (q.name.endswith(".json")
                                                                       or q.name.endswith(".json.gz")))
        else:
            out.append(p)
    return out


def coverage(path: Path, top: int = 5) -> Row:
    from wlprof.errors import TraceFormatError
    from wlprof.pipeline import costed, read

    row = Row(trace=path.name)
    t0 = time.perf_counter()
    try:
        try:
            trace = read(path, keep_events=False)  # streamed, as `wlprof ingest` reads
        except TraceFormatError:
            trace = read(path, keep_events=True)  # a layout the streaming reader refuses: parse it whole
        k = costed(trace).kernels
    except Exception as exc:  # noqa: BLE001  (a foreign trace may fail anywhere; report it)
        row.error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"
        row.seconds = time.perf_counter() - t0
        return row
    row.seconds = time.perf_counter() - t0
    kk = k[k.kind == "kernel"]
    row.kernels = len(kk)
    row.kernel_us = float(kk.dur_us.sum())
    if row.kernel_us > 0:
        row.bytes_known = float(kk.dur_us[kk["bytes"].notna()].sum()) / row.kernel_us
        row.flops_known = float(kk.dur_us[kk.flops.notna()].sum()) / row.kernel_us
        row.inductor = float(kk.dur_us[kk.flops_source == "inductor"].sum()) / row.kernel_us
        unknown = kk[kk["bytes"].isna()]
        by_op = unknown.dur_us.groupby(unknown.op_name.fillna("(no op)")).sum().sort_values(ascending=False)
        row.top = [(str(name), float(us) / row.kernel_us) for name, us in by_op.head(top).items()]
    return row


def _pct(x: float) -> str:
    return "—" if x != x else f"{100 * x:.1f}%"


def render(rows: list[Row]) -> str:
    lines = ["| trace | kernels | kernel µs | bytes known | FLOPs known | from Inductor | top uncosted ops (share of kernel time) |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        if r.error:
            lines.append(f"| `{r.trace}` | — | — | — | — | — | does not parse: {r.error} |")
            continue
        top = ", ".join(f"`{n}` {_pct(s)}" for n, s in r.top) or "—"
        lines.append(f"| `{r.trace}` | {r.kernels} | {r.kernel_us:,.1f} | {_pct(r.bytes_known)} | "
                     f"{_pct(r.flops_known)} | {_pct(r.inductor)} | {top} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("traces", nargs="+", help="trace files or folders")
    ap.add_argument("--top", type=int, default=5, help="uncosted ops listed per trace")
    ap.add_argument("--markdown", type=Path, help="also write the table to this file")
    a = ap.parse_args(argv)
    rows = []
    for p in traces(a.traces):
        r = coverage(p, a.top)
        rows.append(r)
        status = r.error or f"bytes {_pct(r.bytes_known)}, FLOPs {_pct(r.flops_known)}"
        print(f"{p}: {status} ({r.seconds:.1f} s)", file=sys.stderr)
    table = render(rows)
    print(table)
    if a.markdown:
        a.markdown.write_text(table + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

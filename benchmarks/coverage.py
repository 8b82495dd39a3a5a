"""Cost coverage: the share of kernel time whose bytes and FLOPs wlprof knows, per trace.

For every trace given (a file, or a folder searched for *.json / *.json.gz but *.flops.json), runs the
pipeline's join, attribution and costs (no ceilings: coverage does not depend on them)
and prints one row: kernels (events of category `kernel`; in a CPU trace, the ops that do
work of their own, with their self time), kernel time, the share of that
time on kernels with known bytes and with known FLOPs, and the ops that launched the
uncosted (bytes unknown) kernel time, largest first. A trace that does not parse (streamed,
then whole) is listed with the reason. Memcpys and memsets are left out of the shares (they are costed
by the bytes the trace records whenever their op has no formula).

    python benchmarks/coverage.py TRACE_OR_FOLDER... [--top 5] [--markdown OUT.md] [--json OUT.json]
                                  [--baseline EARLIER.json]
    python benchmarks/coverage.py --inductor TRACE   # Triton launches: buffer bytes vs Inductor's kernel_num_gb
"""

from __future__ import annotations

import argparse
import json
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
    top_no_flops: list[tuple[str, float]] = field(default_factory=list)  # bytes known, FLOPs not
    error: str | None = None
    seconds: float = 0.0


def traces(paths: list[str]) -> list[Path]:
    """The trace files named or found in the folders named (a folder's FlopCounterMode counts, NAME.flops.json
    beside NAME.json.gz as the capture scripts write them, are not traces)."""
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            out += sorted(q for q in p.rglob("*") if q.is_file() and (q.name.endswith(".json")
                                                                       or q.name.endswith(".json.gz"))
                          and not q.name.endswith(".flops.json"))
        else:
            out.append(p)
    return out


def coverage(path: Path, top: int = 5) -> Row:
    from wlprof.errors import TraceFormatError
    from wlprof.ingest import unknown_labels
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
    kk = k[k.kind.isin(("kernel", "cpu_op"))]  # a CPU trace's rows are its working ops
    row.kernels = len(kk)
    row.kernel_us = float(kk.dur_us.sum())
    if row.kernel_us > 0:
        row.bytes_known = float(kk.dur_us[kk["bytes"].notna()].sum()) / row.kernel_us
        row.flops_known = float(kk.dur_us[kk.flops.notna()].sum()) / row.kernel_us
        row.inductor = float(kk.dur_us[kk.flops_source == "inductor"].sum()) / row.kernel_us
        unknown = kk[kk["bytes"].isna()]
        by_op = unknown.dur_us.groupby(unknown_labels(unknown)).sum().sort_values(ascending=False)
        row.top = [(str(name), float(us) / row.kernel_us) for name, us in by_op.head(top).items()]
        no_flops = kk[kk["bytes"].notna() & kk.flops.isna()]
        kind = no_flops.op_name.fillna("(no op)").map(lambda n: "Triton kernels" if n.startswith("triton_") else n)
        by_kind = no_flops.dur_us.groupby(kind).sum().sort_values(ascending=False)
        row.top_no_flops = [(str(name), float(us) / row.kernel_us) for name, us in by_kind.head(top).items()]
    return row


def _pct(x: float) -> str:
    return "—" if x != x else f"{100 * x:.1f}%"


def render(rows: list[Row], baseline: dict[str, dict] | None = None) -> str:
    """The table; with `baseline` (rows of an earlier run by trace name), shares as 'before -> after'."""
    lines = ["| trace | kernels | kernel µs | bytes known | FLOPs known | from Inductor | top uncosted ops "
             "(share of kernel time) | bytes but no FLOPs |", "|---|---|---|---|---|---|---|---|"]

    def share(r: Row, key: str) -> str:
        b = (baseline or {}).get(r.trace)
        now = _pct(getattr(r, key))
        return f"{_pct(b[key])} → {now}" if b and not b.get("error") else now

    for r in rows:
        if r.error:
            lines.append(f"| `{r.trace}` | — | — | — | — | — | does not parse: {r.error} | |")
            continue
        top = ", ".join(f"`{n}` {_pct(s)}" for n, s in r.top) or "—"
        no_flops = ", ".join(f"{n} {_pct(s)}" if n == "Triton kernels" else f"`{n}` {_pct(s)}"
                             for n, s in r.top_no_flops) or "—"
        lines.append(f"| `{r.trace}` | {r.kernels} | {r.kernel_us:,.1f} | {share(r, 'bytes_known')} | "
                     f"{share(r, 'flops_known')} | {_pct(r.inductor)} | {top} | {no_flops} |")
    return "\n".join(lines)


def inductor_bytes(path: Path) -> str:
    """Per Triton launch of a trace recorded with benchmark_kernel: wlprof's buffer estimate (each
    tensor argument once) against Inductor's kernel_num_gb, with each launch's kernel time."""
    import numpy as np

    from wlprof.cost.inductor import buffer_bytes
    from wlprof.cost.registry import OpCall
    from wlprof.pipeline import costed, read

    c = costed(read(path))
    ops, k = c.joined.ops, c.kernels
    args = c.joined.trace.args_table
    rows = []
    for pos in np.flatnonzero(ops.name.str.startswith("triton_").to_numpy()):
        a = args[ops.args_id.iloc[pos]]
        if a.get("kernel_backend") != "triton" or not a.get("kernel_num_gb"):
            continue
        ind = a["kernel_num_gb"] * 1e9
        est = buffer_bytes(OpCall.from_args(ops.name.iloc[pos], a))
        rows.append((ops.name.iloc[pos], est, ind, float(k.dur_us[k._op_pos == pos].sum())))
    if not rows:
        return f"{path.name}: no Triton launch with kernel_num_gb"
    est, ind, dur = (np.array([r[i] for r in rows]) for i in (1, 2, 3))
    exact = np.isclose(est, ind, rtol=1e-9)
    lines = [f"{path.name}: {len(rows)} Triton launches with kernel_num_gb",
             f"- buffer bytes equal Inductor's for {exact.sum()} of {len(rows)} launches "
             f"({dur[exact].sum() / dur.sum():.1%} of their kernel time)",
             f"- over all launches the buffer bytes are {est.sum() / ind.sum():.1%} of Inductor's; "
             f"per launch the ratio runs {np.min(est / ind):.3f} to {np.max(est / ind):.3f}",
             "", "| kernel | launches | buffer bytes | Inductor's bytes | ratio |", "|---|---|---|---|---|"]
    seen: dict[tuple, int] = {}
    for name, e, i, _ in rows:
        if not np.isclose(e, i, rtol=1e-9):
            seen[(name, e, i)] = seen.get((name, e, i), 0) + 1
    for (name, e, i), n in seen.items():
        lines.append(f"| `{name}` | {n} | {e:,.0f} | {i:,.0f} | {e / i:.3f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("traces", nargs="+", help="trace files or folders")
    ap.add_argument("--top", type=int, default=5, help="uncosted ops listed per trace")
    ap.add_argument("--markdown", type=Path, help="also write the table to this file")
    ap.add_argument("--json", type=Path, help="also write the rows as JSON")
    ap.add_argument("--baseline", type=Path, help="rows of an earlier run (--json): shares shown as before -> after")
    ap.add_argument("--inductor", action="store_true",
                    help="compare the buffer estimate with Inductor's kernel_num_gb on each trace instead")
    a = ap.parse_args(argv)
    if a.inductor:
        for p in traces(a.traces):
            print(inductor_bytes(p))
        return 0
    rows = []
    for p in traces(a.traces):
        r = coverage(p, a.top)
        rows.append(r)
        status = r.error or f"bytes {_pct(r.bytes_known)}, FLOPs {_pct(r.flops_known)}"
        print(f"{p}: {status} ({r.seconds:.1f} s)", file=sys.stderr)
    baseline = None
    if a.baseline:
        baseline = {r["trace"]: r for r in json.loads(a.baseline.read_text())}
    table = render(rows, baseline)
    print(table)
    if a.markdown:
        a.markdown.write_text(table + "\n")
    if a.json:
        a.json.write_text(json.dumps([r.__dict__ for r in rows], indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""`--ceilings datasheet` on every public trace: which sheet each GPU gets, and what it places.

For each trace under a folder (or each folder of per-rank traces directly under it), ingests it twice
into scratch stores with an empty ceilings cache (`wlprof.ingest.ingest`, the command's own code): as
is, and with `--ceilings datasheet`. One markdown row per trace: the GPU, the sheet matched (or why
none), the share of kernel time placed on the roofline before and after, and the distribution of the
placed kernels' fractions: quantiles weighted by kernel time, how many above 1 and their notes.

    python benchmarks/datasheet_roofline.py tests/fixtures/public [--markdown OUT.md]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def _targets(folder: Path) -> list[Path]:
    files = sorted(p for p in folder.iterdir() if p.is_file() and p.name.endswith((".json", ".json.gz")))
    return files + sorted(p for p in folder.iterdir() if p.is_dir())


def _placed_share(k) -> float:
    total = k.dur_us.sum()
    return float(k.dur_us[k.roofline_fraction.notna()].sum() / total) if total > 0 else float("nan")


def _weighted_quantiles(frac, w, qs=(0.1, 0.5, 0.9)) -> list[float]:
    import numpy as np

    order = np.argsort(frac)
    f, cw = frac[order], np.cumsum(w[order])
    return [float(f[np.searchsorted(cw, q * cw[-1])]) for q in qs]


def row(path: Path, scratch: Path) -> dict:
    import wlprof
    from wlprof.errors import WlprofError
    from wlprof.ingest import ingest
    from wlprof.store.runs import read_manifest

    out: dict = {"trace": path.name}
    try:
        res = ingest(path, scratch / "plain", jobs=1)
    except WlprofError as exc:
        return {**out, "gpu": "-", "sheet": f"not ingested: {str(exc)[:80]}"}
    m = read_manifest(res.path)
    dev = m.get("device") or {}
    out["gpu"] = f"{dev.get('name')} ({dev.get('type')})"
    k = wlprof.load(scratch / "plain", run_id=res.run_id)
    out["before"] = _placed_share(k)
    try:
        res2 = ingest(path, scratch / "ds", jobs=1, ceilings_file="datasheet")
    except WlprofError as exc:
        rule = getattr(exc, "rule", str(exc))
        return {**out, "sheet": "none (refused: " + str(rule).split(";")[0].split(": ", 1)[-1] + ")"}
    c = read_manifest(res2.path)["ceilings"]
    out["sheet"] = f"{c['method']['datasheet']} ({c['copy_gbps']:,.0f} GB/s)"
    k2 = wlprof.load(scratch / "ds", run_id=res2.run_id)
    out["after"] = _placed_share(k2)
    placed = k2[k2.roofline_fraction.notna() & (k2.dur_us > 0)]
    out["kernels"] = len(placed)
    if len(placed):
        out["q"] = _weighted_quantiles(placed.roofline_fraction.to_numpy(), placed.dur_us.to_numpy())
        above = placed[placed.roofline_fraction > 1]
        notes = Counter(n for v in above.roof_note.dropna() for n in v.split(",") if n != "datasheet")
        out["above"] = len(above)
        out["above_notes"] = ", ".join(f"{n} {c}" for n, c in notes.most_common()) or "-"
        out["above_ops"] = ", ".join(f"{o} {c}" for o, c in Counter(above.op_name.fillna("(no op)")).most_common(3))
    return out


def markdown(rows: list[dict]) -> str:
    def pct(v):
        return "-" if v is None or v != v else f"{v:.1%}"

    lines = ["| trace | GPU (type) | sheet matched | kernel time placed: before | after | placed kernels | "
             "fraction p10 / p50 / p90 (time-weighted) | above 1 | their notes | their ops |",
             "|---|---|---|---:|---:|---:|---|---:|---|---|"]
    for r in rows:
        q = " / ".join(f"{v:.3f}" for v in r["q"]) if r.get("q") else "-"
        lines.append(f"| `{r['trace']}` | {r['gpu']} | {r['sheet']} | {pct(r.get('before'))} | {pct(r.get('after'))} "
                     f"| {r.get('kernels', '-')} | {q} | {r.get('above', '-')} | {r.get('above_notes', '-')} "
                     f"| {r.get('above_ops', '-')} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--markdown", type=Path)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["WLPROF_CACHE_DIR"] = str(Path(tmp) / "cache")  # no measured ceilings for any device
        rows = []
        for i, p in enumerate(_targets(args.folder)):
            rows.append(row(p, Path(tmp) / str(i)))
            print(rows[-1], file=sys.stderr)
    text = markdown(rows)
    if args.markdown:
        args.markdown.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`wlprof roofline RUN... -o roofline.png`: every op call of the runs on the measured roofline."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from wlprof.cli.common import handle_errors
from wlprof.cli.options import DEFAULT_TRACES, AllowMixed, CeilingsChoice, Traces, epilog

EXAMPLES = epilog("wlprof roofline RUN_ID", "wlprof roofline RUN_A RUN_B -o roofline.png",
                  "wlprof roofline RUN_ID --ceilings current")


@handle_errors
def roofline(
    runs: Annotated[list[str], typer.Argument(help="Run ids.")],
    output: Annotated[Path, typer.Option("--out", "-o", help="PNG file to write.")] = Path("roofline.png"),
    traces: Traces = DEFAULT_TRACES,
    allow_mixed_devices: AllowMixed = False,
    ceilings: CeilingsChoice = "run",
) -> None:
    """Draw the hierarchical roofline (measured ceilings: memory and cache roofs, a compute roof per dtype)
    with every op call as a point, those above their roof marked by their reason."""
    from wlprof.analysis.families import add_family
    from wlprof.cli.placement import place
    from wlprof.cli.report_files import _save
    from wlprof.errors import InputError
    from wlprof.plots import figures
    from wlprof.store.runs import check_writable_file
    from wlprof.store.selection import load_runs, split_runs

    ids = split_runs(runs)
    if output.suffix.lower() != ".png":
        raise InputError("--out", "must be a .png file", str(output))
    check_writable_file(output, "--out", "a .png file", "the figure")
    ops = load_runs(traces, "ops", ids, "RUNS", None, allow_mixed_devices)
    placed = place(traces, ceilings, ops)
    for line in placed.findings:
        typer.echo(f"ceilings: {line}")
    fig = figures.roofline(add_family(placed.ops), placed.lines_ceilings or {}, f"Roofline: {', '.join(ids)}")
    _save(fig, output)
    typer.echo(f"wrote {output} ({placed_summary(placed.ops)})")


def placed_summary(o) -> str:
    """'3019 of 4899 op calls placed; ...; above their roof: 63 cache_fit': the op calls the figure draws
    (FLOPs, bytes and kernel time all positive), and of those the ones above their roof by reason."""
    import numpy as np
    import pandas as pd

    num = {c: pd.to_numeric(o[c], errors="coerce") if c in o else pd.Series(np.nan, index=o.index)
           for c in ("flops", "bytes", "dur_us")}
    drawn = (num["flops"] > 0) & (num["bytes"] > 0) & (num["dur_us"] > 0)
    shown = int(drawn.sum())
    unshaped = "op_input_dims" not in o or not o.op_input_dims.fillna("").astype(str).str.strip("[] ").ne("").any()
    lack = ("; the trace recorded no shapes: profile with record_shapes=True" if unshaped else
            "; the others have no FLOPs, bytes or kernel time") if shown < len(o) else ""
    why = above_roof_counts(o[drawn])  # a 0-FLOP copy above its memory roof has no point on a FLOP axis
    return f"{shown} of {len(o)} op calls placed{lack}" + (f"; above their roof: {why}" if why else "")


def above_roof_counts(ops) -> str:
    """'12 ceiling_stale, 2 cache_fit': the op calls above their roof, counted by the reasons they carry
    (placement notes such as l3_resident left out); empty when none is above."""
    from wlprof.cli.render import above_roof_text

    if "roofline_fraction" not in ops or not len(ops):
        return ""
    above = ops[ops.roofline_fraction > 1]
    notes = above.roof_note if "roof_note" in above else [None] * len(above)
    counts = {}
    for frac, note in zip(above.roofline_fraction, notes, strict=True):
        key = above_roof_text(frac, note)
        counts[key] = counts.get(key, 0) + 1
    return ", ".join(f"{n:,} {k}" for k, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))

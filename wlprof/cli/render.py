"""Rich tables of wlprof's DataFrames. Presentation only: nothing here computes a number."""

from __future__ import annotations

import math

import pandas as pd


def _num(v, fmt: str = "{:,.1f}") -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return fmt.format(v)


def _si(v, unit: str = "") -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    for div, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= div:
            return f"{v / div:.2f} {suffix}{unit}"
    return f"{v:.0f} {unit}".strip()


def above_roof_why(frac, note) -> str:
    """The reasons a fraction above 1 carries (from its roof notes); '' at or below the roof."""
    from wlprof.ceilings import ABOVE_ROOF_NOTES

    if frac is None or not (frac == frac) or frac <= 1:
        return ""
    notes = [n for n in str(note or "").split(",") if n in ABOVE_ROOF_NOTES]
    return ",".join(notes) if notes else "[red]no reason recorded[/red]"


def steps_table(steps: pd.DataFrame, title: str):
    """Per variant: the three timings, the kernel time, costs, rates and roofline placement."""
    from rich.table import Table

    t = Table(title=title, title_justify="left", show_lines=False)
    # where a workload's useful FLOPs differ from what its kernels ran (MoE padding, routing),
    # show the rate against both
    ok = steps[steps.get("status", pd.Series("ok", index=steps.index)).fillna("ok") != "failed"]
    useful = "useful_flops" in ok and (ok.useful_flops.fillna(0) != ok.flops.fillna(0)).any()
    cols = [("variant", "left"), ("latency\n1 call µs", "right"), ("back-to-back\nµs/step", "right"),
            ("graph\nµs/step", "right"), ("kernels\nµs/step", "right"), ("FLOPs", "right"), ("bytes", "right"),
            ("TFLOP/s", "right")]
    if useful:
        cols += [("useful\nFLOPs", "right"), ("TFLOP/s\nuseful", "right"), ("TFLOP/s\nexecuted", "right")]
    cols += [("GB/s", "right"), ("FLOP/B", "right"), ("bound", "left"), ("roofline", "right"),
             ("above roof: why", "left")]
    for col, justify in cols:
        t.add_column(col, justify=justify)
    for _, r in steps.iterrows():
        if r.get("status") == "failed":
            t.add_row(str(r["variant"]), f"[red]failed: {r.get('error')}[/red]", *[""] * (len(cols) - 2))
            continue
        frac = r["roofline_fraction"]
        row = [str(r["variant"]), _num(r["latency_us"]), _num(r["back_to_back_us"]), _num(r.get("graph_us")),
               _num(r["kernel_us"]), _si(r["flops"]), _si(r["bytes"], "B"), _num(r["achieved_tflops"], "{:,.2f}")]
        if useful:
            row += [_si(r["useful_flops"]), _num(r.get("achieved_tflops_useful"), "{:,.2f}"),
                    _num(r.get("achieved_tflops_executed"), "{:,.2f}")]
        row += [_num(r["achieved_gbps"], "{:,.0f}"), _num(r["intensity_flop_per_byte"], "{:,.2f}"),
                str(r["bound"] or "-"), _num(100 * frac if frac == frac else None, "{:.0f}%"),
                above_roof_why(frac, r.get("roof_note"))]
        t.add_row(*row)
    return t


def kernel_table(summary: pd.DataFrame, title: str):
    from rich.table import Table

    t = Table(title=title, title_justify="left")
    for col, justify in [("op", "left"), ("kernel", "left"), ("region", "left"), ("n/step", "right"),
                         ("µs/step", "right"), ("share", "right"), ("FLOPs", "right"), ("bytes", "right"),
                         ("TFLOP/s", "right"), ("GB/s", "right"), ("FLOP/B", "right"), ("bound", "left"),
                         ("roof", "left"), ("roofline", "right"), ("roof note", "left"), ("source", "left")]:
        t.add_column(col, justify=justify, overflow="fold" if col == "kernel" else "ellipsis")
    for _, r in summary.iterrows():
        frac = r["roofline_fraction"]
        t.add_row(
            str(r["op_name"] or "-"), str(r["kernel"]), str(r["region"] or "-"), _num(r["count_per_step"], "{:.0f}"),
            _num(r["dur_us_per_step"]), _num(100 * r["time_share"], "{:.0f}%"), _si(r["flops_per_step"]),
            _si(r["bytes_per_step"], "B"), _num(r["achieved_tflops"], "{:,.2f}"), _num(r["achieved_gbps"], "{:,.0f}"),
            _num(r["intensity_flop_per_byte"], "{:,.2f}"), str(r["bound"] or "-"), str(r.get("roof") or "-"),
            _num(100 * frac if frac == frac else None, "{:.0f}%"), _note(frac, r.get("roof_note")),
            str(r["flops_source"]),
        )
    return t


def _note(frac, note) -> str:
    """A row's roof notes, with a warning where its fraction is above 1 and none explains it."""
    text = note if isinstance(note, str) else ""
    why = above_roof_why(frac, note)
    return f"{text} {why}".strip() if why.startswith("[red]") else text


def runs_table(runs: pd.DataFrame):
    from rich.table import Table

    t = Table(title=None)
    for col in ("run_id", "workload", "device", "dtype", "points", "status", "created (UTC)"):
        t.add_column(col)
    for _, r in runs.iterrows():
        colour = {"complete": "green", "running": "yellow", "incomplete": "red", "failed": "red",
                  "partial": "yellow"}.get(r["status"], "white")
        t.add_row(r["run_id"], r["workload"], r["device"], r["dtype"], r["points"],
                  f"[{colour}]{r['status']}[/{colour}]", r["created"])
    return t

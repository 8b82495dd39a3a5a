"""Rich tables of wlprof's DataFrames that fit the terminal. Presentation only: nothing here computes a number.

Every table is a list of `Col`s with a priority. At the console's width (100 characters where the
output is no terminal and COLUMNS is unset) the lowest-priority columns are dropped until the table fits, and the
table says which ones `--wide` would show; long text columns wrap rather than being cut. Numbers keep
three significant digits, and a column's unit follows its values' magnitude (µs, ms or s; GFLOP/s
below 1 TFLOP/s, so a CPU's rates do not read 0.00).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the tables of a command that loaded no DataFrame (the ingest summary) need no pandas
    import pandas as pd

MIN_WIDTH = 100  # the width a table is fitted to where no width is given (the output is not a terminal)


def _missing(v) -> bool:
    if v is None:
        return True
    pandas = sys.modules.get("pandas")  # a value can only be pandas.NA where pandas is loaded
    if pandas is not None and v is pandas.NA:
        return True
    try:
        return bool(isinstance(v, float) and math.isnan(v))
    except TypeError:
        return False


def sig(v, digits: int = 3) -> str:
    """`digits` significant digits below 1,000 (42.0, 4.27, 0.123), whole numbers with thousands separators
    from there (162,356), and 1.2e-05 below 0.001."""
    if _missing(v):
        return "-"
    v = float(v)
    if not math.isfinite(v):
        return "inf" if v > 0 else "-inf"
    if v == 0:
        return "0"
    if abs(v) >= 10 ** (digits - 1) * 10 or abs(v) >= 1000:
        return f"{v:,.0f}"
    if abs(v) < 1e-3:
        return f"{v:.2g}"
    decimals = digits - 1 - math.floor(math.log10(abs(v)))
    return f"{v:,.{max(decimals, 0)}f}"


def integer(v) -> str:
    return "-" if _missing(v) else f"{float(v):,.0f}"


def percent(v) -> str:
    """A fraction as a percentage: 17%, 0.6%, 0.01%."""
    if _missing(v):
        return "-"
    p = 100 * float(v)
    if p != 0 and abs(p) < 0.01:
        return "<0.01%" if p > 0 else ">-0.01%"
    if p != 0 and abs(p) < 1:
        return f"{sig(p, 1)}%"
    return f"{p:,.0f}%"


def ratio(v) -> str:
    """A ratio of two times: 163x, 1.41x."""
    if _missing(v):
        return "-"
    return f"{sig(v)}x" if math.isfinite(float(v)) else "-"


def coef(v) -> str:
    """A correlation or an R²: two decimals (an R² of -2.22e-16 is 0.00); text (why there is none) as is."""
    if _missing(v):
        return "-"
    if isinstance(v, str):
        return v
    text = f"{float(v):.2f}"
    return "0.00" if text == "-0.00" else text


def si(v, unit: str = "") -> str:
    """1.23 G, 21.5 GB: three significant digits with an SI prefix."""
    if _missing(v):
        return "-"
    v = float(v)
    for div, suffix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= div:
            return f"{sig(v / div)} {suffix}{unit}"
    return f"{sig(v)} {unit}".strip()


TIME_UNITS = ((1.0, "µs"), (1e3, "ms"), (1e6, "s"))
RATE_UNITS = ((1e-3, "GFLOP/s"), (1.0, "TFLOP/s"))  # values given in TFLOP/s


def unit_for(values, units=TIME_UNITS) -> tuple[float, str]:
    """The unit that puts the column's largest value under 10,000 (the first unit when all are missing)."""
    xs = [abs(float(v)) for v in values if not _missing(v) and math.isfinite(float(v))]
    top = max(xs) if xs else 0.0
    for scale, name in units:  # the smallest unit in which the largest value stays below 10,000
        if top / scale < 1e4:
            return scale, name
    return units[-1]


def rate_unit(values_tflops) -> tuple[float, str]:
    """GFLOP/s when the column's largest rate is below 1 TFLOP/s (a CPU), else TFLOP/s (a GPU)."""
    xs = [float(v) for v in values_tflops if not _missing(v) and math.isfinite(float(v))]
    return (1e-3, "GFLOP/s") if not xs or max(xs) < 1 else (1.0, "TFLOP/s")


@dataclass
class Col:
    header: str
    cells: list[str]
    priority: int = 5  # higher stays longer
    justify: str = "right"
    wrap: int | None = None  # a text column that may wrap to this width instead of widening the table
    styles: list[str | None] | None = None  # a rich style per cell
    needs: Col | None = None  # a column this one is never shown without (a fraction above 100% and its reason)

    def natural(self) -> int:
        lines = [*self.header.split("\n"), *(x for c in self.cells for x in c.split("\n"))]
        return max((len(x) for x in lines), default=1)

    def least(self) -> int:
        if self.wrap is None:
            return self.natural()
        header = max((len(x) for x in self.header.split("\n")), default=1)
        return min(self.natural(), max(self.wrap, header))  # a long word folds: the cell wraps, nothing is cut


def one_line(header: str) -> str:
    """A two-line header on one line: 'roof-\\nline' -> 'roof-line', 'kernels\\nµs/step' -> 'kernels µs/step'."""
    return header.replace("-\n", "-").replace("/\n", "/").replace("\n", " ")


def fit(cols: Sequence[Col], width: int | None, wide: bool = False) -> tuple[list[tuple[Col, int]], list[str]]:
    """The columns that fit `width` (each with the width to give it) and the headers of those dropped."""
    cols = list(cols)
    # the console's own width, however narrow: a table wider than it would have rich squeeze a column to nothing
    width = (width or MIN_WIDTH) if not wide else 10**6
    kept = list(cols)

    def total(cs, sizes):
        return sum(sizes) + 3 * len(cs) + 1

    while True:
        sizes = [c.least() for c in kept]
        if total(kept, sizes) <= width or len(kept) <= 1:
            break
        droppable = [c for c in kept if c.priority < 10]
        if not droppable:
            break
        # a column wider than all the room the kept ones leave it can never fit: it goes first
        room = width - total([c for c in kept if c.priority >= 10], [c.least() for c in kept if c.priority >= 10])
        hopeless = [c for c in droppable if c.least() + 3 > room]
        victim = min(reversed(hopeless or droppable), key=lambda c: c.priority)  # lowest priority, rightmost first
        kept.remove(victim)
        kept = [c for c in kept if c.needs is None or any(c.needs is k for k in kept)]
    # give wrapping columns back the room that is left, up to their natural width
    sizes = [c.least() for c in kept]
    spare = width - total(kept, sizes)
    for i, c in enumerate(kept):
        if c.wrap is not None and spare > 0:
            grow = min(spare, c.natural() - sizes[i])
            sizes[i] += grow
            spare -= grow
    dropped = [one_line(c.header) for c in cols if c not in kept]
    return list(zip(kept, sizes, strict=True)), dropped


def table(cols: Sequence[Col], title: str | None = None, width: int | None = None, wide: bool = False,
          styles: list[str | None] | None = None):
    """A rich Table of the columns that fit, with a caption naming the columns left out."""
    from rich.table import Table

    chosen, dropped = fit(cols, width, wide)
    caption = (f"{len(dropped)} more column{'s' if len(dropped) > 1 else ''} with --wide: {', '.join(dropped)}"
               if dropped else None)
    t = Table(title=title, title_justify="left", caption=caption, caption_justify="left")
    for c, w in chosen:
        if c.wrap is not None:
            t.add_column(c.header, justify=c.justify, overflow="fold", max_width=w, min_width=min(w, c.least()))
        else:
            t.add_column(c.header, justify=c.justify, no_wrap=True, min_width=w)
    n = max((len(c.cells) for c, _ in chosen), default=0)
    from rich.text import Text

    for i in range(n):
        t.add_row(*[Text(c.cells[i], style=c.styles[i] or "") if c.styles else Text(c.cells[i])
                    for c, _ in chosen], style=styles[i] if styles else None)
    return t


def cells(values, fn: Callable) -> list[str]:
    return [fn(v) for v in values]


def _col(df: pd.DataFrame, name: str) -> list:
    return list(df[name]) if name in df else [None] * len(df)


def flagged(v) -> bool:
    """Whether a flag cell is set: True or numpy's True (a nullable boolean column); null is not."""
    numpy = sys.modules.get("numpy")  # a cell can only be numpy's bool where numpy is loaded
    return v is True or (numpy is not None and isinstance(v, numpy.bool_) and bool(v))


def _any(values) -> bool:
    return any(not _missing(v) for v in values)


def ceilings_text(c: dict) -> str:
    """The ceilings a run used, in one line; what the run says about them where none were measured."""
    matrix = c.get("matrix_tflops") or {}
    if not c.get("copy_gbps") and not matrix:
        return str(c.get("origin") or "none measured for this device (`wlprof calibrate` on it)")
    rates = list(matrix.values()) + ([c["vector_tflops"]] if c.get("vector_tflops") else [])
    scale, unit = rate_unit(rates)
    parts = [f"copy {sig(c['copy_gbps'])} GB/s"] if c.get("copy_gbps") else []
    parts += [f"matrix {k} {sig(v / scale)} {unit}" for k, v in sorted(matrix.items())]
    if c.get("vector_tflops"):
        parts.append(f"vector fp32 {sig(c['vector_tflops'] / scale)} {unit}")
    where = ", ".join(str(x) for x in (c.get("source"), c.get("measured_at")) if x)
    if c.get("source") == "datasheet":  # vendor peaks: say whose, and that nothing was measured
        m = c.get("method") or {}
        where = f"datasheet of the {m.get('datasheet')} ({m.get('document')}), not measured"
    return "; ".join(parts) + (f" ({where})" if where else "")


def above_roof_why(frac, note) -> str:
    """The reasons a fraction above 1 carries (from its roof notes); '' at or below the roof."""
    why = above_roof_text(frac, note)
    return "[red]no reason recorded[/red]" if why == NO_REASON else why


NO_REASON = "no reason recorded"


def above_roof_text(frac, note) -> str:
    """`above_roof_why` as plain text (the fitted tables style it themselves)."""
    from wlprof.ceilings import ABOVE_ROOF_NOTES

    if _missing(frac) or frac <= 1:
        return ""
    notes = [n for n in str(note or "").split(",") if n in ABOVE_ROOF_NOTES]
    return ",".join(notes) if notes else NO_REASON


# --------------------------------------------------------------------------- the tables


def with_rank(variants, ranks) -> list[str]:
    """Each variant named with its rank, `dispersed / alltoall (rank 1)`; an ingested rank's variant that
    already is `rank 1` stays as it is."""
    out = []
    for v, r in zip(variants, ranks, strict=True):
        v = str(v)
        out.append(v if v == f"rank {int(r)}" else f"{v} (rank {int(r)})")
    return out


def _share_all(share) -> bool:
    """Whether an unknown-time share says that nothing of the step is known (all of its kernel time)."""
    return not _missing(share) and float(share) >= 1.0


def steps_table(steps: pd.DataFrame, title: str, wide: bool = False, width: int | None = None):
    """Per variant: the three timings, the kernel time, costs, rates and roofline placement."""
    steps = steps.reset_index(drop=True)
    status = [str(s) if not _missing(s) else "ok" for s in _col(steps, "status")]
    failed = [s == "failed" for s in status]
    ok = steps[[not f for f in failed]]
    # where a workload's useful FLOPs differ from what its kernels ran (MoE padding, routing)
    useful = "useful_flops" in ok and (ok.useful_flops.fillna(0) != ok.flops.fillna(0)).any()
    times = [c for c in ("latency_us", "back_to_back_us", "graph_us", "kernel_us") if c in steps]
    t_scale, t_unit = unit_for([v for c in times for v in _col(ok, c)])
    r_scale, r_unit = rate_unit(list(_col(ok, "achieved_tflops")) + list(_col(ok, "achieved_tflops_useful")))

    def tm(v):
        return "-" if _missing(v) else sig(float(v) / t_scale)

    def rt(v):
        return "-" if _missing(v) else sig(float(v) / r_scale)

    def masked(values, fn):  # failed points show their reason in the variant column only
        return ["" if f else fn(v) for v, f in zip(values, failed, strict=True)]

    variant = [f"{v}\nfailed: {e}" if f else str(v)
               for v, f, e in zip(_col(steps, "variant"), failed, _col(steps, "error"), strict=True)]
    cols = [Col("variant", variant, 10, "left", wrap=28)]

    def optional(name: str, col: Col) -> None:  # a column of an ingested run's unmeasured timings is left out
        if _any(_col(ok, name)):
            cols.append(col)

    optional("latency_us", Col(f"latency\n1 call {t_unit}", masked(_col(steps, "latency_us"), tm), 9))
    optional("back_to_back_us", Col(f"back-to-back\n{t_unit}/step", masked(_col(steps, "back_to_back_us"), tm), 7))
    optional("graph_us", Col(f"graph\n{t_unit}/step", masked(_col(steps, "graph_us"), tm), 5))
    # a step whose every kernel has unknown FLOPs (bytes) shows no total and no rate, not a zero
    no_flops = [_share_all(u) for u in _col(steps, "unknown_time_share")]
    no_bytes = [_share_all(u) for u in _col(steps, "bytes_unknown_time_share")]

    def known(values, none):
        return [None if n else v for v, n in zip(values, none, strict=True)]

    cols += [Col(f"kernels\n{t_unit}/step", masked(_col(steps, "kernel_us"), tm), 9),
             Col("FLOPs", masked(known(_col(steps, "flops"), no_flops), si), 8),
             Col("bytes", masked(known(_col(steps, "bytes"), no_bytes), lambda v: si(v, "B")), 6),
             Col(r_unit, masked(known(_col(steps, "achieved_tflops"), no_flops), rt), 8)]
    if any(not _missing(u) and float(u) > 0 for u in _col(ok, "unknown_time_share")):
        cols.append(Col("FLOPs\nunknown", masked(_col(steps, "unknown_time_share"), percent), 7))
    if any(not _missing(u) and float(u) > 0 for u in _col(ok, "bytes_unknown_time_share")):
        cols.append(Col("bytes\nunknown", masked(_col(steps, "bytes_unknown_time_share"), percent), 7))
    if useful:
        cols += [Col("useful\nFLOPs", masked(_col(steps, "useful_flops"), si), 4),
                 Col(f"{r_unit}\nuseful", masked(_col(steps, "achieved_tflops_useful"), rt), 4),
                 Col(f"{r_unit}\nexecuted", masked(_col(steps, "achieved_tflops_executed"), rt), 3)]
    either = [a or b for a, b in zip(no_flops, no_bytes, strict=True)]
    cols += [Col("GB/s", masked(known(_col(steps, "achieved_gbps"), no_bytes), sig), 6),
             Col("FLOP/B", masked(known(_col(steps, "intensity_flop_per_byte"), either), sig), 4)]
    optional("bound", Col("bound", masked(_col(steps, "bound"), lambda v: "-" if _missing(v) else str(v)), 5, "left"))
    roofline = Col("roof-\nline", masked(_col(steps, "roofline_fraction"), percent), 7)
    optional("roofline_fraction", roofline)
    why = [above_roof_text(f, n) for f, n in zip(_col(steps, "roofline_fraction"), _col(steps, "roof_note"),
                                                 strict=True)]
    if any(why):
        roofline.needs = Col("above roof:\nwhy", masked(why, str), 6, "left", wrap=18,
                             styles=["red" if w == NO_REASON else None for w in why])
        cols.append(roofline.needs)
    if any(flagged(v) for v in _col(steps, "noisy")):
        cols.append(Col("spread", masked(_col(steps, "timing_spread"), lambda v: percent(v)), 7))
    styles = ["red" if f else ("yellow" if flagged(n) else None) for f, n in zip(failed, _col(steps, "noisy"),
                                                                                strict=True)]
    return table(cols, title, width, wide, styles)


def kernel_table(summary: pd.DataFrame, title: str, wide: bool = False, width: int | None = None):
    """The kernels of one variant by time per step, with their costs, rates and roofline placement."""
    r_scale, r_unit = rate_unit(_col(summary, "achieved_tflops"))
    t_scale, t_unit = unit_for(_col(summary, "dur_us_per_step"))
    text = lambda v: "-" if _missing(v) or v == "" else str(v)  # noqa: E731
    ops, kernels = _col(summary, "op_name"), _col(summary, "kernel")
    cols = [Col("op", cells(ops, text), 8, "left", wrap=18)]
    if [str(k) for k in kernels] != [str(o) for o in ops]:  # on a CPU the rows are the ops themselves
        cols.append(Col("kernel", cells(kernels, text), 10, "left", wrap=26))
    else:
        cols[0].priority = 10
    if any(not _missing(v) and v != "" for v in _col(summary, "region")):
        cols.append(Col("region", cells(_col(summary, "region"), text), 4, "left", wrap=12))
    cols += [Col("n/\nstep", cells(_col(summary, "count_per_step"), sig), 5),
             Col(f"{t_unit}/\nstep", cells(_col(summary, "dur_us_per_step"), lambda v: sig(float(v) / t_scale)), 9),
             Col("share", cells(_col(summary, "time_share"), percent), 9),
             Col("FLOPs", cells(_col(summary, "flops_per_step"), si), 6),
             Col("bytes", cells(_col(summary, "bytes_per_step"), lambda v: si(v, "B")), 6),
             Col(r_unit, cells(_col(summary, "achieved_tflops"),
                               lambda v: "-" if _missing(v) else sig(float(v) / r_scale)), 7),
             Col("GB/s", cells(_col(summary, "achieved_gbps"), sig), 7),
             Col("FLOP/B", cells(_col(summary, "intensity_flop_per_byte"), sig), 4)]
    if _any(_col(summary, "roofline_fraction")):  # no ceilings measured for the device: no roofline columns
        cols.append(Col("bound", cells(_col(summary, "bound"), text), 5, "left"))
        if _any(_col(summary, "roof")):
            cols.append(Col("roof", cells(_col(summary, "roof"), text), 4, "left", wrap=12))
        roofline = Col("roof-\nline", cells(_col(summary, "roofline_fraction"), percent), 7)
        cols.append(roofline)
        notes = [_note(f, n) for f, n in zip(_col(summary, "roofline_fraction"), _col(summary, "roof_note"),
                                             strict=True)]
        if any(notes):
            cols.append(Col("roof note", notes, 5, "left", wrap=16,
                            styles=["red" if NO_REASON in x else None for x in notes]))
            if any(not _missing(f) and f > 1 for f in _col(summary, "roofline_fraction")):
                roofline.needs = cols[-1]
    cols.append(Col("source", cells(_col(summary, "flops_source"), text), 3, "left"))
    return table(cols, title, width, wide)


def _note(frac, note) -> str:
    """A row's roof notes, with a warning where its fraction is above 1 and none explains it."""
    text = note if isinstance(note, str) else ""
    why = above_roof_text(frac, note)
    return f"{text} {why}".strip() if why == NO_REASON else text


def runs_table(runs: pd.DataFrame, wide: bool = False, width: int | None = None):
    colour = {"complete": "green", "running": "yellow", "incomplete": "red", "failed": "red", "partial": "yellow"}
    text = lambda v: "-" if _missing(v) else str(v)  # noqa: E731
    status = [text(s) for s in _col(runs, "status")]
    cols = [Col("run_id", cells(_col(runs, "run_id"), text), 10, "left"),
            Col("workload", cells(_col(runs, "workload"), text), 8, "left"),
            Col("source", cells(_col(runs, "source"), text), 7, "left"),
            Col("device", cells(_col(runs, "device"), text), 5, "left", wrap=16),
            Col("dtype", cells(_col(runs, "dtype"), text), 6, "left"),
            Col("points", cells(_col(runs, "points"), text), 8),
            Col("status", status, 9, "left", styles=[colour.get(s, "white") for s in status]),
            Col("created (UTC)", cells(_col(runs, "created"), text), 4, "left"),
            Col("from", cells(_col(runs, "from"), text), 3, "left", wrap=28)]
    return table(cols, None, width, wide)


def frame_table(df: pd.DataFrame, columns: dict[str, tuple[str, Callable, int]], title: str | None = None,
                wide: bool = False, width: int | None = None, text: set[str] = frozenset(),
                wrap: dict[str, int] | None = None):
    """A table of a DataFrame: `columns` maps a column to (header, formatter, priority)."""
    wrap = wrap or {}
    cols = [Col(header, cells(_col(df, name), fn), prio, "left" if name in text else "right", wrap.get(name))
            for name, (header, fn, prio) in columns.items()]
    return table(cols, title, width, wide)


def label(v) -> str:
    return "-" if _missing(v) else str(v)

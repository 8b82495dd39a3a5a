"""Run a study from the CLI: progress with an ETA over sweep points and inside each, then the summary table."""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

from wlprof.cli.common import command_line, console


def _clock(seconds: float) -> str:
    if not math.isfinite(seconds) or seconds < 0:
        return "?"
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}" if seconds >= 3600 \
        else f"{seconds // 60}:{seconds % 60:02d}"


def busy_machine_note() -> str | None:
    """A note when other processes compete for this machine's cores (its timings will be noisy)."""
    try:
        load = os.getloadavg()[0]
    except (OSError, AttributeError):
        return None
    cores = os.cpu_count() or 1
    if load > cores + 0.5:
        return (f"this machine's load average is {load:.1f} on {cores} cores: other processes compete for them, "
                "so timings will be noisy")
    return None


class PointProgress:
    """Progress on stderr: a live bar with the phase and an ETA on a terminal, one line per point elsewhere."""

    def __init__(self, err, workload: str, label: str | None, quiet: bool, note: str | None = None):
        self.err, self.workload, self.label, self.quiet = err, workload, label, quiet
        self.note = note  # said once the run starts (after its input was checked)
        self.live = err.is_terminal and not quiet
        self.t0 = time.perf_counter()
        self.point_t0 = self.t0
        self.progress = None
        self.task = None

    def _start(self, total: int) -> None:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        self.progress = Progress(TextColumn("{task.fields[head]}"), BarColumn(bar_width=24),
                                 TextColumn("{task.fields[count]}"), TimeElapsedColumn(), TextColumn("ETA"),
                                 TimeRemainingColumn(), TextColumn("{task.fields[state]}"), console=self.err,
                                 transient=False)
        self.progress.start()
        self.task = self.progress.add_task("", total=total, head=f"{self.workload}:", count=f"0/{total} points",
                                           state="starting")

    def __call__(self, done: float, total: int, variant: str, state: str, row: dict | None = None) -> None:
        if self.quiet:
            return
        if self.note:
            self.err.print(f"note: {self.note}", markup=False, highlight=False, soft_wrap=True)
            self.note = None
        head = f"{self.label + ' ' if self.label else ''}{self.workload}: {variant}"
        finished = row is not None
        if self.live:
            if self.progress is None:
                self._start(total)
            self.progress.update(self.task, completed=done, head=head, state=state,
                                 count=f"{math.floor(done + 1e-9)}/{total} points")
            return
        if not finished:
            return
        now = time.perf_counter()
        left = (now - self.t0) / done * (total - done) if done else math.nan
        self.err.print(f"[{int(done)}/{total}] {head}: {state} in {now - self.point_t0:.1f} s"
                       + (f", about {_clock(left)} left" if done < total else f", {_clock(now - self.t0)} in all")
                       + _noisy_suffix(row), markup=False, highlight=False, soft_wrap=True)
        self.point_t0 = now

    def stop(self) -> None:
        if self.progress is not None:
            self.progress.stop()


def _noisy_suffix(row: dict) -> str:
    from wlprof.cli.render import flagged

    if flagged(row.get("noisy")):
        return f" (noisy: {_spread_text(row)})"
    return ""


def _spread_text(row) -> str:
    which = str(row.get("timing_spread_of") or "timing").replace("_", "-")
    return f"{which} samples spread {100 * float(row.get('timing_spread')):.0f}%"


NOISY_LISTED = 8  # the most spread points named; the others counted


def noisy_lines(steps) -> list[str]:
    """What to say about points whose repeated timings spread more than steps.NOISY_SPREAD."""
    from wlprof.steps import NOISY_SPREAD

    if "noisy" not in steps:
        return []
    noisy = steps[steps.noisy.fillna(False).astype(bool)]
    if noisy.empty:
        return []
    worst = noisy.sort_values("timing_spread", ascending=False) if "timing_spread" in noisy else noisy
    listed = "; ".join(f"{r['variant']} ({_spread_text(r)})" for _, r in worst.head(NOISY_LISTED).iterrows())
    if len(noisy) > NOISY_LISTED:
        listed += f"; and {len(noisy) - NOISY_LISTED} more (the steps table's `noisy` column)"
    return [f"noisy: {len(noisy)} of {len(steps)} points' repeated timings spread more than {NOISY_SPREAD:.0%} "
            f"((p90 - p10) or (max - min) over the median): {listed}. Their medians are not stable: re-run them "
            "(more --reps or --steps), or on a quieter machine."]


def unplaced_lines(steps) -> list[str]:
    """What to say about points with matrix ops of a dtype the ceilings hold no matrix rate for (roof note
    compute_unmeasured): those ops are not placed, and the point's roofline column is over its other kernels."""
    if "roof_note" not in steps or steps.empty:
        return []
    hit = steps[steps.roof_note.fillna("").astype(str).str.split(",").map(lambda n: "compute_unmeasured" in n)]
    if hit.empty:
        return []
    dtypes = sorted({str(d) for d in hit.get("dtype", []) if isinstance(d, str)})
    names = list(dict.fromkeys(str(v) for v in hit.variant))
    listed = "; ".join(names[:NOISY_LISTED]) + (f"; and {len(names) - NOISY_LISTED} more" if len(names) > NOISY_LISTED
                                                  else "")
    which = f"the {', '.join(dtypes)} matrix ops" if dtypes else "matrix ops"
    rate = f"no {', '.join(dtypes)} matrix rate" if dtypes else "no matrix rate for their dtype"
    return [f"not placed: {which} of {len(names)} of {len(steps)} points ({listed}): the ceilings hold {rate} "
            "(`wlprof calibrate --show` lists the measured ones), so their roofline column is over their other "
            "kernels only."]


def execute(study, traces: Path, quiet: bool = False, resume: str | None = None, wide: bool = False,
            exit_on_failure: bool = True, label: str | None = None) -> str:
    """Run `study`, showing progress on stderr, then its steps table; returns the run's status."""
    from rich.markup import escape

    from wlprof.cli import render
    from wlprof.study import run_study

    err = console(stderr=True)
    progress = PointProgress(err, study.workload, label, quiet, busy_machine_note())
    try:
        result = run_study(study, traces=traces, progress=progress, command=command_line(), resume=resume)
    finally:
        progress.stop()
    con = console(wide=wide)
    for note in result.notes:
        con.print(f"[dim]note: {escape(note)}[/dim]")
    steps = result.steps
    device = steps.device_name.iloc[0] if "device_name" in steps and len(steps) else "?"
    con.print(render.steps_table(steps, title=f"{result.run_id}  ({device}, {steps.dtype.iloc[0]}, {result.status})",
                                 wide=wide, width=con.width))
    for _, r in steps.iterrows():  # what a workload measured about each point (halo: step against max and sum)
        if isinstance(r.get("note"), str) and r["note"]:
            con.print(f"[dim]{escape(str(r['variant']))}: {escape(r['note'])}[/dim]")
    for line in noisy_lines(steps) + unplaced_lines(steps):
        con.print(escape(line))
    con.print(f"ceilings: {escape(str(result.ceilings_origin))}")
    con.print(f"traces:   {escape(str(result.path))}  (kernels: pandas.read_parquet({str(traces)!r}); "
              f"Chrome traces for Perfetto: {escape(str(result.path / '_chrome'))})")
    if result.status != "complete" and exit_on_failure:
        raise SystemExit(1)
    return result.status

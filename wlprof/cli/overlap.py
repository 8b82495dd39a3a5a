"""`wlprof overlap RUN_ID`: per rank, compute, communication, their overlap and the exposed rest.

Reads the run's overlap table (computed from its kernels for runs stored before it existed),
its collectives matched across ranks, and, for the halo workload, each step against
max(compute, exchange) and their sum. Definitions: `docs/overlap.md`.
"""

from __future__ import annotations

import math
from typing import Annotated

import typer

from wlprof.cli.common import console, handle_errors
from wlprof.cli.options import DEFAULT_TRACES, Traces, epilog

EXAMPLES = epilog("wlprof overlap RUN_ID", "wlprof overlap RUN_ID --streams", "wlprof overlap RUN_ID --variant overlap")


def _us(v) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:,.1f}"


def _pct(v) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{100 * v:.1f}%"


@handle_errors
def overlap(
    run_id: Annotated[str, typer.Argument(help="A run id from `wlprof ls`.")],
    traces: Traces = DEFAULT_TRACES,
    streams: Annotated[bool, typer.Option("--streams/--no-streams", help="Also one row per CUDA stream. Default: on.")] = True,
    variant: Annotated[str | None, typer.Option("--variant", help="Only this sweep point. Default: every point.")] = None,
) -> None:
    """Per rank (and stream): compute, communication, overlapped and exposed time, and the overlap share."""
    from rich.table import Table

    from wlprof import load
    from wlprof.analysis.collectives import per_rank
    from wlprof.analysis.overlap import overlap_for_run
    from wlprof.errors import InputError
    from wlprof.store.runs import read_manifest, run_dir

    path = run_dir(traces, run_id)
    if not path.is_dir():
        raise InputError("RUN_ID", f"must name a run in {traces}/ (see `wlprof ls`)", run_id)
    manifest = read_manifest(path)
    table = load(path, table="overlap")
    if table.empty:  # a run stored before the overlap table existed
        table = overlap_for_run(load(path, table="kernels"))
    steps = load(path, table="steps")
    coll = load(path, table="collectives")
    if variant is not None:
        known = sorted(set(steps.variant))
        if variant not in known:
            raise InputError("--variant", f"must be one of {known}", variant)
        table, steps, coll = (t[t.variant == variant] for t in (table, steps, coll))
    con = console()
    con.print(f"[bold]{run_id}[/bold]  {manifest.get('workload')} on {manifest.get('device', {}).get('name')}; "
              f"per step: totals / profiled steps; communication = collectives, P2P, memcpy and memset")
    if not streams:
        table = table[table.scope == "rank"]
    for (point, name), g in table.groupby(["point", "variant"], sort=True):
        t = Table(title=f"{name}: per rank (µs per step)", title_justify="left")
        for col in ("rank", "stream", "compute", "communication", "  collectives", "  copies", "overlapped",
                    "exposed", "overlap share", "collectives hidden", "copies hidden", "idle"):
            t.add_column(col, justify="left" if col in ("rank", "stream") else "right")
        g = g.sort_values(["rank", "scope", "stream"], key=lambda s: s.map({"rank": 0, "stream": 1})
                          if s.name == "scope" else s)
        for _, r in g.iterrows():
            n = max(int(r["steps"]) if r["steps"] == r["steps"] and r["steps"] else 1, 1)
            t.add_row(str(int(r["rank"]) if r["rank"] == r["rank"] else 0),
                      "all" if r["scope"] == "rank" else str(int(r["stream"])),
                      _us(r["compute_us"] / n), _us(r["comm_us"] / n), _us(r["collective_us"] / n),
                      _us(r["copy_us"] / n), _us(r["overlap_us"] / n), _us(r["exposed_comm_us"] / n),
                      _pct(r["overlap_share"]), _pct(r["collective_overlap_share"]), _pct(r["copy_overlap_share"]),
                      _us(r["idle_us"] / n) if r["scope"] == "rank" else "")
        con.print(t)
        c = coll[coll.point == point] if len(coll) else coll
        if len(c):
            s = Table(title=f"{name}: collectives per rank (whole trace)", title_justify="left")
            for col in ("rank", "collectives", "bytes", "time µs", "busbw GB/s (median)", "waited for others µs",
                        "last to arrive"):
                s.add_column(col, justify="right")
            for _, r in per_rank(c).iterrows():
                s.add_row(str(int(r["rank"])), str(int(r["collectives"])),
                          "-" if r["comm_bytes"] != r["comm_bytes"] else f"{r['comm_bytes']:,.0f}", _us(r["dur_us"]),
                          _us(r["busbw_gbps_median"]), _us(r["skew_wait_us"]), f"{int(r['straggler_of'])} times")
            con.print(s)
            con.print(f"[dim]clocks: {c.clock_method.iloc[0]}[/dim]")
    if "halo_step_us" in steps and steps.halo_step_us.notna().any():
        h = Table(title="halo: the step between max(compute, exchange) and their sum (µs, back to back)",
                  title_justify="left")
        for col in ("variant", "rank", "compute", "exchange", "step", "max", "sum", "position (0 max, 1 sum)"):
            h.add_column(col, justify="left" if col == "variant" else "right")
        for _, r in steps.sort_values(["point", "rank"]).iterrows():
            h.add_row(str(r["variant"]), str(int(r["rank"]) if r["rank"] == r["rank"] else 0),
                      _us(r["halo_compute_us"]), _us(r["halo_exchange_us"]), _us(r["halo_step_us"]),
                      _us(r["halo_max_us"]), _us(r["halo_sum_us"]),
                      "-" if r["halo_position"] != r["halo_position"] else f"{r['halo_position']:.2f}")
        con.print(h)

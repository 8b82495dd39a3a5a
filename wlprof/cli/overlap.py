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
from wlprof.cli.options import DEFAULT_TRACES, Traces, Wide, epilog

EXAMPLES = epilog("wlprof overlap RUN_ID", "wlprof overlap RUN_ID --no-streams", "wlprof overlap RUN_ID --variant overlap")


def _us(v) -> str:
    """µs with one decimal; - for none."""
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:,.1f}"


def _pct(v) -> str:
    """A fraction as a percentage; - for none."""
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{100 * v:.1f}%"


PER_STEP = {"compute": "compute_us", "communication": "comm_us", "collectives": "collective_us",
            "copies": "copy_us", "overlapped": "overlap_us", "exposed": "exposed_comm_us"}
SHARES = {"overlap_share": "overlap_share", "collectives_hidden": "collective_overlap_share",
          "copies_hidden": "copy_overlap_share"}
RANK_COLUMNS = {"rank": "rank", "stream": "stream", "compute": "compute", "communication": "commu-\nnication",
                "collectives": "collec-\ntives", "copies": "copies", "overlapped": "over-\nlapped",
                "exposed": "exposed", "overlap_share": "overlap\nshare", "collectives_hidden": "collectives\nhidden",
                "copies_hidden": "copies\nhidden", "idle": "idle"}
RANK_PRIORITY = {"rank": 10, "stream": 9, "compute": 9, "communication": 9, "overlapped": 8, "exposed": 8,
                 "overlap_share": 8, "idle": 6, "collectives": 5, "copies": 5, "collectives_hidden": 4,
                 "copies_hidden": 4}


@handle_errors
def overlap(
    run_id: Annotated[str, typer.Argument(help="A run id from `wlprof ls`.")],
    traces: Traces = DEFAULT_TRACES,
    streams: Annotated[bool, typer.Option("--streams/--no-streams", help="Also one row per CUDA stream. Default: on.")] = True,
    variant: Annotated[str | None, typer.Option("--variant", help="Only this sweep point. Default: every point.")] = None,
    wide: Wide = False,
) -> None:
    """Per rank (and stream): compute, communication, overlapped and exposed time, and the overlap share."""
    import pandas as pd
    from rich.table import Table

    from wlprof import load
    from wlprof.analysis.collectives import per_rank
    from wlprof.analysis.overlap import overlap_for_run
    from wlprof.cli.markdown import rich_table
    from wlprof.errors import InputError, did_you_mean
    from wlprof.store.runs import read_manifest, run_dir
    from wlprof.store.selection import require_folder

    require_folder(traces)
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
            raise InputError("--variant", f"must be one of {', '.join(repr(v) for v in known)}", variant,
                             hint=did_you_mean(variant, known))
        table, steps, coll = (t[t.variant == variant] for t in (table, steps, coll))
    con = console(wide=wide)
    con.print(f"[bold]{run_id}[/bold]  {manifest.get('workload')} on {manifest.get('device', {}).get('name')}; "
              f"per step: totals / profiled steps; communication = collectives, P2P, memcpy and memset")
    if not streams:
        table = table[table.scope == "rank"]
    for (point, name), g in table.groupby(["point", "variant"], sort=True):
        g = g.sort_values(["rank", "scope", "stream"], key=lambda s: s.map({"rank": 0, "stream": 1})
                          if s.name == "scope" else s)
        n = pd.to_numeric(g["steps"], errors="coerce").fillna(1).clip(lower=1)
        rows = pd.DataFrame({
            "rank": [_rank(v) for v in g["rank"]],
            "stream": ["all" if sc == "rank" else str(int(st)) for sc, st in zip(g["scope"], g["stream"], strict=True)],
            **{k: (g[c] / n).to_numpy() for k, c in PER_STEP.items()},
            **{k: g[c].to_numpy() for k, c in SHARES.items()},
            "idle": [v if sc == "rank" else None for sc, v in zip(g["scope"], g["idle_us"] / n, strict=True)]})
        con.print(rich_table(rows, RANK_COLUMNS, title=f"{name}: per rank (µs per step)",
                             formats={**{k: _us for k in (*PER_STEP, "idle")}, **{k: _pct for k in SHARES}},
                             priorities=RANK_PRIORITY, text={"rank", "stream"}, wide=wide, width=con.width))
        c = coll[coll.point == point] if len(coll) else coll
        if len(c):
            con.print(collectives_table(per_rank(c), f"{name}: collectives per rank (whole trace)"))
            con.print(f"[dim]clocks: {c.clock_method.iloc[0]}[/dim]")
    if "halo_step_us" in steps and steps.halo_step_us.notna().any():
        h = Table(title="halo: the step between max(compute, exchange) and their sum (µs, back to back)",
                  title_justify="left")
        for col in ("variant", "rank", "compute", "exchange", "step", "max", "sum", "position (0 max, 1 sum)"):
            h.add_column(col, justify="left" if col == "variant" else "right")
        for _, r in steps.sort_values(["point", "rank"]).iterrows():
            h.add_row(str(r["variant"]), _rank(r["rank"]),
                      _us(r["halo_compute_us"]), _us(r["halo_exchange_us"]), _us(r["halo_step_us"]),
                      _us(r["halo_max_us"]), _us(r["halo_sum_us"]),
                      "-" if r["halo_position"] != r["halo_position"] else f"{r['halo_position']:.2f}")
        con.print(h)


def _gbps(v) -> str:
    """GB/s with one decimal, two significant digits below 1 (gloo's 0.003 GB/s is not 0.0); - for none."""
    from wlprof.store.selection import _rate

    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else _rate(float(v), 1)


def collectives_table(ranks, title: str):
    """Per rank: collectives, bytes, time, median busbw, the wait it caused others and how often it was
    the last to arrive; the last two are '-' for a rank none of whose collectives were matched across ranks
    (P2P sends and receives are not)."""
    from rich.table import Table

    s = Table(title=title, title_justify="left")
    for col in ("rank", "collectives", "bytes", "time µs", "busbw GB/s (median)", "waited for others µs",
                "last to arrive"):
        s.add_column(col, justify="right")
    for _, r in ranks.iterrows():
        matched = int(r.get("matched", 1) or 0) > 0
        s.add_row(_rank(r["rank"]), str(int(r["collectives"])),
                  "-" if r["comm_bytes"] != r["comm_bytes"] else f"{r['comm_bytes']:,.0f}", _us(r["dur_us"]),
                  _gbps(r["busbw_gbps_median"]), _us(r["skew_wait_us"]),
                  f"{int(r['straggler_of'])} times" if matched else "-")
    return s


def _rank(value) -> str:
    """A rank as text: a trace without ranks (NA) is rank 0."""
    import pandas as pd

    return "0" if pd.isna(value) else str(int(value))

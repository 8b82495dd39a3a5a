"""`wlprof profile -o DIR`: build the offline profile Level 3 predicts from (the grid, `wlprof.predict.grid`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from wlprof.cli.common import command_line, console, handle_errors
from wlprof.cli.options import Device, Quiet, epilog

EXAMPLES = epilog("wlprof profile --device cuda -o profiles/h200",
                  "wlprof profile --device cuda -o profiles/h200 --extend --budget-minutes 4",
                  "wlprof profile --device cpu -o profiles/cpu --section 'gemm nn' --section moe",
                  "wlprof profile -o profiles/h200 --drop 'profile:gnn raw * pass 2' --reason 'replaced'",
                  "wlprof profile -o profiles/h200 --refit",
                  "wlprof profile -o profiles/h200 --ceilings ceilings.json")


@handle_errors
def profile(
    out: Annotated[Path, typer.Option("--out", "-o", help="The profile folder to create (new or empty; required).",
                                      metavar="DIR")],
    device: Device = None,
    budget_minutes: Annotated[float, typer.Option(
        "--budget-minutes", help="Stop starting sections once this much wall time is spent (the coarse pass "
        "of every section first).", metavar="MIN", show_default=True)] = 6.0,
    section: Annotated[list[str] | None, typer.Option(
        "--section", help="Profile only these sections of the grid (repeatable): gemm nn, gemm nt, gemm linear, "
        "gemm odd, gemm ragged, gemm narrow, elementwise, elementwise mixed, gnn raw, gnn pyg, moe, mlp, layers, optim (a CPU's grid: "
        "gnn, no layers or optim). Default: every "
        "section.", metavar="NAME")] = None,
    extend: Annotated[bool, typer.Option(
        "--extend", help="-o names an existing profile: run the studies its budget left out (within this "
        "budget), add them to it and fit it again.")] = False,
    drop: Annotated[list[str] | None, typer.Option(
        "--drop", help="-o names an existing profile: leave out its measured studies of these names (globs, "
        "repeatable; e.g. 'profile:gnn raw * pass 2') and fit it again. Measures nothing. Default: none.",
        metavar="STUDY")] = None,
    reason: Annotated[str, typer.Option(
        "--reason", help="With --drop: why, as profile.json records it.", show_default=True)] = "left out with --drop",
    refit: Annotated[bool, typer.Option(
        "--refit", help="-o names an existing profile: fit its predictor again from its tables (after an "
        "update of wlprof's model). Measures nothing.")] = False,
    ceilings: Annotated[Path | None, typer.Option(
        "--ceilings", help="-o names an existing profile: add to its ceilings what they lack and this later "
        "calibration of the same device measured (`wlprof calibrate --out FILE`: a dtype's matrix peak, the host "
        "link), and fit it again. Measures nothing. Default: none.", metavar="FILE")] = None,
    quiet: Quiet = False,
) -> None:
    """Measure the profile grid (GEMMs, memory-bound and index ops, MoE and GNN steps, training layers) into DIR, check it
    (clocks, noisy points) and fit the Level-3 predictor `wlprof predict --profile DIR` uses."""
    from wlprof.predict.profile import run_profile

    con = console()
    if ceilings is not None:
        from wlprof.errors import InputError
        from wlprof.predict.profile import supplement_ceilings

        other = [name for name, on in (("--refit", refit), ("--drop", bool(drop)), ("--extend", extend)) if on]
        if other:
            raise InputError("--ceilings", "must be given alone (it refits the profile itself)", f"with {other[0]}")
        _, added = supplement_ceilings(out, ceilings)
        if added:
            con.print(f"added {', '.join(added)} from {ceilings} to {out}'s ceilings; refitted {out}/predictor.json")
        else:
            con.print(f"{out}'s ceilings already hold everything {ceilings} measured: nothing added, nothing refitted")
        return
    if refit:
        from wlprof.predict.profile import refit as refit_profile

        info = refit_profile(out)
        con.print(f"refitted {out}/predictor.json from {info['op_calls']:,} op calls of {info['points']:,} points "
                  f"in {info['fit_seconds']:.1f} s")
        return
    if drop:
        from wlprof.predict.profile import drop_studies

        info, left = drop_studies(out, drop, reason)
        con.print(f"left out {len(left)} stud{'y' if len(left) == 1 else 'ies'} ({', '.join(left)}); the profile now holds "
                  f"{info['points']:,} points, {info['op_calls']:,} op calls, {info['grid_seconds'] / 60:.2f} minutes "
                  f"of grid; refitted {out}/predictor.json")
        return
    err = console(stderr=True)
    say = None if quiet else (lambda msg: err.print(msg))  # progress on stderr, the summary on stdout
    info = run_profile(out, device=device, budget_s=budget_minutes * 60.0, sections=section, progress=say,
                       command=command_line(), extend=extend)
    minutes = info["grid_seconds"] / 60
    skipped = info["skipped"]
    con.print(f"profiled {info['points']:,} points, {info['op_calls']:,} op calls in {minutes:.2f} minutes "
              f"({'GPU' if info['device']['type'] == 'cuda' else 'CPU'}: {info['device']['name']}); "
              f"{info['noisy_points']} noisy, {info['throttled_points']} throttled; "
              + (f"{len(skipped)} sections left out by the budget" if skipped else "every section run"))
    clocks = info.get("sm_clock_mhz")
    if clocks:
        con.print(f"SM clock at the points' ends: {clocks['end_min']:.0f}-{clocks['end_max']:.0f} MHz "
                  f"(median {clocks['end_median']:.0f})")
    con.print(f"wrote {out}/profile.json, {out}/predictor.json and the runs in {out}/traces")

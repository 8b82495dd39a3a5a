"""`wlprof place MIX.toml --gpus N`: plan a mix of models onto GPUs with each planner, and measure the plans."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import typer

from wlprof.cli.common import console, handle_errors
from wlprof.cli.options import Device, Quiet, epilog

EXAMPLES = epilog(
    "wlprof place workloads/mixes/mix_dense.toml --gpus 4",
    "wlprof place workloads/mixes/mix_dense.toml --gpus 4 --validate",
    "wlprof place workloads/mixes/mix_moe_gnn_dense.toml --gpus 4 --planner profile --profile benchmarks/profiles/h200",
    "wlprof place workloads/mixes/mix_flops_mislead.toml --gpus 3 --validate --planner all --profile benchmarks/profiles/h200",
)


@handle_errors
def place(
    mix_file: Annotated[Path, typer.Argument(help="The mix (TOML): its models, each a workload configuration (docs/placement.md).",
                                             metavar="MIX_FILE", show_default=False)],
    gpus: Annotated[int, typer.Option("--gpus", "-g", help="GPUs to place the models on (identical; required).",
                                      metavar="INT")],
    planner: Annotated[list[str] | None, typer.Option(
        "--planner", "-p", help="flops, roofline, profile, oracle or all (comma-separated or repeated). "
        "Default: flops and roofline, profile with --profile, oracle with --validate (mixes of at most 8).",
        metavar="NAME,...")] = None,
    profile: Annotated[Path | None, typer.Option(
        "--profile", help="Offline profile for the profile planner: a traces folder profiled on this device. Default: none (no profile planner).",
        metavar="DIR")] = None,
    coloc: Annotated[list[Path] | None, typer.Option(
        "--coloc", help="Co-location calibrations to reuse (coloc.json of an earlier place; repeatable); pairs "
        "missing from them are measured. Default: measure every pair.", metavar="FILE")] = None,
    validate: Annotated[bool, typer.Option(
        "--validate", help="Co-run each plan's GPU groups on this device, one at a time, and measure them.")] = False,
    reps: Annotated[int | None, typer.Option(
        "--reps", help="Request waves per measured group. Default: 20 on a GPU, 5 on the CPU.",
        metavar="INT")] = None,
    search: Annotated[str, typer.Option(
        "--search", help="auto (exhaustive up to 200,000 assignments, else greedy + local search), "
        "exhaustive or heuristic.", metavar="METHOD")] = "auto",
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", help="Folder for plan.json, plan.md, the Parquet tables and the Chrome traces. "
        "Default: placement/<mix>-<UTC time>.", metavar="DIR")] = None,
    no_trace: Annotated[bool, typer.Option("--no-trace", help="Do not trace the validated groups.")] = False,
    device: Device = None,
    quiet: Quiet = False,
) -> None:
    """Put several models on GPUs so that the slowest one is as fast as possible.

    Each planner predicts every model's latency alone and co-located (flops: L0, roofline: L2,
    profile: L3 with the measured slowdown of co-located pairs, oracle: every group measured)
    and searches the assignments (exhaustive for small mixes, greedy + local search beyond).
    The objective is the largest latency of any model, ties broken by the total GPU time.
    Co-located models run concurrently, each on its own CUDA stream, their requests arriving
    together; `docs/placement.md` says how it is measured.
    """
    from wlprof.placement import output
    from wlprof.placement.mix import load_mix
    from wlprof.placement.run import PlaceOptions
    from wlprof.placement.run import place as run_place

    mix = load_mix(mix_file)
    err = console(stderr=True)
    say = (lambda s: None) if quiet else (lambda s: err.print(f"[dim]place:[/dim] {s}"))
    opts = PlaceOptions(gpus=gpus, planners=planner, profile=profile, coloc=coloc or (), validate=validate,
                        device=device, reps=reps, trace=not no_trace, method=search)
    if out is not None:
        _check_out(out)
    from wlprof.cli.execute import busy_machine_note
    from wlprof.stderr_filter import profiler_noise_filtered

    def load_note():  # once the options are checked: a refused one is said alone
        note = busy_machine_note()
        if note and not quiet:
            err.print(f"[yellow]note: {note}[/yellow]")

    with profiler_noise_filtered():  # the validation's traces: Kineto's status lines stay off stderr
        result = run_place(mix, opts, progress=say, on_checked=load_note)
    text = render(result)
    con = console()
    con.print(text, markup=False)
    if out is None:
        from wlprof.store.atomic import slug
        from wlprof.store.runs import utcnow

        stamp = utcnow().replace(":", "").replace("-", "")[:15]
        out = Path("placement") / f"{slug(mix.name)}-{stamp}"
    written = output.write(result, out, markdown=text)
    con.print(f"wrote {len(written)} files to {out}/")


def _check_out(out: Path) -> None:
    from wlprof.errors import InputError

    if out.exists() and not out.is_dir():
        raise InputError("--out", "must be a folder (it names a file)", str(out))
    blocked = next((d for d in out.parents if d.exists() and not d.is_dir()), None)
    if blocked is not None:
        raise InputError("--out", f"must be a folder wlprof can write into ({str(blocked)!r} is a file)", str(out))


def _us(v) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{v:,.0f}" if v >= 100 else f"{v:,.1f}"


def _pct(v) -> str:
    return "-" if v is None else f"{v:+.1%}"


def render(r) -> str:
    """The tables `wlprof place` prints (Markdown: the same text goes into plan.md)."""
    from wlprof.placement.output import summary

    s = summary(r)
    lines = [f"# Placement of mix {r.mix.name}: {len(r.models)} models on {r.gpus} GPUs ({r.device_name})", ""]
    if r.mix.description:
        lines += [r.mix.description, ""]
    lines += ["Objective: the largest latency of any model (requests arrive together), ties by total GPU time; "
              f"measured values are medians of {r.reps} request waves.", ""]
    lines += ["| model | workload | configuration | run as | FLOPs | bytes | FLOPs/peak µs | roofline µs | SLO µs |",
              "|---|---|---|---|---:|---:|---:|---:|---:|"]
    for m in s["models"]:
        lines.append(f"| {m['name']} | {m['workload']} | {m['variant']}{' x' + str(m['layers']) if m['layers'] > 1 else ''}"
                     f" | {m['mode']} | {m['flops']:.3g} | {m['bytes']:.3g} | {_us(m['peak_us'])} | "
                     f"{_us(m['roofline_us'])} | {_us(m['slo_us'])} |")
    lines += ["", "| planner | level | search | assignment (one [group] per GPU) | predicted max µs | "
              "measured max µs | predicted vs measured | gap to oracle | SLO misses (pred / meas) |",
              "|---|---|---|---|---:|---:|---:|---:|---|"]
    for p in s["planners"]:
        assign = " ".join("[" + ", ".join(g) + "]" for g in p["assignment"])
        if p["idle_gpus"]:
            assign += f" + {p['idle_gpus']} idle"
        lines.append(f"| {p['planner']} | {p['level']} | {p['search']} | {assign} | {_us(p['predicted_max_us'])} | "
                     f"{_us(p.get('measured_max_us'))} | {_pct(p.get('predicted_vs_measured'))} | "
                     f"{_pct(p.get('gap_to_oracle'))} | {p['predicted_slo_misses']} / "
                     f"{p.get('measured_slo_misses', '-')} |")
    for p in s["planners"]:
        lines += ["", f"## {p['planner']} ({p['level']}): {p['search']}, {p['candidates']:,} candidates, "
                  f"{p['groups_evaluated']:,} groups, {p['search_seconds']:.3f} s", ""]
        for note in p["notes"]:
            lines.append(f"- {note}")
        lines += ["", "| GPU | model | alone µs (source) | predicted µs | measured µs | SLO µs | SLO met (pred / meas) |",
                  "|---:|---|---|---:|---:|---:|---|"]
        slo = {m["name"]: m["slo_us"] for m in s["models"]}
        for k, g in enumerate(p["assignment"]):
            for name in g:
                a = p["alone"].get(name, {})
                pred, meas = p["predicted_us"][name], (p.get("measured_us") or {}).get(name)
                met = "-" if slo[name] is None else (("yes" if pred <= slo[name] else "no") + " / " + (
                    "-" if meas is None else ("yes" if meas <= slo[name] else "no")))
                src = a.get("source", "")
                lines.append(f"| {k} | {name} | {_us(a.get('us'))} ({src}) | {_us(pred)} | {_us(meas)} | "
                             f"{_us(slo[name])} | {met} |")
    if s.get("targets"):
        lines += ["", "Targets: " + ", ".join(f"{k}: {'yes' if v else 'no'}" for k, v in s["targets"].items())]
    check = s.get("coloc_check") or {}
    if check.get("groups"):
        lines += ["", "The profile planner's group makespans against the oracle's measurements (every group):", "",
                  "| group size | groups | median abs error | max abs error | within 10% |", "|---:|---:|---:|---:|---:|"]
        for k, v in check["groups"].items():
            lines.append(f"| {k} | {v['groups']} | {v['median_abs_error']:.1%} | {v['max_abs_error']:.1%} | "
                         f"{v['within_10pct']:.0%} |")
    if check.get("alone"):
        lines += ["", "Level 3 alone against the calibration's measurement: " + ", ".join(
            f"{a['model']} {a['error']:+.1%} ({a['source']})" for a in check["alone"])]
    if s.get("notes"):
        lines += [""] + [f"- {n}" for n in s["notes"]]
    lines += ["", "Time: " + ", ".join(f"{k} {v:.1f} s" for k, v in r.seconds.items())]
    return "\n".join(lines) + "\n"

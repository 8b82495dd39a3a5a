"""`wlprof ingest PATH`: a torch.profiler trace (or a folder of per-rank traces) into the traces folder."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from wlprof.cli.common import command_line, console, handle_errors
from wlprof.cli.options import DEFAULT_TRACES, Quiet, Traces, Wide, epilog

EXAMPLES = epilog("wlprof ingest model_step.pt.trace.json.gz",
                   "wlprof ingest runs/ --name llama-train",
                   "wlprof ingest big.json.gz --chrome-top 5000")


@handle_errors
def ingest(
    path: Annotated[Path, typer.Argument(help="A trace (.json or .json.gz) or a folder of per-rank traces.")],
    traces: Traces = DEFAULT_TRACES,
    name: Annotated[str | None, typer.Option("--name", help="Name the run (its id starts with it). Default: ingest.")] = None,
    chrome_top: Annotated[int | None, typer.Option(
        "--chrome-top", help="Also write an enriched Chrome trace of the N longest kernels. Default: none.",
        metavar="N")] = None,
    quiet: Quiet = False,
    jobs: Annotated[int | None, typer.Option(
        "--jobs", "-j", help="Processes reading the files of a folder at once. Default: one per core.",
        metavar="N")] = None,
    wide: Wide = False,
    ceilings: Annotated[str | None, typer.Option(
        "--ceilings", help="Ceilings measured on the traces' device (`wlprof calibrate --out FILE` there), or "
        "'datasheet': the GPU's vendor peaks, not measured (docs/ceilings.md lists the GPUs). Default: this "
        "machine's cache.", metavar="FILE|datasheet")] = None,
) -> None:
    """Per-kernel FLOPs, bytes and achieved rates for any torch.profiler trace, through wlprof's parser."""
    import time

    import rich.emoji  # noqa: F401  (with rich.table and render: what drawing the table below loads,
    import rich.table  # noqa: F401  loaded now, while a folder's workers start, not after they finish)

    from wlprof.cli import render
    from wlprof.cli.render import Col
    from wlprof.errors import InputError, TraceFormatError
    from wlprof.ingest import ingest as run_ingest
    from wlprof.ingest import unreadable
    from wlprof.memory import keep_heap

    keep_heap()  # this process ends with the command: a file read here reuses its freed pages, as a worker does
    err = console(stderr=True)
    t0 = time.perf_counter()

    def progress(i: int, n: int, name_: str) -> None:
        if not quiet:
            err.print(f"[dim]read {i}/{n}: {name_}[/dim]")

    try:
        res = run_ingest(path, traces, name=name, chrome_top=chrome_top, command=command_line(), progress=progress,
                         jobs=jobs, ceilings_file=ceilings)
    except TraceFormatError as exc:  # a file's content: named with the argument that gave it
        raise InputError("PATH", unreadable(path, exc), str(path)) from None
    con = console(wide=wide)
    files = res.files
    shares = [f.no_flops_us / f.kernel_us if f.kernel_us else None for f in files]
    t_scale, t_unit = render.unit_for([f.kernel_us for f in files])
    cols = [Col("file", [Path(f.path).name for f in files], 10, "left", wrap=24),
            Col("rank", [str(f.rank) for f in files], 3),
            Col("events", [f"{f.events:,}" for f in files], 4),
            Col("kernel\nrows", [f"{f.kernels:,}" for f in files], 7),
            Col(f"kernel time\n{t_unit}", [render.sig(f.kernel_us / t_scale) for f in files], 9),
            Col("unknown FLOPs\n(time share)", [render.percent(s) for s in shares], 8),
            Col("longest ops without FLOPs", [", ".join(f"{op} {render.sig(us / 1e3)} ms" for op, us in f.top_unknown[:3])
                                        or "-" for f in files], 7, "left", wrap=30)]
    con.print(render.table(cols, f"{res.run_id}  ({time.perf_counter() - t0:.1f} s)", con.width, wide))
    bare = [Path(f.path).name for f in files if not f.shapes]
    opless = [Path(f.path).name for f in files if not f.ops]
    replayed = any(f.replayed_us > 0 for f in files)
    if sum(f.kernel_us for f in files) > 0:
        causes = ["its op has no FLOP formula", *(["its shapes were not recorded"] if bare else []),
                  *(["the trace recorded no op to cost it"] if opless else []),
                  *(["it was replayed from a CUDA/HIP graph"] if replayed else [])]
        why = ("no FLOPs: " + ", ".join(causes[:-1]) + " or " + causes[-1]) if len(causes) > 1 else "no FLOP formula"
        unknown = f"has {why} (kept as flops_source = unknown)"
        if res.bytes_only_share > 0.0005:  # the table's column counts both
            longest: dict[str, float] = {}
            for f in files:
                for op, us in f.top_bytes_only:
                    longest[op] = longest.get(op, 0.0) + us
            named = ", ".join(f"{op} {render.sig(us / 1e3)} ms"
                              for op, us in sorted(longest.items(), key=lambda kv: -kv[1])[:3])
            con.print(f"{res.unknown_share + res.bytes_only_share:.1%} of kernel time has no FLOPs: "
                      f"{res.unknown_share:.1%} {unknown}, and {res.bytes_only_share:.1%} has bytes but no FLOPs "
                      f"(ops whose arithmetic the trace does not record: {named})")
        else:
            con.print(f"{res.unknown_share:.1%} of kernel time {unknown}")
    else:
        con.print("no kernel time to cost: the trace holds no kernel or CPU-op rows")
    for f in files:
        for note in f.notes:
            con.print(f"[yellow]{Path(f.path).name}: {note}[/yellow]")
    if bare:
        con.print(f"[yellow]{len(bare)} of {len(files)} file{'s' if len(files) > 1 else ''} recorded no shapes "
                  f"({', '.join(bare[:3])}{', ...' if len(bare) > 3 else ''}): their ops cannot be costed; "
                  "profile with torch.profiler.profile(record_shapes=True)[/yellow]")
    if opless:
        con.print(f"[yellow]{len(opless)} of {len(files)} file{'s' if len(files) > 1 else ''} recorded no CPU op "
                  f"({', '.join(opless[:3])}{', ...' if len(opless) > 3 else ''}): their kernels have no op to cost; "
                  "profile with torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], "
                  "record_shapes=True)[/yellow]")
    if res.skipped:
        names = [Path(f).name for f in res.skipped]
        what = "JSON files that are not Chrome traces" if len(names) > 1 else "JSON file that is not a Chrome trace"
        con.print(f"skipped {len(names)} {what}: {', '.join(names[:5])}{', ...' if len(names) > 5 else ''}")
    con.print(f"ceilings: {res.ceilings_origin}")
    con.print(f"written: {res.path}  (pandas.read_parquet({str(traces)!r}), or wlprof.load({str(traces)!r}, "
              f"run_id={res.run_id!r}))")
    for f in res.files:
        if f.chrome:
            con.print(f"Chrome trace of the longest kernels (Perfetto): {res.path / f.chrome}")

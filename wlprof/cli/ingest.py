"""`wlprof ingest PATH`: a torch.profiler trace (or a folder of per-rank traces) into the traces folder."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from wlprof.cli.common import command_line, console, handle_errors
from wlprof.cli.options import DEFAULT_TRACES, Quiet, Traces, epilog

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
) -> None:
    """Per-kernel FLOPs, bytes and achieved rates for any torch.profiler trace, through wlprof's parser."""
    import time

    from rich.table import Table

    from wlprof.ingest import ingest as run_ingest

    err = console(stderr=True)
    t0 = time.perf_counter()

    def progress(i: int, n: int, name_: str) -> None:
        if not quiet:
            err.print(f"[dim]read {i}/{n}: {name_}[/dim]")

    res = run_ingest(path, traces, name=name, chrome_top=chrome_top, command=command_line(), progress=progress,
                     jobs=jobs)
    con = console()
    t = Table(title=f"{res.run_id}  ({time.perf_counter() - t0:.1f} s)", title_justify="left")
    for col in ("file", "rank", "events", "kernel rows", "kernel time (ms)", "unknown FLOPs (share of time)",
                "longest unknown ops"):
        t.add_column(col)
    for f in res.files:
        share = f.unknown_us / f.kernel_us if f.kernel_us else float("nan")
        t.add_row(Path(f.path).name, str(f.rank), f"{f.events:,}", f"{f.kernels:,}", f"{f.kernel_us / 1e3:,.2f}",
                  f"{share:.1%}", ", ".join(f"{op} {us / 1e3:,.2f} ms" for op, us in f.top_unknown[:3]))
    con.print(t)
    con.print(f"{res.unknown_share:.1%} of kernel time has no FLOP formula (kept as flops_source = unknown)")
    con.print(f"ceilings: {res.ceilings_origin}")
    con.print(f"written: {res.path}  (pandas.read_parquet({str(traces)!r}), or wlprof.load({str(traces)!r}, "
              f"run_id={res.run_id!r}))")
    for f in res.files:
        if f.chrome:
            con.print(f"Chrome trace of the longest kernels (Perfetto): {res.path / f.chrome}")

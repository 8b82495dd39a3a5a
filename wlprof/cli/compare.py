"""`wlprof compare A B`: two runs or sweep points side by side — where did the extra time go?"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from wlprof.cli.common import console, handle_errors
from wlprof.cli.options import DEFAULT_TRACES, Traces, Wide, epilog

EXAMPLES = epilog("wlprof compare RUN_A:'concentrated / grouped' RUN_A:'dispersed / grouped'",
                  "wlprof compare RUN_A RUN_B --top 20")


def _select(traces: Path, spec: str, arg: str):
    """'RUN' or 'RUN:VARIANT' -> (steps row, kernels) of one sweep point."""
    from wlprof.errors import InputError, did_you_mean
    from wlprof.store.selection import load_runs

    run, _, variant = spec.partition(":")
    steps = load_runs(traces, "steps", [run], arg)
    variants = list(dict.fromkeys(steps.variant))  # a distributed run has one row per rank
    listed = ", ".join(repr(v) for v in variants)
    if not variant:
        if len(variants) != 1:
            raise InputError(arg, f"names a run with {len(variants)} sweep points: add ':VARIANT', one of {listed}",
                             spec)
        variant = variants[0]
    if variant not in variants:  # the point's file-name form ('batch-1' for 'batch 1') names it too
        from wlprof.store.atomic import slug

        named = [v for v in variants if slug(v) == variant]
        variant = named[0] if len(named) == 1 else variant
    if variant not in variants:
        import wlprof

        every = wlprof.load(traces, table="steps", run_id=[run])
        failed = every[every.variant == variant]
        if len(failed):  # a sweep point of the run that did not finish: say so, and why
            row = failed.iloc[0]
            why = f": {row.error}" if "error" in failed and isinstance(row.error, str) and row.error else ""
            raise InputError(arg, f"must name a sweep point that finished; {variant!r} of {run} is {row.status}{why}",
                             variant)
        raise InputError(arg, f"must name a sweep point of {run}, one of {listed}", variant,
                         hint=did_you_mean(variant, variants))
    kernels = load_runs(traces, "kernels", [run], arg)
    rows, kernels = steps[steps.variant == variant], kernels[kernels.variant == variant]
    label = f"{run}:{variant}"
    ranks = sorted(rows["rank"].dropna().unique()) if "rank" in rows else []
    if len(ranks) > 1:  # a distributed run: one steps row per rank; compare rank 0's timings with its kernels
        rank = ranks[0]
        rows, kernels = rows[rows["rank"] == rank], kernels[kernels["rank"] == rank]
        label += f" (rank {rank} of {len(ranks)}; `wlprof overlap` compares the ranks)"
    return rows.iloc[0], kernels, label


@handle_errors
def compare(
    a: Annotated[str, typer.Argument(help="RUN or RUN:VARIANT (the baseline)", metavar="RUN_A")],
    b: Annotated[str, typer.Argument(help="RUN or RUN:VARIANT", metavar="RUN_B")],
    traces: Traces = DEFAULT_TRACES,
    top: Annotated[int, typer.Option("--top", help="Rows per table (0: all).")] = 12,
    wide: Wide = False,
) -> None:
    """Timings, then kernel time per step by op category, by phase and by kernel, with B - A and B / A."""
    from wlprof.analysis.compare import (
        GROUP_STATISTIC,
        compare_kernels,
        compare_steps,
        negative_overhead_note,
    )
    from wlprof.analysis.summary import short_kernel_name
    from wlprof.cli.markdown import rich_table
    from wlprof.errors import InputError

    if top < 0:
        raise InputError("--top", "must be 0 (all) or a positive number", top)
    rows = top or None  # 0: every row
    sa, ka, la = _select(traces, a, "RUN_A")
    sb, kb, lb = _select(traces, b, "RUN_B")
    if sa.device_name != sb.device_name:
        raise InputError("RUN_B", f"must come from the same device as RUN_A ({sa.device_name})", sb.device_name)
    from wlprof.cli import render

    con = console(wide=wide)
    con.print(f"A: {la}\nB: {lb}", markup=False, highlight=False)
    opts = {"wide": wide, "width": con.width}
    con.print(rich_table(compare_steps(sa, sb), {"metric": "per step", "statistic": "statistic", "a": "A", "b": "B",
                                                "ratio": "B / A"},
                         title="timings and totals", formats={"ratio": render.ratio}, text={"metric", "statistic"},
                         priorities={"metric": 10, "a": 9, "b": 9, "ratio": 8, "statistic": 7}, **opts))
    note = negative_overhead_note({"A": sa, "B": sb})
    if note:
        con.print(note, markup=False, highlight=False)
    cols = {"dur_us_a": "A mean\nµs/step", "dur_us_b": "B mean\nµs/step", "diff_us": "B - A\nµs", "ratio": "B / A",
            "share_of_diff": "share of\nthe diff.", "kernels_a": "A mean\nkernels", "kernels_b": "B mean\nkernels"}
    formats = {"ratio": render.ratio, "share_of_diff": render.percent}
    prio = {"dur_us_a": 9, "dur_us_b": 9, "diff_us": 8, "ratio": 7, "share_of_diff": 8, "kernels_a": 4,
            "kernels_b": 4}
    con.print(f"kernel time below: the {GROUP_STATISTIC} (their sum can differ from kernel_us, a median)",
              markup=False, highlight=False)
    for by, title in ((["category"], "by op category"), (["region"], "by phase (record_function region)")):
        t = compare_kernels(ka, kb, by)
        con.print(rich_table(t.head(rows), {by[0]: by[0], **cols}, title=title, formats=formats, priorities=prio,
                             text={by[0]}, wrap={by[0]: 24}, **opts))
    ka2, kb2 = ka.assign(kernel=ka.name.map(short_kernel_name)), kb.assign(kernel=kb.name.map(short_kernel_name))
    t = compare_kernels(ka2, kb2, ["op_name", "kernel"])
    if t.kernel.astype(str).equals(t.op_name.astype(str)):  # on a CPU the rows are the ops themselves
        con.print(rich_table(t.head(rows), {"op_name": "op", **cols}, title="by op", formats=formats,
                             priorities={**prio, "op_name": 10}, text={"op_name"}, wrap={"op_name": 24}, **opts))
        return
    con.print(rich_table(t.head(rows), {"op_name": "op", "kernel": "kernel", **cols}, title="by kernel",
                         formats=formats, priorities={**prio, "op_name": 10, "kernel": 10}, text={"op_name", "kernel"},
                         wrap={"op_name": 16, "kernel": 24}, **opts))

"""`wlprof predict --train RUNS --test RUNS`: the Level 0-3 performance models, scored on unseen runs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from wlprof.cli.common import console, handle_errors
from wlprof.cli.options import DEFAULT_TRACES, AllowMixed, Traces, Wide, epilog

EXAMPLES = epilog("wlprof predict --train RUN_A --test RUN_B",
                  "wlprof predict --train-traces offline/ --test RUN_ID",
                  "wlprof predict --train-traces offline/ --test RUN_ID --out scores.md",
                  "wlprof predict --profile benchmarks/profiles/h200 --test RUN_ID",
                  "wlprof predict --profile benchmarks/profiles/h200 --spec 'moe tokens=4096 experts=32 top_k=2 routing=zipf:1.1'",
                  "wlprof predict --profile benchmarks/profiles/h200 --trace step.pt.trace.json.gz --scale batch=4")


DEFAULT_TOP = 15  # op rows in a --spec or --trace breakdown

# The options one mode takes and the other would ignore: (option, its parameter, the rule)
PROFILE_ONLY = (("--scale", "scale", "applies only with --profile and --trace (it rescales the trace's shapes)"),
                ("--top", "top", "applies only with --profile and --spec or --trace (the op rows of their "
                 "breakdown)"),
                ("--refit", "refit", "applies only with --profile (it fits the profile's runs again)"),
                ("--dtype", "dtype", "applies only with --profile and --spec (a run keeps its own dtypes)"))
TRAIN_ONLY = (("--train", "train", "does not apply with --profile, --spec or --trace (they predict from the "
               "profile)"),
              ("--train-traces", "train_traces", "does not apply with --profile, --spec or --trace (they predict "
               "from the profile)"),
              ("--allow-mixed-devices", "allow_mixed_devices", "does not apply with --profile, --spec or --trace "
               "(a profile is of one device)"))


def _refuse_other_mode(with_profile: bool, **given) -> None:
    """Refuse an option the chosen mode would ignore: a --profile option when fitting on --train runs, a
    --train option with --profile, --spec or --trace."""
    from wlprof.errors import InputError

    for flag, name, rule in TRAIN_ONLY if with_profile else PROFILE_ONLY:
        value = given[name]
        if value is not None and value is not False:
            raise InputError(flag, rule, str(value) if isinstance(value, Path) else value)


@handle_errors
def predict(
    test: Annotated[list[str] | None, typer.Option(
        "--test", help="Run ids to score on (comma-separated or repeated); required unless --spec or --trace.")] = None,
    train: Annotated[list[str] | None, typer.Option(
        "--train", help="Run ids to fit on (comma-separated or repeated). Default: every run in --train-traces.")] = None,
    traces: Traces = DEFAULT_TRACES,
    train_traces: Annotated[Path | None, typer.Option(
        "--train-traces", help="Traces folder of the --train runs, e.g. an offline profile kept apart. "
        "Default: --traces.", metavar="DIR")] = None,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Also write the scores as Markdown to this file. Default: none.")] = None,
    allow_mixed_devices: AllowMixed = False,
    profile: Annotated[Path | None, typer.Option(
        "--profile", help="An offline profile (`wlprof profile -o DIR`): Level 3 from it instead of --train. Default: none.",
        metavar="DIR")] = None,
    spec: Annotated[str | None, typer.Option(
        "--spec", help="With --profile: a configuration to predict without running it, 'WORKLOAD KEY=VALUE ...'. Default: none.",
        metavar="SPEC")] = None,
    trace: Annotated[Path | None, typer.Option(
        "--trace", help="With --profile: a torch.profiler trace whose first step to predict. Default: none.", metavar="FILE")] = None,
    scale: Annotated[str | None, typer.Option(
        "--scale", help="With --trace: rewrite one dimension, DIM=FACTOR (batch=4, or a dimension's value: 4096=2): "
        "every input dimension equal to its value, so one that only equals it changes too. Default: none.",
        metavar="DIM=FACTOR")] = None,
    dtype: Annotated[str | None, typer.Option("--dtype", help="With --spec: the dtype. Default: bfloat16.")] = None,
    top: Annotated[int | None, typer.Option(
        "--top", help="With --spec or --trace: op rows in the breakdown (0: all). Default: 15.")] = None,
    refit: Annotated[bool, typer.Option("--refit", help="With --profile: fit the profile's runs again.")] = False,
    wide: Wide = False,
) -> None:
    """Fit the ladder on --train runs and score every level per family on --test runs; with
    --profile, predict runs, a --spec configuration or a --trace never profiled.

    The Level-3 use: profile offline into a folder of its own, then
    `wlprof predict --train-traces offline --test RUN...` scores what the profile predicts.
    """
    from wlprof.analysis import models
    from wlprof.cli.markdown import rich_table, table
    from wlprof.errors import InputError, did_you_mean
    from wlprof.store.runs import list_runs
    from wlprof.store.selection import load_runs, ls_hint, require_folder, split_runs

    with_profile = profile is not None or spec is not None or trace is not None
    if out is not None:  # before any fit: a file that cannot be written is said at once
        from wlprof.store.runs import check_writable_file

        check_writable_file(out, "--out", "a Markdown file", "the scores")
    _refuse_other_mode(with_profile, scale=scale, top=top, refit=refit, dtype=dtype, train=train,
                       train_traces=train_traces, allow_mixed_devices=allow_mixed_devices)
    if with_profile:
        from wlprof.cli import predict_profile

        if profile is None:
            raise InputError("--profile", "must name the profile to predict from (`wlprof profile -o DIR`)", None)
        if sum(x is not None for x in (split_runs(test) or None, spec, trace)) != 1:
            given = [n for n, v in (("--test", split_runs(test)), ("--spec", spec), ("--trace", trace)) if v]
            raise InputError("--profile", "takes exactly one of --test RUN..., --spec SPEC and --trace FILE",
                             ", ".join(given) or "none of them")
        if scale is not None and trace is None:
            raise InputError("--scale", "applies only with --trace (it rescales the trace's shapes)", scale)
        if dtype is not None and spec is None:
            raise InputError("--dtype", "applies to --spec (a trace or a run keeps its own dtypes)", dtype)
        if top is not None and top < 0:
            raise InputError("--top", "must be 0 (all) or a positive number", top)
        if top is not None and spec is None and trace is None:
            raise InputError("--top", "applies only with --spec or --trace (the op rows of their breakdown)", top)
        top = DEFAULT_TOP if top is None else top
        if spec is not None:
            return predict_profile.spec(profile, spec, dtype, top, out, refit, wide)
        if trace is not None:
            return predict_profile.trace(profile, trace, scale, top, out, refit, wide)
        return predict_profile.score(profile, split_runs(test), traces, out, refit, wide)

    train_root = train_traces if train_traces is not None else traces
    require_folder(traces)
    if train_traces is not None:
        require_folder(train_traces, "--train-traces")
    tr, te = split_runs(train), split_runs(test)
    known_test = [m["run_id"] for m in list_runs(traces)]
    for r in te:  # the runs to score first: a missing one is named before any other check
        if r not in known_test:
            raise InputError("--test", f"must name runs in {traces}/ ({ls_hint(traces)})", r,
                             hint=did_you_mean(r, known_test))
    if train is not None and not tr:
        raise InputError("--train", "must name at least one run", train)
    if not tr:
        tr = [m["run_id"] for m in list_runs(train_root)]
        if not tr:
            raise InputError("--train-traces" if train_traces is not None else "--traces",
                             "must hold at least one run to fit on", str(train_root))
    if not te:
        raise InputError("--test", "must name at least one run", test)
    overlap = sorted(set(tr) & set(te))
    if overlap:
        raise InputError("--test", "must not overlap --train (a model is scored on runs it did not see)", overlap)
    ops_tr = load_runs(train_root, "ops", tr, "--train", None, allow_mixed_devices)
    ops_te = load_runs(traces, "ops", te, "--test", None, allow_mixed_devices)
    devices = sorted(set(ops_tr.device_name) | set(ops_te.device_name))
    if len(devices) > 1 and not allow_mixed_devices:
        raise InputError("--test", "must come from the device --train came from, or pass --allow-mixed-devices",
                         devices)
    f_tr, f_te = models.features(ops_tr), models.features(ops_te)
    if f_te.empty:
        raise InputError("--test", "must contain op calls with known FLOPs and bytes", te)
    ladder = models.fit(f_tr)
    op_scores, step_scores = models.score(ladder, f_te)
    merged = op_scores.merge(step_scores, on=["model", "family"])
    from wlprof.cli import render

    cols = {"model": "model", "family": "family", "ops": "op\ncalls", "within_10pct": "within\n±10%",
            "time_within_10pct": "their\ntime", "median_ape": "median\n|error|", "steps": "steps",
            "step_within_5pct": "steps\nwithin ±5%", "step_median_ape": "step median\n|error|"}
    formats = {"within_10pct": render.percent, "time_within_10pct": render.percent, "median_ape": render.percent,
               "step_within_5pct": render.percent, "step_median_ape": render.percent}
    prio = {"model": 10, "family": 10, "within_10pct": 9, "median_ape": 8, "step_within_5pct": 8, "ops": 6,
            "time_within_10pct": 6, "steps": 5, "step_median_ape": 7}
    con = console(wide=wide)
    coverage = len(f_te) / max(len(ops_te), 1)
    con.print(f"trained on {len(f_tr):,} op calls from {len(tr)} run{'' if len(tr) == 1 else 's'}; "
              f"scored on {len(f_te):,} op calls "
              f"({coverage:.0%} of the test runs' op calls have known FLOPs and bytes)")
    sources = ladder.sources(f_te)
    con.print("L3 answered from: " + ", ".join(f"{k} {v:.0%}" for k, v in sources.items())
              + " (same point: the call profiled in the same sweep point of --train; same call: profiled "
              f"elsewhere there; nearest: shapes within {models.NEAREST_MAX_RATIO:g}x; regression: none of these). "
              "The noise floor: the same call in the other profiled steps of its run.")
    unseen = sorted(set(f_te.workload.dropna()) - set(f_tr.workload.dropna())) if "workload" in f_te else []
    if unseen:
        con.print(f"[yellow]note: --train holds no run of {', '.join(unseen)} (it holds "
                  f"{', '.join(sorted(set(f_tr.workload.dropna()))) or 'none'}): those calls are extrapolated "
                  "from other workloads' ops, mostly by the regression (`wlprof predict --profile` answers any "
                  "workload from the profile grid)[/yellow]")
    con.print(rich_table(merged, cols, title="Level 0-3 performance models on held-out runs", formats=formats,
                         priorities=prio, text={"model", "family"}, wrap={"family": 20}, wide=wide,
                         width=con.width))
    if out is not None:
        from wlprof.store.atomic import atomic_write_bytes

        text = (f"Trained on {', '.join(tr)}; tested on {', '.join(te)} ({devices[0]}). L3 answered from: "
                + ", ".join(f"{k} {v:.1%}" for k, v in sources.items()) + ".\n\n"
                + table(merged, cols, formats=formats))
        atomic_write_bytes(out, text.encode())
        con.print(f"wrote {out}")

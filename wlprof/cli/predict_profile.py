"""`wlprof predict --profile DIR ...`: Level 3 from an offline profile, on runs, a spec or a scaled trace.

Three uses, one profile (`wlprof profile`):

- `--test RUN...`: score held-out runs, every model of the ladder per family, with the noise floor;
- `--spec 'WORKLOAD KEY=VALUE ...'`: a configuration never run, its calls listed without a GPU;
- `--trace FILE [--scale DIM=FACTOR]`: an ingested step, its shapes rewritten along one dimension.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from wlprof.cli import render

OP_COLS = {"model": "model", "family": "family", "ops": "op calls", "within_10pct": "within ±10%",
           "time_within_10pct": "their time share", "median_ape": "median |error|", "steps": "steps",
           "step_within_5pct": "steps within ±5%", "step_median_ape": "step median |error|"}
TIMELINE_COLS = {"family": "family", "steps": "steps", "kernel_within_5pct": "step kernel time within ±5%",
                 "kernel_median_ape": "its median |error|", "points": "points",
                 "b2b_within_10pct": "back-to-back within ±10%", "b2b_median_ape": "its median |error|",
                 "latency_within_10pct": "latency within ±10%", "latency_median_ape": "its median |error| "}
SHARE_COLS = ("within_10pct", "time_within_10pct", "median_ape", "step_within_5pct", "step_median_ape",
              "kernel_within_5pct", "kernel_median_ape", "b2b_within_10pct", "b2b_median_ape",
              "latency_within_10pct", "latency_median_ape")
BREAKDOWN_COLS = {"op": "op", "shapes": "input shapes", "calls": "calls", "pred_us": "predicted µs",
                  "each_us": "µs each", "share": "share", "source": "source"}
BREAKDOWN_FORMATS = {"share": render.percent}  # a call group's share of the step's predicted time
BREAKDOWN_PRIORITY = {"op": 10, "pred_us": 9, "share": 9, "source": 7, "each_us": 6, "calls": 6, "shapes": 5,
                      "measured_us": 8}


def _write(out: Path | None, text: str, con) -> None:
    if out is None:
        return
    from wlprof.store.atomic import atomic_write_bytes

    atomic_write_bytes(out, text.encode())
    con.print(f"wrote {out}")


def score(profile: Path, test: list[str], traces: Path, out: Path | None, refit: bool,
          wide: bool = False) -> None:
    """Score held-out runs with the profile's predictor beside L0-L2 and the noise floor."""
    from wlprof.cli.common import console
    from wlprof.cli.markdown import rich_table, table
    from wlprof.errors import InputError
    from wlprof.predict.profile import load_profile, profile_tables
    from wlprof.predict.report import placed_against, score_runs
    from wlprof.store.selection import load_runs

    con = console(wide=wide)
    predictor, host, info = load_profile(profile, refit)
    overlap = sorted(set(test) & {s.get("run_id") for s in info.get("sections", [])})
    if overlap:
        raise InputError("--test", "must not be runs of the profile (a model is scored on runs it did not see)",
                         overlap)
    ops = load_runs(traces, "ops", test, "--test")
    steps = load_runs(traces, "steps", test, "--test")
    prof_ops = profile_tables(profile)[0]
    devices = sorted(set(ops.device_name.dropna()) | set(prof_ops.device_name.dropna()))
    if len(devices) > 1:
        measured = sorted(set(prof_ops.device_name.dropna().astype(str)))
        raise InputError("--test", f"must come from the device the profile was measured on ({', '.join(measured)})",
                         sorted(set(ops.device_name.dropna().astype(str))),
                         hint="a profile of that device: `wlprof profile --device cuda -o profiles/DEVICE` on it "
                              "(--budget-minutes sets its GPU time)")
    if "ceiling_tflops" not in ops or ops.ceiling_tflops.isna().all():
        ops = placed_against(ops, info.get("ceilings"))  # an ingested trace: L0-L2 need a peak and a roof
    res = score_runs(predictor, host, prof_ops, ops, steps)
    merged = res["ops"].merge(res["steps"], on=["model", "family"])
    src = ", ".join(f"{k} {v:.1%}" for k, v in res["sources"].items())
    head = (f"Profile {profile} ({info.get('gpu_minutes') or info.get('grid_seconds', '?')} "
            f"{'GPU-minutes' if info.get('gpu_minutes') else 's'}); scored {res['scored_calls']:,} op calls with "
            f"known FLOPs and bytes of {res['calls']:,} in {len(test)} run{'s' if len(test) != 1 else ''}. "
            f"L3 answered from: {src}.")
    from wlprof.cli import render

    formats = {c: render.percent for c in SHARE_COLS}  # shares as percentages, as `predict --train` prints them
    con.print(head)
    con.print(rich_table(merged, OP_COLS, title="Level 0-3 on runs the profile never saw", wide=wide,
                         width=con.width, formats=formats))
    con.print(rich_table(res["timeline"], TIMELINE_COLS, title="Whole steps (every call) and their timings",
                         wide=wide, width=con.width, formats=formats))
    _write(out, f"{head}\n\n{table(merged, OP_COLS, formats=formats)}\n"
                f"{table(res['timeline'], TIMELINE_COLS, formats=formats)}", con)


def _predict_and_show(title: str, ops: pd.DataFrame, predictor, host, top: int, out: Path | None, con,
                      measured: pd.DataFrame | None = None, wide: bool = False,
                      unscaled: pd.DataFrame | None = None, same_device: bool = False) -> pd.DataFrame:
    """Predict each point of `ops` and print its breakdown; `unscaled` (a rescaled trace's calls as
    recorded, same index): the calls the profile cannot answer anchored on their measured times
    (`scale.anchored`); `same_device`: the trace was recorded on the profile's device."""
    from wlprof.cli.markdown import rich_table, table
    from wlprof.predict.report import breakdown, predict_calls, source_labels
    from wlprof.predict.steps import times_of

    lines = [title, ""]
    rows = []
    keys = [k for k in ("variant", "point") if k in ops]
    groups = ops.groupby(keys, sort=False) if keys else [((), ops)]
    for key, g in groups:
        g = g.sort_values("ts_us", kind="stable") if "ts_us" in g else g
        d, pred, src = predict_calls(predictor, g)
        note = ""
        if unscaled is not None and "measured_us" in g:
            from wlprof.predict.model import base_us
            from wlprof.predict.scale import anchored

            d_u, pred_u, _ = predict_calls(predictor, unscaled.loc[g.index])
            rb = base_us(d, predictor.constants) / base_us(d_u, predictor.constants)
            pred, mask = anchored(pred, pred_u, src, g.measured_us.to_numpy(), d.rows_unknown.to_numpy(dtype=bool),
                                  rb)
            if "backward_shift" in d:  # an anchored call is answered from its measured time, not its class
                d["backward_shift"] = d.backward_shift.to_numpy(dtype=bool) & ~mask
            if mask.any():
                note = (f"; {int(mask.sum())} of {len(g)} calls (ops the profile holds nothing of, or cannot "
                        "size) scaled from their measured times" + ("" if same_device else
                                                                   ", on the trace's device, not the profile's"))
        b2b, lat = times_of(d, pred, host)
        label = key[0] if isinstance(key, tuple) and key else str(key)
        unpriced = _unpriced_note(g, pred, src)
        row = {"point": label, "calls": len(g), "kernel_us": float(pred.sum()), "back_to_back_us": b2b,
               "latency_us": lat, "answered near or same": float(np.isin(src, (0, 1)).mean())}
        if "measured_us" in g:
            row["measured_kernel_us"] = float(pd.to_numeric(g.measured_us, errors="coerce").sum())
        rows.append(row)
        bd = breakdown(g, pred, src, top, source_labels(d, src))
        cols = dict(BREAKDOWN_COLS)
        if "measured_us" in bd:
            cols["measured_us"] = "measured µs (unscaled)"
        measured_note = ""
        if "measured_kernel_us" in row and unscaled is None and row["measured_kernel_us"] > 0:
            measured_note = f" (measured {row['measured_kernel_us']:,.1f} µs)"
        msg = (f"{label}: {len(g):,} call{'' if len(g) == 1 else 's'}, kernel time {pred.sum():,.1f} µs"
               f"{measured_note}, back to back {b2b:,.1f} µs/step, one call {lat:,.1f} µs{note}")
        transfers = [*predictor.transfer_notes(d), *predictor.backward_notes(d, g.op_name)]
        con.print(msg)
        for t in transfers:
            con.print(t)
        if unpriced:
            con.print(f"[yellow]{unpriced}[/yellow]")
            transfers = [*transfers, unpriced]
        con.print(rich_table(bd, cols, wide=wide, width=con.width, priorities=BREAKDOWN_PRIORITY,
                             wrap={"shapes": 24}, formats=BREAKDOWN_FORMATS))
        lines += [f"## {label}", "", msg, "", *[x for t in transfers for x in (t, "")],
                  table(bd, cols, formats=BREAKDOWN_FORMATS)]
    summary = pd.DataFrame(rows)
    _write(out, "\n".join(lines), con)
    return summary


def _unpriced_note(g: pd.DataFrame, pred: np.ndarray, src: np.ndarray) -> str | None:
    """A line for the calls the profile prices by their bytes alone: ops with no FLOP formula (a custom op,
    a fused kernel) that neither their op's calls in the profile nor its other layouts answer (`class`,
    `base`). Their predicted time is a bytes-and-floor guess, whatever work they do; with the trace's
    measured times, the line says how much of the step that guess stands for."""
    from wlprof.predict.model import SOURCES

    if "flops" not in g or not len(g):
        return None
    from wlprof.cost import registry

    flops = pd.to_numeric(g.flops, errors="coerce").to_numpy(dtype=float)
    # no FLOPs: the formula found none (flops_source `unknown`), or there is no formula (a call whose shapes
    # `--scale` rewrote has its recorded cost dropped, so its source is empty)
    formula = np.array([registry.has_formula(n) for n in g.op_name.astype(str)], dtype=bool)
    unknown = (g.flops_source.astype(object).to_numpy() == "unknown") if "flops_source" in g \
        else np.ones(len(g), dtype=bool)
    hit = np.isnan(flops) & (src >= SOURCES.index("class")) & (unknown | ~formula)
    if not hit.any():
        return None
    names = g.op_name.astype(str).to_numpy()[hit]
    measured = pd.to_numeric(g.measured_us, errors="coerce").to_numpy(dtype=float)[hit] if "measured_us" in g \
        else np.full(int(hit.sum()), np.nan)
    weight = pd.Series(np.where(np.isfinite(measured), measured, pred[hit])).groupby(names).sum()
    top = ", ".join(weight.sort_values(ascending=False).index[:3])
    n = int(hit.sum())
    line = (f"{n} call{'s' if n != 1 else ''} of ops with no FLOP formula ({top}{', ...' if len(weight) > 3 else ''}) "
            f"priced by {'their' if n != 1 else 'its'} bytes alone: {pred[hit].sum():,.1f} µs predicted is a "
            "guess at the bytes and the launch floor, whatever work they do")
    total = float(np.nansum(pd.to_numeric(g.measured_us, errors="coerce"))) if "measured_us" in g else 0.0
    if total > 0 and np.isfinite(measured).any():
        line += (f"; measured {np.nansum(measured):,.1f} µs, {np.nansum(measured) / total:.0%} of the trace's "
                 "kernel time")
    return line


def spec(profile: Path, text: str, dtype: str | None, top: int, out: Path | None, refit: bool,
         wide: bool = False) -> None:
    from wlprof.cli.common import console
    from wlprof.predict.profile import load_profile
    from wlprof.predict.spec import parse_spec, record

    con = console(wide=wide)
    predictor, host, info = load_profile(profile, refit)
    sp = parse_spec(text)
    ops = record(sp, dtype, launching=frozenset(predictor.meta.get("op_names", [])), device_label=_gpu(info),
                 device_memory=(info.get("device") or {}).get("memory_bytes"))
    head = f"predicted for {_gpu(info)} from profile {profile}; calls listed on the meta device"
    con.print(head, highlight=False)
    _predict_and_show(f"# {text}\n\n{head[0].upper()}{head[1:]}.", ops, predictor, host, top, out, con, wide=wide)


def _gpu(info: dict) -> str:
    """The GPU a profile was measured on, as its profile.json names it."""
    return str((info.get("device") or {}).get("name") or "the profile's GPU")


def trace(profile: Path, path: Path, scale_text: str | None, top: int, out: Path | None, refit: bool,
          wide: bool = False) -> None:
    from wlprof.cli.common import console
    from wlprof.errors import InputError, TraceFormatError
    from wlprof.predict.profile import load_profile
    from wlprof.predict.scale import describe, ingest_trace, parse_scale, scaled
    from wlprof.trace.join import NO_STEP_MARKERS

    con = console(wide=wide)
    if not Path(path).is_file():
        raise InputError("--trace", "must be an existing torch.profiler trace file" + (
            " (it names a folder: pass one of its traces)" if Path(path).is_dir() else " (no such file)"), str(path))
    parsed = parse_scale(scale_text) if scale_text else None  # refused before the trace is read
    predictor, host, info = load_profile(profile, refit)
    try:
        ops = ingest_trace(str(path), info.get("ceilings"))
    except TraceFormatError as exc:
        raise InputError("--trace", f"must be a torch.profiler trace: {exc.problem}", str(path)) from None
    # what is said before the table, said once the scaling (which may refuse) is done: an error leaves no part
    # of an answer on stdout
    said = [(f"predicted for {_gpu(info)} from profile {profile}", False)]
    notes = []
    if NO_STEP_MARKERS in ops.attrs.get("warnings", []):
        notes.append(f"{Path(path).name}: {NO_STEP_MARKERS}, and predicted as one (a torch.profiler "
                     "schedule marks each step)")
        said.append((f"[yellow]{notes[-1]}[/yellow]", None))
    steps = sorted(s for s in ops.step.unique() if s >= 0) if "step" in ops else []
    if steps:  # one step: the first profiled one
        ops = ops[ops.step == steps[0]]
    for note in _trace_notes(Path(path).name, ops, info):
        notes.append(note)
        said.append((f"[yellow]{note}[/yellow]", None))
    gpu_profile = (info.get("device") or {}).get("type") == "cuda"
    whole = ops
    if gpu_profile and len(ops) and "device_type" in ops and (ops.device_type == "cpu").all():
        compiled = compiled_note(ops)
        ops, left_out = _cpu_calls(path, ops, predictor)
        gpu = (info.get("device") or {}).get("name", "the profile")
        said.append((f"[yellow]{Path(path).name} ran on the CPU: its op calls are predicted as "
                     f"{gpu} would launch them (on each branch "
                     "of the op tree the outermost op that launches kernels there); its CPU times are not "
                     "comparable and are not shown[/yellow]", None))
        if len(left_out):
            notes.append(left_out_note(left_out, gpu))
            said.append((f"[yellow]{notes[-1]}[/yellow]", None))
        if compiled:
            notes.append(compiled)
            said.append((f"[yellow]{notes[-1]}[/yellow]", None))
    unscaled, same_device = None, False
    if parsed:
        dim, factor = parsed
        unscaled = ops
        ops, value = scaled(ops, dim, factor, whole=whole)
        _check_fits(ops, info, dim, value, factor)
        said.append((describe(unscaled, ops, dim, value, factor), None))
        names = set(ops.device_name.dropna().astype(str)) if "device_name" in ops else set()
        same_device = names == {str((info.get("device") or {}).get("name"))}
        title = (f"# {path} with {dim} ({value}) x {factor:g}\n\nPredicted for {_gpu(info)} from profile {profile}; "
                 "measured µs: the trace's own calls before scaling.")
    else:
        ops = ops.assign(measured_us=pd.to_numeric(ops.dur_us, errors="coerce"))
        title = f"# {path}\n\nPredicted for {_gpu(info)} from profile {profile} beside the trace's measured calls."
    for text, highlight in said:
        con.print(text, highlight=highlight)
    ops = ops.assign(variant=str(Path(path).name))
    if "measured_us" in ops and pd.to_numeric(ops.measured_us, errors="coerce").isna().all():
        ops = ops.drop(columns="measured_us")  # a CPU trace: no device times to set beside the prediction
        title = title.split(";")[0].split(" beside")[0] + "."
    for note in notes:
        title += f"\n\n{note}."
    _predict_and_show(title, ops, predictor, host, top, out, con, wide=wide, unscaled=unscaled,
                      same_device=same_device)


def _check_fits(ops: pd.DataFrame, info: dict, dim: str, value, factor: float) -> None:
    """Refuse a scaled step one op of which would need more than the profiled GPU's memory for its own tensors
    (the bytes it reads and writes, as its cost counts them): it could never run there."""
    from wlprof.errors import InputError
    from wlprof.predict.calls import describe as described
    from wlprof.study import MEMORY_SHARE

    memory = (info.get("device") or {}).get("memory_bytes")
    if not memory or not len(ops):
        return
    nbytes = pd.to_numeric(described(ops)["bytes"], errors="coerce").to_numpy(dtype=float)
    if not np.isfinite(nbytes).any() or np.nanmax(nbytes) <= MEMORY_SHARE * memory:
        return
    i = int(np.nanargmax(nbytes))
    op = str(ops.op_name.iloc[i]) if "op_name" in ops else "an op"
    raise InputError("--scale", f"must leave each op within the profiled GPU's memory: with {dim} ({value}) x "
                     f"{factor:g}, {op} alone reads and writes about {nbytes[i] / 2**30:,.1f} GiB, more than "
                     f"{MEMORY_SHARE:.0%} of {_gpu(info)}'s {memory / 2**30:,.1f} GiB", f"{dim}={factor:g}")


def _trace_notes(name: str, ops: pd.DataFrame, info: dict) -> list[str]:
    """What makes a trace's prediction weaker than the profile's: a GPU other than the profile's (the
    measured times beside the prediction are of that GPU), and ops recorded without shapes (their calls
    cannot be sized)."""
    out = []
    prof = str((info.get("device") or {}).get("name") or "")
    gpu = ops[ops.device_type.astype(str) == "cuda"] if "device_type" in ops else ops.iloc[:0]
    names = sorted(set(gpu.device_name.dropna().astype(str))) if "device_name" in gpu else []
    if prof and names and names != [prof]:
        out.append(f"{name} was recorded on {', '.join(names)}, the profile on {prof}: the prediction is for "
                   f"{prof}, the measured times beside it are of the trace's GPU")
    if "op_input_dims" in ops and len(ops):
        dims = ops.op_input_dims.astype(object).map(lambda v: v is not None and str(v).strip("[] ,") != "")
        if not dims.any():
            out.append(f"{name} recorded no shapes (profile with torch.profiler.profile(record_shapes=True)): "
                       "its calls cannot be sized, and each is predicted from its op alone, near the launch floor")
        elif "op_input_types" in ops:
            unrec = [_lists_unrecorded(t, d) for t, d in zip(ops.op_input_types, ops.op_input_dims, strict=True)]
            names = sorted(set(ops.op_name[np.array(unrec, dtype=bool)].astype(str)))
            if names:
                out.append(f"{sum(unrec)} calls of {', '.join(names)} have tensor lists recorded as [] (torch.profiler "
                           "records none of more than 30 tensors, and torch 2.1 and earlier none at all) whose shapes neither the backward's gradients "
                           "nor their launches confirm: they cannot be sized, and each is predicted from its op "
                           "alone")
    return out


def _lists_unrecorded(types, dims) -> bool:
    """Whether a call's first TensorList was recorded as `[]`."""
    import json

    if not isinstance(types, str) or not isinstance(dims, str) or "TensorList" not in types:
        return False
    try:
        t, d = json.loads(types), json.loads(dims)
    except ValueError:
        return False
    first = next((d[i] for i, x in enumerate(t) if x == "TensorList" and i < len(d)), None)
    return first == []


def _cpu_calls(path: Path, ops: pd.DataFrame, predictor) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A CPU trace's calls as CUDA launches them (`spec.calls_and_left_out`) within the step `ops`
    holds, and the costed ops of that step no call covers (not predicted)."""
    from wlprof.predict.spec import calls_and_left_out

    calls, left = calls_and_left_out(str(path), frozenset(predictor.meta.get("op_names", [])))
    # by the step each op ran in, not by the times of `ops`: those are the working ops, and the outer op
    # a call or a left-out op is begins before the first of them (a step's first convolution)
    step = set(ops.step) if "step" in ops else set(calls.trace_step)
    calls = calls[calls.trace_step.isin(step)].drop(columns="trace_step")
    left = left[left.trace_step.isin(step)].drop(columns="trace_step")
    return (calls.assign(device_type="cpu", device_name=str(ops.device_name.iat[0]), workload="ingest",
                         run_id="trace", point=0).reset_index(drop=True), left.reset_index(drop=True))


# the ops torch.compile'd code runs in; on a CPU, Inductor's fused C++ kernels run inside them with no op of
# their own in the trace, so their time is these ops' own (exclusive) time
COMPILED_REGIONS = ("Torch-Compiled Region", "CompiledFunction", "CompiledFunctionBackward")


def compiled_note(ops: pd.DataFrame) -> str | None:
    """What a CPU step's torch.compile'd regions did that no call stands for: their own time, which on a CPU
    is Inductor's fused kernels (unrecorded as ops) and the wrapper's overhead; None without such regions."""
    if not len(ops) or "op_name" not in ops or "dur_us" not in ops:
        return None
    names = ops.op_name.astype(str)
    hit = names.str.startswith(COMPILED_REGIONS[0]) | names.isin(COMPILED_REGIONS[1:])
    if not hit.any():
        return None
    dur = pd.to_numeric(ops.dur_us, errors="coerce").fillna(0.0)
    own, total = float(dur[hit].sum()), float(dur.sum())
    regions = ", ".join(sorted(set(names[hit])))
    share = f", {own / total:.0%} of the step's {total:,.1f} µs of op time on the CPU" if total > 0 else ""
    return (f"left out, not predicted: the work inside torch.compile'd regions ({regions}) that no recorded op "
            f"stands for, {own:,.1f} µs of their own time{share}: on a CPU Inductor's fused C++ kernels run "
            "there with no op in the trace (only the ATen ops it calls out to, such as GEMMs, are calls here); "
            "the step's predicted times lack them")


def left_out_note(left: pd.DataFrame, gpu: str) -> str:
    """What a CPU trace's prediction leaves out: the ops that did work on the CPU but that neither
    launch on the GPU as recorded nor are held by the profile, counted by name."""
    counts = left.op_name.value_counts(sort=False)
    counts = counts.sort_values(ascending=False, kind="stable")
    named = ", ".join(f"{name} ({n})" for name, n in counts.items())
    return (f"left out, not predicted: {len(left)} call{'s' if len(left) != 1 else ''} that did work on the CPU "
            f"but whose op {gpu} does not launch under that name and the profile does not hold "
            f"(the step's predicted times lack them): {named}")

"""`wlprof calibrate`: measure this device's ceilings (matrix rate per dtype; main-memory read, write and
copy bandwidth; the caches' bandwidth) and cache them; `--show` prints the cached ones."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from wlprof.cli.common import console, handle_errors
from wlprof.cli.options import Device, epilog

EXAMPLES = epilog("wlprof calibrate", "wlprof calibrate --device cpu --quick", "wlprof calibrate --show",
                  "wlprof calibrate --out h200-ceilings.json")


def _bytes(n) -> str:
    if not n:
        return "-"
    for div, unit in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if n >= div:
            return f"{n / div:,.1f} {unit}".replace(".0 ", " ")
    return f"{n} B"


def _sizes(sizes: dict) -> str:
    parts = []
    for k, v in sizes.items():
        if v is None:
            continue
        parts.append(f"{k} {_bytes(v)}" if "bytes" in k else f"{k} {v:,}" if isinstance(v, int) else f"{k} {v}")
    return ", ".join(parts)


def ceilings_table(c):
    """A rich table of every ceiling: median, spread, method and sizes, the datasheet beside."""
    from rich.table import Table

    from wlprof.store.selection import _rate

    sheet = c.datasheet or {}
    t = Table(title=f"{c.device_name}: ceilings measured {c.measured_at} (torch {c.torch_version}, format "
              f"{c.format_version}{f', migrated from {c.migrated_from}' if c.migrated_from else ''})",
              title_justify="left")
    # the ceiling is the repeats' median on a GPU, their 90th percentile on a CPU (a busy CPU only slows a
    # repeat down)
    stat = "p90" if (c.method or {}).get("statistic") == "p90" else "median"
    for col, j in (("ceiling", "left"), (stat, "right"), ("p10-p90", "right"), ("min-max", "right"),
                   ("n", "right"), ("method (sizes)", "left"), ("datasheet", "right")):
        t.add_column(col, justify=j, overflow="fold" if col.startswith("method") else "ellipsis")

    def row(label, key, value, decimals, sheet_key=None):
        def num(v):  # a CPU's 0.03 TFLOP/s keeps two significant digits instead of reading '0.0'
            return _rate(v, decimals)

        m = c.measurements.get(key)
        spread = f"{num(m.p10)}-{num(m.p90)}" if m is not None and m.p10 is not None else "-"
        extent = f"{num(m.min)}-{num(m.max)}" if m is not None and m.min is not None else "-"
        how = f"{m.method} ({_sizes(m.sizes)})" if m is not None else "-"
        if m is not None and m.alternatives:
            how += "; also " + "; ".join(f"{a['method'].split(':')[0]} {num(a['value'])} {m.unit}"
                                         f" ({_sizes(a.get('sizes') or {})})" for a in m.alternatives)
        t.add_row(label, num(value), spread, extent, str(m.repeats) if m is not None else "-", how,
                  num(sheet[sheet_key]) if sheet_key in sheet else "-")

    for key, val in sorted(c.matrix_tflops.items()):
        label = "tf32 (fp32 inputs)" if key == "tf32" else key
        row(f"matrix {label} TFLOP/s", f"matrix:{key}", val, 1, key)
    row("vector TFLOP/s (fp32 GEMM, TF32 off)", "vector", c.vector_tflops, 1, "vector" if "vector" in sheet else "float32")
    labels = {"read": "read", "write": "write", "copy": "copy (read + write)"}
    for roof, gbps in c.memory_roofs().items():
        level, _, kind = roof.partition("_")
        if kind:
            label = f"{level.upper()} {labels.get(kind, kind)} GB/s"
        else:
            label = f"{level.upper()} read GB/s (working sets up to {_bytes(c.cache_bytes.get(level))})"
        row(label, roof, gbps, 0, "copy_gbps" if kind in ("read", "copy") else None)
    for roof, label in (("host_to_device", "host -> device GB/s (pinned)"), ("device_to_host",
                                                                           "device -> host GB/s (pinned)")):
        if c.bandwidth(roof) is not None:
            row(label, roof, c.bandwidth_gbps[roof], 1)
    return t


def _check_out(out: Path) -> None:
    """An InputError naming --out when the ceilings JSON cannot be written there."""
    from wlprof.errors import InputError
    from wlprof.store.runs import check_writable_file

    if out.is_dir():
        raise InputError("--out", "must be a JSON file, not a folder", str(out))
    check_writable_file(out, "--out", "a JSON file", "the ceilings")


@handle_errors
def calibrate(
    device: Device = None,
    quick: Annotated[bool, typer.Option("--quick", help="Smaller sizes, fewer repeats.")] = False,
    show: Annotated[bool, typer.Option("--show", help="Print the cached ceilings without measuring.")] = False,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Also write the ceilings to this JSON file "
                                             "(for `--ceilings` elsewhere). Default: only the cache.", metavar="FILE")] = None,
    replace: Annotated[bool, typer.Option("--replace", help="Cache the new ceilings even where they measured lower "
                                          "than the cached ones (default: keep the cache then).")] = False,
) -> None:
    """Measure and cache the device's ceilings; runs record which ones they used.

    A ceiling that measures lower than the cached one (beyond the cache's spread) keeps its cached value
    unless `--replace` is given (a busy machine only ever measures low); the ceilings that rose replace theirs.
    """
    from wlprof import jsonio
    from wlprof.ceilings import (
        cache_path,
        keep_higher,
        load_cached,
        lower_than,
        rose_above,
        save,
        stale_against,
    )
    from wlprof.ceilings import calibrate as measure
    from wlprof.device import device_name, resolve_device
    from wlprof.store.atomic import atomic_write_bytes

    if out is not None:  # checked before measuring (minutes on a GPU), not after
        _check_out(out)
    dev = resolve_device(device)
    previous = load_cached(dev.type, device_name(dev))
    kept = False  # the new ceilings measured lower and --replace was not given: the cached ones stay
    risen: list[str] = []  # ... except these, which rose
    if show:
        c = previous
        if c is None:
            typer.echo(f"no cached ceilings for {dev}: run `wlprof calibrate`", err=True)
            raise typer.Exit(1)
        path = cache_path(c.device_type, c.device_name)
    else:
        from wlprof.ceilings import check_cache_writable
        from wlprof.cli.execute import busy_machine_note

        check_cache_writable()

        note = busy_machine_note()
        if note:  # ceilings measured on a busy machine are low, and every later run is placed against them
            console(stderr=True).print(f"[yellow]note: {note}; ceilings measured now may be low (every later "
                                       "run is placed against them): calibrate again on a quiet machine[/yellow]")
        try:
            measured = c = measure(dev, quick=quick)
        except KeyboardInterrupt:
            from wlprof.errors import Interrupted

            kept_as = ("nothing was cached" if previous is None
                       else f"the ceilings cache is as it was ({cache_path(dev.type, device_name(dev))})")
            raise Interrupted(f"{kept_as}: ceilings are cached once every one is measured") from None
        low = lower_than(c, previous) if previous is not None else []
        # a format-1 cache lacks the read, write and cache roofs: the new ceilings replace it anyway
        kept = bool(low) and not replace and previous.migrated_from is None
        risen = rose_above(c, previous) if kept else []
        if kept and risen:  # the ceilings that fell keep their cached values, those that rose replace theirs
            c, _ = keep_higher(c, previous)
        path = cache_path(c.device_type, c.device_name) if kept and not risen else save(c)
    con = console()
    con.print(ceilings_table(c))
    if c.datasheet:
        con.print(f"datasheet: {c.datasheet.get('source')} (shown for reference, never used)")
    errors = (c.method or {}).get("errors")
    if errors:
        con.print(f"[yellow]not measured: {', '.join(f'{k} ({v})' for k, v in errors.items())}[/yellow]")
    inverted = cache_inversions(c)
    if inverted:
        con.print(f"[yellow]{'; '.join(inverted)}: a cache nearer the cores measured slower than one farther "
                  "out, so these numbers are unreliable (a busy machine?): calibrate again on a quiet one[/yellow]")
    if c.method.get("main_past_last_cache") is False:
        con.print(f"[yellow]the main-memory buffers ({_bytes(c.method.get('copy_bytes_each_way'))}) are not past "
                  "the last cache: the dram_* ceilings may be cache rates (a quick calibration)[/yellow]")
    if not show and previous is not None:
        if kept and risen:
            con.print(f"[yellow]kept these from the cache of {previous.measured_at}, which measured lower now "
                      f"({'; '.join(low)}); cached the rest, which rose ({'; '.join(risen)}). A busy machine "
                      "measures low: calibrate again on a quiet one, or pass --replace to cache all of these "
                      "anyway[/yellow]")
        elif kept:
            con.print(f"[yellow]kept the cache of {previous.measured_at}: these measured lower ({'; '.join(low)}). "
                      "A busy machine measures low: calibrate again on a quiet one, or pass --replace to cache "
                      "these anyway[/yellow]")
        elif low:
            con.print(f"[yellow]lower than the cache it replaces (measured {previous.measured_at}): "
                      f"{'; '.join(low)}. A busy machine measures low, and every later run is placed against "
                      "these: calibrate again on a quiet one[/yellow]")
        why = [] if kept and not risen else stale_against(previous, c)
        if why:
            con.print(f"replaces the cache of {previous.measured_at}, now stale: {'; '.join(why)}; runs placed "
                      "against it are marked ceiling_stale in `wlprof report` and `wlprof roofline`")
    if show or not kept or risen:
        con.print(f"cached in {path}")
    else:
        con.print(f"the cache stays in {path}")
    if out is not None:
        atomic_write_bytes(out, jsonio.dumps((c if show else measured).to_dict(), indent=True))
        con.print(f"wrote {out}")


def cache_inversions(c) -> list[str]:
    """Each cache level that measured slower than the next level out (L1 < L2 < ... < main memory's read)."""
    bw = c.bandwidth_gbps or {}
    order = [k for k in ("l1", "l2", "l3") if bw.get(k)] + [k for k in ("dram_read", "hbm_read") if bw.get(k)][:1]
    return [f"{a} {bw[a]:,.0f} < {b} {bw[b]:,.0f} GB/s" for a, b in zip(order, order[1:], strict=False) if bw[a] < bw[b]]

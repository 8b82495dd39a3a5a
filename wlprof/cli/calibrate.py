"""`wlprof calibrate`: measure this device's ceilings (matrix rate per dtype, copy bandwidth)."""

from __future__ import annotations

from typing import Annotated

import typer

from wlprof.cli.common import console, handle_errors
from wlprof.cli.options import Device, epilog

EXAMPLES = epilog("wlprof calibrate", "wlprof calibrate --device cpu --quick", "wlprof calibrate --show")


@handle_errors
def calibrate(
    device: Device = None,
    quick: Annotated[bool, typer.Option("--quick", help="Smaller sizes, fewer repeats.")] = False,
    show: Annotated[bool, typer.Option("--show", help="Print the cached ceilings without measuring.")] = False,
) -> None:
    """Measure and cache the device's ceilings; runs record which ones they used."""
    from rich.table import Table

    from wlprof.ceilings import cache_path, load_cached, save
    from wlprof.ceilings import calibrate as measure
    from wlprof.device import device_name, resolve_device

    dev = resolve_device(device)
    if show:
        c = load_cached(dev.type, device_name(dev))
        if c is None:
            typer.echo(f"no cached ceilings for {dev}: run `wlprof calibrate`", err=True)
            raise typer.Exit(1)
        path = cache_path(c.device_type, c.device_name)
    else:
        c = measure(dev, quick=quick)
        path = save(c)
    sheet = c.datasheet or {}
    t = Table(title=f"{c.device_name}: ceilings measured {c.measured_at} (torch {c.torch_version})",
              title_justify="left")
    t.add_column("ceiling")
    t.add_column("measured", justify="right")
    t.add_column("datasheet", justify="right")
    for key, val in sorted(c.matrix_tflops.items()):
        label = "tf32 (fp32 inputs)" if key == "tf32" else key
        t.add_row(f"matrix {label} TFLOP/s", f"{val:,.1f}", f"{sheet[key]:,.1f}" if key in sheet else "-")
    t.add_row("vector fp32 TFLOP/s (fp32 GEMM, TF32 off)", f"{c.vector_tflops:,.1f}",
              f"{sheet['float32']:,.1f}" if "float32" in sheet else "-")
    t.add_row("copy GB/s (read + write)", f"{c.copy_gbps:,.0f}",
              f"{sheet['copy_gbps']:,.0f}" if "copy_gbps" in sheet else "-")
    con = console()
    con.print(t)
    if sheet:
        con.print(f"datasheet: {sheet.get('source')} (shown for reference, never used)")
    con.print(f"cached in {path}")

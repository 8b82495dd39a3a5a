"""The examples `wlprof run <name> --help` ends with run on a CPU in seconds (docs/architecture.md): no
sweep point they give is larger than the workload's own CPU defaults, or than 256 MiB where those are
smaller (`run elementwise --numel 268435456`, 3 GiB a point, took over three minutes a point here)."""

from __future__ import annotations

import shlex

import pytest
import torch

from wlprof import workloads
from wlprof.device import resolve_dtype
from wlprof.errors import Key

MAX_EXAMPLE_BYTES = 256 * 2**20
# flags of every `run` that choose no size
NOT_SIZES = {"--world-size", "--device", "--quiet", "-q", "--traces", "-t"}


def _examples():
    for wl in workloads.all_workloads():
        for line in wl.examples:
            words = shlex.split(line)
            if words[:3] == ["wlprof", "run", wl.name]:
                yield pytest.param(wl, words[3:], id=line)


def _flags(words: list[str]) -> dict[str, str]:
    flags, i = {}, 0
    while i < len(words):
        flags[words[i]] = words[i + 1] if i + 1 < len(words) and not words[i + 1].startswith("-") else ""
        i += 2 if flags[words[i]] else 1
    return flags


@pytest.mark.parametrize(("wl", "words"), list(_examples()))
def test_a_help_example_runs_at_cpu_sizes(wl, words):
    flags = _flags(words)
    by_flag = {p.flag: p.name for p in wl.params}
    raw = {by_flag[f]: v for f, v in flags.items() if f not in NOT_SIZES and f != "--dtype"}
    cpu = torch.device("cpu")
    dtype = resolve_dtype(flags.get("--dtype"), cpu, Key("dtype", "study"))
    points = wl.points(wl.parse(raw, cpu, dtype).spec)
    worst = max(points, key=lambda p: wl.estimate_bytes(p, dtype))
    need = wl.estimate_bytes(worst, dtype)
    defaults = wl.points(wl.parse({}, cpu, torch.float32).spec)
    bound = max([MAX_EXAMPLE_BYTES] + [wl.estimate_bytes(p, torch.float32) for p in defaults])
    assert need <= bound, f"{worst.variant}: {need / 2**20:,.0f} MiB"

"""Property: every integer parameter of every registered workload, through the real CLI, refuses 0,
-1 and huge values cleanly (exit 2, the flag, the rule and the value named, nothing written, nothing
built, no traceback), and a seed accepts 0 and any value up to the int64 bound.

Huge values must be refused by a declared bound or by the memory check before anything is
allocated. Each parameter is also driven with every choice of the workload's sweep axes on its
own (`--dispatch padded`, `--backend csr`, ...), so a point kind that estimates its memory
differently comes first at least once. Derandomized: CI draws the same examples every run.
"""

from __future__ import annotations

import resource
import signal
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import HUNG_S, files_under
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from wlprof import workloads
from wlprof.params import show

INT_PARAMS = [(wl, p) for wl in workloads.all_workloads() for p in wl.params if p.kind == "int"]
# a size that no machine holds, to show a seed was accepted: the refusal then names the size
BUSTER = {"moe": "--d-model", "gnn": "--features", "halo": "--features"}
HUGE = st.integers(2**40, 2**80)
NOT_POSITIVE = st.integers(-(2**80), 0)
MiB = 1 << 20


def _axes(wl):
    """(parameter, choice) for every choice of the workload's sweep axes with fixed choices."""
    return [None] + [(p, c) for p in wl.params if p.kind == "str" and p.many and p.choices for c in p.choices]


def _points(wl, raw):
    """The sweep points of `raw` on the CPU, or None where parsing refuses it."""
    import torch

    from wlprof.errors import InputError

    try:
        return wl.points(wl.parse(raw, torch.device("cpu"), torch.float32).spec)
    except InputError:
        return None


def _applies(wl, p, value, axis) -> bool:
    """Whether `value` of `p` reaches a point (`--numel` does not, with `--ops matvec` alone)."""
    fixed = {axis[0].name: axis[1]} if axis else {}
    with_value = _points(wl, {**fixed, p.name: value})
    return with_value is None or with_value != _points(wl, fixed)  # refused at parsing: it applies


@contextmanager
def _deadline(seconds: int, what: str):
    """Fail instead of hanging (not a timing assertion: a refusal takes milliseconds, once the commands loaded,
    which on a loaded machine can take tens of seconds)."""
    def alarm(signum, frame):
        raise TimeoutError(f"{what} still running after {seconds} s")

    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.fixture
def nothing_built(monkeypatch):
    """No workload may build a point: the refusal must come before anything is allocated."""
    for wl in workloads.all_workloads():
        monkeypatch.setattr(type(wl), "build", lambda self, *a, **k: pytest.fail(f"{self.name} built a point"))


def _refused(cli, tmp_path, wl, args):
    traces = Path(tempfile.mkdtemp(dir=tmp_path)) / "traces"
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB, the high-water mark
    with _deadline(HUNG_S, f"wlprof run {wl.name} {' '.join(map(str, args))}"):
        res = cli("run", wl.name, *args, "--device", "cpu", "--traces", traces)
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss) / 1024
    assert res.exit_code == 2, (args, res.output, res.exception)
    assert "Traceback" not in res.output and isinstance(res.exception, SystemExit), res.output
    assert grown_mib < 256, f"{args}: the refusal grew the process by {grown_mib:.0f} MiB"
    assert files_under(traces.parent) == [], args  # not even the traces folder
    (line,) = res.output.strip().splitlines()
    assert line.startswith("error: ")
    return line


@pytest.mark.parametrize(("wl", "p"), INT_PARAMS, ids=[f"{wl.name}{p.flag}" for wl, p in INT_PARAMS])
@settings(max_examples=4, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=st.one_of(NOT_POSITIVE, HUGE), axis=st.none())
@example(value=0, axis=None)
@example(value=-1, axis=None)
@example(value=2**40, axis=None)
@example(value=2**70, axis=None)
def test_int_parameter_refusals_through_the_cli(cli, tmp_path, nothing_built, wl, p, value, axis):
    _check(cli, tmp_path, wl, p, value, axis)


@pytest.mark.parametrize(("wl", "p"), INT_PARAMS, ids=[f"{wl.name}{p.flag}" for wl, p in INT_PARAMS])
@settings(max_examples=8, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@pytest.mark.slow
@given(data=st.data())
def test_int_parameter_refusals_with_each_sweep_axis_choice(cli, tmp_path, nothing_built, wl, p, data):
    axis = data.draw(st.sampled_from(_axes(wl)), label="axis")
    value = data.draw(st.one_of(st.sampled_from([0, -1, 2**40, 2**70]), NOT_POSITIVE, HUGE), label="value")
    _check(cli, tmp_path, wl, p, value, axis)


def _check(cli, tmp_path, wl, p, value, axis):
    # a choice refused with the other defaults (--reduction max beside index_add) tests nothing here
    assume(axis is None or _points(wl, {axis[0].name: axis[1]}) is not None)
    extra = [axis[0].flag, axis[1]] if axis else []
    low, high = p.low(), p.high()
    if value < low:  # the declared minimum: 'must be a positive integer', 'must be an integer >= 0'
        line = _refused(cli, tmp_path, wl, [p.flag, value, *extra])
        assert line == f"error: {p.flag} must be {p.what()} (got '{value}')"
    elif value > high:  # the declared maximum (int64 unless the parameter says less)
        line = _refused(cli, tmp_path, wl, [p.flag, value, *extra])
        assert line == f"error: {p.flag} must be at most {show(high)} (got '{value}')"
    elif p.name in wl.size_params():  # a size past any memory: the memory check or a cross-check refuses it
        assume(_applies(wl, p, value, axis))
        line = _refused(cli, tmp_path, wl, [p.flag, value, *extra])
        assert line.startswith(f"error: {p.flag} must ")
        assert f"got {value!r}" in line or f"got '{value}'" in line or "must fit in host memory" in line, line
        if "must fit in host memory" in line:
            assert f"lower {p.flag}" in line
    else:  # a seed: every value from 0 to the bound is a seed; a size no machine holds shows it was taken
        buster = BUSTER[wl.name]
        line = _refused(cli, tmp_path, wl, [p.flag, value, buster, 2**40, *extra])
        assert line.startswith(f"error: {buster} must fit in host memory"), line


def test_every_integer_parameter_is_covered():
    names = {(wl.name, p.name) for wl, p in INT_PARAMS}
    assert {("mlp", "batch"), ("moe", "top_k"), ("moe", "seed"), ("gnn", "seed"), ("elementwise", "numel")} <= names
    assert all(p.low() is not None and p.high() is not None for _, p in INT_PARAMS)
    assert {wl.name for wl, p in INT_PARAMS if p.name == "seed"} == set(BUSTER)

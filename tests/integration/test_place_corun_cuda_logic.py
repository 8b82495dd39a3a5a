"""The co-runner's CUDA path (graphs, streams, the gate, eager threads) driven through a stand-in torch.cuda.

No GPU here: events read the host clock, a graph replays what was captured, streams do nothing.
What this checks is the path's own logic: every member measured from the arrival, graphs and
eager threads in one wave, the gate lengthened when enqueueing outlasts it, traces labelled.
"""

from __future__ import annotations

import contextlib
import threading
import time

import pytest

torch = pytest.importorskip("torch")


class FakeEvent:
    def __init__(self, enable_timing=False):
        self.t = None

    def record(self, stream=None):
        stream = stream or getattr(FakeCuda.current, "s", None)
        now = time.perf_counter()
        self.t = max(now, stream.busy_until) if stream is not None else now

    def synchronize(self):
        pass

    def elapsed_time(self, other):
        return (other.t - self.t) * 1e3


class FakeStream:
    """A stream as a timeline: work queued on it (a spin) pushes back what it records after."""

    def __init__(self, device=None):
        self.busy_until = 0.0

    def wait_event(self, event):
        self.busy_until = max(self.busy_until, event.t or 0.0)

    def wait_stream(self, other):
        pass


class FakeGraph:
    def __init__(self):
        self.steps = []

    def replay(self):
        for s in self.steps:
            s()


class FakeCuda:
    current = threading.local()
    capturing: FakeGraph | None = None

    @staticmethod
    def stream(s):
        @contextlib.contextmanager
        def cm():
            before = getattr(FakeCuda.current, "s", None)
            FakeCuda.current.s = s
            try:
                yield
            finally:
                FakeCuda.current.s = before
        return cm()

    @staticmethod
    def graph(g, stream=None):
        @contextlib.contextmanager
        def cm():
            FakeCuda.capturing = g
            g.capture_stream = stream  # torch.cuda.graph captures on `stream` (its own side stream if None)
            yield
            FakeCuda.capturing = None
        return cm()


@pytest.fixture()
def fake_cuda(monkeypatch):
    sleeps = []

    def _sleep(cycles):
        s = getattr(FakeCuda.current, "s", None)
        if s is not None:  # the gate: its spin delays what the stream records after it (1 GHz)
            s.busy_until = max(time.perf_counter(), s.busy_until) + cycles / 1e9
        else:  # the default stream: spin on the host
            time.sleep(cycles / 1e9)
        sleeps.append(cycles)

    c = torch.cuda
    monkeypatch.setattr(c, "Event", FakeEvent)
    monkeypatch.setattr(c, "Stream", FakeStream)
    monkeypatch.setattr(c, "CUDAGraph", FakeGraph)
    monkeypatch.setattr(c, "graph", FakeCuda.graph)
    monkeypatch.setattr(c, "stream", FakeCuda.stream)
    monkeypatch.setattr(c, "_sleep", _sleep)
    monkeypatch.setattr(c, "synchronize", lambda device=None: None)
    monkeypatch.setattr(c, "current_stream", lambda device=None: FakeStream())
    monkeypatch.setattr(c, "device", lambda d: contextlib.nullcontext())
    monkeypatch.setattr("wlprof.capture.sm_clock_mhz", lambda device: 1980.0)
    return sleeps


class M:
    def __init__(self, name, layers=1):
        self.name, self.layers = name, layers


def _runner(steps: dict[str, tuple], graphs: bool = True):
    from wlprof.placement.corun import CoRunner, Prepared
    from wlprof.workloads.base import Built

    runner = CoRunner([M(n) for n in steps], torch.device("cuda"))
    for name, (fn, safe) in steps.items():
        p = Prepared(M(name), Built(step=fn, graph_safe=safe), "eager", stream=FakeStream())
        if graphs and safe:
            p.graph, p.note = runner._capture(p)
            p.mode = "graph"
        runner.prepared.append(p)
    return runner


def test_graphs_and_eager_threads_in_one_wave(fake_cuda, monkeypatch):
    calls = {"a": 0, "b": 0, "c": 0}

    def step(name, secs):
        def f():
            calls[name] += 1
            if secs:  # device work on the caller's stream: it starts once the stream passed the arrival
                torch.cuda._sleep(int(secs * 1e9))
        return f

    runner = _runner({"a": (step("a", 0.0), True), "b": (step("b", 0.0), True), "c": (step("c", 0.02), False)})
    # warmed up twice on its stream, then called once inside the capture (the stand-in records nothing)
    assert calls["a"] == 3 and runner.prepared[0].graph.steps == []
    # each graph captured on its model's own stream: cuBLAS keeps one workspace per stream
    assert [p.graph.capture_stream for p in runner.prepared[:2]] == [p.stream for p in runner.prepared[:2]]
    runner.prepared[0].graph.steps = [step("a", 0.0)]
    runner.prepared[1].graph.steps = [step("b", 0.0)]
    runner._calibrate_gate()
    assert 0 < runner.gate_cycles_per_us <= 1000.0 * 1.01  # host sleeps last at least as long
    waves = []
    real_wave = runner._wave_cuda

    def wave(*args, **kwargs):
        waves.append(runner.gate_us)
        return real_wave(*args, **kwargs)

    monkeypatch.setattr(runner, "_wave_cuda", wave)
    run = runner.measure((0, 1, 2), reps=3, warmup=1)
    assert set(run.samples) == {0, 1, 2}
    assert all(len(v) == 3 for v in run.samples.values())
    assert run.median(2) > 10_000  # the eager model's 20 ms, from the arrival
    assert run.median(0) >= 0 and len(run.gate_us) == 3 and run.clock_mhz == (1980.0, 1980.0)
    from itertools import pairwise

    from wlprof.placement.corun import GATE_US, MAX_GATE_US

    # four waves, and one more each time enqueueing outlasted the gate (a busy host), which then doubled
    assert len(waves) >= 4 and calls["c"] == len(waves)  # one call a wave
    assert waves[0] == GATE_US and all(b in (a, min(2 * a, MAX_GATE_US)) for a, b in pairwise(waves))


def test_the_gate_lengthens_when_enqueueing_outlasts_it(fake_cuda, monkeypatch):
    runner = _runner({"a": (lambda: None, True), "b": (lambda: None, True)})
    runner.gate_cycles_per_us = 1000.0
    slow = runner.prepared[1].graph
    slow.replay = lambda: time.sleep(0.002)  # a 2 ms launch: longer than the 300 us gate
    before = runner.gate_us
    runner.measure((0, 1), reps=1, warmup=0)
    assert runner.gate_us > before  # doubled until the launches fit inside it
    assert runner.gate_us >= 2500


def test_trace_of_a_graph_group_is_labelled(fake_cuda):
    import gzip
    import json

    runner = _runner({"a": (lambda: torch.ones(4).sum(), True), "b": (lambda: torch.ones(4).sum(), True)})
    runner.gate_cycles_per_us = 1000.0
    data, lat = runner.trace((0, 1))
    doc = json.loads(gzip.decompress(data))
    names = {e.get("name") for e in doc["traceEvents"]}
    assert {"place/a", "place/b"} <= names
    assert doc["wlprof"]["placement"]["modes"] == {"a": "graph", "b": "graph"}
    assert set(lat) == {0, 1}

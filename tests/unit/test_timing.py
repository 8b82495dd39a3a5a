"""Unprofiled timing statistics (wlprof.timing): medians and percentiles of known samples, and
time_step on the CPU driven by a fake clock, so every sample is known in advance."""

from __future__ import annotations

import math
import types

import pytest
import torch

from wlprof import timing
from wlprof.timing import Timings, calls_for, time_step


def test_medians_and_percentiles_of_known_samples():
    t = Timings(latency_us=[50.0, 10.0, 30.0, 20.0], back_to_back_us=[27.0, 25.0, 26.0], calls_per_batch=7,
                graph_us=[4.0, 8.0], graph_error=None)
    # sorted latencies 10, 20, 30, 50: median (20 + 30) / 2 = 25 (the mean would be 27.5, the max 50)
    assert t.latency_median_us == 25.0
    assert t.back_to_back_median_us == 26.0  # 25, 26, 27
    assert t.graph_median_us == 6.0  # (4 + 8) / 2
    # percentile q: the sorted sample at index round(q * (n - 1)), n = 4:
    # q 0 -> 0 (10); 0.1 -> round(0.3) = 0 (10); 0.5 -> round(1.5) = 2 (30, banker's rounding);
    # 0.9 -> round(2.7) = 3 (50); 1 -> 3 (50); out of range clamps
    assert [t.percentile(q) for q in (0.0, 0.1, 0.5, 0.9, 1.0)] == [10.0, 10.0, 30.0, 50.0, 50.0]
    assert t.percentile(-1.0) == 10.0 and t.percentile(2.0) == 50.0
    assert t.latency_us == [50.0, 10.0, 30.0, 20.0]  # the samples are kept as measured, unsorted


def test_odd_counts_and_missing_samples():
    t = Timings(latency_us=[3.0, 1.0, 2.0], back_to_back_us=[5.0], calls_per_batch=3)
    assert t.latency_median_us == 2.0 and t.back_to_back_median_us == 5.0
    # n = 3: q 0.5 -> index round(0.5 * 2) = 1 (2.0); q 0.25 -> round(0.5) = 0 (1.0); q 0.75 -> round(1.5) = 2 (3.0)
    assert [t.percentile(q) for q in (0.25, 0.5, 0.75)] == [1.0, 2.0, 3.0]
    assert t.graph_median_us is None and t.graph_error is None
    assert Timings([1.0], [1.0], 3, graph_us=[]).graph_median_us is None
    assert math.isnan(Timings([], [1.0], 3).percentile(0.5))


class FakeClock:
    """perf_counter that only a step advances: the step takes the next of `durations_us` (then `rest_us`)."""

    def __init__(self, durations_us, rest_us):
        self.now = 0.0  # seconds; from 0 the float differences stay exact to ~1e-16
        self.durations = list(durations_us)
        self.rest = rest_us
        self.calls = 0

    def perf_counter(self):
        return self.now

    def step(self):
        self.calls += 1
        self.now += (self.durations.pop(0) if self.durations else self.rest) * 1e-6


def test_time_step_on_the_cpu_with_a_fake_clock(monkeypatch):
    clock = FakeClock([4.0, 1.0, 3.0, 100.0], rest_us=2.0)
    monkeypatch.setattr(timing, "time", types.SimpleNamespace(perf_counter=clock.perf_counter))
    t = time_step(clock.step, torch.device("cpu"), latency_reps=4, batches=2, min_batch_ms=0.068)
    # four single calls of 4, 1, 3 and 100 us; median (3 + 4) / 2 = 3.5 us
    assert t.latency_us == pytest.approx([4.0, 1.0, 3.0, 100.0], rel=1e-9)
    assert t.latency_median_us == pytest.approx(3.5)
    # calls per batch: ceil(0.068 ms * 1e3 / 3.5 us) = ceil(19.43) = 20; two batches of 20 calls of 2 us
    assert t.calls_per_batch == 20
    assert t.back_to_back_us == pytest.approx([2.0, 2.0], rel=1e-9)  # 40 us over 20 calls
    assert clock.calls == 4 + 2 * 20
    assert t.graph_us is None and t.graph_error == "CUDA graphs need a CUDA device"


def test_calls_per_batch_is_at_least_three_and_at_most_the_cap(monkeypatch):
    clock = FakeClock([], rest_us=1000.0)  # 1 ms a call
    monkeypatch.setattr(timing, "time", types.SimpleNamespace(perf_counter=clock.perf_counter))
    # ceil(0.5 ms / 1 ms) = 1, raised to the minimum of 3
    assert time_step(clock.step, torch.device("cpu"), latency_reps=1, batches=1, min_batch_ms=0.5).calls_per_batch == 3
    clock = FakeClock([], rest_us=0.5)
    monkeypatch.setattr(timing, "time", types.SimpleNamespace(perf_counter=clock.perf_counter))
    # ceil(20 ms / 0.5 us) = 40,000, capped at max_calls_per_batch
    t = time_step(clock.step, torch.device("cpu"), latency_reps=1, batches=1, max_calls_per_batch=50)
    assert t.calls_per_batch == 50 and t.back_to_back_us == pytest.approx([0.5])


def test_default_batch_length_and_cap(monkeypatch):
    clock = FakeClock([], rest_us=8.0)
    monkeypatch.setattr(timing, "time", types.SimpleNamespace(perf_counter=clock.perf_counter))
    # defaults: 20 ms batches, at most 2000 calls: ceil(20,000 us / 8 us) = 2500 -> 2000
    assert time_step(clock.step, torch.device("cpu"), latency_reps=1, batches=1).calls_per_batch == 2000
    clock = FakeClock([], rest_us=12.0)
    monkeypatch.setattr(timing, "time", types.SimpleNamespace(perf_counter=clock.perf_counter))
    # ceil(20,000 / 12) = ceil(1666.7) = 1667: under the cap
    t = time_step(clock.step, torch.device("cpu"), latency_reps=3, batches=2)
    assert t.calls_per_batch == 1667 and clock.calls == 3 + 2 * 1667
    assert t.graph_us is None and t.graph_error == "CUDA graphs need a CUDA device"


def test_sub_microsecond_steps(monkeypatch):
    clock = FakeClock([], rest_us=0.3)
    monkeypatch.setattr(timing, "time", types.SimpleNamespace(perf_counter=clock.perf_counter))
    # ceil(0.01 ms * 1e3 / 0.3 us) = ceil(33.3) = 34 (the 1e-3 us floor only guards a zero median)
    t = time_step(clock.step, torch.device("cpu"), latency_reps=1, batches=1, min_batch_ms=0.01)
    assert t.calls_per_batch == 34


def test_single_call_us_on_the_cpu(monkeypatch):
    clock = FakeClock([7.0, 9.0], rest_us=1.0)
    monkeypatch.setattr(timing, "time", types.SimpleNamespace(perf_counter=clock.perf_counter))
    assert timing.single_call_us(clock.step, torch.device("cpu"), 3) == pytest.approx([7.0, 9.0, 1.0], rel=1e-9)


def test_each_sample_is_heard_by_on_phase(monkeypatch):
    clock = FakeClock([], rest_us=1000.0)
    monkeypatch.setattr(timing, "time", types.SimpleNamespace(perf_counter=clock.perf_counter))
    heard = []
    t = time_step(clock.step, torch.device("cpu"), latency_reps=2, batches=2, min_batch_ms=0.5,
                  on_phase=lambda *a: heard.append(a))
    # (phase, samples done, samples planned) before each sample: two single calls, two batches
    assert heard == [("one call", 0, 2), ("one call", 1, 2), ("back to back", 0, 2), ("back to back", 1, 2)]
    assert t.calls_per_batch == 3  # ceil(0.5 ms / 1 ms) = 1, raised to 3


def test_default_sample_counts(monkeypatch):
    clock = FakeClock([], rest_us=8.0)
    monkeypatch.setattr(timing, "time", types.SimpleNamespace(perf_counter=clock.perf_counter))
    t = time_step(clock.step, torch.device("cpu"))
    # 30 single calls, then 5 batches of 2000 calls (ceil(20,000 us / 8 us) = 2500, capped)
    assert len(t.latency_us) == 30 and len(t.back_to_back_us) == 5 and t.calls_per_batch == 2000
    assert clock.calls == 30 + 5 * 2000


def test_calls_for_defaults():
    assert calls_for(8.0) == 2000  # ceil(20 ms * 1e3 / 8 us) = 2500, capped at 2000
    assert calls_for(12.0) == 1667  # ceil(20,000 / 12) = ceil(1666.7)
    assert calls_for(12.0, 10.0, 500) == 500 and calls_for(1e6) == 3  # ceil(0.02) = 1, raised to 3


class FakeCuda:
    """Stand-ins for gpu_samples and _graph, so that time_step's CUDA path runs on the CPU: they record
    what they are asked, call what they are given as the real ones do (the fake graph runs the step
    once, as if capturing it), and return known samples (gpu_samples: 10 x per_sample + i for sample i;
    _graph: 5 us per replayed step)."""

    def __init__(self):
        self.asked = []

    def gpu_samples(self, run, samples, per_sample, on_sample=lambda i: None):
        self.asked.append(("gpu_samples", samples, per_sample))
        out = []
        for i in range(samples):
            on_sample(i)
            run()
            out.append(10.0 * per_sample + i)
        return out

    def graph(self, step, batches, min_batch_us, latency_us, on_phase=timing.no_phase):
        self.asked.append(("graph", batches, min_batch_us, latency_us))
        step()
        for i in range(batches):
            on_phase("graph replay", i, batches)
        return [5.0] * batches, None


def _cuda(monkeypatch):
    fake = FakeCuda()
    monkeypatch.setattr(timing, "gpu_samples", fake.gpu_samples)
    monkeypatch.setattr(timing, "_graph", fake.graph)
    return fake, types.SimpleNamespace(type="cuda")  # time_step reads only device.type


def test_time_step_on_a_cuda_device_times_with_device_events(monkeypatch):
    fake, cuda = _cuda(monkeypatch)
    calls, heard = [], []
    t = time_step(lambda: calls.append(1), cuda, latency_reps=3, batches=2, min_batch_ms=0.1,
                  on_phase=lambda *a: heard.append(a))
    # single calls: 3 samples of 1 call, 10, 11, 12 us (median 11); batches: ceil(0.1 ms * 1e3 / 11 us) =
    # ceil(9.09) = 10 calls; graph replay asked for 2 batches of at least 100 us at a latency of 11 us
    assert fake.asked == [("gpu_samples", 3, 1), ("graph", 2, 100.0, 11.0), ("gpu_samples", 2, 10)]
    assert t.latency_us == [10.0, 11.0, 12.0] and t.calls_per_batch == 10
    assert t.back_to_back_us == [100.0, 101.0] and t.graph_us == [5.0, 5.0] and t.graph_error is None
    assert len(calls) == 3 + 1 + 2 * 10  # single calls, the (fake) graph's capture, the batches
    assert heard == [("one call", 0, 3), ("one call", 1, 3), ("one call", 2, 3), ("graph replay", 0, 2),
                     ("graph replay", 1, 2), ("back to back", 0, 2), ("back to back", 1, 2)]


def test_time_step_on_a_cuda_device_without_graphs(monkeypatch):
    fake, cuda = _cuda(monkeypatch)
    t = time_step(lambda: None, cuda, latency_reps=1, batches=1, graph=False, calls_per_batch=4)
    assert fake.asked == [("gpu_samples", 1, 1), ("gpu_samples", 1, 4)]  # no graph tried
    assert t.graph_us is None and t.calls_per_batch == 4 and t.back_to_back_us == [40.0]
    assert t.graph_error == "the workload does host syncs or host work per step: not capturable"

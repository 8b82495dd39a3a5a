"""Unprofiled timings of one step: one call's latency, back-to-back time, CUDA-graph replay.

The method and why there are three: `docs/timing.md`.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class Timings:
    latency_us: list[float]
    back_to_back_us: list[float]
    calls_per_batch: int
    graph_us: list[float] | None = None
    graph_error: str | None = None

    @property
    def latency_median_us(self) -> float:
        return statistics.median(self.latency_us)

    @property
    def back_to_back_median_us(self) -> float:
        return statistics.median(self.back_to_back_us)

    @property
    def graph_median_us(self) -> float | None:
        return statistics.median(self.graph_us) if self.graph_us else None

    def percentile(self, q: float) -> float:
        xs = sorted(self.latency_us)
        if not xs:
            return math.nan
        i = min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))
        return xs[i]


Phase = Callable[[str, int, int], None]  # (phase, samples done, samples planned): progress inside a point


def no_phase(phase: str, done: int, total: int) -> None:
    return None


def single_call_us(step: Callable[[], object], device, reps: int, on_phase: Phase = no_phase) -> list[float]:
    """`reps` individually timed calls, in µs: device events around each call on an idle GPU,
    perf_counter on the CPU."""
    if device.type == "cuda":
        return gpu_samples(step, reps, 1, lambda i: on_phase("one call", i, reps))
    out = []
    for i in range(reps):
        on_phase("one call", i, reps)
        t0 = time.perf_counter()
        step()
        out.append((time.perf_counter() - t0) * 1e6)
    return out


def gpu_samples(run: Callable[[], object], samples: int, per_sample: int,
                on_sample: Callable[[int], None] = lambda i: None) -> list[float]:
    """µs per call: device events around each of `samples` runs of `run` (which makes `per_sample`
    calls) on an idle device, started after a full synchronization."""
    import torch

    out = []
    for i in range(samples):
        on_sample(i)
        torch.cuda.synchronize()
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        end.synchronize()
        out.append(start.elapsed_time(end) * 1e3 / per_sample)
    return out


def _graph(step: Callable[[], object], batches: int, min_batch_us: float, latency_us: float,
           on_phase: Phase = no_phase) -> tuple[list[float] | None, str | None]:
    import torch

    # several steps per graph, so that one graph launch does not dominate tiny steps
    steps_per_graph = max(1, min(20, math.ceil(200.0 / max(latency_us, 1e-3))))
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                step()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(steps_per_graph):
                step()
        graph.replay()
        torch.cuda.synchronize()
    except Exception as exc:  # capture refuses host syncs, some allocations, CPU work
        torch.cuda.synchronize()
        return None, f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
    replays = max(1, math.ceil(min_batch_us / max(latency_us * steps_per_graph, 1e-3)))
    replays = min(replays, 1000)

    def batch():
        for _ in range(replays):
            graph.replay()

    return gpu_samples(batch, batches, replays * steps_per_graph,
                       lambda i: on_phase("graph replay", i, batches)), None


def calls_for(latency_us: float, min_batch_ms: float = 20.0, max_calls_per_batch: int = 2000) -> int:
    """Steps per back-to-back batch: enough to last `min_batch_ms` at this latency, 3 to the maximum."""
    return int(min(max_calls_per_batch, max(3, math.ceil(min_batch_ms * 1e3 / max(latency_us, 1e-3)))))


def time_step(step: Callable[[], object], device, *, latency_reps: int = 30, batches: int = 5,
              min_batch_ms: float = 20.0, max_calls_per_batch: int = 2000, graph: bool = True,
              calls_per_batch: int | None = None, on_phase: Phase = no_phase) -> Timings:
    """Time an already warmed-up `step` on `device` without the profiler; `on_phase` hears each sample.

    `calls_per_batch` fixes the batch size (ranks of a distributed step must all make the same
    calls); None derives it from the single-call latency.
    """
    gpu = device.type == "cuda"
    lat = single_call_us(step, device, latency_reps, on_phase)
    med = statistics.median(lat)
    per_batch = calls_per_batch or calls_for(med, min_batch_ms, max_calls_per_batch)

    # Graph replay first, back-to-back last: the profiled steps follow right after, so the
    # back-to-back time and the profiled kernel time are measured at the same clocks (a
    # long compute-bound sweep heats the GPU and its clocks drift over seconds).
    g_us, g_err = None, None
    if gpu and graph:
        g_us, g_err = _graph(step, batches, min_batch_ms * 1e3, med, on_phase)
    elif gpu:
        g_err = "the workload does host syncs or host work per step: not capturable"
    else:
        g_err = "CUDA graphs need a CUDA device"

    def run_batch():
        for _ in range(per_batch):
            step()

    if gpu:
        b2b = gpu_samples(run_batch, batches, per_batch, lambda i: on_phase("back to back", i, batches))
    else:
        b2b = []
        for i in range(batches):
            on_phase("back to back", i, batches)
            t0 = time.perf_counter()
            run_batch()
            b2b.append((time.perf_counter() - t0) * 1e6 / per_batch)
    return Timings(latency_us=lat, back_to_back_us=b2b, calls_per_batch=per_batch, graph_us=g_us,
                   graph_error=g_err)

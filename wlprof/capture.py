"""Capture one sweep point: warm-up, unprofiled timings, then profiled steps under torch.profiler.

The steps run back to back, as in the back-to-back timing, so the two compare (`docs/timing.md`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from wlprof.stderr_filter import profiler_noise_filtered, schedule_warning_ignored
from wlprof.timing import Phase, Timings, no_phase, time_step

# Bounds on the capture's counts: past them a run does not end in any useful time (a million calls of
# the smallest step take seconds; the profiler holds every profiled step's events in memory)
MAX_CALLS = 1_000_000
MAX_PROFILED = 10_000


@dataclass(frozen=True)
class CaptureConfig:
    warmup: int = 5  # unprofiled calls before anything is timed
    latency_reps: int = 30  # single-call latency samples
    batches: int = 5  # back-to-back batches (and graph batches)
    min_batch_ms: float = 20.0  # each back-to-back batch lasts at least this long
    profiled_steps: int = 5
    profiler_warmup: int = 1
    graph: bool = True  # try CUDA-graph replay timing where the workload allows it
    keep_raw_trace: bool = False  # also keep torch.profiler's trace as written (_chrome/<point>.raw.json.gz)
    calls_per_batch: int = 0  # steps per back-to-back batch; 0: enough for min_batch_ms (ranks agree on one)

    def __post_init__(self):
        from wlprof.errors import InputError, Key

        for name, low in (("warmup", 1), ("latency_reps", 1), ("batches", 1), ("profiled_steps", 1),
                          ("profiler_warmup", 0), ("calls_per_batch", 0)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int):
                raise InputError(Key(name, "capture"), "must be an integer", v)
            if v < low:
                raise InputError(Key(name, "capture"), f"must be at least {low}", v)
            high = MAX_PROFILED if name in ("profiled_steps", "profiler_warmup") else MAX_CALLS
            if v > high:
                raise InputError(Key(name, "capture"), f"must be at most {high:,}", v)
        if isinstance(self.min_batch_ms, bool) or not isinstance(self.min_batch_ms, (int, float)) \
                or not self.min_batch_ms > 0:
            raise InputError(Key("min_batch_ms", "capture"), "must be a positive number", self.min_batch_ms)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Capture:
    timings: Timings
    trace_path: Path
    profiled_steps: int
    tf32: bool
    sm_clock_mhz: tuple[float | None, float | None] = (None, None)  # before timing, after profiling


def sm_clock_mhz(device) -> float | None:
    """The GPU's current SM clock (NVML through torch), or None where it cannot be read."""
    if device.type != "cuda":
        return None
    try:
        import torch

        return float(torch.cuda.clock_rate(device))
    except Exception:  # noqa: BLE001 - pynvml missing or NVML refused: the clock is optional
        return None


def capture(step, device, cfg: CaptureConfig, trace_path: Path, graph_safe: bool = True,
            on_phase: Phase = no_phase) -> Capture:
    """Warm up, time and profile `step`; `on_phase(phase, done, total)` hears each call of each phase
    (warm-up, one call, graph replay, back to back, profiling)."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    from wlprof.device import synchronize

    with torch.inference_mode():
        for i in range(cfg.warmup):
            on_phase("warm-up", i, cfg.warmup)
            step()
        synchronize(device)
        clock_start = sm_clock_mhz(device)
        timings = time_step(step, device, latency_reps=cfg.latency_reps, batches=cfg.batches,
                            min_batch_ms=cfg.min_batch_ms, graph=cfg.graph and graph_safe,
                            calls_per_batch=cfg.calls_per_batch or None, on_phase=on_phase)

        activities = [ProfilerActivity.CPU]
        if device.type == "cuda":
            activities.append(ProfilerActivity.CUDA)
        exported: list[Path] = []

        def on_ready(prof):
            prof.export_chrome_trace(str(trace_path))
            exported.append(trace_path)

        total = cfg.profiler_warmup + cfg.profiled_steps
        # Kineto's profiler_start/profiler_stop lines go to fd 2 below Python: kept off the user's stderr;
        # so is the warning some torch versions give when a schedule's warm-up hands over to its one cycle
        # (events of earlier cycles are dropped: there are none)
        with profiler_noise_filtered(), schedule_warning_ignored(), profile(activities=activities, record_shapes=True,
                     schedule=schedule(wait=0, warmup=cfg.profiler_warmup, active=cfg.profiled_steps, repeat=1),
                     on_trace_ready=on_ready) as prof:
            for i in range(total):
                on_phase("profiling", i, total)
                with record_function(f"wlprof/step#{i}"):
                    step()
                if i == cfg.profiler_warmup - 1 or i == total - 1:
                    synchronize(device)
                prof.step()
    clock_end = sm_clock_mhz(device)
    if not exported:
        raise RuntimeError("torch.profiler did not hand over a trace")
    tf32 = bool(device.type == "cuda" and torch.backends.cuda.matmul.allow_tf32)
    return Capture(timings=timings, trace_path=trace_path, profiled_steps=cfg.profiled_steps, tf32=tf32,
                   sm_clock_mhz=(clock_start, clock_end))

"""Co-running a group of models on one device, all requests arriving together, and measuring each one.

On a GPU every model gets its own CUDA stream in this one process, and its request is
captured once as a CUDA graph (models whose step syncs with the host run eagerly from a
thread of their own instead). A request wave is: a spin kernel on a gate stream, then an
`arrival` event; every model's stream waits for the arrival, replays its graph and records
its own end event. The host enqueues every replay while the gate spins (the gate lengthens
itself when enqueueing outlasts it), so all requests reach the device at the arrival, and a
model's latency is arrival -> its end event: from the common arrival to its last kernel's
end, on the device's clock. The launch order rotates from one wave to the next.

Why streams and not processes: kernels of one process's streams share the device's SMs
concurrently, which is the sharing placement is about; processes without MPS time-slice the
device (no two contexts' kernels run at once), and MPS needs a daemon this tool cannot assume.
Why graphs: the host launches a request in a few microseconds, so co-located models are not
serialized by one Python thread's launch loop (nor by the GIL between threads), and what is
measured is the device's sharing.

On the CPU each model runs in its own thread (torch releases the GIL inside its ops); once all
wait at a barrier the arrival time is taken and they are released together; a latency is the
arrival -> the model's last op's end.
"""

from __future__ import annotations

import gzip
import json
import statistics
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wlprof.errors import InputError

GATE_US = 300.0  # the first gate's length; doubled while enqueueing a wave outlasts it
MAX_GATE_US = 50_000.0


@dataclass
class GroupRun:
    """One group's co-run measurement: each member's latency samples (µs) over `reps` waves."""

    members: tuple[int, ...]
    samples: dict[int, list[float]]
    gate_us: list[float] = field(default_factory=list)
    host_us: list[float] = field(default_factory=list)
    clock_mhz: tuple[float | None, float | None] = (None, None)  # the SM clock before and after (GPU)

    def median(self, i: int) -> float:
        return float(statistics.median(self.samples[i]))

    def medians(self) -> dict[int, float]:
        return {i: self.median(i) for i in self.members}

    def makespan(self) -> float:
        return max(self.medians().values())


@dataclass
class Prepared:
    model: Any  # placement.mix.Model
    built: Any  # workloads.Built
    mode: str  # "graph" (CUDA graph replay) or "eager"
    graph: Any = None
    stream: Any = None
    note: str | None = None


class CoRunner:
    """Every model of a mix built once on `device`, ready to co-run any group of them."""

    def __init__(self, models: Sequence, device, graphs: bool = True):
        self.models = list(models)
        self.device = device
        self.cuda = device.type == "cuda"
        self.use_graphs = graphs and self.cuda
        self.prepared: list[Prepared] = []
        self.gate_cycles_per_us: float | None = None
        self.gate_us = GATE_US

    # ------------------------------------------------------------------ building

    def check_memory(self) -> None:
        """Refuse a mix whose models cannot all be resident on the device at once."""
        from wlprof import workloads
        from wlprof.study import MEMORY_SHARE, _free_memory

        free = _free_memory(self.device)
        if free is None:
            return
        need = sum(workloads.get(m.workload).estimate_bytes(m.point, m.dtype) for m in self.models)
        if need > MEMORY_SHARE * free:
            raise InputError("MIX_FILE", f"must fit on one {self.device.type} device all at once to co-run its "
                             f"models: they need about {need / 2**30:.1f} GiB, more than {MEMORY_SHARE:.0%} of "
                             f"the {free / 2**30:.1f} GiB free", f"{len(self.models)} models")

    def build(self, cost=None, progress=None) -> dict:
        """Build every model, warm it up, cost one request (`cost(model, built) -> ModelCost`), and on a
        GPU capture its request as a CUDA graph. Returns the costs by model name."""
        import torch

        from wlprof import workloads
        from wlprof.device import synchronize

        costs = {}
        for m in self.models:
            if progress:
                progress(f"build {m.name}")
            built = workloads.get(m.workload).build(m.point, self.device, m.dtype)
            with torch.inference_mode():
                for _ in range(2):
                    for _ in range(m.layers):
                        built.step()
                synchronize(self.device)
            if cost is not None:
                costs[m.name] = cost(m, built)
            p = Prepared(m, built, "eager")
            if self.cuda:
                p.stream = torch.cuda.Stream(self.device)
                if self.use_graphs and built.graph_safe:
                    p.graph, p.note = self._capture(p)
                    p.mode = "graph" if p.graph is not None else "eager"
                elif not built.graph_safe:
                    p.note = "syncs with the host: eager, from its own thread"
            self.prepared.append(p)
        if self.cuda:
            self._calibrate_gate()
        return costs

    def _capture(self, p: Prepared):
        import torch

        step, layers = p.built.step, p.model.layers
        try:
            with torch.inference_mode():
                side = p.stream
                side.wait_stream(torch.cuda.current_stream(self.device))
                with torch.cuda.stream(side):
                    for _ in range(2 * layers):
                        step()
                torch.cuda.current_stream(self.device).wait_stream(side)
                torch.cuda.synchronize(self.device)
                graph = torch.cuda.CUDAGraph()
                # captured on the model's own stream: cuBLAS keeps a workspace per stream, and graphs
                # captured on one shared stream would replay concurrently over one workspace
                with torch.cuda.graph(graph, stream=side):
                    for _ in range(layers):
                        step()
                graph.replay()
                torch.cuda.synchronize(self.device)
            return graph, None
        except Exception as exc:  # noqa: BLE001 - a step capture refuses runs eagerly instead
            torch.cuda.synchronize(self.device)
            return None, f"graph capture failed ({type(exc).__name__}: {str(exc).splitlines()[0][:160]}): eager"

    def _calibrate_gate(self) -> None:
        import torch

        cycles = 200_000
        us = []
        for _ in range(3):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            torch.cuda._sleep(cycles)
            b.record()
            b.synchronize()
            us.append(a.elapsed_time(b) * 1e3)
        self.gate_cycles_per_us = cycles / max(statistics.median(us), 1e-3)

    def modes(self) -> dict[str, str]:
        return {p.model.name: p.mode for p in self.prepared}

    def notes(self) -> list[str]:
        return [f"{p.model.name}: {p.note}" for p in self.prepared if p.note]

    # ------------------------------------------------------------------ measuring

    def measure(self, members: Sequence[int], reps: int = 20, warmup: int = 2) -> GroupRun:
        """Co-run `members` (model indices) in `warmup + reps` request waves; the samples of the last `reps`."""
        from wlprof.capture import sm_clock_mhz

        members = tuple(members)
        run = GroupRun(members, {i: [] for i in members})
        before = sm_clock_mhz(self.device)
        for r in range(warmup + reps):
            k = r % len(members)
            order = members[k:] + members[:k]
            lat, gate, host = self._wave(order)
            if r >= warmup:
                for i in members:
                    run.samples[i].append(lat[i])
                if gate is not None:
                    run.gate_us.append(gate)
                    run.host_us.append(host)
        run.clock_mhz = (before, sm_clock_mhz(self.device))
        return run

    def _wave(self, order: Sequence[int], label: bool = False):
        if self.cuda:
            for _ in range(8):
                lat, gate, host, late = self._wave_cuda(order, label)
                if not late or self.gate_us >= MAX_GATE_US:
                    return lat, gate, host
                self.gate_us = min(self.gate_us * 2, MAX_GATE_US)
            return lat, gate, host
        return self._wave_cpu(order, label) + (None, None)

    def _wave_cpu(self, order: Sequence[int], label: bool) -> tuple[dict[int, float]]:
        import torch

        # every thread started and waiting (`ready`), then the arrival time taken, then released (`go`)
        ready, go = threading.Barrier(len(order) + 1), threading.Barrier(len(order) + 1)
        ends: dict[int, float] = {}
        errors: list[BaseException] = []

        def work(i: int) -> None:
            p = self.prepared[i]
            try:
                with torch.inference_mode():
                    ready.wait()
                    go.wait()
                    _request(p, label)
                ends[i] = time.perf_counter()
            except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
                errors.append(exc)
                for b in (ready, go):
                    b.abort()

        threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in order]
        for t in threads:
            t.start()
        t0 = None
        try:
            ready.wait()
            t0 = time.perf_counter()
            go.wait()
        except threading.BrokenBarrierError:
            pass
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        return ({i: (ends[i] - t0) * 1e6 for i in order},)

    def _wave_cuda(self, order: Sequence[int], label: bool):
        import torch
        from torch.profiler import record_function

        dev = self.device
        torch.cuda.synchronize(dev)
        start = torch.cuda.Event(enable_timing=True)
        arrival = torch.cuda.Event(enable_timing=True)
        ends = {i: torch.cuda.Event(enable_timing=True) for i in order}
        eager = [i for i in order if self.prepared[i].graph is None]
        # eager threads first reach `ready` (started, outside the timed enqueue), then wait for `go`
        # (the arrival event is recorded by then)
        ready = threading.Barrier(len(eager) + 1) if eager else None
        go = threading.Barrier(len(eager) + 1) if eager else None
        errors: list[BaseException] = []

        def work(i: int) -> None:
            p = self.prepared[i]
            try:
                with torch.inference_mode(), torch.cuda.device(dev), torch.cuda.stream(p.stream):
                    ready.wait()
                    go.wait()
                    p.stream.wait_event(arrival)
                    _request(p, label)
                    ends[i].record(p.stream)
            except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
                errors.append(exc)
                for b in (ready, go):
                    b.abort()

        threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in eager]
        for t in threads:
            t.start()
        if ready is not None:
            try:
                ready.wait()
            except threading.BrokenBarrierError:
                pass
        gate = self.gate_stream()
        cycles = int(self.gate_us * (self.gate_cycles_per_us or 1000.0))
        h0 = time.perf_counter()
        with torch.cuda.stream(gate):
            start.record(gate)
            torch.cuda._sleep(cycles)
            arrival.record(gate)
        if go is not None:
            try:
                go.wait()
            except threading.BrokenBarrierError:
                pass
        for i in order:
            p = self.prepared[i]
            if p.graph is None:
                continue
            p.stream.wait_event(arrival)
            with torch.cuda.stream(p.stream):
                if label:
                    with record_function(f"place/{p.model.name}"):
                        p.graph.replay()
                else:
                    p.graph.replay()
                ends[i].record(p.stream)
        host_us = (time.perf_counter() - h0) * 1e6
        for t in threads:
            t.join()
        if errors:
            torch.cuda.synchronize(dev)
            raise errors[0]
        torch.cuda.synchronize(dev)
        gate_us = start.elapsed_time(arrival) * 1e3
        lat = {i: arrival.elapsed_time(ends[i]) * 1e3 for i in order}
        # enqueueing the graphs must end before the gate opens (eager threads launch as they go)
        late = len(eager) < len(order) and host_us > 0.8 * gate_us
        return lat, gate_us, host_us, late

    _gate = None

    def gate_stream(self):
        import torch

        if self._gate is None:
            self._gate = torch.cuda.Stream(self.device)
        return self._gate

    # ------------------------------------------------------------------ tracing

    def trace(self, members: Sequence[int]) -> tuple[bytes, dict[int, float]]:
        """One request wave of `members` under torch.profiler: (the gzipped Chrome trace, its latencies).
        Each model's work is inside `place/<name>`; GPU streams are named after their model."""
        import torch
        from torch.profiler import ProfilerActivity, profile

        members = tuple(members)
        self._wave(members)  # warm
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.cuda else [])
        with tempfile.TemporaryDirectory(prefix="wlprof-place-") as tmp:
            path = Path(tmp) / "group.json"
            with profile(activities=activities, experimental_config=_all_threads()) as prof:
                lat = self._wave(members, label=True)[0]
                if self.cuda:
                    torch.cuda.synchronize(self.device)
            prof.export_chrome_trace(str(path))
            doc = json.loads(path.read_bytes())
        label_streams(doc, {p.model.name for p in self.prepared})
        doc.setdefault("wlprof", {})["placement"] = {
            "members": [self.prepared[i].model.name for i in members],
            "latency_us": {self.prepared[i].model.name: lat[i] for i in members},
            "modes": {self.prepared[i].model.name: self.prepared[i].mode for i in members},
        }
        return gzip.compress(json.dumps(doc).encode(), compresslevel=6), lat


def _all_threads():
    """The profiler's setting to record every thread's ops (the eager models' threads), where torch has it."""
    try:
        import torch

        return torch._C._profiler._ExperimentalConfig(profile_all_threads=True)
    except (AttributeError, TypeError):
        return None


def label_streams(doc: dict, names: set[str]) -> None:
    """Name each GPU stream (and each model's host thread) in a Chrome trace after the model whose
    `place/<name>` annotation launched its kernels, with thread_name metadata events."""
    events = doc.get("traceEvents", []) if isinstance(doc, dict) else []
    spans: dict[tuple, list[tuple[float, float, str]]] = {}
    for e in events:
        n = e.get("name", "")
        if e.get("ph") == "X" and isinstance(n, str) and n.startswith("place/") and n[6:] in names:
            spans.setdefault((e.get("pid"), e.get("tid")), []).append((e["ts"], e["ts"] + e.get("dur", 0), n[6:]))
    owner: dict[Any, str] = {}  # correlation -> model
    for e in events:
        if e.get("ph") != "X" or e.get("cat") not in ("cuda_runtime", "cuda_driver"):
            continue
        corr = (e.get("args") or {}).get("correlation")
        for a, b, name in spans.get((e.get("pid"), e.get("tid")), ()):
            if a <= e["ts"] <= b:
                owner[corr] = name
                break
    streams: dict[tuple, dict[str, int]] = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            name = owner.get((e.get("args") or {}).get("correlation"))
            if name is not None:
                c = streams.setdefault((e.get("pid"), e.get("tid")), {})
                c[name] = c.get(name, 0) + 1
    meta = []
    for (pid, tid), counts in streams.items():
        label = " + ".join(sorted(counts, key=lambda k: -counts[k]))
        meta.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
                     "args": {"name": f"stream {tid}: {label}"}})
    for (pid, tid), sp in spans.items():
        who = {s[2] for s in sp}
        if len(who) == 1:
            meta.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
                         "args": {"name": f"{next(iter(who))} (host)"}})
    named = {(m["pid"], m["tid"]) for m in meta}
    events[:] = [e for e in events if not (e.get("ph") == "M" and e.get("name") == "thread_name"
                                           and (e.get("pid"), e.get("tid")) in named)] + meta


def _request(p: Prepared, label: bool) -> None:
    """One request of a prepared model: its layers' steps, labelled `place/<model>` in a trace."""
    from torch.profiler import record_function

    if label:
        with record_function(f"place/{p.model.name}"):
            for _ in range(p.model.layers):
                p.built.step()
    else:
        for _ in range(p.model.layers):
            p.built.step()


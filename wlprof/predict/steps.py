"""A step's times from its op calls: kernel time, back-to-back time and single-call latency.

The kernel time is the sum of the step's predicted calls. The other two add the host:
each op costs the host `launch_us` to dispatch (a GEMM `gemm_us` more), a step `step_us`
of Python around its ops, and an op that reads a value back (`calls.SYNC_OPS`: nonzero,
item) waits for the device to drain, then `sync_us`. A kernel starts when it is launched
and the device is free:

    cpu_i = cpu_{i-1} + host_i               (cpu = gpu_i + sync_us after a sync op)
    gpu_i = max(cpu_i, gpu_{i-1}) + kernel_i + gap_us

`gap_us` is the device's time between one op's kernels and the next op's when they are
queued. Back to back, steps follow one another on this timeline (the host runs ahead of
the device until a sync); the per-step time is the second step's end minus the first's,
so a step is the host's time where the host issues slower than the device runs. One
call's latency is the first step alone on an idle device: it ends when its last kernel
does or when the host, `tail_us` after its last launch, records the end event, whichever
is later; plus `latency_us` for the timer's start. The host numbers are fitted on the profile's own unprofiled timings
(`fit_host`): what is measured to separate the kernels.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

STEP_KEYS = ["run_id", "point", "step"]
MAX_CASES = 120
MIN_CONTEXT_CASES = 8  # profiled points a context needs for host numbers of its own
PULL = 0.02  # a context's numbers are pulled toward the whole fit's by this weight on their squared log ratio


@dataclass
class Host:
    launch_us: float = 6.0
    gemm_us: float = 2.0
    sync_us: float = 15.0
    step_us: float = 5.0
    latency_us: float = 8.0
    gap_us: float = 0.0  # the device's time between one queued op's kernels and the next's
    tail_us: float = 0.0  # the host's time after a call's last launch, before its end event
    # per context (workload and dispatch, `calls.describe`'s '@context'): the numbers fitted on its own
    # steps, where the profile holds enough of them (a Python loop of small launches is not a GEMM study)
    by_context: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Host:
        host = cls(**{k: float(v) for k, v in d.items() if k in cls.__dataclass_fields__ and k != "by_context"})
        host.by_context = {c: cls.from_dict(v) for c, v in (d.get("by_context") or {}).items()}
        return host

    def for_context(self, context: str) -> Host:
        return self.by_context.get(context, self)


def context_of(described: pd.DataFrame) -> str:
    """A step's context: the most common '@context' of its calls' groups ('' where they carry none)."""
    groups = described.group.to_numpy(dtype=object) if "group" in described else []
    ctx = pd.Series([g.rsplit("|@", 1)[1] if "|@" in g else "" for g in groups], dtype=object)
    return str(ctx.mode().iat[0]) if len(ctx) else ""


def plan_of(described: pd.DataFrame, kernel) -> Plan:
    return Plan(kernel, np.isin(described.cls.to_numpy(), ("gemm", "grouped", "spmm")),
                described.sync.to_numpy(dtype=bool))


def times_of(described: pd.DataFrame, kernel, host: Host) -> tuple[float, float]:
    """(back-to-back us per step, single-call latency us) of one step's described calls in launch order,
    with the host numbers of the step's context."""
    return plan_of(described, kernel).times(host.for_context(context_of(described)))


class Plan:
    """A step's calls cut at its syncs, with the running sums the timeline needs: evaluating it for
    other host numbers is arithmetic on these arrays."""

    def __init__(self, kernel, is_gemm, sync):
        kernel = np.asarray(kernel, dtype=float)
        is_gemm = np.asarray(is_gemm, dtype=float)
        sync = np.asarray(sync, dtype=bool)
        self.segments = []
        cuts = np.flatnonzero(sync) + 1
        lo = 0
        for hi in [*cuts.tolist(), len(kernel)]:
            if hi <= lo:
                continue
            k = np.cumsum(kernel[lo:hi])
            self.segments.append((np.arange(1, hi - lo + 1, dtype=float), np.cumsum(is_gemm[lo:hi]),
                                  np.concatenate([[0.0], k[:-1]]), float(k[-1]), bool(sync[hi - 1])))
            lo = hi

    def run(self, host: Host, cpu: float, gpu: float) -> tuple[float, float]:
        """(cpu, gpu) at the end of the step's calls, from (cpu, gpu)."""
        for n, gm, prev, total, sync in self.segments:
            h = cpu + host.launch_us * n + host.gemm_us * gm
            busy = prev + host.gap_us * (n - 1)  # each kernel holds the device for its time and the gap
            # gpu_i = K_i + max(gpu_0, max_j (cpu_j - K_{j-1}))
            gpu = total + host.gap_us * n[-1] + max(gpu, float(np.max(h - busy)))
            cpu = float(h[-1])
            if sync:
                cpu = gpu + host.sync_us
        return cpu, gpu

    def times(self, host: Host) -> tuple[float, float]:
        """(back-to-back us per step, single-call latency us)."""
        if not self.segments:
            return host.step_us, host.step_us + host.latency_us
        c1, g1 = self.run(host, host.step_us, 0.0)
        c2, g2 = self.run(host, c1 + host.step_us, g1)
        return float(max(g2, c2) - max(g1, c1)), float(max(g1, c1 + host.tail_us) + host.latency_us)


def step_times(kernel: np.ndarray, is_gemm: np.ndarray, sync: np.ndarray, host: Host) -> tuple[float, float]:
    """(back-to-back us per step, single-call latency us) of one step's calls in launch order."""
    return Plan(kernel, is_gemm, sync).times(host)


def compose(ops: pd.DataFrame, pred: np.ndarray, described: pd.DataFrame, host: Host,
            keys=STEP_KEYS) -> pd.DataFrame:
    """One row per step of `ops`: measured and predicted kernel time, the calls, the predicted
    back-to-back time and latency (every call of the step, in launch order)."""
    order = ops.ts_us.to_numpy(dtype=float) if "ts_us" in ops else np.arange(len(ops), dtype=float)
    frame = pd.DataFrame({k: ops[k].to_numpy() for k in keys if k in ops})
    frame["dur"] = pd.to_numeric(ops.dur_us, errors="coerce").to_numpy(dtype=float) if "dur_us" in ops else np.nan
    frame["pred"] = pred
    frame["gemm"] = np.isin(described.cls.to_numpy(), ("gemm", "grouped", "spmm"))
    frame["sync"] = described.sync.to_numpy(dtype=bool)
    frame["ctx"] = _contexts(described)
    frame["order"] = order
    rows = []
    for key, g in frame.sort_values("order", kind="stable").groupby([k for k in keys if k in frame], sort=False):
        h = host.for_context(str(g.ctx.mode().iat[0]))
        b2b, lat = Plan(g.pred.to_numpy(), g.gemm.to_numpy(), g.sync.to_numpy()).times(h)
        rows.append({**dict(zip([k for k in keys if k in frame], key if isinstance(key, tuple) else (key,),
                                strict=True)),
                     "calls": len(g), "syncs": int(g.sync.sum()), "kernel_us": float(g.dur.sum()),
                     "pred_kernel_us": float(g.pred.sum()), "pred_back_to_back_us": b2b, "pred_latency_us": lat})
    return pd.DataFrame(rows)


def _contexts(described: pd.DataFrame) -> np.ndarray:
    return np.array([g.rsplit("|@", 1)[1] if "|@" in g else "" for g in described.group.to_numpy(dtype=object)],
                    dtype=object)


def fit_host(ops: pd.DataFrame, described: pd.DataFrame, steps: pd.DataFrame) -> Host:
    """Host numbers that make the timeline match the profile's measured back-to-back times and
    latencies (one profiled step per point, its measured kernel times): over every point, and per
    context that has `MIN_CONTEXT_CASES` points."""
    if steps is None or steps.empty or "back_to_back_us" not in steps:
        return Host()
    frame = pd.DataFrame({"run_id": ops.run_id.to_numpy(), "point": ops.point.to_numpy(),
                          "step": ops.step.to_numpy(), "order": ops.ts_us.to_numpy(dtype=float),
                          "dur": ops.dur_us.to_numpy(dtype=float),
                          "gemm": np.isin(described.cls.to_numpy(), ("gemm", "grouped", "spmm")),
                          "sync": described.sync.to_numpy(dtype=bool), "ctx": _contexts(described)})
    first = frame.groupby(["run_id", "point"]).step.transform("min")
    frame = frame[frame.step == first].sort_values("order", kind="stable")
    meas = steps.set_index(["run_id", "point"])[["back_to_back_us", "latency_us"]]
    cases = []
    for key, g in frame.groupby(["run_id", "point"], sort=False):
        if key not in meas.index:
            continue
        b2b, lat = meas.loc[key]
        if np.isfinite(b2b) and b2b > 0 and np.isfinite(lat) and lat > 0:
            cases.append((g.dur.to_numpy(), g.gemm.to_numpy(), g.sync.to_numpy(), float(b2b), float(lat),
                          str(g.ctx.mode().iat[0])))
    if len(cases) < 4:
        return Host()
    host = _fit(cases)
    for ctx in sorted({c[-1] for c in cases}):
        mine = [c for c in cases if c[-1] == ctx]
        if len(mine) >= MIN_CONTEXT_CASES:
            host.by_context[ctx] = _fit(mine, host)
    return host


def _fit(cases: list, prior: Host | None = None) -> Host:
    """The back-to-back numbers (launch, GEMM, sync, step, device gap) by least squares in log
    back-to-back time, then the latency's lead and the host's tail in log latency; a context's
    fit starts from the whole fit (`prior`) and is pulled toward it where its steps leave a
    number undecided (a context whose steps are all the device's says nothing of its launches)."""
    from scipy.optimize import minimize

    if len(cases) > MAX_CASES:  # a fit of five numbers needs no more; spread over the grid
        cases = [cases[i] for i in np.linspace(0, len(cases) - 1, MAX_CASES).astype(int)]
    plans = [(Plan(k, gm, s), b2b, lat) for k, gm, s, b2b, lat, _ in cases]

    lam = PULL if prior is not None else 0.0
    b2b_prior = (np.array([prior.launch_us, prior.gemm_us, prior.sync_us, prior.step_us, prior.gap_us])
                 if prior is not None else None)

    def pull(theta, ref):
        return lam * float(np.mean(np.square(np.log((np.abs(theta) + 1.0) / (ref + 1.0))))) if lam else 0.0

    def loss(theta):
        h = Host(*np.abs(theta[:4]), latency_us=0.0, gap_us=abs(theta[4]))
        err = [np.log(p.times(h)[0] / b) for p, b, _ in plans]
        return float(np.mean(np.square(err))) + pull(theta, b2b_prior)

    x0 = [6.0, 2.0, 15.0, 5.0, 1.0] if b2b_prior is None else b2b_prior
    best = minimize(loss, x0=x0, method="Nelder-Mead",
                    options={"maxiter": 200, "xatol": 0.05, "fatol": 1e-5})
    host = Host(*np.abs(best.x[:4]), latency_us=0.0, gap_us=abs(best.x[4]))

    def lat_loss(theta):
        host.latency_us, host.tail_us = abs(theta[0]), abs(theta[1])
        err = [np.log(p.times(host)[1] / lat) for p, _, lat in plans]
        ref = np.array([prior.latency_us, prior.tail_us]) if prior is not None else None
        return float(np.mean(np.square(err))) + pull(theta, ref)

    fits = [minimize(lat_loss, x0=x0, method="Nelder-Mead", options={"maxiter": 120, "xatol": 0.05, "fatol": 1e-5})
            for x0 in ([10.0, 10.0], [2.0, 30.0], [20.0, 1.0])]
    lead, tail = np.abs(min(fits, key=lambda r: r.fun).x)
    host.latency_us, host.tail_us = float(lead), float(tail)
    return host

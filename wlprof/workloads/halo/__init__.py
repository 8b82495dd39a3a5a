"""The halo exchange: a partitioned GNN aggregation whose boundary rows are exchanged every step.

Boundary first, its exchange on other streams (or to other ranks), the inner nodes
meanwhile (`overlap`), against all compute then the exchange (`serial`). Each point also
times its compute alone and its exchange alone, so the step is placed between
max(compute, exchange) (fully hidden) and their sum (fully exposed). Design and argument:
`docs/halo.md`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from wlprof.errors import InputError, Key
from wlprof.params import Param, PerDevice, Values
from wlprof.schema import F64, I64, Column, S
from wlprof.workloads.base import Built, Parsed, Point, Workload, column
from wlprof.workloads.halo.steps import EXCHANGES, SCHEDULES

# below this share of the larger of the two, sum and max of a step are too close to place it between them
SMALL_EXCHANGE = 0.05

GRAPHS = ("grid", "uniform", "rmat")
EDGE_FACTOR = 8  # uniform and rmat: edges drawn per node (before duplicates and self-loops are removed)


@dataclass(frozen=True)
class HaloSpec:
    schedules: tuple[str, ...]
    graph: str
    nodes: tuple[int, ...]
    features: tuple[int, ...]
    partitions: int
    exchange: str
    seed: int


def _timed(fn, device, calls: int | None, key: str) -> float:
    """Back-to-back µs per call of `fn` (ranks agree on the batch size)."""
    from wlprof.device import synchronize
    from wlprof.distributed.world import agree_max
    from wlprof.timing import calls_for, single_call_us, time_step

    for _ in range(2):
        fn()
    synchronize(device)
    probe = sorted(single_call_us(fn, device, 3))[1]
    n = agree_max(calls or calls_for(probe, 10.0), key)
    return time_step(fn, device, latency_reps=1, batches=5, min_batch_ms=10.0, graph=False,
                     calls_per_batch=n).back_to_back_median_us


class Halo(Workload):
    name = "halo"
    summary = ("the halo exchange: a partitioned GNN aggregation, boundary exchanged on side streams or between "
               "ranks, serial vs overlapped")
    label = "Halo exchange"
    phases = True
    params = (
        Param("schedule", "str", "serial (all compute, then the exchange, then wait) or overlap (boundary, its "
              "exchange started, inner compute meanwhile, then wait)", many=True, choices=SCHEDULES,
              default=list(SCHEDULES)),
        Param("graph", "str", "grid (a 2-D 4-neighbour mesh: the stencil, row strips as partitions), uniform or "
              "rmat (random graphs: most edges cross partitions)", choices=GRAPHS, default="grid"),
        Param("nodes", "int", "Nodes of the graph (grid: a square number; rmat: a power of two)", many=True,
              default=PerDevice([1 << 20], [1 << 12])),
        Param("features", "int", "Feature width", many=True, default=PerDevice([128], [32])),
        Param("partitions", "int", "Partitions (contiguous node ranges); a multiple of the world size. Default: 4 "
              "in one process, one per rank in a distributed run", minimum=1),
        Param("exchange", "str", "The copy path between partitions of one process: d2d (device to device on two "
              "side streams) or host (through pinned host memory: device to host on one stream, host to device on "
              "the other)", choices=EXCHANGES, default="d2d"),
        Param("seed", "int", "Seed of the random graphs and the features", minimum=0, default=0),
    )
    columns = (
        Column("schedule", S, "", "halo: serial or overlap"),
        Column("graph", S, "", "GNN: graph generator (uniform, rmat, zipf:s, karate)"),
        Column("nodes", I64, "", "GNN: nodes"),
        Column("edges", I64, "", "GNN: edges"),
        Column("features", I64, "", "GNN: feature width"),
        Column("partitions", I64, "", "halo: partitions of the graph"),
        Column("exchange", S, "", "halo: copy path between partitions of one process (d2d, host)"),
        Column("seed", I64, "", "MoE/GNN: seed of the generated data (routing draw, graph draw, inputs)", data=True),
        Column("halo_rows", I64, "rows", "halo: halo rows this rank holds (copies of other partitions' nodes)"),
        Column("boundary_nodes", I64, "", "halo: this rank's nodes other partitions hold a copy of"),
        Column("inner_nodes", I64, "", "halo: this rank's other nodes"),
        Column("cut_edges", I64, "", "halo: edges into this rank's nodes from another partition"),
        Column("exchange_bytes", I64, "bytes", "halo: bytes this rank moves per step (local copies and P2P sends)"),
        Column("exchange_copies", I64, "", "halo: copies per step between this rank's own partitions"),
        Column("halo_compute_us", F64, "us", "halo: boundary + inner compute alone, back to back, per step"),
        Column("halo_exchange_us", F64, "us", "halo: the exchange alone, back to back, per step"),
        Column("halo_step_us", F64, "us", "halo: this schedule's whole step, back to back, timed beside the two"),
        Column("halo_max_us", F64, "us", "halo: max(compute, exchange): the step if the exchange hid completely"),
        Column("halo_sum_us", F64, "us", "halo: compute + exchange: the step with nothing overlapped"),
        Column("halo_position", F64, "fraction", "halo: (step - max) / (sum - max): 0 at max (hidden), 1 at sum "
               "(serial); null where the smaller of compute and exchange is under 5% of the larger"),
    )
    examples = (
        "wlprof run halo --schedule serial,overlap --partitions 4 --features 128",
        "wlprof run halo --schedule serial,overlap --world-size 2",
        "wlprof run halo --exchange host --nodes 4096,16384 --features 32,128",
    )

    def spec(self, values: Values, device, dtype) -> Parsed:
        from wlprof.distributed.world import current

        world = current().size
        notes = []
        graph = values["graph"]
        parts = values["partitions"]
        if parts is None:
            parts = world if world > 1 else 4
        if parts < 2:
            raise InputError(Key("partitions"), "must be at least 2: one partition exchanges nothing", parts)
        if parts % world:
            raise InputError(Key("partitions"), ("must be a multiple of ", Key("world_size", "store"),
                             f" ({world}): every rank holds the same number of partitions"), parts)
        for n in values["nodes"]:
            if parts > n:
                raise InputError(Key("partitions"), ("must be at most ", Key("nodes"), f" ({n}): a partition "
                                 "holds at least one node"), parts)
            if graph == "grid" and math.isqrt(n) ** 2 != n:
                s = math.isqrt(n)
                raise InputError(Key("nodes"), f"must be a square number for --graph grid (e.g. {s * s} or "
                                 f"{(s + 1) ** 2})", n)
            if graph == "grid" and parts > math.isqrt(n):
                raise InputError(Key("partitions"), ("must be at most the grid's side (", Key("nodes"),
                                 f" {n} = {math.isqrt(n)}^2): a strip is at least one row"), parts)
            if graph == "rmat" and n & (n - 1):
                raise InputError(Key("nodes"), "must be a power of two for --graph rmat", n)
        if device.type != "cuda":
            notes.append("CPU: streams and events are no-ops here, so the copies between partitions run inline; "
                         "serial and overlap differ only where gloo sends to other ranks in the background")
        if device.type != "cuda" and not {"nodes", "features"} & values.given:
            notes.append("CPU: 4,096 nodes (a 64 x 64 grid), 32 features (GPU defaults: 2^20 nodes, 128)")
        notes.append("each point also times its compute alone and its exchange alone: halo_position places the "
                     "step between max(compute, exchange) (0) and their sum (1)")
        spec = HaloSpec(tuple(values["schedule"]), graph, tuple(values["nodes"]), tuple(values["features"]), parts,
                        values["exchange"], values["seed"])
        return Parsed(spec, tuple(notes))

    def family(self, rows) -> list[str]:
        return [f"Halo ({s})" for s in column(rows, "schedule")]

    def points(self, spec: HaloSpec) -> list[Point]:
        out = []
        many = len(spec.nodes) > 1 or len(spec.features) > 1
        for n in spec.nodes:
            for f in spec.features:
                for s in spec.schedules:
                    label = s + (f" / {n} nodes x {f}" if many else "")
                    out.append(Point(label, {"schedule": s, "graph": spec.graph, "nodes": n, "features": f,
                                             "partitions": spec.partitions, "exchange": spec.exchange,
                                             "seed": spec.seed}))
        return out

    def estimate_bytes(self, point: Point, dtype) -> int:
        p = point.params
        n, f = p["nodes"], p["features"]
        deg = 4 if p["graph"] == "grid" else 2 * EDGE_FACTOR
        # two feature buffers with halo rows (at most a copy of every node per partition), messages, indices
        return int(2 * (2 * n) * f * dtype.itemsize + 3 * n * deg * 8 + n * deg * f * dtype.itemsize)

    def build(self, point: Point, device, dtype) -> Built:
        from wlprof.distributed.world import current, ensure_group
        from wlprof.workloads.halo import partition as P
        from wlprof.workloads.halo import steps as S

        p = point.params
        world = current() if current().size == 1 else ensure_group(device)
        key = (p["graph"], p["nodes"], p["partitions"], p["seed"], world.size, world.rank)
        cache = self.__dict__.setdefault("_plans", {})  # the schedules of one graph share its plan
        if key not in cache:
            edges = (P.grid_edges(p["nodes"]) if p["graph"] == "grid"
                     else P.random_edges(p["graph"], p["nodes"], EDGE_FACTOR, p["seed"]))
            cache.clear()
            cache[key] = (int(edges.shape[1]), P.plan(edges, p["nodes"], p["partitions"], world.size, world.rank))
        n_edges, pl = cache[key]
        fns = S.build(pl, p["features"], device, dtype, p["exchange"], world.group, p["seed"])
        compute_us = _timed(fns["compute"], device, None, f"{point.variant}/compute")
        exchange_us = _timed(fns["exchange"], device, None, f"{point.variant}/exchange")
        step_us = _timed(fns[p["schedule"]], device, None, f"{point.variant}/step")
        lo, hi = max(compute_us, exchange_us), compute_us + exchange_us
        position = halo_position(compute_us, exchange_us, step_us)
        rows = pl.exchange_rows()
        n_copies = len(pl.runs()) if len(pl.runs()) <= P.MAX_RUNS else 2
        facts = {"edges": n_edges, "halo_rows": pl.halo, "boundary_nodes": len(pl.self_rows["boundary"]),
                 "inner_nodes": len(pl.self_rows["inner"]), "cut_edges": pl.cut_edges,
                 "exchange_bytes": rows * p["features"] * dtype.itemsize, "exchange_copies": n_copies,
                 "halo_compute_us": compute_us, "halo_exchange_us": exchange_us, "halo_step_us": step_us,
                 "halo_max_us": lo, "halo_sum_us": hi, "halo_position": position}
        where = position_phrase(compute_us, exchange_us, step_us)
        peers = f", P2P with ranks {sorted(pl.send)}" if pl.send else ""
        note = (f"rank {world.rank}: compute {compute_us:,.1f} µs, exchange {exchange_us:,.1f} µs "
                f"({rows:,} rows, {n_copies} copies{peers}); step {step_us:,.1f} µs against max {lo:,.1f} and sum "
                f"{hi:,.1f}: {where}" + ("; CPU: streams are no-ops, copies run inline" if device.type != "cuda"
                                          else ""))
        return Built(step=fns[p["schedule"]], graph_safe=world.size == 1, facts=facts, note=note)


WORKLOAD = Halo()


def halo_position(compute_us: float, exchange_us: float, step_us: float) -> float:
    """(step - max) / (sum - max); NaN where the smaller of compute and exchange is under SMALL_EXCHANGE
    of the larger (the denominator is then within the timings' noise, and the ratio says nothing)."""
    lo, hi = max(compute_us, exchange_us), compute_us + exchange_us
    return (step_us - lo) / (hi - lo) if hi > lo and hi - lo >= SMALL_EXCHANGE * lo else float("nan")


def position_phrase(compute_us: float, exchange_us: float, step_us: float) -> str:
    """Where a step lies between max(compute, exchange) and their sum, in words."""
    lo, hi = max(compute_us, exchange_us), compute_us + exchange_us
    position = (step_us - lo) / (hi - lo) if hi > lo else float("nan")
    where = (f"{position:.2f}: below max" if position < -0.05 else
             "at max: the exchange hid completely" if position <= 0.05 else
             f"{position:.2f}: above the sum" if position > 1.05 else
             "at sum: nothing overlapped" if position >= 0.95 else f"{position:.0%} of the way from max to sum")
    if hi > lo and hi - lo < SMALL_EXCHANGE * lo:
        small, large = ("exchange", "compute") if exchange_us <= compute_us else ("compute", "exchange")
        where += f" (the {small} is {(hi - lo) / lo:.1%} of the {large}: too small for the position to say much)"
    return where

"""The world a step runs in: rank, size, process group, and a rendezvous store that names failed ranks.

A rank is started by `wlprof run ... --world-size N` (`distributed.launch`) or by torchrun;
both set RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT. The launcher hosts the
rendezvous store (under torchrun, the agent does; started otherwise, rank 0). Every wait on another rank goes
through `Rendezvous`, which times out naming the ranks that did not arrive, and fails at
once when any rank (or the launcher, which sees a rank's process exit) posts `abort`.
Every rank checks that all run the same wlprof, torch, Python and schema first.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import socket
import time
from dataclasses import dataclass, field
from typing import Any

from wlprof.errors import InputError, WlprofError

# NVLink multicast stays off in every process wlprof starts (and in the ranks themselves).
MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
TIMEOUT_ENV = "WLPROF_DIST_TIMEOUT"  # seconds a rank waits for the others (default 300)
GRACE_ENV = "WLPROF_DIST_GRACE"  # seconds the launcher gives the other ranks to stop once one failed
STORE_ENV = "WLPROF_STORE_HOST"  # "launcher": `wlprof run --world-size` hosts the rendezvous store, not rank 0
FAIL_ENV = "WLPROF_TEST_FAIL"  # "RANK:PHASE": that rank exits there (tests of a rank that dies)
VERSION_ENV = "WLPROF_TEST_VERSION"  # "RANK:package=version": that rank reports it (tests of a mismatch)
VERSION_KEYS = ("wlprof", "schema", "torch", "python")


class DistributedError(WlprofError):
    """Another rank failed, died, timed out, or does not match this one."""


def multicast_off(env: dict | None = None) -> dict:
    """Set the NVLink-multicast switches off in `env` (default: this process's environment)."""
    target = os.environ if env is None else env
    target.update(MULTICAST_OFF)
    return target


def timeout_s() -> float:
    raw = os.environ.get(TIMEOUT_ENV)
    try:
        return float(raw) if raw else 300.0
    except ValueError:
        raise InputError(TIMEOUT_ENV, "must be a number of seconds", raw) from None


def grace_s() -> float:
    """Seconds the launcher waits for the other ranks to stop by themselves once one failed, then ends them
    (default: the ranks' wait, at most 30 s, plus 5)."""
    raw = os.environ.get(GRACE_ENV)
    if not raw:
        return min(30.0, timeout_s()) + 5
    try:
        grace = float(raw)
    except ValueError:
        grace = -1.0
    if not grace >= 0:
        raise InputError(GRACE_ENV, "must be a number of seconds, 0 or more", raw)
    return grace


@dataclass
class World:
    rank: int = 0
    size: int = 1
    local_rank: int = 0
    group: Any = None  # the default torch.distributed process group, once initialized
    backend: str | None = None
    launched_by: str = "none"  # none, planned (validation only), in-process, wlprof, torchrun
    rendezvous: Rendezvous | None = None
    hosts: dict[int, str] = field(default_factory=dict)

    @property
    def distributed(self) -> bool:
        return self.size > 1 or self.group is not None


_CURRENT = World()


def current() -> World:
    """The world of this process (size 1 and no group unless a distributed run set one up)."""
    return _CURRENT


def set_current(world: World) -> None:
    global _CURRENT
    _CURRENT = world


@contextlib.contextmanager
def planned(size: int):
    """A world of `size` ranks for checking a study before its ranks are launched (no group)."""
    prev = _CURRENT
    set_current(World(size=size, launched_by="planned"))
    try:
        yield _CURRENT
    finally:
        set_current(prev)


def from_env() -> tuple[int, int, int] | None:
    """(rank, world size, local rank) when this process was launched as a rank (torchrun or wlprof)."""
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        return None
    try:
        rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        local = int(os.environ.get("LOCAL_RANK", rank))
    except ValueError:
        raise InputError("RANK/WORLD_SIZE", "must be integers (as torchrun sets them)",
                         f"{os.environ.get('RANK')}/{os.environ.get('WORLD_SIZE')}") from None
    if not 0 <= rank < size:
        raise InputError("RANK", f"must be in 0..{size - 1} (WORLD_SIZE {size})", rank)
    return rank, size, local


def host_store(host: str, port: int, size: int):
    """The rendezvous store of `size` ranks, served by this process on `port` of `host` (0: one the system
    picks, taken as it is picked: no other process can take it before the store listens)."""
    import torch.distributed as dist

    return dist.TCPStore(host, port, size, is_master=True, timeout=dt.timedelta(seconds=timeout_s()),
                         wait_for_workers=False)


class Rendezvous:
    """Keys on the rank-0 store, read with waits that name who is missing."""

    POLL_S = 0.05

    def __init__(self, store, rank: int, size: int, timeout: float, host: str = "rank 0"):
        self.store, self.rank, self.size, self.timeout = store, rank, size, timeout
        self.host = host  # who hosts the store: rank 0, the launcher or torchrun's agent

    def _call(self, fn, *args):
        try:
            return fn(*args)
        except DistributedError:
            raise
        except Exception as exc:  # noqa: BLE001 - the store's host is gone: say who hosts it
            raise DistributedError(f"rank {self.rank}: lost the rendezvous store on {self.host} ({self.host} died "
                                   f"or exited: {str(exc).splitlines()[0][:200]})") from None

    def publish(self, key: str, value: str) -> None:
        self._call(self.store.set, f"{key}/{self.rank}", value)

    def post(self, key: str, value: str) -> None:
        self._call(self.store.set, key, value)

    def aborted(self) -> str | None:
        if self._call(self.store.check, ["abort"]):
            return self._call(self.store.get, "abort").decode()
        return None

    def abort(self, message: str) -> None:
        """Tell every rank to stop (the first message stays), best effort."""
        with contextlib.suppress(Exception):
            self.store.compare_set("abort", "", message)

    def wait(self, keys: list[str], what: str, timeout: float | None = None) -> None:
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            if self._call(self.store.check, keys):
                return
            reason = self.aborted()
            if reason:
                raise DistributedError(f"rank {self.rank} stopped: {reason}")
            if time.monotonic() > deadline:
                missing = [k for k in keys if not self._call(self.store.check, [k])]
                ranks = sorted({int(k.rsplit("/", 1)[-1]) for k in missing if k.rsplit("/", 1)[-1].isdigit()})
                who = ", ".join(f"rank {r}" for r in ranks) or ", ".join(missing)
                raise DistributedError(f"{who} did not reach {what} within {self.timeout:.0f} s "
                                       f"(died or hangs; {TIMEOUT_ENV} sets the wait)")
            time.sleep(self.POLL_S)

    def gather(self, key: str, what: str) -> dict[int, str]:
        keys = [f"{key}/{r}" for r in range(self.size)]
        self.wait(keys, what)
        return {r: self._call(self.store.get, k).decode() for r, k in enumerate(keys)}

    def get(self, key: str, what: str) -> str:
        self.wait([key], what)
        return self._call(self.store.get, key).decode()


def versions_of_this_rank(rank: int) -> dict[str, str | None]:
    import platform

    import torch

    import wlprof
    from wlprof import schema

    v = {"wlprof": wlprof.__version__, "schema": schema.SCHEMA_VERSION, "torch": torch.__version__,
         "python": platform.python_version()}
    fake = os.environ.get(VERSION_ENV, "")
    if fake:
        who, _, assign = fake.partition(":")
        pkg, _, val = assign.partition("=")
        if who.strip() == str(rank) and pkg in v:
            v[pkg] = val
    return v


def mismatch(versions: dict[int, dict]) -> str | None:
    """The first difference between the ranks' versions, worded for the user; None when they agree."""
    ref = versions[min(versions)]
    for r in sorted(versions):
        for k in VERSION_KEYS:
            if versions[r].get(k) != ref.get(k):
                return (f"rank {r} runs {k} {versions[r].get(k)}, rank {min(versions)} runs {ref.get(k)}: every rank "
                        "must run the same wlprof, schema, torch and Python")
    return None


def fail_here(rank: int, phase: str) -> None:
    """A test's fault injection: exit this rank at `phase` when WLPROF_TEST_FAIL says so."""
    spec = os.environ.get(FAIL_ENV, "")
    if spec and spec == f"{rank}:{phase}":
        os._exit(3)


def connect(rank: int, size: int, local_rank: int, device_type: str, launched_by: str) -> World:
    """The rendezvous store, the version check and the default process group of this rank."""
    import torch
    import torch.distributed as dist

    multicast_off()
    t = timeout_s()
    host = os.environ.get("MASTER_ADDR", "127.0.0.1")
    try:
        port = int(os.environ.get("MASTER_PORT", "29500"))
    except ValueError:
        raise InputError("MASTER_PORT", "must be a port number", os.environ.get("MASTER_PORT")) from None
    agent = os.environ.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true"
    host_of_store = "the launcher" if os.environ.get(STORE_ENV) == "launcher" else \
        "torchrun's agent" if agent else "rank 0"
    master = rank == 0 and host_of_store == "rank 0"
    try:
        base = dist.TCPStore(host, port, size, is_master=master, timeout=dt.timedelta(seconds=t),
                             wait_for_workers=False)
    except Exception as exc:  # noqa: BLE001 - torch's DistNetworkError and RuntimeError both
        text = str(exc).splitlines()[0][:200]
        if master:
            raise InputError("MASTER_PORT", f"must be a free port on {host} for rank 0's rendezvous store "
                             f"(it is in use: {text}); unset it to let wlprof pick one", port) from None
        raise DistributedError(f"rank {rank}: could not reach the rendezvous store on {host_of_store} at "
                               f"{host}:{port} within {t:.0f} s ({text})") from None
    token = os.environ.get("WLPROF_RUN_TOKEN") or (os.environ.get("TORCHELASTIC_RUN_ID", "run") + "-"
                                                   + os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    store = dist.PrefixStore(f"wlprof/{token}", base)
    rv = Rendezvous(store, rank, size, t, host_of_store)
    rv.publish("versions", json.dumps(versions_of_this_rank(rank)))
    rv.publish("host", socket.gethostname())
    if rank == 0:
        got = {r: json.loads(v) for r, v in rv.gather("versions", "the version check").items()}
        bad = mismatch(got)
        rv.post("verdict", bad or "ok")
    verdict = rv.get("verdict", "the version check")
    if verdict != "ok":
        raise DistributedError(verdict)
    hosts = {r: h for r, h in rv.gather("host", "the version check").items()}
    fail_here(rank, "init")
    backend = "nccl" if device_type == "cuda" else "gloo"
    kwargs: dict[str, Any] = {}
    if backend == "nccl":
        torch.cuda.set_device(local_rank)
        kwargs["device_id"] = torch.device("cuda", local_rank)
    dist.init_process_group(backend, store=dist.PrefixStore("pg", store), rank=rank, world_size=size,
                            timeout=dt.timedelta(seconds=t), **kwargs)
    world = World(rank, size, local_rank, dist.group.WORLD, backend, launched_by, rv, hosts)
    set_current(world)
    return world


def ensure_group(device) -> World:
    """The current world with a process group: a 1-rank group in this process when none was set up
    (an alltoall dispatch run without --world-size)."""
    w = current()
    if w.group is not None:
        return w
    if w.launched_by == "planned":
        return w
    import torch
    import torch.distributed as dist

    multicast_off()
    backend = "nccl" if device.type == "cuda" else "gloo"
    if not dist.is_initialized():
        kwargs: dict[str, Any] = {}
        if backend == "nccl":
            kwargs["device_id"] = torch.device("cuda", device.index or 0)
        dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1,
                                timeout=dt.timedelta(seconds=timeout_s()), **kwargs)
    world = World(0, 1, 0, dist.group.WORLD, backend, "in-process")
    set_current(world)
    return world


def agree_max(value: int, key: str) -> int:
    """The largest of every rank's `value` (each rank must call it with the same `key`)."""
    global _AGREEMENTS
    w = current()
    if w.rendezvous is None or w.size == 1:
        return int(value)
    _AGREEMENTS += 1  # every rank agrees in the same order: the count keeps a key from meeting a stale value
    name = f"agree/{_AGREEMENTS}/{key}"
    w.rendezvous.publish(name, str(int(value)))
    return max(int(v) for v in w.rendezvous.gather(name, f"'{key}'").values())


_AGREEMENTS = 0


def shutdown() -> None:
    import torch.distributed as dist

    with contextlib.suppress(Exception):
        if dist.is_initialized():
            dist.destroy_process_group()
    set_current(World())

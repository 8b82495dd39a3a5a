"""`wlprof run ... --world-size N`: start N local ranks of the same study and watch them.

The study is checked here first (with a planned world of N ranks), so bad input is
refused before any process starts. The launcher hosts the ranks' rendezvous store (on
the MASTER_PORT given, which must be free, else on a port the system picks). Each rank is
`python -m wlprof.distributed.child` with RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and
MASTER_PORT set and NVLink multicast off. When a rank's process exits with an error, the
launcher posts `abort` naming it to the store, waits for the others to stop, ends the ones
that do not (by their pids, after WLPROF_DIST_GRACE seconds), and removes rank 0's staged
run folder if it was left: nothing half-written remains.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from wlprof.distributed import world as W
from wlprof.errors import InputError


def check(study, world_size: int):
    """Validate the study for `world_size` ranks (raises InputError before anything starts)."""
    import torch

    from wlprof import study as S

    if world_size < 1:
        raise InputError("--world-size", "must be a positive number of ranks", world_size)
    with W.planned(world_size):
        wl, device, dtype, parsed, points, _ = S.prepare(study)
    if device.type == "cuda" and world_size > torch.cuda.device_count():
        raise InputError("--world-size", f"must be at most the {torch.cuda.device_count()} GPUs of this host "
                         "(one rank per GPU)", world_size)
    return wl, device, parsed, points


def oversubscribed_note(device, world_size: int, cores: int) -> str | None:
    """A note where CPU ranks outnumber the cores: each rank then waits for one, and the run is slow."""
    if device.type != "cpu" or world_size <= cores:
        return None
    return (f"{world_size} ranks on {cores} cores: the ranks take turns on the cores, so each step waits for "
            "the slowest and the run takes many times longer; --world-size "
            f"{cores} or less keeps one core per rank")


def _store(host: str, world_size: int):
    """The rendezvous store, hosted here on the MASTER_PORT given (which must be free) or on a free port."""
    given = os.environ.get("MASTER_PORT")
    port = 0
    if given:
        try:
            port = int(given)
        except ValueError:
            raise InputError("MASTER_PORT", "must be a port number", given) from None
    try:
        return W.host_store(host, port, world_size)
    except Exception as exc:  # noqa: BLE001 - torch's DistNetworkError and RuntimeError both
        text = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        if not given:
            raise InputError("MASTER_ADDR", f"must be an address of this host, where the rendezvous store listens "
                             f"({text})", host) from None
        why = "it is in use" if "EADDRINUSE" in text or "in use" in text else text
        raise InputError("MASTER_PORT", f"must be a free port on {host} for the rendezvous store ({why}); unset "
                         "it to let wlprof pick one", port) from None


def _post_abort(store, token: str, message: str) -> None:
    """Tell the other ranks why they stop (the first message stays). The store lives in this process: the post
    needs no connection of its own, which a loaded machine could time out, and reaches them whichever rank died."""
    import torch.distributed as dist

    dist.PrefixStore(f"wlprof/{token}", store).compare_set("abort", "", message)


def launch(study, traces, world_size: int, quiet: bool = False, command: str | None = None) -> int:
    """Run `study` on `world_size` local ranks; returns the exit code (0: the run was written)."""
    _, device, _, _ = check(study, world_size)
    note = oversubscribed_note(device, world_size, os.cpu_count() or 1)
    if note and not quiet:
        print(f"note: {note}", file=sys.stderr)
    grace = W.grace_s()
    host = os.environ.get("MASTER_ADDR", "127.0.0.1")
    store = _store(host, world_size)
    token = secrets.token_hex(6)
    tmp = Path(tempfile.mkdtemp(prefix="wlprof-launch-"))
    spec = tmp / "study.json"
    spec.write_text(json.dumps({"study": study.to_dict(), "traces": str(traces), "quiet": quiet,
                                "command": command}))
    note = tmp / "staging"
    cores = os.cpu_count() or 1
    procs: list[subprocess.Popen] = []
    try:
        for rank in range(world_size):
            env = W.multicast_off(dict(os.environ))
            env.update(RANK=str(rank), WORLD_SIZE=str(world_size), LOCAL_RANK=str(rank),
                       LOCAL_WORLD_SIZE=str(world_size), MASTER_ADDR=host, MASTER_PORT=str(store.port),
                       WLPROF_RUN_TOKEN=token, **{"WLPROF_STAGING_NOTE": str(note), W.STORE_ENV: "launcher"})
            # c10d's warnings (each with a C++ stack) repeat what the rank's own error says when a peer dies
            env.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
            if study.device in (None, "cpu") and "OMP_NUM_THREADS" not in os.environ:
                env["OMP_NUM_THREADS"] = str(max(1, cores // world_size))
            procs.append(subprocess.Popen([sys.executable, "-m", "wlprof.distributed.child", str(spec)], env=env))
        failed: tuple[int, int] | None = None
        grace_end = None
        while any(p.poll() is None for p in procs):
            for r, p in enumerate(procs):
                code = p.poll()
                if code not in (None, 0) and failed is None:
                    failed = (r, code)
                    how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
                    _post_abort(store, token, f"rank {r} {how}")
                    grace_end = time.monotonic() + grace
            if grace_end is not None and time.monotonic() > grace_end:
                for p in procs:
                    if p.poll() is None:
                        p.terminate()
                time.sleep(2)
                for p in procs:
                    if p.poll() is None:
                        p.kill()
                break
            time.sleep(0.1)
        for p in procs:
            p.wait()
        codes = [p.returncode for p in procs]
        if failed is None and any(codes):
            failed = next((r, c) for r, c in enumerate(codes) if c)
        if failed is not None:
            _remove_staged(note)
            r, code = failed
            how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
            print(f"error: rank {r} {how}; the other ranks stopped; no run was written", file=sys.stderr)
            return 1 if code != 2 else 2
        return 0
    except KeyboardInterrupt:
        for p in procs:
            if p.poll() is None:
                p.terminate()
        for p in procs:
            with contextlib.suppress(Exception):
                p.wait(timeout=10)
        if not _remove_staged(note):
            from wlprof.errors import Interrupted

            raise Interrupted(f"no run was written to {traces}/ (a run over several ranks is written once every "
                              "rank has finished every point, and cannot be resumed)") from None
        raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _remove_staged(note: Path) -> bool:
    """Remove rank 0's staged run folder, if a failure left it (a published run is never touched); True
    when rank 0 staged one that is gone: published under its run id."""
    try:
        staged = Path(note.read_text().strip())
    except OSError:
        return False
    if not staged.name.startswith(".staging-"):
        return False
    if staged.is_dir():
        shutil.rmtree(staged, ignore_errors=True)
        return False
    return True

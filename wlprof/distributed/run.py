"""One rank of a distributed study: every rank profiles itself, rank 0 merges them into one run.

Rank 0 stages the run folder (a hidden name, `store.runs.RunWriter(staged=True)`) and posts
its path; every rank writes its points there (`p000-<variant>-r<rank>`, its tables with its
`rank`), then posts what it wrote. Rank 0 waits for every rank, matches their collectives
(the `collectives` table), writes the manifest and only then publishes the folder. Any
failure on any rank aborts every rank and removes the staged folder: a run is whole or
absent. The timing batch size is agreed across ranks, so every rank makes the same calls.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from dataclasses import replace
from pathlib import Path

from wlprof.distributed import world as W
from wlprof.errors import InputError, Key, WlprofError

STAGING_NOTE_ENV = "WLPROF_STAGING_NOTE"  # the launcher's file where rank 0 notes its staged folder


def rank_device(study, local_rank: int):
    """The device of this rank: cuda:LOCAL_RANK where the study runs on a GPU, else the CPU."""
    import torch

    name = study.device
    if name in (None, "auto"):
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if str(name).startswith("cuda"):
        if not torch.cuda.is_available():
            raise InputError(Key("device", "study"), "names a CUDA device but this machine has none", name)
        if local_rank >= torch.cuda.device_count():
            raise InputError("--world-size", f"must be at most the {torch.cuda.device_count()} GPUs of this host "
                             f"(LOCAL_RANK {local_rank} has none)", local_rank + 1)
        return f"cuda:{local_rank}"
    return "cpu"


def _agreed_capture(step, device, cfg):
    """The capture settings with a batch size every rank uses: each times a few calls, the largest wins."""
    from wlprof.device import synchronize
    from wlprof.timing import calls_for

    for _ in range(max(1, min(cfg.warmup, 3))):
        step()
    synchronize(device)
    t0 = time.perf_counter()
    for _ in range(3):
        step()
    synchronize(device)
    local = calls_for((time.perf_counter() - t0) / 3 * 1e6, cfg.min_batch_ms)
    return replace(cfg, calls_per_batch=W.agree_max(local, "calls_per_batch"), graph=False)


def _point(wl, point, index, device, dtype, cfg, run_path: Path, ceilings, identity, rank: int):
    """Build, capture and write one point on this rank; returns (steps row, files)."""
    import pandas as pd

    from wlprof import pipeline
    from wlprof.capture import capture
    from wlprof.schema import SCHEMA_VERSION
    from wlprof.store.runs import write_point

    raw = run_path / f".raw-p{index:03d}-r{rank}.json"
    try:
        built = wl.build(point, device, dtype)
        W.fail_here(rank, "build")
        cfg = _agreed_capture(built.step, device, cfg)
        W.fail_here(rank, "capture")
        cap = capture(built.step, device, cfg, raw, graph_safe=False)
        del built.step
        columns = {**identity, **dict(point.params), **built.facts, "variant": point.variant, "point": index,
                   "rank": rank}
        tables = pipeline.process(raw, ceilings=ceilings, identity=columns, stated=built.stated,
                                  timings=cap.timings, profiled_steps=cap.profiled_steps,
                                  useful_flops=built.useful_flops, executed_regions=built.executed_regions,
                                  tf32=cap.tf32)
        row = tables.steps.iloc[0].to_dict()
        row["note"] = built.note
        row["sm_clock_mhz_start"], row["sm_clock_mhz_end"] = cap.sm_clock_mhz
        chrome = pipeline.chrome(tables, {"run_id": identity["run_id"], "variant": point.variant, "rank": rank,
                                          "schema_version": SCHEMA_VERSION})
        W.fail_here(rank, "write")
        files = write_point(run_path, index, f"{point.variant} r{rank}",
                            {"kernels": tables.kernels, "ops": tables.ops, "steps": pd.DataFrame([row]),
                             "overlap": tables.overlap}, chrome)
        return row, files
    finally:
        raw.unlink(missing_ok=True)


def run_rank(study, traces="traces", progress=None, command: str | None = None):
    """Run `study` as this process's rank (RANK/WORLD_SIZE in the environment); rank 0 returns the
    `study.RunResult`, the other ranks None."""
    import pandas as pd

    from wlprof import study as S
    from wlprof.ceilings import Ceilings, get_ceilings
    from wlprof.device import device_info, dtype_name
    from wlprof.store.collectives import write_collectives
    from wlprof.store.runs import RunWriter, check_writable, point_stem

    env = W.from_env()
    if env is None:
        raise InputError("RANK", "must be set: run under torchrun or `wlprof run ... --world-size N`", None)
    rank, size, local = env
    launched_by = "wlprof" if os.environ.get("WLPROF_RUN_TOKEN") else "torchrun"
    device_name = rank_device(study, local)
    study = replace(study, device=device_name)
    world = W.connect(rank, size, local, "cuda" if device_name.startswith("cuda") else "cpu", launched_by)
    rv = world.rendezvous
    writer = None
    try:
        if device_name == "cpu" and "OMP_NUM_THREADS" not in os.environ:  # a set one is the user's (or torchrun's)
            import torch

            torch.set_num_threads(max(1, (os.cpu_count() or 1) // int(os.environ.get("LOCAL_WORLD_SIZE", size))))
        wl, device, dtype, parsed, points, study = S.prepare(study)
        info = device_info(device)
        if rank == 0:
            root = check_writable(traces, Key("traces", "store"))
            ceilings, origin = get_ceilings(device)
            manifest = {
                "command": command if command is not None else " ".join(sys.argv),
                "study": study.to_dict(), "spec": S._jsonable(parsed.spec), "notes": list(parsed.notes),
                "versions": S.versions(), "device": info, "dtype": dtype_name(dtype),
                "ceilings": {**ceilings.to_dict(), "origin": origin}, "capture": study.capture.to_dict(),
                "world": {"size": size, "backend": world.backend, "launched_by": launched_by,
                          "hosts": {str(r): h for r, h in world.hosts.items()}},
                "points": [{"index": i, "variant": p.variant, "params": dict(p.params), "status": "pending"}
                           for i, p in enumerate(points)],
            }
            writer = RunWriter(root, wl.name, manifest, staged=True)
            note = os.environ.get(STAGING_NOTE_ENV)
            if note:
                Path(note).write_text(str(writer.path))
            rv.post("run", json.dumps({"path": str(writer.path.resolve()), "run_id": writer.run_id,
                                       "ceilings": manifest["ceilings"], "origin": origin}))
        run = json.loads(rv.get("run", "the run folder"))
        run_path = Path(run["path"])
        if not run_path.is_dir():
            raise W.DistributedError(f"rank {rank} cannot see rank 0's run folder {run_path}: the traces folder "
                                     "must be one folder every rank can write (a shared file system)")
        ceilings = Ceilings.from_dict(run["ceilings"])
        identity = {"run_id": run["run_id"], "workload": wl.name, "device_type": device.type,
                    "device_name": info["name"], "dtype": dtype_name(dtype)}
        rows = []
        for i, point in enumerate(points):
            if progress and rank == 0:
                progress(i, len(points), point.variant, "running")
            row, files = _point(wl, point, i, device, dtype, study.capture, run_path, ceilings, identity, rank)
            rows.append(row)
            rv.publish(f"point{i}", json.dumps(files))
            done = {r: json.loads(v) for r, v in rv.gather(f"point{i}", f"the end of point {i}").items()}
            if rank == 0:
                entry = writer.manifest["points"][i]
                entry.update(status="ok", files=done[0], rank_files={str(r): f for r, f in done.items()})
                write_collectives(run_path, [i], world.hosts, point_stem(i, point.variant))
                writer.write_manifest()
            if progress and rank == 0:
                progress(i + 1, len(points), point.variant, "ok")
        rv.publish("finished", "1")
        if rank != 0:
            rv.get("published", "rank 0 publishing the run")
            return None
        rv.gather("finished", "the end of the run")
        for r in range(1, size):
            rows.extend(pd.read_parquet(run_path / f)
                        .iloc[0].to_dict() for f in [rv_files(writer, i, r) for i in range(len(points))])
        writer.finish("complete")
        rv.post("published", writer.run_id)
        steps = pd.DataFrame(rows)
        return S.RunResult(writer.run_id, writer.path, "complete", steps, list(parsed.notes), run["origin"])
    except BaseException as exc:
        reason = exc if isinstance(exc, WlprofError) else f"{type(exc).__name__}: {exc}"
        rv.abort(f"rank {rank}: {str(reason).splitlines()[0][:300] if str(reason) else type(exc).__name__}")
        if writer is not None:
            writer.abort()
        if not isinstance(exc, (WlprofError, KeyboardInterrupt)):
            if _peer_gone(exc):  # another rank died: its own error is the one to read, not this stack
                raise W.DistributedError(f"rank {rank}: lost the connection to another rank (it died or exited: "
                                         f"{_peer_gone(exc)})") from None
            if _peer_silent(exc):  # gloo or the store waited out its timeout: another rank died or hangs
                raise W.DistributedError(f"rank {rank}: timed out waiting for another rank (it died, exited or "
                                         f"hangs: {_peer_silent(exc)})") from None
            traceback.print_exc(file=sys.stderr)
            raise W.DistributedError(f"rank {rank}: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}") \
                from None
        raise
    finally:
        W.shutdown()


# gloo's words for a rank that died: its socket closed, reset, or gone under a write
PEER_GONE = ("Connection closed by peer", "Connection reset by peer", "Broken pipe")


def _peer_gone(exc: BaseException) -> str | None:
    """gloo's sentence saying a peer closed the connection (address included), or None."""
    text = str(exc).splitlines()[0] if str(exc) else ""
    hit = next((w for w in PEER_GONE if w in text), None) if isinstance(exc, RuntimeError) else None
    return text[text.index(hit):].split(". ")[0] if hit else None


# gloo's and c10d's store's words for a wait that ran out its timeout
PEER_SILENT = ("Timed out waiting", "wait timeout after", "Socket Timeout")


def _peer_silent(exc: BaseException) -> str | None:
    """gloo's or the store's sentence saying a wait for another rank timed out, or None."""
    text = str(exc).splitlines()[0] if str(exc) else ""
    hit = next((w for w in PEER_SILENT if w in text), None) if isinstance(exc, RuntimeError) else None
    return text[text.index(hit):][:200] if hit else None


def rv_files(writer, index: int, rank: int) -> str:
    return writer.manifest["points"][index]["rank_files"][str(rank)]["steps"]

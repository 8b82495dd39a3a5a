"""How a rank words the death of another: gloo's sentence found in its error, nothing else taken for it."""

from pathlib import Path

from wlprof.distributed.run import _peer_gone, _peer_silent


def test_gloo_closed_connection_is_cut_to_its_sentence():
    exc = RuntimeError("[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed "
                       "by peer [127.0.0.1]:28288. This is typically caused by a remote worker crashing. GLHF!")
    assert _peer_gone(exc) == "Connection closed by peer [127.0.0.1]:28288"
    assert _peer_gone(RuntimeError("pair.cc:598] Connection reset by peer")) == "Connection reset by peer"
    assert _peer_gone(RuntimeError("pair.cc:589] Write error [127.0.0.1]:41236: Broken pipe")) == "Broken pipe"


def test_other_errors_are_not_a_dead_peer():
    assert _peer_gone(RuntimeError("CUDA out of memory")) is None
    assert _peer_gone(ValueError("Connection closed by peer")) is None  # only the backend's RuntimeError
    assert _peer_gone(RuntimeError("")) is None


def test_a_wait_that_timed_out_is_a_silent_peer():
    # gloo's recv timeout and c10d's store timeout, cut to their sentence; another error, or a timeout that is
    # no backend error, is not one
    exc = RuntimeError("[/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting "
                       "30000ms for recv operation to complete")
    assert _peer_silent(exc) == "Timed out waiting 30000ms for recv operation to complete"
    assert _peer_silent(RuntimeError("wait timeout after 300000ms, keys: /finished/1")) == \
        "wait timeout after 300000ms, keys: /finished/1"
    assert _peer_silent(RuntimeError("CUDA out of memory")) is None
    assert _peer_silent(TimeoutError("Timed out waiting")) is None


def test_more_cpu_ranks_than_cores_get_a_note_and_gpus_or_fewer_ranks_none():
    import torch

    from wlprof.distributed.launch import oversubscribed_note

    note = oversubscribed_note(torch.device("cpu"), 8, 2)
    assert note.startswith("8 ranks on 2 cores: the ranks take turns") and note.endswith(
        "--world-size 2 or less keeps one core per rank")
    assert oversubscribed_note(torch.device("cpu"), 2, 2) is None
    assert oversubscribed_note(torch.device("cuda"), 8, 2) is None


def _launch_interrupted(tmp_path, monkeypatch, staged_exists: bool):
    """`launch` of two stand-in ranks: rank 0 notes a staged folder (made, or already gone as a published
    one leaves it) and both wait to be ended; Ctrl-C reaches the launcher once the note is written."""
    import subprocess
    import sys
    import time

    from wlprof.distributed import launch as L
    from wlprof.study import Study

    staged = tmp_path / "t" / ".staging-run"
    if staged_exists:
        staged.mkdir(parents=True)
    real_popen, real_sleep = subprocess.Popen, time.sleep
    notes = []

    def popen(args, env=None):
        notes.append(Path(env["WLPROF_STAGING_NOTE"]))
        if env["RANK"] == "0":
            Path(env["WLPROF_STAGING_NOTE"]).write_text(str(staged))
        return real_popen([sys.executable, "-c", "import signal; signal.pause()"])  # runs until the launcher ends it

    sent = []

    def sleep(s):  # the launcher's polling loop (and Popen.wait's): interrupted once
        real_sleep(s)
        if notes and notes[0].exists() and not sent:
            sent.append(True)
            raise KeyboardInterrupt

    monkeypatch.setattr(L.subprocess, "Popen", popen)
    monkeypatch.setattr(L.time, "sleep", sleep)
    L.launch(Study("gemm", {"shapes": "8x8x8"}, device="cpu"), tmp_path / "t", 2, quiet=True)


def test_an_interrupted_launch_says_no_run_was_written_and_removes_the_staged_folder(tmp_path, monkeypatch):
    import pytest

    from wlprof.errors import Interrupted

    # a run over several ranks is published only when every point is done: its finished points are not kept
    with pytest.raises(Interrupted, match=r"no run was written to .*/t/ \(a run over several ranks"):
        _launch_interrupted(tmp_path, monkeypatch, staged_exists=True)
    assert not (tmp_path / "t" / ".staging-run").exists()


def test_an_interrupt_after_the_run_was_published_claims_nothing(tmp_path, monkeypatch):
    import pytest

    from wlprof.errors import Interrupted

    with pytest.raises(KeyboardInterrupt) as exc:
        _launch_interrupted(tmp_path, monkeypatch, staged_exists=False)
    assert not isinstance(exc.value, Interrupted)


def test_the_abort_reaches_the_ranks_under_the_runs_token_and_the_first_stays():
    # the launcher hosts the store and posts to it in its own process; a rank reads it as a client
    import datetime as dt

    import torch.distributed as dist
    from conftest import HUNG_S

    from wlprof.distributed.launch import _post_abort
    from wlprof.distributed.world import host_store

    server = host_store("127.0.0.1", 0, 2)
    _post_abort(server, "tok", "rank 1 exited with code 3")
    _post_abort(server, "tok", "rank 0 exited with code 3")  # a second failure, seen later: not the cause
    rank = dist.TCPStore("127.0.0.1", server.port, 2, is_master=False, timeout=dt.timedelta(seconds=HUNG_S),
                         wait_for_workers=False)
    assert dist.PrefixStore("wlprof/tok", rank).get("abort") == b"rank 1 exited with code 3"
    assert not dist.PrefixStore("wlprof/other", rank).check(["abort"])  # another run's ranks are not told


def test_a_lost_store_names_who_hosted_it():
    import pytest

    from wlprof.distributed.world import DistributedError, Rendezvous

    class Gone:
        def check(self, keys):
            raise RuntimeError("Connection reset by peer\nException raised from recvBytes")

    for host in ("rank 0", "the launcher"):
        with pytest.raises(DistributedError) as exc:
            Rendezvous(Gone(), 1, 2, 5.0, host).wait(["point0/0"], "the end of point 0")
        assert str(exc.value) == (f"rank 1: lost the rendezvous store on {host} ({host} died or exited: Connection "
                                  "reset by peer)")

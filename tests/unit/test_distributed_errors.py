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
    one leaves it) and both sleep; Ctrl-C reaches the launcher once the note is written."""
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
        return real_popen([sys.executable, "-c", "import time; time.sleep(60)"])

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


def test_posting_the_abort_to_a_store_that_closes_mid_handshake_prints_nothing(capfd, monkeypatch):
    # rank 0 can close its store between the launcher's check that the port answers and c10d's handshake; c10d's
    # client then writes a warning with a C++ stack per try straight to fd 2 and raises. A stand-in client does
    # exactly that (written below Python's sys.stderr, as C++ writes it): the launcher's best-effort post must
    # leave stderr empty and not raise
    import os
    import socket

    import torch.distributed as dist

    from wlprof.distributed.launch import _post_abort

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)  # answers the launcher's port check
    port = srv.getsockname()[1]
    tried = []

    def noisy_client(host, port_, **kw):
        tried.append((host, port_, kw["is_master"]))
        os.write(2, b"[W socket.cpp:767] [c10d] The client socket has failed to connect\nException raised from "
                    b"connect at ../torch/csrc/distributed/c10d/socket.cpp:831\n")
        raise dist.DistStoreError("Timed out after 3 seconds waiting for clients")

    monkeypatch.setattr(dist, "TCPStore", noisy_client)
    try:
        _post_abort("127.0.0.1", port, "tok", "rank 1 exited with code 3")
    finally:
        srv.close()
    out, err = capfd.readouterr()
    assert tried == [("127.0.0.1", port, False)]  # the port answered, so the client was tried, as a client
    assert err == "", err[:500]
    print("after", file=__import__("sys").stderr)  # fd 2 is back where it was
    assert capfd.readouterr().err == "after\n"


def test_posting_the_abort_to_a_store_that_is_gone_tries_no_client(monkeypatch):
    import socket

    import torch.distributed as dist

    from wlprof.distributed.launch import _post_abort

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    port = srv.getsockname()[1]
    srv.close()  # nothing listens there now
    monkeypatch.setattr(dist, "TCPStore", lambda *a, **k: (_ for _ in ()).throw(AssertionError("tried")))
    _post_abort("127.0.0.1", port, "tok", "rank 1 exited with code 3")


def test_the_abort_reaches_a_live_store_under_the_runs_token():
    import datetime as dt

    import torch.distributed as dist

    from wlprof.distributed.launch import _post_abort

    server = dist.TCPStore("127.0.0.1", 0, is_master=True, timeout=dt.timedelta(seconds=30),
                           wait_for_workers=False)
    _post_abort("127.0.0.1", server.port, "tok", "rank 1 exited with code 3")
    assert dist.PrefixStore("wlprof/tok", server).get("abort") == b"rank 1 exited with code 3"

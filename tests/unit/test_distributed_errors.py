"""How a rank words the death of another: gloo's sentence found in its error, nothing else taken for it."""

from wlprof.distributed.run import _peer_gone


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


def test_more_cpu_ranks_than_cores_get_a_note_and_gpus_or_fewer_ranks_none():
    import torch

    from wlprof.distributed.launch import oversubscribed_note

    note = oversubscribed_note(torch.device("cpu"), 8, 2)
    assert note.startswith("8 ranks on 2 cores: the ranks take turns") and note.endswith(
        "--world-size 2 or less keeps one core per rank")
    assert oversubscribed_note(torch.device("cpu"), 2, 2) is None
    assert oversubscribed_note(torch.device("cuda"), 8, 2) is None

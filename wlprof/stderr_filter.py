"""Keep the profiler's own status lines off the user's stderr, and nothing else.

Kineto (torch.profiler's C++ side) writes two lines per profiled session straight to file
descriptor 2, below Python:

    USDT:2026-12-01 09:25:16 5309:5309 SyncActivityProfilerHandler.cpp:52] profiler_start
    USDT:2026-12-01 09:25:16 5309:5309 SyncActivityProfilerHandler.cpp:59] profiler_stop

Its log level cannot drop them without dropping its errors too (USDT ranks above ERROR), so
`profiler_noise_filtered()` points fd 2 at a pipe for the duration and a thread forwards
everything written there to the real stderr as it arrives, except complete lines of exactly
that form. Anything else (warnings, errors, a progress bar) passes through unchanged and at once.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
import warnings

NOISE = re.compile(rb"USDT:[^\n\r]*\] profiler_(start|stop)[ \t\r]*\n?$")
_PREFIX = b"USDT:"
JOIN_S = 10.0  # seconds the context waits, on leaving, for the thread to forward the last bytes


def is_noise(line: bytes) -> bool:
    """Whether a line (its end, after any carriage return) is one of the profiler's two status lines."""
    m = NOISE.search(line)
    return m is not None and (m.start() == 0 or line[m.start() - 1:m.start()] == b"\r")


def _split_line(line: bytes) -> tuple[bytes, bytes | None]:
    """(what to forward, the noise dropped or None) for one complete line."""
    m = NOISE.search(line)
    if m is None or not (m.start() == 0 or line[m.start() - 1:m.start()] == b"\r"):
        return line, None
    return line[:m.start()], line[m.start():]


def _hold_from(partial: bytes) -> int:
    """Where the part of an unfinished line that may still become a noise line begins (len: nothing)."""
    i = partial.rfind(_PREFIX)
    if i >= 0:
        return i
    for n in range(len(_PREFIX) - 1, 0, -1):
        if partial.endswith(_PREFIX[:n]):
            return len(partial) - n
    return len(partial)


def _pump(read_fd: int, out_fd: int, dropped: list[bytes]) -> None:
    """Copy read_fd to out_fd until EOF, holding back only what may still become a noise line."""
    pending = b""

    def write(data: bytes) -> None:
        while data:
            try:
                n = os.write(out_fd, data)
            except OSError:
                return
            data = data[n:]

    try:
        while True:
            chunk = os.read(read_fd, 65536)
            if not chunk:
                break
            pending += chunk
            out = []
            while pending:
                nl = pending.find(b"\n")
                if nl < 0:  # an unfinished line: what cannot start a noise line goes out now
                    cut = _hold_from(pending)
                    out.append(pending[:cut])
                    pending = pending[cut:]
                    break
                line, pending = pending[:nl + 1], pending[nl + 1:]
                keep, noise = _split_line(line)
                out.append(keep)
                if noise is not None:
                    dropped.append(noise)
            if out:
                write(b"".join(out))
        if pending:
            keep, noise = _split_line(pending)
            write(keep)
            if noise is not None:
                dropped.append(noise)
    finally:
        os.close(read_fd)


@contextlib.contextmanager
def profiler_noise_filtered():
    """While inside, fd 2 goes through the filter; yields the list of lines dropped (for tests)."""
    dropped: list[bytes] = []
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):  # no real stderr: nothing to filter
        yield dropped
        return
    read_fd, write_fd = os.pipe()
    os.dup2(write_fd, 2)
    os.close(write_fd)
    pump = threading.Thread(target=_pump, args=(read_fd, saved, dropped), name="wlprof-stderr-filter",
                            daemon=True)
    pump.start()
    try:
        yield dropped
    finally:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            sys.stderr.flush()
        os.dup2(saved, 2)  # closes the pipe's last write end: the pump reads EOF and stops
        pump.join(timeout=JOIN_S)
        # a pump still running (a child process holds the pipe's write end, or a busy machine has not run it
        # yet) keeps its copy of the real stderr: closed, its number could be reused by a file this process
        # opens next, and the pump would write stderr's bytes into that file
        if not pump.is_alive():
            os.close(saved)


@contextlib.contextmanager
def schedule_warning_ignored():
    """While inside, torch.profiler's warning that a scheduled profiler "clears events at the end of each
    cycle" is not shown (some torch versions give it when the warm-up hands over to the one cycle wlprof
    records: there are no earlier events to lose)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"Warning: Profiler clears events", category=UserWarning)
        yield

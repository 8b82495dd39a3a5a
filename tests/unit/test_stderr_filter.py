"""The profiler's profiler_start/profiler_stop lines are kept off stderr; everything else passes through."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from conftest import HUNG_S

from wlprof.stderr_filter import is_noise

SCRIPT = textwrap.dedent("""
    import os, sys
    from wlprof.stderr_filter import profiler_noise_filtered
    os.write(2, b"before\\n")
    with profiler_noise_filtered() as dropped:
        os.write(2, b"USDT:2026-12-01 09:25:16 5309:5309 SyncActivityProfilerHandler.cpp:52] profiler_start\\n")
        os.write(2, b"a warning from C++\\n")
        sys.stderr.write("python: progress 1/2\\r")
        sys.stderr.flush()
        os.write(2, b"USDT:2026-12-01 09:25:16 5309:5309 Sync")  # a noise line written in two parts
        os.write(2, b"ActivityProfilerHandler.cpp:59] profiler_stop\\n")
        os.write(2, b"USDT:2026-12-01 something else that is not the start/stop\\n")
        os.write(2, b"bar 50%\\rUSDT:2026-12-01 09:25:17 5309:5309 Sync"
                 b"ActivityProfilerHandler.cpp:52] profiler_start\\n")
        os.write(2, b"no newline at the end")
    os.write(2, b"\\nafter\\n")
    print(len(dropped))
""")


def test_only_the_two_profiler_lines_are_dropped():
    res = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, timeout=HUNG_S)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == b"3"
    assert res.stderr == (b"before\na warning from C++\npython: progress 1/2\r"
                          b"USDT:2026-12-01 something else that is not the start/stop\n"
                          b"bar 50%\rno newline at the end\nafter\n")


LATE = textwrap.dedent(r"""
    import os, subprocess, sys, tempfile, threading
    import wlprof.stderr_filter as F
    F.JOIN_S = 0.0  # the context stops waiting for its thread at once
    r, w = os.pipe()
    with F.profiler_noise_filtered():  # a child started inside inherits the pipe as its stderr
        child = subprocess.Popen([sys.executable, "-c", "import os, sys; sys.stdin.read(); os.write(2, b'late\\n')"],
                                 stdin=r)
    os.close(r)
    pump = next(t for t in threading.enumerate() if t.name == "wlprof-stderr-filter")  # waiting on the child
    other = tempfile.TemporaryFile()  # opened after the context: the lowest free descriptor
    os.write(w, b"go")
    os.close(w)
    child.wait()
    pump.join()  # the child's stderr closed: the thread read the end and stopped
    other.seek(0)
    print(repr(other.read()))
""")


def test_a_child_that_writes_after_the_filter_was_left_reaches_stderr_and_nothing_else():
    res = subprocess.run([sys.executable, "-c", LATE], capture_output=True, timeout=HUNG_S)
    assert res.returncode == 0, res.stderr
    assert res.stderr == b"late\n" and res.stdout.strip() == b"b''"


def test_noise_pattern():
    assert is_noise(b"USDT:2026-12-01 09:25:16 5309:5309 SyncActivityProfilerHandler.cpp:59] profiler_stop\n")
    assert not is_noise(b"USDT:2026-12-01 09:25:16 5309:5309 Foo.cpp:1] profiler_crashed\n")
    assert not is_noise(b"error: profiler_stop\n")


def test_the_scheduled_profilers_cycle_warning_is_not_shown_and_others_are():
    import warnings

    from wlprof.stderr_filter import schedule_warning_ignored

    msg = ("Warning: Profiler clears events at the end of each cycle.Only events from the current cycle will be "
           "reported.To keep events across cycles, set acc_events=True.")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with schedule_warning_ignored():
            warnings.warn(msg, UserWarning, stacklevel=1)  # torch 2.11's text, as an H200 run printed it
            warnings.warn("another warning", UserWarning, stacklevel=1)
        warnings.warn(msg, UserWarning, stacklevel=1)  # outside: shown again
    assert [str(w.message) for w in seen] == ["another warning", msg]

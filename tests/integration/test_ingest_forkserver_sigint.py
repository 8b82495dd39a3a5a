"""A Ctrl-C to the process group while the workers' fork server loads their modules: the server ignores it
(no traceback of its imports on the user's stderr), the workers take it, and this process's handler stays."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from conftest import HUNG_S

PROBE = '''
import signal

# imported by the fork server as it loads the workers' modules: how SIGINT is handled there at that moment
AT_LOAD = signal.getsignal(signal.SIGINT)


def at_load():
    return repr(AT_LOAD)


def in_worker():
    return repr(signal.getsignal(signal.SIGINT))
'''

SCRIPT = '''
import signal
import wlprof.ingest as I

I.WORKER_MODULES = [*I.WORKER_MODULES, "sigprobe"]
before = signal.getsignal(signal.SIGINT)  # Python's handler; SIG_IGN where the shell started pytest in the background
I.prestart_workers()
print("main", signal.getsignal(signal.SIGINT) is before)
import sigprobe
with I._pool(2) as pool:
    print("server", pool.submit(sigprobe.at_load).result())
    print("worker", pool.submit(sigprobe.in_worker).result())
I.stop_workers()
'''


def test_the_fork_server_loads_with_sigint_ignored_and_its_workers_take_it(tmp_path):
    (tmp_path / "sigprobe.py").write_text(textwrap.dedent(PROBE))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    res = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=HUNG_S)
    assert res.returncode == 0, res.stderr
    lines = dict(line.split(" ", 1) for line in res.stdout.splitlines())
    # the server's modules loaded with SIGINT ignored (it was Python's KeyboardInterrupt handler, which
    # printed the import's traceback on a Ctrl-C); the workers raise KeyboardInterrupt again
    assert lines["server"] == "<Handlers.SIG_IGN: 1>", res.stdout
    assert lines["worker"] == "<built-in function default_int_handler>", res.stdout
    assert lines["main"] == "True", res.stdout  # this process's handler is the one it had

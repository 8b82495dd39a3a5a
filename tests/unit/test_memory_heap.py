"""keep_heap: glibc keeps a freed large buffer's pages, so the next buffer of that size reuses them."""

import subprocess
import sys

import pytest

from wlprof import memory

pytestmark = pytest.mark.skipif(memory._libc() is None or not hasattr(memory._libc(), "mallopt"),
                                reason="needs glibc's mallopt")

# a 64 MiB zero-filled buffer touches 16,384 pages of 4 KiB; freed and allocated again, the second faults in
# anew only where the first was returned to the system
_PROBE = """
import resource, sys
from wlprof import memory
ok = memory.keep_heap() if sys.argv[1] == "keep" else None
def faults(n):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    b = bytearray(n)
    del b
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
first, second = faults(64 << 20), faults(64 << 20)
print(ok, first, second)
"""


def _probe(mode: str) -> tuple[str, int, int]:
    out = subprocess.run([sys.executable, "-c", _PROBE, mode], capture_output=True, text=True, check=True).stdout
    ok, first, second = out.split()
    return ok, int(first), int(second)


def test_kept_heap_reuses_a_freed_buffer():
    ok, first, second = _probe("keep")
    assert ok == "True"
    assert first >= 16384 * 0.9  # every page of the first buffer faults in once
    assert second < first * 0.1  # its pages are kept and reused


def test_default_heap_returns_a_large_buffer():
    _, first, second = _probe("default")  # glibc mmaps a 64 MiB buffer and unmaps it when freed
    assert second >= first * 0.9


def test_keep_heap_without_mallopt(monkeypatch):
    monkeypatch.setattr(memory, "_libc", lambda: None)
    assert memory.keep_heap() is False

"""Give freed memory back to the system between the phases of a large ingest.

glibc keeps freed heap pages and Arrow's allocator keeps freed blocks for reuse;
between phases that each allocate hundreds of MB that reuse never comes, so the
process's peak would be the sum of the phases instead of the largest one.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools


@functools.lru_cache(maxsize=1)
def _libc():
    name = ctypes.util.find_library("c")
    try:
        lib = ctypes.CDLL(name) if name else None
        return lib if lib is not None and hasattr(lib, "malloc_trim") else None
    except OSError:
        return None


def release(heap: bool = True) -> None:
    """Return Arrow's unused blocks to the operating system (only where this process loaded Arrow: it is
    not loaded to be asked) and, with `heap`, glibc's freed heap pages too.

    Trim the heap (`heap`) where what was freed will not serve what comes next (the parse's buffers
    before a large trace's join, the event tables before Arrow's allocator writes); where the next
    step's arrays fit in the freed pages, a trim lowers no peak and makes each reused page fault in anew."""
    import sys

    lib = _libc() if heap else None
    if lib is not None:
        lib.malloc_trim(0)
    pa = sys.modules.get("pyarrow")
    try:
        if pa is not None:
            pa.default_memory_pool().release_unused()
    except AttributeError:
        pass


# glibc's mallopt parameters
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3


def keep_heap(mmap_threshold: int = 256 << 20, trim_threshold: int = 1 << 30, top_pad: int = 64 << 20) -> bool:
    """Have glibc serve large buffers from the heap and keep freed pages for reuse (explicit `release`
    calls still return them): an ingest allocates and frees buffers of tens of MB per chunk, and each
    fresh mmap of one faults every page in anew. For the ingest's worker processes, which end with it.
    False where the C library has no `mallopt` or refuses a value."""
    lib = _libc()
    if lib is None or not hasattr(lib, "mallopt"):
        return False
    return all(lib.mallopt(param, value) == 1 for param, value in
               ((_M_MMAP_THRESHOLD, mmap_threshold), (_M_TRIM_THRESHOLD, trim_threshold), (_M_TOP_PAD, top_pad)))

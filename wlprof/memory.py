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

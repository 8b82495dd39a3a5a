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


def release() -> None:
    """Return freed heap pages (glibc) and Arrow's unused blocks to the operating system (Arrow's only
    where this process loaded it: it is not loaded to be asked)."""
    import sys

    lib = _libc()
    if lib is not None:
        lib.malloc_trim(0)
    pa = sys.modules.get("pyarrow")
    try:
        if pa is not None:
            pa.default_memory_pool().release_unused()
    except AttributeError:
        pass

"""The direction of a device copy, from its name as each profiler writes it."""

from __future__ import annotations

import functools
import re

# CUPTI and roctracer (through Kineto) spell a copy's kind `Memcpy DtoD (Device -> Device)`; Intel's
# PTI (Kineto's XPU plugin) spells it `Memcpy D2D (DEVICE -> DEVICE)`, `Memcpy H2D (HOST -> DEVICE)`
_KIND = re.compile(r"\b([HDPA])(?:to|2)([HDPA])\b")


@functools.lru_cache(maxsize=4096)  # a trace's copies share a few names; the search runs once per name
def copy_kind(name: str) -> str | None:
    """A memcpy's kind in CUDA's spelling ('DtoD', 'HtoD', 'DtoH', 'PtoP'), or None where the name
    spells none."""
    m = _KIND.search(name)
    return f"{m.group(1)}to{m.group(2)}" if m else None


def transfer_label(name: str) -> str | None:
    """A memcpy's kind as the ops table's `transfer` holds it: its `copy_kind`, with ' pageable' where the
    host side was pageable memory (`Memcpy HtoD (Pageable -> Device)`: staged through a pinned buffer)."""
    kind = copy_kind(name)
    if kind is None:
        return None
    return f"{kind} pageable" if "pageable" in name.lower() and "H" in kind else kind

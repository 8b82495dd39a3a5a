"""Collective names and the nccl-tests conventions, shared by the trace reader and the cost code.

Traces name one collective many ways: torch's `Collective name` ('allreduce',
'_allgather_base', 'all_to_allv'), c10d ops ('c10d::alltoall_base_'), gloo's work
('gloo:all_to_all') and NCCL kernels ('ncclDevKernel_AllGather_RING_LL'). `normalize`
maps them to one vocabulary; `BUSBW_FACTOR` and `SIZE_BUFFER` are nccl-tests'
conventions (its doc/PERFORMANCE.md), stated in `docs/overlap.md`.
"""

from __future__ import annotations

import re

ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, ALL_TO_ALL = "all_reduce", "all_gather", "reduce_scatter", "all_to_all"
BROADCAST, REDUCE, SEND, RECV, SENDRECV = "broadcast", "reduce", "send", "recv", "sendrecv"
GATHER, SCATTER, BARRIER = "gather", "scatter", "barrier"
P2P = frozenset({SEND, RECV, SENDRECV})
REDUCING = frozenset({ALL_REDUCE, REDUCE_SCATTER, REDUCE})

# (pattern over the lowercased name with '_', ':', '-' and spaces removed, collective), first match wins
_PATTERNS = [
    ("reducescatter", REDUCE_SCATTER),
    ("allreduce", ALL_REDUCE),
    ("allgather", ALL_GATHER),
    ("alltoall", ALL_TO_ALL),
    ("broadcast", BROADCAST),
    ("bcast", BROADCAST),
    ("sendrecv", SENDRECV),
    ("barrier", BARRIER),
    ("reduce", REDUCE),
    ("gather", GATHER),
    ("scatter", SCATTER),
    ("send", SEND),
    ("recv", RECV),
]

# A device kernel that does communication: NCCL/RCCL's kernels and vLLM's custom all-reduce.
_COMM_KERNEL = re.compile(r"nccl|rccl|cross_device_reduce", re.IGNORECASE)


def normalize(name: str | None) -> str | None:
    """'_allgather_base' / 'c10d::_allgather_base_' / 'gloo:all_gather' / 'ncclDevKernel_AllGather_RING_LL'
    -> 'all_gather'; None when the name names no collective."""
    if not name:
        return None
    text = str(name).lower()
    if text.startswith("c10d::"):
        text = text[6:]
    elif text.startswith(("gloo:", "nccl:")):
        text = text[5:]
    elif _COMM_KERNEL.search(text):  # a kernel: the collective is the word after the library's prefix
        text = re.sub(r"^.*?(nccl|rccl)(dev)?kernel_?", "", text).split("(")[0]
    flat = re.sub(r"[_:\-\s]", "", text)
    for pattern, collective in _PATTERNS:
        if pattern in flat:
            return collective
    return None


def is_comm_kernel(name: str) -> bool:
    """A device kernel's name says it communicates (NCCL, RCCL, a custom all-reduce)."""
    return bool(_COMM_KERNEL.search(name or ""))


def is_comm_op(name: str) -> bool:
    """A host op that issues communication: c10d's ops and record_param_comms."""
    return bool(name) and (name.startswith(("c10d::", "nccl:", "gloo:")) or name == "record_param_comms")


def comm_class(collective: str | None) -> str:
    """'p2p' for send, recv and their pairs, else 'collective'."""
    return "p2p" if collective in P2P else "collective"


def busbw_factor(collective: str | None, n: int | None) -> float | None:
    """nccl-tests' busbw / algbw for a group of n ranks (None where it states none)."""
    if collective is None or n is None or n < 1:
        return None
    if collective == ALL_REDUCE:
        return 2.0 * (n - 1) / n
    if collective in (ALL_GATHER, REDUCE_SCATTER, ALL_TO_ALL, GATHER, SCATTER):
        return (n - 1) / n
    if collective in (BROADCAST, REDUCE, SEND, RECV, SENDRECV):
        return 1.0
    return None


def size_elements(collective: str | None, in_nelems: float | None, out_nelems: float | None,
                  n: int | None) -> float | None:
    """nccl-tests' size S in elements, from the message's input and output element counts.

    all_reduce, broadcast, reduce, send: the input buffer; recv: the output buffer;
    all_gather: the output buffer (n x the input); reduce_scatter: the input buffer (n x the
    output); all_to_all: the send buffer (every peer's chunk, the rank's own included);
    gather, scatter: the larger buffer (the root's). A missing count is derived from the
    other where the collective fixes their ratio.
    """
    def ok(v):
        return v is not None and v == v and v >= 0

    i = in_nelems if ok(in_nelems) else None
    o = out_nelems if ok(out_nelems) else None
    if collective in (ALL_REDUCE, BROADCAST, REDUCE, SEND, SENDRECV):
        return i if i is not None else o
    if collective == RECV:
        return o if o is not None else i
    if collective == ALL_GATHER:
        return o if o is not None else (i * n if i is not None and n else None)
    if collective in (REDUCE_SCATTER, ALL_TO_ALL):
        return i if i is not None else (o * n if o is not None and n and collective == REDUCE_SCATTER else o)
    if collective in (GATHER, SCATTER):
        vals = [v for v in (i, o) if v is not None]
        return max(vals) if vals else None
    return None


def reduction_flops(collective: str | None, size_elems: float | None, n: int | None) -> float:
    """FLOPs a rank spends reducing: (n-1)/n x S for all_reduce, reduce_scatter and reduce (S the
    reduced buffer: the n-1 adds per element of an n-way sum, spread over the n ranks, as a ring
    or a tree does them); 0 for every collective that only moves data."""
    if collective not in REDUCING or not size_elems or not n:
        return 0.0
    return float(size_elems) * (n - 1) / n


# c10 ScalarType names, as `dtype` in record_param_comms and NCCL kernel args -> bytes per element
SCALAR_TYPE_SIZES = {
    "Float": 4, "Double": 8, "Half": 2, "BFloat16": 2, "Long": 8, "Int": 4, "Short": 2, "Char": 1, "Byte": 1,
    "Bool": 1, "ComplexFloat": 8, "ComplexDouble": 16, "ComplexHalf": 4, "Float8_e4m3fn": 1, "Float8_e5m2": 1,
    "Float8_e4m3fnuz": 1, "Float8_e5m2fnuz": 1, "Float8_e8m0fnu": 1, "UInt16": 2, "UInt32": 4, "UInt64": 8,
}

"""A device copy's direction from its name, as CUPTI, roctracer and Intel's PTI write it."""

from __future__ import annotations

import pytest

from wlprof.cost.copies import copy_kind


@pytest.mark.parametrize("name, kind", [
    ("Memcpy DtoD (Device -> Device)", "DtoD"),  # CUDA and ROCm through Kineto
    ("Memcpy HtoD (Pinned -> Device)", "HtoD"),
    ("Memcpy DtoH (Device -> Pageable)", "DtoH"),
    ("Memcpy PtoP (Device -> Device)", "PtoP"),
    ("Memcpy D2D (DEVICE -> DEVICE)", "DtoD"),  # Intel PTI through Kineto's XPU plugin
    ("Memcpy D2H (DEVICE -> HOST)", "DtoH"),
    ("Memcpy H2D (HOST -> DEVICE)", "HtoD"),
    ("Memcpy M2S (MEMORY -> SHARED)", None),  # kinds with no CUDA counterpart
    ("dma_request", None),
    ("Memset (Device)", None),
])
def test_copy_kind(name, kind):
    assert copy_kind(name) == kind

"""The GEMM workload's shape class, from all three dimensions."""

from __future__ import annotations

import pytest

from wlprof.workloads.gemm import shape_class


@pytest.mark.parametrize(("mkn", "cls"), [
    ((4096, 4096, 1280), "balanced"),  # the seed's three 21.5-GFLOP shapes
    ((32, 4096, 81920), "medium-skinny"),
    ((1, 4096, 2621440), "tall-skinny"),
    ((64, 64, 64), "balanced"),  # small but square: nothing is skinny
    ((97, 89, 83), "balanced"),
    ((1, 1, 1), "balanced"),
    ((4096, 1, 4096), "low-K"),  # an outer product: skinny in K alone
    ((4096, 64, 4096), "low-K"),  # 64 <= 4096 / 8, and M and N are not small
    ((8, 64, 4096), "medium-skinny"),  # M is the smallest: skinny in M
    ((64, 64, 4096), "medium-skinny"),  # M ties K: skinny in M first
    ((1, 1, 4096), "tall-skinny"),
    ((4, 128, 96), "medium-skinny"),  # 4 <= 128 / 8
    ((16, 32, 64), "balanced"),  # 64 < 8 x 16
    ((200, 8192, 8192), "balanced"),  # skinny by ratio, but not small
])
def test_shape_class_looks_at_every_dimension(mkn, cls):
    assert shape_class(*mkn) == cls

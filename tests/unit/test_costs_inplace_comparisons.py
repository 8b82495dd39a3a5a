"""An in-place comparison writes its result into `self`, at self's dtype, not as bools.

x.gt_(y) on float32 x stores 0.0 or 1.0 in x: 4 bytes per element written, where gt writes a
1-byte bool.
"""

from __future__ import annotations

from cost_calls import F32, F64, T, op

import wlprof.cost  # noqa: F401  (registers every formula)
from wlprof.cost import cost_of


def test_in_place_comparisons_write_self_dtype():
    # gt_([3,4] f32, [3,4] f32): 12 comparisons, 2 x 48 bytes read, 48 written
    assert cost_of(op("aten::gt_", T([3, 4]), T([3, 4]))).bytes == 144
    assert cost_of(op("aten::gt_", T([3, 4]), T([3, 4]))).written == 48
    # eq_ with a 0-d double: 48 + 8 read, 48 written
    assert cost_of(op("aten::eq_", T([3, 4], F32), T([], F64))).bytes == 104
    # logical_not_: 48 read, 48 written
    assert cost_of(op("aten::logical_not_", T([3, 4]))).bytes == 96
    # the functional forms still write one bool per element: 96 + 12, 48 + 12
    assert cost_of(op("aten::gt", T([3, 4]), T([3, 4]))).bytes == 108
    assert cost_of(op("aten::logical_not", T([3, 4]))).bytes == 60

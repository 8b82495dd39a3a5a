"""Ops that models from outside wlprof spend time in (transformers' Llama, GPT-2, Mixtral, Mamba;
ResNet, a diffusers UNet): linspace's formula, and the pads, random factories and metadata ops
that are wrappers or views, never rows of their own."""

from __future__ import annotations

from cost_calls import F32, F64, NONE, S, T, op

import wlprof.cost  # noqa: F401  (registers every formula)
from wlprof.cost import VECTOR, cost_of, is_view, is_wrapper
from wlprof.cost.registry import Cost


def test_linspace_out_form():
    # linspace(0., 3., 5, out=[5] fp32), as histc runs it: 5 * 4 = 20 bytes written, 0 FLOPs
    c = cost_of(op("aten::linspace", S(0.0), S(3.0), S(5), T([5], F32)))
    assert c == Cost(0, 20, VECTOR, "float32", written=20)
    # an out tensor recorded before its resize ([0]): the count is `steps`, 7 * 8 = 56 bytes
    c = cost_of(op("aten::linspace", S(0.0), S(1.0), S(7), T([0], F64)))
    assert c == Cost(0, 56, VECTOR, "float64", written=56)


def test_linspace_functional_form():
    # linspace(0, 1, 5, dtype=float64 (code 7), layout, device, pin_memory): 5 * 8 = 40 bytes
    c = cost_of(op("aten::linspace", S(0), S(1), S(5), S(7), NONE, NONE, NONE))
    assert c == Cost(0, 40, VECTOR, "float64", written=40)
    # no dtype: torch's default, float32: 7 * 4 = 28 bytes
    c = cost_of(op("aten::linspace", S(0), S(1), S(7), NONE, NONE, NONE, NONE))
    assert c == Cost(0, 28, VECTOR, "float32", written=28)
    # 0-dim fp32 tensors as start and end: read 4 + 4, write 4 * 4 = 16: 24 bytes
    c = cost_of(op("aten::linspace", T([], F32), T([], F32), S(4), NONE, NONE, NONE, NONE))
    assert c == Cost(0, 24, VECTOR, "float32", written=16)


def test_linspace_without_a_count_is_unknown():
    assert cost_of(op("aten::linspace", S(0), S(1), NONE, NONE, NONE, NONE, NONE)) is None
    assert cost_of(op("aten::linspace", S(0), S(1), S(-2), T([0], F32))) is None
    assert cost_of(op("aten::linspace", S(0), S(1), S(5))) is None  # an arity of no overload


def test_pads_and_random_factories_are_wrappers():
    # pad -> constant_pad_nd -> fill_ + copy_ (or clone -> copy_); randn -> normal_, rand -> uniform_,
    # randint -> random_: the nested ops are costed
    for name in ("aten::pad", "aten::constant_pad_nd", "aten::randn", "aten::rand", "aten::randint",
                 "aten::randn_like", "aten::rand_like", "aten::randint_like"):
        assert is_wrapper(name), name


def test_metadata_ops_are_views():
    # mT/mH/adjoint are transposes, broadcast_tensors expands, result_type and _nnpack_available
    # answer a question, as do a sparse tensor's dense_dim, sparse_dim and is_coalesced; the autograd
    # kernels of detach and detach_ record themselves unnamespaced
    for name in ("aten::mT", "aten::mH", "aten::adjoint", "aten::broadcast_tensors", "aten::result_type",
                 "aten::_nnpack_available", "aten::dense_dim", "aten::sparse_dim", "aten::is_coalesced",
                 "detach", "detach_"):
        assert is_view(name), name

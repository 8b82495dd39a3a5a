"""Registry mechanics: formulas chosen by a recorded arg, the cost's source, kernel names at cost time."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import wlprof.cost  # noqa: F401  (registers every formula)
from wlprof.cost import registry
from wlprof.cost.annotate import _kernel_names
from wlprof.cost.attribution import flag_ops
from wlprof.cost.registry import INDUCTOR, Cost, OpCall, arg_formula, cost_of, formula, selects_formula


@pytest.fixture
def scratch_registry(monkeypatch):
    """A registry whose additions vanish after the test."""
    monkeypatch.setattr(registry, "_FORMULAS", dict(registry._FORMULAS))
    monkeypatch.setattr(registry, "_ARG_FORMULAS", dict(registry._ARG_FORMULAS))


def test_arg_formula_costs_a_call_by_its_recorded_arg(scratch_registry):
    @arg_formula("kernel_backend", "test-backend")
    def _cost(call):
        return Cost(None, 10.0)

    call = OpCall.from_args("some_generated_kernel_7", {"kernel_backend": "test-backend"})
    assert cost_of(call) == Cost(None, 10.0)
    assert cost_of(OpCall.from_args("some_generated_kernel_7", {"kernel_backend": "other"})) is None
    assert selects_formula({"kernel_backend": "test-backend"}) and not selects_formula({})


def test_arg_formula_duplicates_refused(scratch_registry):
    arg_formula("kernel_backend", "dup")(lambda c: None)
    with pytest.raises(ValueError, match="already registered"):
        arg_formula("kernel_backend", "dup")(lambda c: None)


def test_a_named_formula_wins_over_an_arg_formula(scratch_registry):
    arg_formula("kernel_backend", "mine")(lambda c: Cost(None, 1.0))
    formula("aten::my_named_test_op")(lambda c: Cost(0, 2.0))
    call = OpCall.from_args("aten::my_named_test_op", {"kernel_backend": "mine"})
    assert cost_of(call).bytes == 2.0


def test_flag_ops_counts_arg_formulas_with_the_args_table(scratch_registry):
    # a generated kernel's launch (chosen by its kernel_backend) nested in an op with a formula
    # makes that op a dispatcher
    arg_formula("kernel_backend", "test-flag")(lambda c: Cost(None, 1.0))
    ops = pd.DataFrame({"name": ["aten::mm", "generated_add_0"], "parent": [-1, 0], "args_id": [0, 1]})
    args = [{}, {"kernel_backend": "test-flag"}]
    plain = flag_ops(ops)
    assert not plain.has_formula[1] and not plain.dispatcher[0]
    flagged = flag_ops(ops, args)
    assert flagged.has_formula[1] and flagged.dispatcher[0]


def test_cost_source_is_checked():
    assert Cost(1, 2).source == "formula"
    assert Cost(None, 2, source=INDUCTOR).source == "inductor"
    with pytest.raises(ValueError, match="source"):
        Cost(1, 2, source="guess")


def test_kernel_names_per_op_distinct_in_launch_order():
    rows = pd.DataFrame({
        "op_pos": [3, 3, 3, 5, 3],
        "has_op": [True, True, True, True, True],
        "kind": ["kernel", "memset", "kernel", "kernel", "kernel"],
        "ts_ns": [30, 10, 20, 5, 40],
        "name": ["b", "Memset (Device)", "a", "c", "b"],
    })
    got = _kernel_names(rows, np.array([3]))
    assert got == {3: ("a", "b")}  # memsets are not kernels; 5 was not asked for


def test_opcall_carries_kernel_names():
    call = OpCall.from_args("aten::_foreach_mul_", {"Input type": ["TensorList", "Scalar"]}, (), ["k1", "k2"])
    assert call.kernels == ("k1", "k2")


def test_parse_scalar_reads_python_printed_lists():
    from wlprof.cost.registry import parse_scalar

    # output masks are printed by Python: JSON does not read them
    assert parse_scalar("[True, True, False]") == [True, True, False]
    assert parse_scalar("[0., 1.5]") == [0.0, 1.5]
    assert parse_scalar("[1, 1]") == [1, 1]


def test_named_auxiliary_ops(scratch_registry):
    # an op whose formula names its auxiliary nested ops stays costed with those nested (their own
    # children are theirs: the sum with a mul nested is a dispatcher by the usual rule), and is a
    # dispatcher when another costed op is nested
    formula("aten::test_outer", aux_children=("aten::sum",))(lambda c: Cost(1, 1))
    ops = pd.DataFrame({"name": ["aten::test_outer", "aten::sum", "aten::mul", "aten::test_outer", "aten::mm"],
                        "parent": [-1, 0, 1, -1, 3]})
    f = flag_ops(ops)
    assert list(f.dispatcher) == [False, True, False, True, False]


def test_children_reach_formulas_that_ask(scratch_registry):
    from wlprof.cost.annotate import _op_costs

    seen = {}

    def probe(call):
        seen[call.name] = [c.name for c in call.children]
        return Cost(0, 1.0)

    formula("aten::test_parent", uses_children=True)(probe)
    formula("aten::test_plain")(probe)
    ops = pd.DataFrame({"name": ["aten::test_parent", "aten::view", "aten::resize_", "aten::test_plain",
                                 "aten::view"],
                        "parent": [-1, 0, 0, -1, 3], "args_id": [0, 0, 0, 0, 0], "ts_ns": [0, 2, 1, 5, 6],
                        "dispatcher": [False] * 5})
    _op_costs(ops, [{}], np.array([0, 3]))
    assert seen == {"aten::test_parent": ["aten::resize_", "aten::view"], "aten::test_plain": []}


def test_registration_keeps_each_flag_as_given(monkeypatch):
    # registration runs at import, before a test can switch anything: register again into copies
    monkeypatch.setattr(registry, "_FORMULAS", dict(registry._FORMULAS))
    monkeypatch.setattr(registry, "_WRAPPERS", set(registry._WRAPPERS))
    monkeypatch.setattr(registry, "_ARG_FORMULAS", dict(registry._ARG_FORMULAS))

    def f(call):
        return None

    formula("aten::_wlprof_test_plain")(f)
    formula("aten::_wlprof_test_all", aux_children=True, uses_kernels=True, uses_children=True)(f)
    formula("aten::_wlprof_test_named", aux_children=("aten::sum",))(f)
    e = registry._FORMULAS
    assert e["aten::_wlprof_test_plain"] == registry.Entry(f, False, False, frozenset(), False)
    assert e["aten::_wlprof_test_all"] == registry.Entry(f, True, True, frozenset(), True)
    assert e["aten::_wlprof_test_named"] == registry.Entry(f, False, False, frozenset({"aten::sum"}), False)
    arg_formula("test_key", "v")(f)
    assert registry._ARG_FORMULAS[("test_key", "v")] == registry.Entry(f, False)
    registry.register_wrapper("aten::_wlprof_test_wrapper")
    assert "aten::_wlprof_test_wrapper" in registry._WRAPPERS and None not in registry._WRAPPERS
    assert registry.wrappers() == sorted(registry._WRAPPERS) and "aten::_wlprof_test_wrapper" in registry.wrappers()
    assert registry.registered_ops() == sorted(registry._FORMULAS) and "aten::_wlprof_test_plain" in registry.registered_ops()

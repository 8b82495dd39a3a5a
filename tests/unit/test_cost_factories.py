"""Formula factories called at test time: pooling's and resampling's formulas are closures that a
factory builds once, when the module registers them (`for _n, _name in ...: formula(...)(_max_pool(_n,
True))`). A mutation tool that switches a mutant on per test (mutmut's trampolines) never reaches the
closures registered at import, so these tests build the formulas again, here, and check them by hand.
fp32 = 4 bytes, bf16 = 2, int64 indices = 8."""

from __future__ import annotations

from cost_calls import BF16, NONE, S, T, op

import wlprof.cost  # noqa: F401  (registers every formula)
from wlprof.cost import VECTOR, cost_of, pooling, resampling


def _fields(c):
    return (c.flops, c.bytes, c.written, c.unit, c.dtype)


def test_max_pool_with_and_without_indices():
    # x [2, 4, 8, 8] bf16, k 3, s 2, p 1, d 1: out [2, 4, 4, 4] = 128 windows of 9 -> 1152 comparisons;
    # reads 2 * 512 = 1024; writes 2 * 128 = 256 values (+ 8 * 128 = 1024 int64 indices)
    call = op("aten::max_pool2d_with_indices", T([2, 4, 8, 8], BF16), S([3, 3]), S([2, 2]), S([1, 1]), S([1, 1]),
              S(False))
    assert _fields(pooling._max_pool(2, True)(call)) == (1152, 1024 + 1280, 1280, VECTOR, "bfloat16")
    assert _fields(pooling._max_pool(2, False)(call)) == (1152, 1024 + 256, 256, VECTOR, "bfloat16")
    assert cost_of(call) == pooling._max_pool(2, True)(call)  # the registered one: nsp 2, with indices
    # 1-d, ceil_mode: x [2, 4, 7] fp32, k 2, s 2, p 0: ceil((7 - 2) / 2) + 1 = 4 outputs per row, 32 in all
    # (floor: 3); 2 comparisons each = 64; reads 4 * 56 = 224; writes 4 * 32 + 8 * 32 = 384
    call = op("aten::max_pool1d_with_indices", T([2, 4, 7]), S([2]), S([2]), S([0]), S([1]), S(True))
    assert _fields(pooling._max_pool(1, True)(call)) == (64, 224 + 384, 384, VECTOR, "float32")
    assert cost_of(call) == pooling._max_pool(1, True)(call)
    # 3-d without indices: x [1, 1, 4, 4, 4] fp32, k 2, s 2: 8 windows of 8 = 64; reads 256, writes 32
    call = op("aten::max_pool3d", T([1, 1, 4, 4, 4]), S([2, 2, 2]), S([2, 2, 2]), S([0, 0, 0]), S([1, 1, 1]),
              S(False))
    assert _fields(pooling._max_pool(3, False)(call)) == (64, 256 + 32, 32, VECTOR, "float32")
    assert cost_of(call) == pooling._max_pool(3, False)(call)
    # dilation 2: x [1, 1, 7, 7] fp32, k 2, s 1: (7 - 2 * (2 - 1) - 1) // 1 + 1 = 5 -> 25 windows of 4 = 100
    # (dilation 1 would give 36); reads 4 * 49 = 196, writes 4 * 25 = 100
    call = op("aten::max_pool2d", T([1, 1, 7, 7]), S([2, 2]), S([1, 1]), S([0, 0]), S([2, 2]), S(False))
    assert _fields(pooling._max_pool(2, False)(call)) == (100, 196 + 100, 100, VECTOR, "float32")


def test_avg_pool_and_backward():
    # avg_pool2d(x [1, 2, 6, 6] fp32, k 2, s 2, p 0): out [1, 2, 3, 3] = 18; (4 adds + 1 divide) * 18 = 90;
    # reads 4 * 72 = 288, writes 4 * 18 = 72
    call = op("aten::avg_pool2d", T([1, 2, 6, 6]), S([2, 2]), S([2, 2]), S([0, 0]), S(False), S(True), NONE)
    assert _fields(pooling._avg_pool(2)(call)) == (90, 360, 72, VECTOR, "float32")
    assert cost_of(call) == pooling._avg_pool(2)(call)
    # ceil_mode: x [1, 1, 5, 5], k 2, s 2 -> 3 x 3 = 9 windows (floor: 2 x 2); 5 * 9 = 45; reads 100, writes 36
    call = op("aten::avg_pool2d", T([1, 1, 5, 5]), S([2, 2]), S([2, 2]), S([0, 0]), S(True), S(True), NONE)
    assert _fields(pooling._avg_pool(2)(call)) == (45, 100 + 36, 36, VECTOR, "float32")
    # k 3, s 2, p 1, ceil off, count_include_pad on: x [1, 1, 6, 6] -> (6 + 2 - 2 - 1) // 2 + 1 = 3, 9 windows;
    # (9 + 1) * 9 = 90; reads 4 * 36 = 144, writes 36 (with ceil_mode on, 4 x 4 windows)
    call = op("aten::avg_pool2d", T([1, 1, 6, 6]), S([3, 3]), S([2, 2]), S([1, 1]), S(False), S(True), NONE)
    assert _fields(pooling._avg_pool(2)(call)) == (90, 144 + 36, 36, VECTOR, "float32")
    # 3-d: x [1, 1, 4, 4, 4] bf16, k 2, s 2: 8 windows of 8: 9 * 8 = 72; reads 128, writes 16
    call = op("aten::avg_pool3d", T([1, 1, 4, 4, 4], BF16), S([2, 2, 2]), S([2, 2, 2]), S([0, 0, 0]), S(False),
              S(True), NONE)
    assert _fields(pooling._avg_pool(3)(call)) == (72, 128 + 16, 16, VECTOR, "bfloat16")
    assert cost_of(call) == pooling._avg_pool(3)(call)
    # backward(grad_output [1, 2, 3, 3], self [1, 2, 6, 6], k 2, ...): 18 grads x (4 + 1) = 90;
    # reads the gradient 72, writes grad_input 4 * 72 = 288 (self is not read)
    call = op("aten::avg_pool2d_backward", T([1, 2, 3, 3]), T([1, 2, 6, 6]), S([2, 2]), S([2, 2]), S([0, 0]),
              S(False), S(True), NONE)
    assert _fields(pooling._avg_pool_backward(2)(call)) == (90, 72 + 288, 288, VECTOR, "float32")
    assert cost_of(call) == pooling._avg_pool_backward(2)(call)
    # a one-element kernel_size [3] means 3 x 3 (stride 2): 9 grads [1, 1, 3, 3] x (9 + 1) = 90; reads 36, writes 144
    call = op("aten::avg_pool2d_backward", T([1, 1, 3, 3]), T([1, 1, 6, 6]), S([3]), S([2]), S([1]), S(False),
              S(True), NONE)
    assert _fields(pooling._avg_pool_backward(2)(call)) == (90, 36 + 144, 144, VECTOR, "float32")
    # 3-d backward, bf16 gradient [1, 1, 2, 2, 2] of self [1, 1, 4, 4, 4]: 8 x (8 + 1) = 72; reads 16, writes 128
    call = op("aten::avg_pool3d_backward", T([1, 1, 2, 2, 2], BF16), T([1, 1, 4, 4, 4], BF16), S([2, 2, 2]),
              S([2, 2, 2]), S([0, 0, 0]), S(False), S(True), NONE)
    assert _fields(pooling._avg_pool_backward(3)(call)) == (72, 16 + 128, 128, VECTOR, "bfloat16")
    assert cost_of(call) == pooling._avg_pool_backward(3)(call)


def test_upsampling_forward_and_backward():
    assert resampling._OPS["upsample_bilinear2d"] == (2, 9, 8) and resampling._OPS["upsample_nearest1d"] == (1, 0, 1)
    # bilinear2d(x [1, 2, 4, 4] fp32, [8, 8]): 2 * 64 = 128 outputs x 9 = 1152; reads 128, writes 512
    call = op("aten::upsample_bilinear2d", T([1, 2, 4, 4]), S([8, 8]), S(False), NONE, NONE)
    assert _fields(resampling._forward(9, 2)(call)) == (1152, 128 + 512, 512, VECTOR, "float32")
    assert cost_of(call) == resampling._forward(9, 2)(call)
    # the .vec form: nearest2d(x [1, 4, 8, 8] bf16, None, scale_factors [2., 1.5]): out 16 x 12, 768 outputs;
    # reads 2 * 256 = 512, writes 2 * 768 = 1536
    call = op("aten::upsample_nearest2d", T([1, 4, 8, 8], BF16), NONE, S([2.0, 1.5]))
    assert _fields(resampling._forward(0, 2)(call)) == (0, 512 + 1536, 1536, VECTOR, "bfloat16")
    assert cost_of(call) == resampling._forward(0, 2)(call)
    # linear1d(x [1, 6, 8] fp32, [16], ...): 96 outputs x 3 = 288; reads 192, writes 384
    call = op("aten::upsample_linear1d", T([1, 6, 8]), S([16]), S(False), NONE)
    assert _fields(resampling._forward(3, 1)(call)) == (288, 192 + 384, 384, VECTOR, "float32")
    assert resampling._forward(3, 1)(op("aten::upsample_linear1d", T([1, 6, 8]), NONE, NONE)) is None  # no size
    # backward(grad_output [1, 2, 8, 8], output_size [8, 8], input_size [1, 2, 4, 4]): 8 per gradient = 1024;
    # reads 4 * 128 = 512, writes 4 * 32 = 128
    call = op("aten::upsample_bilinear2d_backward", T([1, 2, 8, 8]), S([8, 8]), S([1, 2, 4, 4]), S(False), NONE,
              NONE)
    assert _fields(resampling._backward(8, 2)(call)) == (1024, 512 + 128, 128, VECTOR, "float32")
    assert cost_of(call) == resampling._backward(8, 2)(call)
    # bf16 gradient of nearest1d: [1, 6, 16] -> input [1, 6, 8]: 96 x 1; reads 192, writes 96
    call = op("aten::upsample_nearest1d_backward", T([1, 6, 16], BF16), S([16]), S([1, 6, 8]), NONE)
    assert _fields(resampling._backward(1, 1)(call)) == (96, 192 + 96, 96, VECTOR, "bfloat16")
    assert resampling._backward(1, 1)(op("aten::upsample_nearest1d_backward", T([1, 6, 16]), S([16]), NONE)) is None


# ---------------------------------------------------------------- every factory-made formula, rebuilt

import dataclasses  # noqa: E402
import importlib  # noqa: E402
import inspect  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402

import pytest  # noqa: E402

from wlprof.cost import registry  # noqa: E402


def _rebuild(fn):
    """The formula `fn` built again by its factory, from the arguments its closure kept; None for a
    formula that is no factory's closure."""
    outer, sep, _ = fn.__qualname__.partition(".<locals>.")
    if not sep or fn.__closure__ is None:
        return None
    outer = re.sub(r"^x_(.+)__mutmut_orig$", r"\1", outer)  # mutmut renames a function's own body so
    factory = getattr(sys.modules[fn.__module__], outer)
    kept = dict(zip(fn.__code__.co_freevars, (c.cell_contents for c in fn.__closure__), strict=True))
    kept.setdefault("name", fn.__name__)  # activations' _make(name, per) names its closure so
    kept.setdefault("in_place", fn.__name__.endswith("_"))  # optimizers' _foreach: foreach_add_ in place
    params = list(inspect.signature(factory).parameters)
    return factory(**{p: kept.get(p) for p in params})  # a parameter no closure reads (resampling's
    # _backward(per, nsp) never reads nsp) is None


def _closures():
    return {name: e for name, e in registry._FORMULAS.items() if _rebuild(e.formula) is not None}


def test_every_factory_closure_is_rebuilt_the_same():
    built = _closures()
    # the factories: pooling, resampling, losses, reductions, elementwise, activations, optimizers
    assert {e.formula.__module__.rsplit(".", 1)[1] for e in built.values()} >= {
        "pooling", "resampling", "losses", "reductions", "elementwise", "activations", "optimizers"}
    assert len(built) > 150


HAND_CHECKED = ["test_cost_formulas", "test_costs_activations", "test_costs_losses", "test_costs_optimizers",
                "test_costs_pooling", "test_costs_resampling", "test_costs_more_forms", "test_costs_norms"]


def _hand_checked():
    """The zero-argument tests of the formula test modules, and test_formula's CASES."""
    out = []
    for mod_name in HAND_CHECKED:
        mod = importlib.import_module(mod_name)
        for name, f in vars(mod).items():
            if name.startswith("test_") and inspect.isfunction(f) and not inspect.signature(f).parameters:
                out.append(pytest.param(f, id=f"{mod_name}.{name}"))
    formulas = importlib.import_module("test_cost_formulas")
    for key, call, flops, nbytes in formulas.CASES:
        out.append(pytest.param(lambda c=call, f=flops, b=nbytes: formulas.test_formula(c, f, b), id=f"CASES.{key}"))
    opt = importlib.import_module("test_costs_optimizers")
    for key, call, flops, nbytes, written in opt.CASES:
        out.append(pytest.param(lambda c=call, f=flops, b=nbytes, w=written: opt.test_foreach(c, f, b, w),
                                id=f"optimizers.{key}"))
    act = importlib.import_module("test_costs_activations")
    for name, args, per in act.CASES:
        out.append(pytest.param(lambda n=name, a=args, p=per: act.test_activation_backward(n, a, p),
                                id=f"activations.{name}"))
    return out


@pytest.mark.parametrize("check", _hand_checked())
def test_hand_checked_costs_hold_with_the_formulas_rebuilt_now(check, monkeypatch):
    for name, entry in _closures().items():
        monkeypatch.setitem(registry._FORMULAS, name, dataclasses.replace(entry, formula=_rebuild(entry.formula)))
    check()


def test_reductions_elementwise_and_losses_by_hand():
    """Factory-made formulas where the hand-checked tables compare only FLOPs and bytes, or miss an overload."""
    from cost_calls import BOOL, F32

    from wlprof.cost import reductions
    from wlprof.cost.registry import Cost

    def rebuilt(call):
        return _rebuild(registry._FORMULAS[call.name].formula)(call)

    # sum.dim_IntList(x [4, 5] fp32, [1], False, None): 20 adds; reads 80, writes 4 outputs x 4 = 16
    call = op("aten::sum", T([4, 5]), S([1]), S(False), NONE)
    assert rebuilt(call) == Cost(20, 96, VECTOR, "float32", written=16)
    # norm.ScalarOpt_dim(x, p 2, dim [1], keepdim False): square and add, 2 x 20 = 40; 4 outputs: 80 + 16
    assert rebuilt(op("aten::norm", T([4, 5]), S(2), S([1]), S(False))) == Cost(40, 96, VECTOR, "float32",
                                                                               written=16)
    # norm.ScalarOpt_dtype(x, p 2, dtype 6): everything, one output: 80 + 4 (the dtype code is no dim)
    assert rebuilt(op("aten::norm", T([4, 5]), S(2), S(6))) == Cost(40, 84, VECTOR, "float32", written=4)
    # std_mean.correction(x, [1], correction 1, keepdim False): 4 x 20 + 4 divides = 84; two outputs of 4: 32
    assert rebuilt(op("aten::std_mean", T([4, 5]), S([1]), S(1), S(False))) == Cost(84, 112, VECTOR, "float32",
                                                                                   written=32)
    # max(self, other) is elementwise, not a reduction
    assert reductions._make_reduction("max", 1, True)(op("aten::max", T([4, 5]), T([4, 5]))) is None
    # argmax(x [4, 5], 1, False): int64 indices: 80 + 4 x 8
    assert rebuilt(op("aten::argmax", T([4, 5]), S(1), S(False))) == Cost(20, 112, VECTOR, "float32", written=32)
    # isnan(x [4] fp32): 1 per element; a bool result: reads 16, writes 4
    assert rebuilt(op("aten::isnan", T([4]))) == Cost(4, 20, VECTOR, "float32", written=4)
    # where(condition) alone is nonzero (costed there); where(cond, a, b) [4]: 1 select each; reads 4 + 16 + 16
    assert rebuilt(op("aten::where", T([4], BOOL))) is None
    assert rebuilt(op("aten::where", T([4], BOOL), T([4], F32), T([4], F32))) == Cost(4, 52, VECTOR, "float32",
                                                                                      written=16)
    # mse_loss(x [4, 5], target [4, 5], reduction 0 = none): 2 x 20; reads 160, writes 20 x 4 = 80
    assert rebuilt(op("aten::mse_loss", T([4, 5]), T([4, 5]), S(0))) == Cost(40, 240, VECTOR, "float32", written=80)
    # ... reduction 1 = mean: + 20 adds; one output
    assert rebuilt(op("aten::mse_loss", T([4, 5]), T([4, 5]), S(1))) == Cost(60, 164, VECTOR, "float32", written=4)


def test_foreach_whole_costs_by_hand():
    from cost_calls import TL

    from wlprof.cost.registry import Cost

    opt = importlib.import_module("test_costs_optimizers")
    cases = {k: c for k, c, *_ in opt.CASES}
    # _foreach_add_.List(self, other, alpha=1), bf16 kernels: 26 adds; reads 2 * 26 * 2, writes 2 * 26
    assert _rebuild(registry._FORMULAS["aten::_foreach_add_"].formula)(cases["add_list"]) == Cost(
        26, 156, VECTOR, "bfloat16", written=52)
    # _foreach_mul_.Scalar(self, 0.9), fp32: 26 multiplies; reads 4 * 26, writes 4 * 26
    assert _rebuild(registry._FORMULAS["aten::_foreach_mul_"].formula)(cases["mul_scalar"]) == Cost(
        26, 208, VECTOR, "float32", written=104)
    # two lists and no alpha argument (add.List(self, other) as two arguments): no multiply for alpha
    call = op("aten::_foreach_add", TL([4, 5], [6]), TL([4, 5], [6]), kernels=opt.F32_K)
    assert _rebuild(registry._FORMULAS["aten::_foreach_add"].formula)(call).flops == 26

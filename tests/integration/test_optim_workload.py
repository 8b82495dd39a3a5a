"""The optimizer-step workload: its points, its memory estimate, and a step that updates the parameters."""

from __future__ import annotations

import torch

from wlprof import workloads


def _points(**values):
    wl = workloads.get("optim")
    return wl, wl.points(wl.parse(values, torch.device("cpu"), torch.float32).spec)


def test_points_and_memory_estimate():
    wl, pts = _points(optimizer=["adamw", "sgd"], impl=["foreach"], tensors=[3], numel=[10, 20])
    assert [p.variant for p in pts] == ["adamw foreach T3 n=10", "adamw foreach T3 n=20", "sgd foreach T3 n=10",
                                        "sgd foreach T3 n=20"]
    assert pts[0].params == {"optimizer": "adamw", "impl": "foreach", "tensors": 3, "param_numel": 10}
    # AdamW: parameters, gradients and two moments, 3 tensors x 20 elements x 4 bytes each: 4 x 240 bytes
    assert wl.estimate_bytes(pts[1], torch.float32) == 960
    # SGD with momentum: one state, 3 x 10 x 4 x 3
    assert wl.estimate_bytes(pts[2], torch.float32) == 360


def test_a_step_applies_the_optimizer_to_every_tensor():
    wl, pts = _points(optimizer=["sgd"], impl=["foreach"], tensors=[2], numel=[5])
    built = wl.build(pts[0], torch.device("cpu"), torch.float32)
    gen = torch.Generator().manual_seed(0)
    drawn = [torch.randn(5, generator=gen) for _ in range(4)]  # each parameter, then its gradient
    w0, g = drawn[0::2], drawn[1::2]
    built.step()
    # build took two SGD steps: the first (its momentum buffer is the gradient: w1 = w0 - lr * g, lr 1e-4) and
    # one recording the list calls (buffer 0.9 * g + g = 1.9 * g, w2 = w0 - lr * 2.9 * g); this is the third:
    # buffer 0.9 * 1.9 * g + g = 2.71 * g, w3 = w0 - lr * 5.61 * g
    after = _params_of(built)
    for w, a, b in zip(after, w0, g, strict=True):
        torch.testing.assert_close(w.detach(), a - 5.61e-4 * b)


def _params_of(built):
    cells = [c.cell_contents for c in built.step.__closure__]
    opt = next(c for c in cells if isinstance(c, torch.optim.Optimizer))
    return opt.param_groups[0]["params"]


def test_an_integer_dtype_is_refused_before_anything_is_written(cli, tmp_path):
    res = cli("run", "optim", "--dtype", "int64", "--traces", tmp_path, "--device", "cpu")
    assert res.exit_code == 2
    assert not any(tmp_path.iterdir())


def test_a_cpu_fused_step_has_its_bytes_from_the_recorded_lists_dtype(cli, tmp_path, cpu_ceilings):
    # a CPU fused AdamW launches no kernel to name its lists' dtype: the workload's record of the call gives
    # float32. 3 tensors x 5 elements: reads params, grads, both moments (16 bytes per element) and 3 float
    # step counters (12 bytes), writes params and both moments (12 per element): 28 x 15 + 12 = 432 per step
    import pandas as pd

    res = cli("run", "optim", "--optimizer", "adamw", "--impl", "fused", "--tensors", "3", "--numel", "5",
              "--device", "cpu", "--steps", "2", "--warmup", "1", "--reps", "2", "-q", "--traces", tmp_path)
    assert res.exit_code == 0, res.output
    k = pd.read_parquet(tmp_path)
    fused = k[k.op_name == "aten::_fused_adamw_"]
    assert len(fused) == 2 and (fused["bytes"] == 432).all() and (fused.cost_dtype == "float32").all()

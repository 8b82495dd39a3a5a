"""A CPU training step captured here (torch.profiler, record_shapes) beside FlopCounterMode.

On the CPU a foreach optimizer op runs one op per tensor nested inside it: it is then a
dispatcher and its per-tensor ops carry the cost (counted once). The matrix FLOPs per op
FlopCounterMode counts equal wlprof's, and the ops' bytes are known for nearly all of the
step's aten op time (a CPU trace's rows are ops with their self time: the autograd
engine's own nodes, `AddmmBackward0` and the like, do no tensor work and have no formula);
a fused optimizer's CPU kernel is the stated exception (its TensorLists' dtype is not
recorded and no kernel names it: FLOPs known, bytes not).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from fcm_credit import flops_by_counted_op
from torch.profiler import ProfilerActivity, profile
from torch.utils.flop_counter import FlopCounterMode


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(64, 16)
        self.conv = nn.Conv1d(16, 16, 3, padding=1)
        self.bn = nn.BatchNorm1d(16)
        self.ln = nn.LayerNorm(16)
        self.fc = nn.Linear(16, 64)

    def forward(self, idx):
        x = self.emb(idx).transpose(1, 2)  # [B, 16, T]
        x = F.max_pool1d(F.gelu(self.bn(self.conv(x))), 2)
        return self.fc(self.ln(x.transpose(1, 2)))


def capture(tmp_path, fused: bool):
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=not fused, fused=fused)
    idx, tgt = torch.randint(0, 64, (4, 8)), torch.randint(0, 64, (4, 4))

    def fwd_bwd():
        F.cross_entropy(model(idx).reshape(-1, 64), tgt.reshape(-1)).backward()

    def step():
        fwd_bwd()
        opt.step()
        opt.zero_grad(set_to_none=True)

    step()
    with FlopCounterMode(display=False) as fc:
        fwd_bwd()
    model.zero_grad(set_to_none=True)
    counts = {"aten::" + str(k).split(".", 1)[1]: v for k, v in fc.get_flop_counts()["Global"].items()}
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        step()
    path = tmp_path / f"step-fused{int(fused)}.json"
    prof.export_chrome_trace(str(path))
    from wlprof.pipeline import costed, read

    return costed(read(path)), counts


@pytest.mark.parametrize("fused", [False, True], ids=["foreach", "fused"])
def test_cpu_training_step(tmp_path, fused):
    c, counts = capture(tmp_path, fused)
    ops, k = c.joined.ops, c.kernels
    foreach = ops[ops.name.str.startswith("aten::_foreach_")]
    if not fused:
        assert len(foreach) and foreach.dispatcher.all()  # per-tensor ops nested: they carry the cost
    # FLOPs per op FlopCounterMode counts, credited to the outermost such op (as it saw them)
    ours = flops_by_counted_op(c, set(counts))
    assert {op: v for op, v in ours.items() if op in counts} == counts
    # bytes known for the step's aten op time, but for the fused optimizer
    aten = k[k.op_name.str.startswith("aten::") & ~k.op_name.str.startswith("aten::_fused_")]
    unknown = aten[aten["bytes"].isna()]
    assert unknown.dur_us.sum() / aten.dur_us.sum() < 0.02, \
        unknown.groupby("op_name").dur_us.sum().sort_values().tail().to_dict()
    if fused:
        f = k[k.op_name == "aten::_fused_adamw_"]
        assert len(f) == 1 and f.flops.notna().all() and f["bytes"].isna().all()

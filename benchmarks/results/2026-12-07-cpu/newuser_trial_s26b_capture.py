"""Capture two CPU training steps of a tiny transformer (three blocks: SDPA plain, is_causal=True and with a
boolean attn_mask) with torch.profiler:
`python newuser_trial_s26b_capture.py {float32,bfloat16} OUT.json`."""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile, schedule

dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[sys.argv[1]]
out = sys.argv[2]
torch.manual_seed(0)
B, T, D, H = 4, 32, 64, 4


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(D, 3 * D)
        self.proj = nn.Linear(D, D)
        self.ln = nn.LayerNorm(D)
        self.ff = nn.Sequential(nn.Linear(D, 4 * D), nn.GELU(), nn.Linear(4 * D, D))

    def forward(self, x, mode):
        q, k, v = self.qkv(self.ln(x)).view(B, T, 3, H, D // H).permute(2, 0, 3, 1, 4)
        if mode == "causal":
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        elif mode == "mask":
            mask = torch.ones(T, T, dtype=torch.bool).tril()
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        else:
            a = F.scaled_dot_product_attention(q, k, v)
        x = x + self.proj(a.transpose(1, 2).reshape(B, T, D))
        return x + self.ff(x)


model = nn.ModuleList([Block() for _ in range(3)]).to(dtype)
opt = torch.optim.AdamW(model.parameters())
x = torch.randn(B, T, D, dtype=dtype)


def step():
    h = x
    for blk, mode in zip(model, ["plain", "causal", "mask"], strict=True):
        h = blk(h, mode)
    loss = h.float().pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()


with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
             schedule=schedule(wait=0, warmup=1, active=2, repeat=1),
             on_trace_ready=lambda prof: prof.export_chrome_trace(out)) as p:
    for _ in range(3):
        step()
        p.step()

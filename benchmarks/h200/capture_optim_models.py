"""Capture training steps whose optimizers work on more tensors than torch.profiler records.

torch.profiler records a TensorList of more than 30 tensors as `[]`; every model below has
more parameters than that, trained the ways people train them, so that the recovery of
those lists from the backward's gradients (`wlprof/cost/tensor_lists.py`) is checked on
traces wlprof did not generate:

- gpt_adamw_foreach:   6 pre-LN blocks (d 512), bf16 autocast, AdamW foreach (the default)
- gpt_adamw_fused_amp: the same, fp16 autocast with a GradScaler, AdamW fused
- gpt_accum_clip:      the same, two micro-batches accumulated, clip_grad_norm_, AdamW foreach
- gpt_two_groups:      AdamW fused with two parameter groups (decay / no decay): not recoverable
- convnet_sgd:         a ResNet-style net (60 parameters), SGD momentum + weight decay, foreach
- mlp_bf16_adam:       40 Linear layers with bf16 parameters, Adam foreach

Each writes <name>.pt.trace.json.gz (two profiled steps) under --out, and `captures.json`
with each model's parameter count and elements.

    python3 benchmarks/h200/capture_optim_models.py --out $OUT/optim_models
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import sys
import time
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).parent))
from capture_training import Block, capture, log  # noqa: E402


class GPT(nn.Module):
    def __init__(self, vocab=4096, d=512, heads=8, layers=6):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab)

    def forward(self, idx):
        x = self.emb(idx)
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln(x))


class ConvNet(nn.Module):
    def __init__(self, classes=100, width=64, blocks=6):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        self.blocks = nn.ModuleList(nn.Sequential(
            nn.Conv2d(width, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
            nn.Conv2d(width, width, 3, padding=1, bias=False), nn.BatchNorm2d(width)) for _ in range(blocks))
        self.fc = nn.Linear(width, classes)

    def forward(self, x):
        x = self.stem(x)
        for b in self.blocks:
            x = F.relu(x + b(x))
        return self.fc(x.mean((2, 3)))


def lm_loss(model, idx, tgt):
    return F.cross_entropy(model(idx).flatten(0, 1).float(), tgt.flatten())


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(0)
    idx = torch.randint(0, 4096, (8, 256), device=dev)
    tgt = torch.randint(0, 4096, (8, 256), device=dev)
    results = []

    def record(name, model, step):
        params = [p for p in model.parameters() if p.requires_grad]
        info = capture(name, step, out, meta={"parameters": len(params),
                                               "elements": int(sum(p.numel() for p in params)),
                                               "dtypes": sorted({str(p.dtype) for p in params})})
        raw = out / info["trace"]
        with open(raw, "rb") as f, gzip.open(f"{raw}.gz", "wb", compresslevel=6) as g:
            shutil.copyfileobj(f, g)
        raw.unlink()
        info["trace"] += ".gz"
        results.append(info)

    def gpt_adamw_foreach():
        m = GPT().to(dev)
        opt = torch.optim.AdamW(m.parameters(), lr=1e-4)

        def step():
            with torch.autocast(dev.type, dtype=torch.bfloat16):
                loss = lm_loss(m, idx, tgt)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        record("gpt_adamw_foreach", m, step)

    def gpt_adamw_fused_amp():
        m = GPT().to(dev)
        opt = torch.optim.AdamW(m.parameters(), lr=1e-4, fused=True)
        scaler = torch.amp.GradScaler(dev.type)

        def step():
            with torch.autocast(dev.type, dtype=torch.float16):
                loss = lm_loss(m, idx, tgt)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            opt.zero_grad(set_to_none=True)
        record("gpt_adamw_fused_amp", m, step)

    def gpt_accum_clip():
        m = GPT().to(dev)
        opt = torch.optim.AdamW(m.parameters(), lr=1e-4)

        def step():
            for half in (slice(0, 4), slice(4, 8)):
                with torch.autocast(dev.type, dtype=torch.bfloat16):
                    loss = lm_loss(m, idx[half], tgt[half]) / 2
                loss.backward()
            torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
        record("gpt_accum_clip", m, step)

    def gpt_two_groups():
        m = GPT().to(dev)
        decay = [p for n, p in m.named_parameters() if p.dim() >= 2]
        rest = [p for n, p in m.named_parameters() if p.dim() < 2]
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                                lr=1e-4, fused=True)

        def step():
            with torch.autocast(dev.type, dtype=torch.bfloat16):
                loss = lm_loss(m, idx, tgt)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        record("gpt_two_groups", m, step)

    def convnet_sgd():
        m = ConvNet().to(dev).to(memory_format=torch.channels_last)
        opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
        x = torch.randn(64, 3, 32, 32, device=dev).to(memory_format=torch.channels_last)
        y = torch.randint(0, 100, (64,), device=dev)

        def step():
            F.cross_entropy(m(x), y).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        record("convnet_sgd", m, step)

    def mlp_bf16_adam():
        m = nn.Sequential(*[nn.Sequential(nn.Linear(768, 768), nn.GELU()) for _ in range(40)]).to(dev, torch.bfloat16)
        opt = torch.optim.Adam(m.parameters(), lr=1e-4)
        x = torch.randn(512, 768, device=dev, dtype=torch.bfloat16)

        def step():
            m(x).float().square().mean().backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        record("mlp_bf16_adam", m, step)

    for fn in (gpt_adamw_foreach, gpt_adamw_fused_amp, gpt_accum_clip, gpt_two_groups, convnet_sgd, mlp_bf16_adam):
        t0 = time.perf_counter()
        try:
            fn()
        except Exception as e:  # noqa: BLE001  (one failed capture must not lose the others)
            log(f"{fn.__name__} failed: {type(e).__name__}: {e}")
            results.append({"name": fn.__name__, "error": f"{type(e).__name__}: {e}"})
        log(f"{fn.__name__}: {time.perf_counter() - t0:.1f} s")
    info = {"device": torch.cuda.get_device_name() if dev.type == "cuda" else "cpu", "torch": torch.__version__,
            "captures": results}
    (out / "captures.json").write_text(json.dumps(info, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

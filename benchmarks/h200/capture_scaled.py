"""Capture the same training steps at several batch sizes, for `wlprof predict --trace --scale batch=F`.

The transformer (2 layers, width 1024, sequence 1024, bf16 autocast, AdamW), the ResNet-style
convnet (SGD) and the MoE layer (16 experts, top-2, `_grouped_mm`, AdamW) of
`capture_training.py`, each at several batches; `benchmarks/scale_check.py` then predicts
every batch from one of them and sets the prediction beside the captured step.

    python3 benchmarks/h200/capture_scaled.py --out $OUT          # on the device machine
"""

from __future__ import annotations

import argparse
import gzip
import shutil
import sys
import tarfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
import capture_training as ct  # noqa: E402

BATCHES = {"transformer": (1, 2, 4, 8, 16), "convnet": (16, 32, 64, 128, 256), "moe": (1024, 2048, 4096, 8192, 16384)}


def transformer(work: Path, dev, b: int) -> dict:
    torch.manual_seed(0)
    vocab, t = 8192, 1024
    idx = torch.randint(0, vocab, (b, t), device=dev)
    tgt = torch.randint(0, vocab, (b, t), device=dev)
    model = ct.Transformer(vocab).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    step = ct.transformer_step(model, opt, idx, tgt)
    step()
    return ct.capture(f"transformer_b{b}", step, work, meta={"model": "transformer", "batch": b, "seq": t})


def convnet(work: Path, dev, b: int) -> dict:
    torch.manual_seed(0)
    model = ct.ConvNet().to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(b, 3, 64, 64, device=dev)
    y = torch.randint(0, 100, (b,), device=dev)

    def step():
        with torch.autocast(ct.DEV_TYPE, dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    step()
    return ct.capture(f"convnet_b{b}", step, work, meta={"model": "convnet", "batch": b})


def moe(work: Path, dev, b: int) -> dict:
    torch.manual_seed(0)
    model = ct.MoE().to(dev, torch.bfloat16)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(b, 1024, device=dev, dtype=torch.bfloat16)

    def step():
        model(x).float().pow(2).mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    step()
    return ct.capture(f"moe_b{b}", step, work, meta={"model": "moe", "batch": b})


def each(name: str, fn, batch: int):
    """`fn` at one batch as a capture of `capture_training.run_captures`."""
    def cap(work: Path, results: list, dev) -> None:
        results.append(fn(work, dev, batch))
    cap.__name__ = f"{name}_b{batch}"
    return cap


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda", help="cpu: a dry run")
    args = ap.parse_args()
    out = Path(args.out)
    work = out / "scaled_traces"
    work.mkdir(parents=True, exist_ok=True)
    dev = torch.device(args.device)
    ct.DEV_TYPE = dev.type
    torch.backends.cuda.matmul.allow_tf32 = False
    info = {"torch": torch.__version__, "cuda": torch.version.cuda,
            "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
            "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "argv": sys.argv}
    caps = [each(name, fn, b) for name, fn in (("transformer", transformer), ("convnet", convnet), ("moe", moe))
            for b in BATCHES[name]]
    ct.run_captures(caps, work, dev, "", info, [])
    for p in work.glob("*.pt.trace.json"):
        with open(p, "rb") as src, gzip.open(str(p) + ".gz", "wb", compresslevel=6) as dst:
            shutil.copyfileobj(src, dst)
        p.unlink()
    with tarfile.open(out / "scaled_traces.tgz", "w") as tar:
        tar.add(work, arcname="scaled_traces")
    ct.log("done")


if __name__ == "__main__":
    main()

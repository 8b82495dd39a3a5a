"""Capture training and inference steps written the way other projects write them, with reference counts.

The same method as capture_training.py (a raw torch.profiler trace of a few steps, CPU + CUDA,
record_shapes, beside FlopCounterMode's per-op count of one step), for model code wlprof's other
captures do not hold:

- llama:        a Llama-style decoder in pure bf16 weights: RMSNorm, rotary embeddings
                (rotate-half), grouped-query SDPA (enable_gqa), SwiGLU MLP, tied embedding,
                cross-entropy with ignore_index, two micro-batches of gradient accumulation,
                clip_grad_norm_, fused AdamW;
- llama_autotune: the same model under torch.compile(mode="max-autotune-no-cudagraphs")
                (Triton GEMM templates beside Inductor's pointwise kernels);
- flex:         flex_attention (compiled) with a causal sliding-window block mask, forward and
                backward;
- fp8:          float8 e4m3 linear layers through torch._scaled_mm (per-tensor scales), and an
                int8 torch._int_mm, inference;
- bert:         nn.TransformerEncoder (post-LN, GELU, dropout) with a key padding mask, a
                classification head, AdamW with foreach=False (one op per parameter), a linear
                warm-up schedule;
- ddp:          a one-rank NCCL DistributedDataParallel MLP (the reducer's bucketed all_reduce);
- fsdp:         a one-rank NCCL fully_shard (FSDP2) MLP (all_gather / reduce_scatter per group);
- sparse_emb:   a sparse-gradient nn.Embedding with SparseAdam beside a dense head with Adam.

    python3 benchmarks/h200/capture_zoo3.py --out $OUT [--only llama,fp8]
"""

from __future__ import annotations

import argparse
import os
import sys
import tarfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import capture_training as ct  # noqa: E402  (sets the NCCL environment before torch loads)
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


class RMSNorm(nn.Module):
    """RMSNorm as Llama's reference code writes it (not nn.RMSNorm)."""

    def __init__(self, d: int, eps: float = 1e-6):
        super().__init__()
        self.eps, self.weight = eps, nn.Parameter(torch.ones(d))

    def forward(self, x):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).type_as(x) * self.weight


def rope(t: int, hd: int, dev):
    inv = 1.0 / (10000 ** (torch.arange(0, hd, 2, device=dev).float() / hd))
    f = torch.outer(torch.arange(t, device=dev).float(), inv)
    emb = torch.cat((f, f), -1)
    return emb.cos().to(torch.bfloat16), emb.sin().to(torch.bfloat16)


def rotate(x, cos, sin):
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-x2, x1), -1) * sin


class LlamaBlock(nn.Module):
    def __init__(self, d: int, heads: int, kv_heads: int, ff: int):
        super().__init__()
        self.h, self.kv, self.hd = heads, kv_heads, d // heads
        self.n1, self.n2 = RMSNorm(d), RMSNorm(d)
        self.q = nn.Linear(d, d, bias=False)
        self.kvp = nn.Linear(d, 2 * kv_heads * self.hd, bias=False)
        self.o = nn.Linear(d, d, bias=False)
        self.gate, self.up = nn.Linear(d, ff, bias=False), nn.Linear(d, ff, bias=False)
        self.down = nn.Linear(ff, d, bias=False)

    def forward(self, x, cos, sin):
        b, t, d = x.shape
        hx = self.n1(x)
        q = self.q(hx).view(b, t, self.h, self.hd).transpose(1, 2)
        k, v = self.kvp(hx).view(b, t, 2, self.kv, self.hd).permute(2, 0, 3, 1, 4)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + self.o(a.transpose(1, 2).reshape(b, t, d))
        hx = self.n2(x)
        return x + self.down(F.silu(self.gate(hx)) * self.up(hx))


class Llama(nn.Module):
    def __init__(self, vocab=8192, d=1024, heads=16, kv_heads=4, ff=2816, layers=2):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(LlamaBlock(d, heads, kv_heads, ff) for _ in range(layers))
        self.norm = RMSNorm(d)
        self.hd = d // heads

    def forward(self, idx):
        x = self.emb(idx)
        cos, sin = rope(idx.shape[1], self.hd, idx.device)
        for blk in self.blocks:
            x = blk(x, cos, sin)
        return F.linear(self.norm(x), self.emb.weight)  # tied output head


def _llama(dev, compiled: str | None):
    torch.manual_seed(0)
    model = Llama().to(dev, torch.bfloat16)
    run = torch.compile(model, mode=compiled) if compiled else model
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=dev.type == "cuda")
    b, t = 2, 1024 if dev.type == "cuda" else 64
    idx = torch.randint(0, 8192, (2, b, t), device=dev)
    tgt = torch.randint(0, 8192, (2, b, t), device=dev)
    tgt[:, :, :16] = -100  # a masked prompt

    def fwd_bwd():
        for m in range(2):  # two micro-batches accumulate their gradients
            logits = run(idx[m])
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)).float(), tgt[m].view(-1), ignore_index=-100) / 2
            loss.backward()

    def step():
        fwd_bwd()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    return model, opt, fwd_bwd, step, {"batch": b, "seq": t, "micro_batches": 2, "d_model": 1024, "layers": 2,
                                       "heads": 16, "kv_heads": 4, "d_ff": 2816, "vocab": 8192}


def cap_llama(out: Path, results: list, dev):
    _, opt, fwd_bwd, step, meta = _llama(dev, None)
    step()
    try:
        counts = {"flop_counter": ct.flop_counts(fwd_bwd)}
    except AssertionError as exc:  # FlopCounterMode's SDPA formula refuses grouped-query shapes
        counts = {"flop_counter_error": f"{type(exc).__name__}: {exc}"}
    opt.zero_grad(set_to_none=True)
    results.append(ct.capture("llama", step, out, meta={**counts, **meta}))


def cap_llama_autotune(out: Path, results: list, dev):
    _, _, _, step, meta = _llama(dev, "max-autotune-no-cudagraphs")
    t0 = time.perf_counter()
    step()
    ct.log(f"compiled (max-autotune-no-cudagraphs) in {time.perf_counter() - t0:.0f} s")
    results.append(ct.capture("llama_autotune", step, out, meta={"mode": "max-autotune-no-cudagraphs", **meta}))


def cap_flex(out: Path, results: list, dev):
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    b, h, t, hd, window = 4, 16, 2048, 64, 256

    def sliding(b_, h_, q, kv):
        return (q >= kv) & (q - kv < window)

    mask = create_block_mask(sliding, None, None, t, t, device=dev.type)
    flex = torch.compile(flex_attention)
    q, k, v = (torch.randn(b, h, t, hd, device=dev, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))

    def step():
        out_ = flex(q, k, v, block_mask=mask)
        out_.sum().backward()
        for x in (q, k, v):
            x.grad = None

    step()
    results.append(ct.capture("flex", step, out, meta={"batch": b, "heads": h, "seq": t, "head_dim": hd,
                                                        "window": window, "block_sparsity": float(mask.sparsity())}))


def cap_fp8(out: Path, results: list, dev):
    torch.manual_seed(0)
    m, d, f = (4096, 4096, 14336) if dev.type == "cuda" else (64, 128, 256)
    x = torch.randn(m, d, device=dev).to(torch.float8_e4m3fn)
    w1 = torch.randn(f, d, device=dev).to(torch.float8_e4m3fn)  # [out, in], as nn.Linear stores it
    w2 = torch.randn(d, f, device=dev).to(torch.float8_e4m3fn)
    one = torch.ones((), device=dev)
    xi = torch.randint(-8, 8, (m, d), device=dev, dtype=torch.int8)
    wi = torch.randint(-8, 8, (d, d), device=dev, dtype=torch.int8)

    def step():
        with torch.no_grad():
            h = torch._scaled_mm(x, w1.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
            h = F.silu(h).to(torch.float8_e4m3fn)
            y = torch._scaled_mm(h, w2.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
            z = torch._int_mm(xi, wi)
        return y, z

    counts = ct.flop_counts(step)
    results.append(ct.capture("fp8", step, out, meta={"flop_counter": counts, "m": m, "d": d, "f": f}))


def cap_bert(out: Path, results: list, dev):
    torch.manual_seed(0)
    d, heads, layers, b, t, classes = 768, 12, 2, 8, 256 if dev.type == "cuda" else 48, 4
    emb = nn.Embedding(30522, d).to(dev)
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.1, activation="gelu",
                                                           batch_first=True), layers).to(dev)
    head = nn.Linear(d, classes).to(dev)
    params = [*emb.parameters(), *enc.parameters(), *head.parameters()]
    opt = torch.optim.AdamW(params, lr=2e-5, foreach=False)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 100))
    idx = torch.randint(0, 30522, (b, t), device=dev)
    pad = torch.zeros(b, t, dtype=torch.bool, device=dev)
    pad[:, t - 37:] = True
    y = torch.randint(0, classes, (b,), device=dev)

    def fwd_bwd():
        h = enc(emb(idx), src_key_padding_mask=pad)
        F.cross_entropy(head(h[:, 0]), y).backward()

    def step():
        fwd_bwd()
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)

    step()
    counts = ct.flop_counts(fwd_bwd)
    opt.zero_grad(set_to_none=True)
    results.append(ct.capture("bert", step, out, meta={"flop_counter": counts, "d_model": d, "heads": heads,
                                                        "layers": layers, "batch": b, "seq": t}))


def _mlp(dev):
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(2048, 8192), nn.GELU(), nn.Linear(8192, 2048), nn.GELU(),
                         nn.Linear(2048, 1024)).to(dev)


def _one_rank(port: str):
    import torch.distributed as dist

    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", port
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda", torch.cuda.current_device()))
    return dist


def cap_ddp(out: Path, results: list, dev):
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist = _one_rank("29541")
    try:
        model = DDP(_mlp(dev), bucket_cap_mb=16)
        opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
        x, y = torch.randn(512, 2048, device=dev), torch.randn(512, 1024, device=dev)

        def step():
            F.mse_loss(model(x), y).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        results.append(ct.capture("ddp", step, out, meta={"world_size": 1, "bucket_cap_mb": 16}))
    finally:
        dist.destroy_process_group()


def cap_fsdp(out: Path, results: list, dev):
    from torch.distributed.fsdp import fully_shard

    dist = _one_rank("29542")
    try:
        model = _mlp(dev)
        for layer in model:
            if isinstance(layer, nn.Linear):
                fully_shard(layer)
        fully_shard(model)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        x, y = torch.randn(512, 2048, device=dev), torch.randn(512, 1024, device=dev)

        def step():
            F.mse_loss(model(x), y).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        results.append(ct.capture("fsdp", step, out, meta={"world_size": 1}))
    finally:
        dist.destroy_process_group()


def cap_sparse_emb(out: Path, results: list, dev):
    torch.manual_seed(0)
    emb = nn.Embedding(1 << 20, 128, sparse=True).to(dev)
    head = nn.Linear(128, 1).to(dev)
    opt_s = torch.optim.SparseAdam(list(emb.parameters()), lr=1e-3)
    opt_d = torch.optim.Adam(head.parameters(), lr=1e-3)
    idx = torch.randint(0, 1 << 20, (8192, 16), device=dev)
    y = torch.rand(8192, 1, device=dev)

    def step():
        F.binary_cross_entropy_with_logits(head(emb(idx).mean(1)), y).backward()
        opt_s.step()
        opt_d.step()
        opt_s.zero_grad(set_to_none=True)
        opt_d.zero_grad(set_to_none=True)

    results.append(ct.capture("sparse_emb", step, out, meta={"rows": 1 << 20, "dim": 128, "lookups": 8192 * 16}))


CAPTURES = (cap_llama, cap_fp8, cap_bert, cap_ddp, cap_fsdp, cap_sparse_emb, cap_flex, cap_llama_autotune)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default="")
    ap.add_argument("--device", default="cuda", help="cpu: a dry run of the steps that run there")
    args = ap.parse_args()
    out = Path(args.out)
    work = out / "zoo3_traces"
    work.mkdir(parents=True, exist_ok=True)
    dev = torch.device(args.device)
    ct.DEV_TYPE = dev.type
    torch.backends.cuda.matmul.allow_tf32 = False
    info = {"torch": torch.__version__, "cuda": torch.version.cuda,
            "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
            "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "argv": sys.argv}
    results: list = []
    ct.run_captures(CAPTURES, work, dev, args.only, info, results, prefix="cap_")
    with tarfile.open(out / "zoo3_traces.tgz", "w:gz") as tar:
        tar.add(work, arcname="zoo3_traces")
    ct.log("done")


if __name__ == "__main__":
    main()

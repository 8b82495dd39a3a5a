"""Capture training and inference steps of model kinds wlprof's own captures do not hold, with reference counts.

The same method as capture_training.py (a raw torch.profiler trace of a few steps, CPU + CUDA,
record_shapes, beside FlopCounterMode's per-op count of one step), for:

- lstm:    a 2-layer nn.LSTM (cuDNN) over embedded tokens and a classifier, fp32, Adam;
- vit:     a small vision transformer: patch-embedding conv, nn.MultiheadAttention, GELU MLP,
           fp16 autocast with a GradScaler, fused AdamW;
- unet:    conv, GroupNorm, SiLU, depthwise conv, ConvTranspose2d, bilinear upsampling,
           average pooling, channels_last, MSE loss, SGD with Nesterov momentum;
- dlrm:    nn.EmbeddingBag (sum) tables, an MLP, the pairwise-dot interaction (bmm),
           BCE-with-logits, Adagrad;
- decode:  greedy decoding of a 2-layer transformer with a growing KV cache (torch.cat,
           masked softmax attention by hand, argmax), bf16, no grad;
- gat:     a 2-layer PyG GATConv on a generated graph, dropout, Adam;
- compiled_graphs: the capture_training transformer under torch.compile(mode="reduce-overhead")
           (its steps replayed as CUDA graphs).

    python3 benchmarks/h200/capture_models.py --out $OUT [--only lstm,vit]
"""

from __future__ import annotations

import argparse
import sys
import tarfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import capture_training as ct  # noqa: E402  (sets the NCCL environment before torch loads)
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def _train(name, model, opt, loss_fn, out, results, meta, scaler=None, autocast=None):
    """Capture `name`: one training step of `model` with `opt` on `loss_fn(model)`, and its FLOP counts."""
    def fwd_bwd():
        if autocast is not None:
            with torch.autocast(ct.DEV_TYPE, dtype=autocast):
                loss = loss_fn(model)
        else:
            loss = loss_fn(model)
        (scaler.scale(loss) if scaler is not None else loss).backward()

    def step():
        fwd_bwd()
        if scaler is not None:
            scaler.step(opt)
            scaler.update()
        else:
            opt.step()
        opt.zero_grad(set_to_none=True)

    step()
    counts = ct.flop_counts(fwd_bwd)
    opt.zero_grad(set_to_none=True)
    results.append(ct.capture(name, step, out, meta={"flop_counter": counts, **meta}))


def cap_lstm(out: Path, results: list, dev):
    torch.manual_seed(0)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(10000, 256)
            self.rnn = nn.LSTM(256, 512, num_layers=2, batch_first=True)
            self.fc = nn.Linear(512, 20)

        def forward(self, idx):
            h, _ = self.rnn(self.emb(idx))
            return self.fc(h[:, -1])

    model = Net().to(dev)
    idx = torch.randint(0, 10000, (64, 128), device=dev)
    y = torch.randint(0, 20, (64,), device=dev)
    _train("lstm", model, torch.optim.Adam(model.parameters()), lambda m: F.cross_entropy(m(idx), y), out,
           results, {"batch": 64, "seq": 128})


def cap_vit(out: Path, results: list, dev):
    torch.manual_seed(0)

    class Layer(nn.Module):
        def __init__(self, d=384, heads=6):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

        def forward(self, x):
            h = self.ln1(x)
            x = x + self.attn(h, h, h, need_weights=False)[0]
            return x + self.mlp(self.ln2(x))

    class ViT(nn.Module):
        def __init__(self, d=384):
            super().__init__()
            self.patch = nn.Conv2d(3, d, 16, stride=16)
            self.cls = nn.Parameter(torch.zeros(1, 1, d))
            self.pos = nn.Parameter(torch.zeros(1, 197, d))
            self.layers = nn.Sequential(*[Layer(d) for _ in range(4)])
            self.head = nn.Linear(d, 1000)

        def forward(self, img):
            x = self.patch(img).flatten(2).transpose(1, 2)
            x = torch.cat([self.cls.expand(len(x), -1, -1), x], dim=1) + self.pos
            return self.head(self.layers(x)[:, 0])

    model = ViT().to(dev)
    img = torch.randn(64, 3, 224, 224, device=dev)
    y = torch.randint(0, 1000, (64,), device=dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    _train("vit", model, opt, lambda m: F.cross_entropy(m(img), y), out, results, {"batch": 64, "image": 224},
           scaler=torch.amp.GradScaler(ct.DEV_TYPE), autocast=torch.float16)


def cap_unet(out: Path, results: list, dev):
    torch.manual_seed(0)

    def block(ci, co):
        return nn.Sequential(nn.Conv2d(ci, co, 3, padding=1), nn.GroupNorm(8, co), nn.SiLU(),
                             nn.Conv2d(co, co, 3, padding=1, groups=co), nn.Conv2d(co, co, 1), nn.SiLU())

    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.d1, self.d2 = block(3, 64), block(64, 128)
            self.mid = block(128, 128)
            self.up = nn.ConvTranspose2d(128, 64, 2, stride=2)
            self.u1 = block(128, 64)
            self.out = nn.Conv2d(64, 3, 1)

        def forward(self, x):
            a = self.d1(x)
            b = self.mid(self.d2(F.avg_pool2d(a, 2)))
            b = self.up(b) + F.interpolate(b[:, :64], scale_factor=2, mode="bilinear", align_corners=False)
            return self.out(self.u1(torch.cat([a, b], dim=1)))

    model = UNet().to(dev, memory_format=torch.channels_last)
    x = torch.randn(16, 3, 128, 128, device=dev).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, nesterov=True)
    _train("unet", model, opt, lambda m: F.mse_loss(m(x), x), out, results, {"batch": 16, "image": 128},
           autocast=torch.bfloat16)


def cap_dlrm(out: Path, results: list, dev):
    torch.manual_seed(0)

    class DLRM(nn.Module):
        def __init__(self, tables=8, rows=100_000, d=64):
            super().__init__()
            self.embs = nn.ModuleList(nn.EmbeddingBag(rows, d, mode="sum") for _ in range(tables))
            self.bot = nn.Sequential(nn.Linear(13, 256), nn.ReLU(), nn.Linear(256, d), nn.ReLU())
            self.top = nn.Sequential(nn.Linear(d + (tables + 1) * tables // 2, 256), nn.ReLU(), nn.Linear(256, 1))

        def forward(self, dense, idx, offsets):
            z = [self.bot(dense)] + [e(i, o) for e, i, o in zip(self.embs, idx, offsets, strict=True)]
            t = torch.stack(z, dim=1)
            inter = torch.bmm(t, t.transpose(1, 2))
            iu = torch.triu_indices(t.shape[1], t.shape[1], offset=1, device=t.device)
            return self.top(torch.cat([z[0], inter[:, iu[0], iu[1]]], dim=1)).squeeze(1)

    b, bag = 2048, 20
    model = DLRM().to(dev)
    dense = torch.randn(b, 13, device=dev)
    idx = [torch.randint(0, 100_000, (b * bag,), device=dev) for _ in range(8)]
    offsets = [torch.arange(0, b * bag, bag, device=dev) for _ in range(8)]
    y = torch.randint(0, 2, (b,), device=dev).float()
    _train("dlrm", model, torch.optim.Adagrad(model.parameters(), lr=0.01),
           lambda m: F.binary_cross_entropy_with_logits(m(dense, idx, offsets), y), out, results,
           {"batch": b, "bag": bag})


def cap_decode(out: Path, results: list, dev):
    torch.manual_seed(0)
    d, heads, layers, vocab = 1024, 16, 2, 32000
    p = {k: torch.randn(*s, device=dev, dtype=torch.bfloat16) * 0.02 for k, s in (
        ("emb", (vocab, d)), ("head", (vocab, d)))}
    w = [{n: torch.randn(*s, device=dev, dtype=torch.bfloat16) * 0.02 for n, s in (
        ("qkv", (3 * d, d)), ("o", (d, d)), ("fc1", (4 * d, d)), ("fc2", (d, 4 * d)))} for _ in range(layers)]
    batch, prompt, new = 8, 64, 16

    @torch.no_grad()
    def generate():
        tok = torch.randint(0, vocab, (batch, prompt), device=dev)
        cache = [None] * layers
        for _ in range(new):
            x = F.embedding(tok if cache[0] is None else tok[:, -1:], p["emb"])
            for i, lw in enumerate(w):
                h = F.layer_norm(x, (d,))
                q, k, v = F.linear(h, lw["qkv"]).split(d, dim=-1)
                if cache[i] is not None:
                    k, v = torch.cat([cache[i][0], k], dim=1), torch.cat([cache[i][1], v], dim=1)
                cache[i] = (k, v)
                t, s = q.shape[1], k.shape[1]
                q, k, v = (z.view(batch, -1, heads, d // heads).transpose(1, 2) for z in (q, k, v))
                att = (q @ k.transpose(-1, -2)) * (d // heads) ** -0.5
                mask = torch.ones(t, s, dtype=torch.bool, device=dev).tril(diagonal=s - t)
                att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
                x = x + F.linear((att @ v).transpose(1, 2).reshape(batch, t, d), lw["o"])
                x = x + F.linear(F.gelu(F.linear(F.layer_norm(x, (d,)), lw["fc1"])), lw["fc2"])
            nxt = F.linear(F.layer_norm(x[:, -1], (d,)), p["head"]).argmax(dim=-1, keepdim=True)
            tok = torch.cat([tok, nxt], dim=1)
        return tok

    generate()
    counts = ct.flop_counts(generate)
    results.append(ct.capture("decode", generate, out, meta={"flop_counter": counts, "batch": batch,
                                                             "prompt": prompt, "new_tokens": new}))


def cap_gat(out: Path, results: list, dev):
    from torch_geometric.nn import GATConv

    n, e, f, c = 1 << 14, 12 << 14, 96, 10
    edge_index, x, y = ct.random_graph(dev, n, e, f, c)

    class GAT(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = GATConv(f, 32, heads=4, dropout=0.1)
            self.c2 = GATConv(128, c, heads=1)

        def forward(self):
            h = F.elu(self.c1(F.dropout(x, 0.1, self.training), edge_index))
            return self.c2(h, edge_index)

    model = GAT().to(dev)
    _train("gat", model, torch.optim.Adam(model.parameters(), lr=0.01), lambda m: F.cross_entropy(m(), y), out,
           results, {"nodes": n, "edges": e, "features": f})


def cap_compiled_graphs(out: Path, results: list, dev):
    torch.manual_seed(0)
    model = ct.Transformer(layers=2).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    compiled = torch.compile(model, mode="reduce-overhead")
    idx = torch.randint(0, 8192, (8, 512), device=dev)
    tgt = torch.randint(0, 8192, (8, 512), device=dev)

    def step():
        with torch.autocast(ct.DEV_TYPE, dtype=torch.bfloat16):
            loss = F.cross_entropy(compiled(idx).flatten(0, 1).float(), tgt.flatten())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(3):
        step()
    results.append(ct.capture("compiled_graphs", step, out, meta={"batch": 8, "seq": 512,
                                                                  "mode": "reduce-overhead"}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default="")
    ap.add_argument("--device", default="cuda", help="cpu: a dry run of the same steps")
    args = ap.parse_args()
    out = Path(args.out)
    work = out / "model_traces"
    work.mkdir(parents=True, exist_ok=True)
    dev = torch.device(args.device)
    ct.DEV_TYPE = dev.type
    torch.backends.cuda.matmul.allow_tf32 = False
    info = {"torch": torch.__version__, "cuda": torch.version.cuda, "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
            "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "argv": sys.argv}
    results: list = []
    ct.run_captures((cap_lstm, cap_vit, cap_unet, cap_dlrm, cap_decode, cap_gat, cap_compiled_graphs), work, dev, args.only, info, results, prefix="cap_")
    with tarfile.open(out / "model_traces.tgz", "w:gz") as tar:
        tar.add(work, arcname="model_traces")
    ct.log("done")


if __name__ == "__main__":
    main()

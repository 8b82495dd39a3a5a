"""Capture steps of model families none of the earlier captures hold, with FlopCounterMode beside each.

The method of `capture_cpu_models.py` (one warm-up step, one step under torch.profiler with
record_shapes and CPU + CUDA activity, exported to NAME.json, then one step under FlopCounterMode
written to NAME.flops.json), at GPU sizes on a GPU and at small sizes on a CPU:

- mobilenet-train:   inverted residual blocks (1x1 expand, 3x3 depthwise with stride, squeeze-excite,
                     1x1 project), BatchNorm, Hardswish/ReLU6, channels_last, bf16 autocast, label-smoothed
                     cross-entropy, SGD with Nesterov momentum and an EMA of the weights (_foreach_lerp_);
- mobilenet-compiled: the same training step with the model under torch.compile (Inductor, default mode);
- swin-train:        shifted-window attention (torch.roll, window partition, relative position bias
                     gathered from its table, additive mask), DropPath, patch merging, AdamW, clip_grad_norm_;
- mamba-train:       a selective state-space block in plain torch (in_proj, causal depthwise conv1d,
                     softplus, an unrolled scan over time), RMSNorm by hand, bf16 autocast, fused AdamW;
- diffusion-train:   a DDPM step of a small UNet (sinusoidal timestep embedding, GroupNorm, SiLU, nearest
                     upsampling, a self-attention block, skip concatenation), noise schedule gathered by
                     timestep, MSE, AdamW;
- whisper-infer:     an encoder-decoder speech model in fp16: conv1d stem, encoder self-attention, greedy
                     decoding of 8 tokens with a self-attention KV cache and cross-attention;
- sample-infer:      decoder-only generation with temperature, top-k, top-p (sort, cumsum, scatter) and
                     repetition penalty (gather, scatter), multinomial sampling, a KV cache;
- detect-infer:      a detector's post-processing: sigmoid, topk, sort, IoU by broadcasting, a greedy
                     NMS loop, nonzero, masked_select, bincount, unique, scatter_reduce, grid_sample,
                     bilinear interpolate, searchsorted;
- int8-infer:        int8 GEMMs (torch._int_mm) with per-token dynamic quantisation, and weight-only int8
                     (_weight_int8pack_mm) where this torch has it;
- linalg-step:       a second-order preconditioner step: covariances, eigh, cholesky, cholesky_solve,
                     solve, qr, svd, inv;
- speech-ctc-train:  conv2d subsampling, a bidirectional GRU over packed sequences, log_softmax, ctc_loss,
                     Adam.

    python benchmarks/capture_zoo4.py --out DIR [NAME ...] [--device cuda]   # each in its own process
    python benchmarks/capture_zoo4.py --list
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).parent))
import capture_cpu_models as cm  # noqa: E402

_EARLIER = set(cm.CAPTURES)  # the captures of capture_cpu_models; this file's register beside them
capture = cm.capture
gpu = cm.gpu  # whether the capture runs on a GPU (its sizes are then the GPU ones)


def autocast(dtype=torch.bfloat16):
    return torch.autocast(torch.get_default_device().type, dtype=dtype)


# ---------------------------------------------------------------- vision


class SqueezeExcite(nn.Module):
    def __init__(self, c: int):
        super().__init__()
        self.fc1, self.fc2 = nn.Conv2d(c, c // 4, 1), nn.Conv2d(c // 4, c, 1)

    def forward(self, x):
        s = F.adaptive_avg_pool2d(x, 1)
        return x * torch.sigmoid(self.fc2(F.relu(self.fc1(s))))


class InvertedResidual(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, expand: int = 4):
        super().__init__()
        mid = cin * expand
        self.use_res = stride == 1 and cin == cout
        self.body = nn.Sequential(
            nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.Hardswish(),
            nn.Conv2d(mid, mid, 3, stride, 1, groups=mid, bias=False), nn.BatchNorm2d(mid), nn.ReLU6(),
            SqueezeExcite(mid),
            nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.body(x)
        return x + y if self.use_res else y


def _mobilenet():
    widths = [(16, 24, 2), (24, 24, 1), (24, 40, 2), (40, 40, 1), (40, 80, 2), (80, 96, 1)]
    m = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.Hardswish(),
                      *[InvertedResidual(a, b, s) for a, b, s in widths],
                      nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.2), nn.Linear(96, 100))
    m = m.to(memory_format=torch.channels_last)
    n, hw = (64, 128) if gpu() else (2, 32)
    x = torch.randn(n, 3, hw, hw).to(memory_format=torch.channels_last)
    t = torch.randint(0, 100, (n,))
    return m, x, t


def _mobilenet_step(compiled: bool):
    m, x, t = _mobilenet()
    run = torch.compile(m) if compiled else m
    opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=4e-5)
    ema = [p.detach().clone() for p in m.parameters()]

    def step():
        with autocast():
            loss = F.cross_entropy(run(x), t, label_smoothing=0.1)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        with torch.no_grad():
            torch._foreach_lerp_(ema, [p.detach() for p in m.parameters()], 0.001)

    return step


@capture("mobilenet-train", "MobileNetV3-like inverted residuals (depthwise 3x3, squeeze-excite, Hardswish, "
         "ReLU6), channels_last, bf16 autocast, label smoothing, SGD(nesterov) + EMA (_foreach_lerp_); "
         "64 x 3 x 128 x 128 on a GPU")
def mobilenet_train():
    return _mobilenet_step(compiled=False)


@capture("mobilenet-compiled", "the mobilenet-train step with the model under torch.compile (Inductor)")
def mobilenet_compiled():
    return _mobilenet_step(compiled=True)


class WindowAttention(nn.Module):
    def __init__(self, dim: int, heads: int, window: int):
        super().__init__()
        self.heads, self.window = heads, window
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.table = nn.Parameter(torch.randn((2 * window - 1) ** 2, heads) * 0.02)
        coords = torch.stack(torch.meshgrid(torch.arange(window), torch.arange(window), indexing="ij")).flatten(1)
        rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0) + (window - 1)
        self.register_buffer("index", rel[..., 0] * (2 * window - 1) + rel[..., 1], persistent=False)

    def forward(self, x, mask):
        b, n, c = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        attn = (q * (c // self.heads) ** -0.5) @ k.transpose(-2, -1)
        bias = self.table[self.index.reshape(-1)].reshape(n, n, -1).permute(2, 0, 1)
        attn = attn + bias.unsqueeze(0)
        if mask is not None:
            w = mask.shape[0]
            attn = attn.view(b // w, w, self.heads, n, n) + mask.unsqueeze(1).unsqueeze(0)
            attn = attn.view(-1, self.heads, n, n)
        return self.proj((attn.softmax(-1) @ v).transpose(1, 2).reshape(b, n, c))


class SwinBlock(nn.Module):
    def __init__(self, dim: int, heads: int, res: int, window: int, shift: int):
        super().__init__()
        self.res, self.window, self.shift = res, window, shift
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = WindowAttention(dim, heads, window)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        mask = None
        if shift:
            img = torch.zeros(1, res, res, 1)
            cnt = 0
            for hs in (slice(0, -window), slice(-window, -shift), slice(-shift, None)):
                for ws in (slice(0, -window), slice(-window, -shift), slice(-shift, None)):
                    img[:, hs, ws, :] = cnt
                    cnt += 1
            mw = self._partition(img).squeeze(-1)
            mask = mw.unsqueeze(1) - mw.unsqueeze(2)
            mask = mask.masked_fill(mask != 0, -100.0).masked_fill(mask == 0, 0.0)
        self.register_buffer("mask", mask, persistent=False)

    def _partition(self, x):
        b, h, w, c = x.shape
        s = self.window
        return x.view(b, h // s, s, w // s, s, c).permute(0, 1, 3, 2, 4, 5).reshape(-1, s * s, c)

    def _drop_path(self, x, p=0.1):
        keep = x.new_empty(x.shape[0], 1, 1).bernoulli_(1 - p)
        return x * keep / (1 - p)

    def forward(self, x):
        b, n, c = x.shape
        h = self.ln1(x).view(b, self.res, self.res, c)
        if self.shift:
            h = torch.roll(h, (-self.shift, -self.shift), (1, 2))
        a = self.attn(self._partition(h), self.mask)
        s = self.window
        a = a.view(b, self.res // s, self.res // s, s, s, c).permute(0, 1, 3, 2, 4, 5).reshape(b, self.res, self.res, c)
        if self.shift:
            a = torch.roll(a, (self.shift, self.shift), (1, 2))
        x = x + self._drop_path(a.reshape(b, n, c))
        return x + self._drop_path(self.mlp(self.ln2(x)))


class PatchMerge(nn.Module):
    def __init__(self, dim: int, res: int):
        super().__init__()
        self.res = res
        self.ln, self.red = nn.LayerNorm(4 * dim), nn.Linear(4 * dim, 2 * dim, bias=False)

    def forward(self, x):
        b, _, c = x.shape
        x = x.view(b, self.res, self.res, c)
        x = torch.cat([x[:, 0::2, 0::2], x[:, 1::2, 0::2], x[:, 0::2, 1::2], x[:, 1::2, 1::2]], -1)
        return self.red(self.ln(x.view(b, -1, 4 * c)))


@capture("swin-train", "Swin-like stage: patch embedding, two blocks (plain and shifted windows: roll, relative "
         "position bias gathered from its table, additive mask, DropPath), patch merging; AdamW, "
         "clip_grad_norm_; 16 x 3 x 224 x 224 on a GPU")
def swin_train():
    n, img, dim, heads = (16, 224, 96, 3) if gpu() else (2, 56, 24, 2)
    res, window = img // 4, 7

    class Swin(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Conv2d(3, dim, 4, 4)
            self.ln = nn.LayerNorm(dim)
            self.blocks = nn.Sequential(SwinBlock(dim, heads, res, window, 0),
                                        SwinBlock(dim, heads, res, window, window // 2))
            self.merge = PatchMerge(dim, res)
            self.head = nn.Linear(2 * dim, 100)

        def forward(self, x):
            x = self.ln(self.embed(x).flatten(2).transpose(1, 2))
            return self.head(self.merge(self.blocks(x)).mean(1))

    m = Swin()
    x, t = torch.randn(n, 3, img, img), torch.randint(0, 100, (n,))
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3, weight_decay=0.05)
    return cm.train_step(m, lambda: F.cross_entropy(m(x), t), opt, clip=5.0)


# ---------------------------------------------------------------- sequence models


class Mamba(nn.Module):
    def __init__(self, d: int, state: int = 16, conv: int = 4):
        super().__init__()
        inner = 2 * d
        self.inner, self.state, self.rank = inner, state, max(1, d // 16)
        self.in_proj = nn.Linear(d, 2 * inner, bias=False)
        self.conv = nn.Conv1d(inner, inner, conv, groups=inner, padding=conv - 1)
        self.x_proj = nn.Linear(inner, self.rank + 2 * state, bias=False)
        self.dt_proj = nn.Linear(self.rank, inner)
        self.a_log = nn.Parameter(torch.log(torch.arange(1, state + 1, dtype=torch.float32)).repeat(inner, 1))
        self.d = nn.Parameter(torch.ones(inner))
        self.out_proj = nn.Linear(inner, d, bias=False)
        self.norm_w = nn.Parameter(torch.ones(d))

    def forward(self, x):
        b, t, _ = x.shape
        h = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.norm_w
        u, z = self.in_proj(h).chunk(2, dim=-1)
        u = F.silu(self.conv(u.transpose(1, 2))[..., :t].transpose(1, 2))
        dt, bm, cm_ = self.x_proj(u).split([self.rank, self.state, self.state], dim=-1)
        dt = F.softplus(self.dt_proj(dt))
        a = -torch.exp(self.a_log.float())
        da = torch.exp(torch.einsum("btd,dn->btdn", dt, a))
        dbu = torch.einsum("btd,btn,btd->btdn", dt, bm, u)
        s = torch.zeros(b, self.inner, self.state, dtype=da.dtype)
        ys = []
        for i in range(t):
            s = da[:, i] * s + dbu[:, i]
            ys.append(torch.einsum("bdn,bn->bd", s, cm_[:, i]))
        y = torch.stack(ys, dim=1) + u * self.d
        return x + self.out_proj(y * F.silu(z))


@capture("mamba-train", "two selective state-space (Mamba-like) blocks in plain torch: RMSNorm by hand, causal "
         "depthwise conv1d, softplus, an unrolled scan of 32 steps (einsum), bf16 autocast, fused AdamW "
         "(foreach on a CPU); 8 x 32 x 512 on a GPU")
def mamba_train():
    b, t, d, vocab = (8, 32, 512, 4096) if gpu() else (2, 8, 32, 64)
    m = nn.ModuleDict({"emb": nn.Embedding(vocab, d), "l0": Mamba(d), "l1": Mamba(d), "head": nn.Linear(d, vocab)})
    idx, tgt = torch.randint(0, vocab, (b, t)), torch.randint(0, vocab, (b, t))

    def loss():
        with autocast():
            h = m["l1"](m["l0"](m["emb"](idx)))
            return F.cross_entropy(m["head"](h).flatten(0, 1).float(), tgt.flatten())

    opt = torch.optim.AdamW(m.parameters(), lr=1e-3, fused=gpu())
    return cm.train_step(m, loss, opt)


class Attention(nn.Module):
    """Multi-head attention with an optional KV cache for self-attention and fixed keys for cross-attention."""

    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))

    def split(self, x):
        b, t, d = x.shape
        return x.view(b, t, self.heads, d // self.heads).transpose(1, 2)

    def forward(self, x, mem=None, cache=None, causal=False):
        q = self.split(self.q(x))
        if mem is not None:
            k, v = mem
        else:
            k, v = self.split(self.k(x)), self.split(self.v(x))
            if cache is not None:
                if cache:
                    k, v = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)
                cache[:] = [k, v]
        y = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        b, h, t, e = y.shape
        return self.o(y.transpose(1, 2).reshape(b, t, h * e))


@capture("whisper-infer", "Whisper-like encoder-decoder in fp16, inference_mode: conv1d stem (GELU), sinusoidal "
         "positions, 2 encoder layers, greedy decoding of 8 tokens (self-attention KV cache with torch.cat, "
         "cross-attention over the encoder output, argmax); 4 x 80 mels x 1000 frames on a GPU")
def whisper_infer():
    b, mels, frames, d, heads, vocab = (4, 80, 1000, 384, 6, 8192) if gpu() else (1, 8, 40, 32, 2, 64)
    dtype = torch.float16 if gpu() else torch.float32

    class Layer(nn.Module):
        def __init__(self, cross: bool):
            super().__init__()
            self.ln1, self.attn = nn.LayerNorm(d), Attention(d, heads)
            self.cross = Attention(d, heads) if cross else None
            self.lnc = nn.LayerNorm(d) if cross else None
            self.ln2 = nn.LayerNorm(d)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

        def forward(self, x, mem=None, cache=None):
            x = x + self.attn(self.ln1(x), cache=cache)
            if self.cross is not None:
                x = x + self.cross(self.lnc(x), mem=mem)
            return x + self.mlp(self.ln2(x))

    conv1, conv2 = nn.Conv1d(mels, d, 3, padding=1), nn.Conv1d(d, d, 3, stride=2, padding=1)
    enc = nn.ModuleList(Layer(False) for _ in range(2))
    dec = nn.ModuleList(Layer(True) for _ in range(2))
    emb, ln, pos_dec = nn.Embedding(vocab, d), nn.LayerNorm(d), nn.Embedding(64, d)
    for mod in (conv1, conv2, enc, dec, emb, ln, pos_dec):
        mod.to(dtype).eval()
    mel = torch.randn(b, mels, frames, dtype=dtype)
    steps = 8

    def step():
        with torch.inference_mode():
            x = F.gelu(conv2(F.gelu(conv1(mel)))).transpose(1, 2)
            n = x.shape[1]
            inv = torch.exp(-math.log(10000) * torch.arange(d // 2) / (d // 2 - 1))
            ang = torch.arange(n)[:, None] * inv[None]
            x = x + torch.cat([ang.sin(), ang.cos()], 1).to(dtype)
            for layer in enc:
                x = layer(x)
            mems = [(lay.cross.split(lay.cross.k(x)), lay.cross.split(lay.cross.v(x))) for lay in dec]
            caches = [[] for _ in dec]
            tok = torch.zeros(b, 1, dtype=torch.long)
            out = [tok]
            for i in range(steps):
                h = emb(tok) + pos_dec.weight[i]
                for lay, mem, cache in zip(dec, mems, caches, strict=True):
                    h = lay(h, mem=mem, cache=cache)
                tok = (ln(h) @ emb.weight.T).argmax(-1)
                out.append(tok)
            torch.cat(out, 1)

    return step


@capture("sample-infer", "decoder-only generation of 8 tokens in bf16 with a KV cache: temperature, repetition "
         "penalty (gather, where, scatter), top-k, top-p (sort, softmax, cumsum, scatter), multinomial; "
         "8 sequences of a 256-token prompt, vocab 32000, on a GPU")
def sample_infer():
    b, prompt, d, heads, vocab, layers = (8, 256, 512, 8, 32000, 2) if gpu() else (2, 16, 32, 2, 100, 1)
    dtype = torch.bfloat16 if gpu() else torch.float32

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2, self.attn = nn.LayerNorm(d), nn.LayerNorm(d), Attention(d, heads)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"), nn.Linear(4 * d, d))

        def forward(self, x, cache, causal):
            x = x + self.attn(self.ln1(x), cache=cache, causal=causal)
            return x + self.mlp(self.ln2(x))

    emb, blocks, ln = nn.Embedding(vocab, d), nn.ModuleList(Block() for _ in range(layers)), nn.LayerNorm(d)
    for mod in (emb, blocks, ln):
        mod.to(dtype).eval()
    ids0 = torch.randint(0, vocab, (b, prompt))
    gen = torch.Generator(device=torch.get_default_device()).manual_seed(0)

    def logits(x, caches, causal):
        h = emb(x)
        for blk, cache in zip(blocks, caches, strict=True):
            h = blk(h, cache, causal)
        return (ln(h[:, -1]) @ emb.weight.T).float()

    def step():
        with torch.no_grad():
            caches = [[] for _ in blocks]
            ids = ids0
            lg = logits(ids, caches, True)
            for _ in range(8):
                lg = lg / 0.8
                seen = torch.gather(lg, 1, ids)
                lg = lg.scatter(1, ids, torch.where(seen > 0, seen / 1.2, seen * 1.2))
                kth = torch.topk(lg, 50, dim=-1).values[:, -1:]
                lg = lg.masked_fill(lg < kth, float("-inf"))
                srt, order = torch.sort(lg, descending=True, dim=-1)
                cum = srt.softmax(-1).cumsum(-1)
                drop = cum - srt.softmax(-1) > 0.9
                lg = lg.masked_fill(drop.scatter(1, order, drop), float("-inf"))
                nxt = torch.multinomial(lg.softmax(-1), 1, generator=gen)
                ids = torch.cat([ids, nxt], 1)
                lg = logits(nxt, caches, False)

    return step


# ---------------------------------------------------------------- generative vision


class ResBlock(nn.Module):
    def __init__(self, cin: int, cout: int, tdim: int):
        super().__init__()
        self.n1, self.c1 = nn.GroupNorm(8, cin), nn.Conv2d(cin, cout, 3, padding=1)
        self.t = nn.Linear(tdim, cout)
        self.n2, self.c2 = nn.GroupNorm(8, cout), nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x, temb):
        h = self.c1(F.silu(self.n1(x))) + self.t(temb)[:, :, None, None]
        return self.skip(x) + self.c2(F.silu(self.n2(h)))


class AttnBlock(nn.Module):
    def __init__(self, c: int):
        super().__init__()
        self.norm, self.qkv, self.out = nn.GroupNorm(8, c), nn.Conv2d(c, 3 * c, 1), nn.Conv2d(c, c, 1)

    def forward(self, x):
        b, c, h, w = x.shape
        q, k, v = self.qkv(self.norm(x)).reshape(b, 3, 4, c // 4, h * w).transpose(-1, -2).unbind(1)
        y = F.scaled_dot_product_attention(q, k, v).transpose(-1, -2).reshape(b, c, h, w)
        return x + self.out(y)


@capture("diffusion-train", "DDPM step of a small UNet: sinusoidal timestep embedding, GroupNorm, SiLU, residual "
         "blocks, avg-pool down, nearest upsampling, a self-attention block, skip concatenation; noise "
         "schedule gathered by timestep, MSE; AdamW; 32 x 3 x 64 x 64 on a GPU")
def diffusion_train():
    n, hw, c = (32, 64, 64) if gpu() else (2, 16, 16)
    tdim = 4 * c

    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.temb = nn.Sequential(nn.Linear(c, tdim), nn.SiLU(), nn.Linear(tdim, tdim))
            self.inp = nn.Conv2d(3, c, 3, padding=1)
            self.d1, self.d2 = ResBlock(c, c, tdim), ResBlock(c, 2 * c, tdim)
            self.mid, self.attn = ResBlock(2 * c, 2 * c, tdim), AttnBlock(2 * c)
            self.u2, self.u1 = ResBlock(4 * c, c, tdim), ResBlock(2 * c, c, tdim)
            self.out = nn.Sequential(nn.GroupNorm(8, c), nn.SiLU(), nn.Conv2d(c, 3, 3, padding=1))

        def forward(self, x, t):
            half = c // 2
            f = torch.exp(-math.log(10000) * torch.arange(half) / half)
            e = t.float()[:, None] * f[None]
            temb = self.temb(torch.cat([e.sin(), e.cos()], 1))
            h1 = self.d1(self.inp(x), temb)
            h2 = self.d2(F.avg_pool2d(h1, 2), temb)
            m = self.attn(self.mid(F.avg_pool2d(h2, 2), temb))
            u = self.u2(torch.cat([F.interpolate(m, scale_factor=2, mode="nearest"), h2], 1), temb)
            u = self.u1(torch.cat([F.interpolate(u, scale_factor=2, mode="nearest"), h1], 1), temb)
            return self.out(u)

    m = UNet()
    betas = torch.linspace(1e-4, 0.02, 1000)
    abar = torch.cumprod(1 - betas, 0)
    x0 = torch.randn(n, 3, hw, hw)
    opt = torch.optim.AdamW(m.parameters(), lr=2e-4)

    def loss():
        t = torch.randint(0, 1000, (n,))
        noise = torch.randn_like(x0)
        a = abar.gather(0, t)[:, None, None, None]
        xt = a.sqrt() * x0 + (1 - a).sqrt() * noise
        with autocast():
            return F.mse_loss(m(xt, t).float(), noise)

    return cm.train_step(m, loss, opt)


# ---------------------------------------------------------------- post-processing, quantisation, linear algebra


@capture("detect-infer", "a detector's post-processing: sigmoid, topk, sort, IoU by broadcasting, a greedy NMS "
         "loop (argmax, where), nonzero, masked_select, bincount, unique, scatter_reduce (amax), grid_sample, "
         "bilinear interpolate, searchsorted, cumsum; 8 images x 20000 anchors on a GPU")
def detect_infer():
    b, anchors, classes, hw = (8, 20000, 80, 128) if gpu() else (2, 200, 8, 16)
    feats = torch.randn(b, 64, hw // 4, hw // 4)
    logits = torch.randn(b, anchors, classes)
    xy = torch.rand(b, anchors, 2) * hw
    wh = torch.rand(b, anchors, 2) * 16 + 1
    thresholds = torch.linspace(0.1, 0.9, 9)

    def step():
        with torch.inference_mode():
            scores = logits.sigmoid()
            best, cls = scores.max(-1)
            top, idx = torch.topk(best, 1000 if gpu() else 50, dim=1)
            boxes = torch.cat([xy - wh / 2, xy + wh / 2], -1).gather(1, idx[..., None].expand(-1, -1, 4))
            lt = torch.max(boxes[:, :, None, :2], boxes[:, None, :, :2])
            rb = torch.min(boxes[:, :, None, 2:], boxes[:, None, :, 2:])
            inter = (rb - lt).clamp(min=0).prod(-1)
            area = (boxes[..., 2:] - boxes[..., :2]).prod(-1)
            iou = inter / (area[:, :, None] + area[:, None, :] - inter)
            alive = top > 0.5
            keep = torch.zeros_like(alive)
            for _ in range(10):
                s = torch.where(alive, top, torch.zeros_like(top))
                j = s.argmax(1)
                keep.scatter_(1, j[:, None], True)
                alive &= iou.gather(1, j[:, None, None].expand(-1, 1, iou.shape[2])).squeeze(1) < 0.5
            kept = torch.masked_select(top, keep)
            torch.nonzero(keep)
            labels = cls.gather(1, idx)[keep]
            torch.bincount(labels, minlength=classes)
            torch.unique(labels, return_counts=True)
            torch.zeros(b, classes).scatter_reduce(1, cls.gather(1, idx), top, reduce="amax", include_self=False)
            torch.searchsorted(thresholds, kept.contiguous())
            torch.sort(kept, descending=True)
            kept.cumsum(0)
            grid = (boxes[:, :64, :2] / hw * 2 - 1)[:, :, None, :]
            F.grid_sample(feats, grid, mode="bilinear", align_corners=False)
            F.interpolate(feats, scale_factor=2, mode="bilinear", align_corners=False)

    return step


@capture("int8-infer", "int8 inference of an MLP: per-token dynamic quantisation (abs, amax, div, round, clamp, "
         "to int8), torch._int_mm, dequantisation, and weight-only int8 (_weight_int8pack_mm) where this torch "
         "has it; 512 tokens x 2048 -> 8192 -> 2048 on a GPU")
def int8_infer():
    t, d, f = (512, 2048, 8192) if gpu() else (32, 64, 128)
    dtype = torch.bfloat16 if gpu() else torch.float32
    x = torch.randn(t, d, dtype=dtype)
    w1, w2 = torch.randn(f, d, dtype=dtype), torch.randn(d, f, dtype=dtype)

    def quant(a, dim):
        scale = a.abs().amax(dim=dim, keepdim=True).float().clamp(min=1e-5) / 127
        return (a.float() / scale).round().clamp(-127, 127).to(torch.int8), scale

    q1, s1 = quant(w1, 1)
    q2, s2 = quant(w2, 1)
    pack = getattr(torch.ops.aten, "_weight_int8pack_mm", None)

    def step():
        with torch.inference_mode():
            qx, sx = quant(x, 1)
            h = (torch._int_mm(qx, q1.t()).float() * sx * s1.t()).to(dtype)
            h = F.gelu(h)
            qh, sh = quant(h, 1)
            y = (torch._int_mm(qh, q2.t()).float() * sh * s2.t()).to(dtype)
            if pack is not None:
                try:
                    pack(x, q1, s1.squeeze(1).to(dtype))
                except RuntimeError:  # not on this device or dtype
                    pass
            y.sum()

    return step


@capture("linalg-step", "a second-order preconditioner step (Shampoo/K-FAC-like) in fp32: covariances (mm), "
         "eigh and an inverse 4th root, cholesky + cholesky_solve, linalg.solve, qr, svd, inv; 512 x 512 "
         "factors on a GPU")
def linalg_step():
    n, m = (512, 2048) if gpu() else (16, 32)
    g = torch.randn(n, m)
    eye = torch.eye(n)

    def step():
        with torch.no_grad():
            left = g @ g.T + 1e-3 * eye
            right = g.T @ g
            vals, vecs = torch.linalg.eigh(left)
            root = vecs @ torch.diag(vals.clamp(min=1e-6) ** -0.25) @ vecs.T
            pre = root @ g
            chol = torch.linalg.cholesky(left)
            torch.cholesky_solve(g, chol)
            torch.linalg.solve(left, g)
            torch.linalg.qr(g.T)
            torch.linalg.svd(g[:, : n // 2], full_matrices=False)
            torch.linalg.inv(left)
            (pre * right[:n].sum(0)[None]).sum()

    return step


@capture("speech-ctc-train", "conv2d subsampling (2 strided convs), a bidirectional GRU (2 layers) over packed "
         "sequences of unequal lengths, log_softmax, ctc_loss, Adam; 16 utterances x 400 frames x 80 mels on "
         "a GPU")
def speech_ctc_train():
    b, frames, mels, hidden, vocab = (16, 400, 80, 256, 32) if gpu() else (2, 40, 16, 16, 8)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.sub = nn.Sequential(nn.Conv2d(1, 32, 3, 2), nn.ReLU(), nn.Conv2d(32, 32, 3, 2), nn.ReLU())
            feat = 32 * (((mels - 1) // 2 - 1) // 2)
            self.proj = nn.Linear(feat, hidden)
            self.rnn = nn.GRU(hidden, hidden, num_layers=2, batch_first=True, bidirectional=True)
            self.out = nn.Linear(2 * hidden, vocab)

        def forward(self, x, lengths):
            h = self.sub(x.unsqueeze(1))
            h = self.proj(h.permute(0, 2, 1, 3).flatten(2))
            packed = nn.utils.rnn.pack_padded_sequence(h, lengths, batch_first=True, enforce_sorted=False)
            y, _ = self.rnn(packed)
            y, _ = nn.utils.rnn.pad_packed_sequence(y, batch_first=True, total_length=h.shape[1])
            return self.out(y).log_softmax(-1)

    m = Net()
    x = torch.randn(b, frames, mels)
    sub = ((frames - 1) // 2 - 1) // 2
    lengths = torch.linspace(sub // 2, sub, b, device="cpu").long()
    targets = torch.randint(1, vocab, (b, sub // 4))
    target_lengths = torch.full((b,), sub // 4, dtype=torch.long)
    opt = torch.optim.Adam(m.parameters(), lr=1e-3)

    def loss():
        lp = m(x, lengths).transpose(0, 1)
        return F.ctc_loss(lp, targets, lengths.to(lp.device), target_lengths, zero_infinity=True)

    return cm.train_step(m, loss, opt, clip=1.0)


# ---------------------------------------------------------------- runner


ZOO4 = [n for n in cm.CAPTURES if n not in _EARLIER]


def main(argv: list[str] | None = None) -> int:
    return cm.main(argv, names_of=ZOO4, script=__file__, description=__doc__.split("\n\n")[0])


if __name__ == "__main__":
    raise SystemExit(main())

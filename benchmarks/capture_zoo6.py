"""Capture steps of model families none of the earlier captures hold (round 6), with FlopCounterMode beside each.

The method of `capture_cpu_models.py` (one warm-up step, one step under torch.profiler with
record_shapes, exported to NAME.json, then one step under FlopCounterMode written to NAME.flops.json),
at GPU sizes on a GPU and at small sizes on a CPU:

- t5-train:        a T5-style encoder-decoder: relative position bias from log-spaced buckets (abs, log,
                   min, where), T5 layer norm by hand (pow, mean, rsqrt), cross-attention, a shared
                   embedding scaled into the head; Adagrad(foreach);
- mixer-train:     an MLP-Mixer: patch embedding, token-mixing MLPs over the transposed patches,
                   channel-mixing MLPs, LayerNorm, GELU, global average; NAdam(foreach, decoupled decay);
- perceiver-train: a Perceiver: learned latents cross-attending to Fourier-featured inputs through
                   nn.MultiheadAttention with kdim/vdim, latent self-attention; RAdam(foreach);
- vae-vq-train:    a conv VAE (mu/logvar, reparameterisation, KL) and a VQ-VAE codebook (squared
                   distances, argmin, embedding lookup, straight-through, codebook and commitment
                   losses); Adagrad(fused);
- nerf-train:      NeRF-style positional encoding (sin, cos of scaled points), an MLP with a skip cat,
                   volume rendering (relu density, exp, cumprod transmittance, weights, sums), plus
                   logcumsumexp and cummax along the rays; Adamax(foreach);
- clip-train:      CLIP-style contrastive learning: a patch image tower and a text tower with an
                   Embedding(max_norm) (embedding_renorm_), F.normalize, exp'd logit scale, symmetric
                   cross-entropy; AdamW(foreach);
- gqa-lora-train:  grouped-query attention (repeat_interleave of K/V heads) with LoRA adapters (dropout,
                   frozen base weights) trained one step, then greedy decoding with a KV cache written by
                   index_copy_; SGD(momentum, foreach);
- sr-param-train:  pixel_shuffle super-resolution (ESPCN-like) with parametrizations: weight_norm,
                   spectral_norm and orthogonal (torch.nn.utils.parametrize); L1; Adam;
- dist-sparse-train: torch.distributions (Normal rsample/log_prob/entropy, Categorical sample/log_prob,
                   MultivariateNormal log_prob, Dirichlet and Gamma sampling, kl_divergence), a graph
                   layer by torch.sparse.mm (COO) and a sparse CSR matmul; SGD (jagged nested tensors
                   through SDPA run on this CPU, but FlopCounterMode fails on them: "Given dimension -2
                   is irregular");
- ddp-gloo-train:  a DistributedDataParallel step over gloo with 2 processes on the CPU (rank 0
                   profiled; gradient all_reduce buckets), then an all_gather_into_tensor, a
                   reduce_scatter_tensor and an all_reduce of a metric.

    python benchmarks/capture_zoo6.py --out DIR [NAME ...] [--device cuda]   # each in its own process
    python benchmarks/capture_zoo6.py --list
"""

from __future__ import annotations

import math
import os
import socket
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


# ---------------------------------------------------------------- T5


def _t5_buckets(rel: torch.Tensor, bidirectional: bool, buckets: int, max_distance: int) -> torch.Tensor:
    """T5's relative position buckets: exact for small distances, log-spaced up to max_distance."""
    out = torch.zeros_like(rel)
    if bidirectional:
        buckets //= 2
        out = out + (rel > 0).long() * buckets
        rel = rel.abs()
    else:
        rel = -torch.min(rel, torch.zeros_like(rel))
    exact = buckets // 2
    small = rel < exact
    large = exact + (torch.log(rel.float() / exact) / math.log(max_distance / exact) * (buckets - exact)).long()
    large = torch.min(large, torch.full_like(large, buckets - 1))
    return out + torch.where(small, rel, large)


class T5Norm(nn.Module):
    def __init__(self, d: int):
        super().__init__()
        self.w = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return self.w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))


class T5Attention(nn.Module):
    def __init__(self, d: int, heads: int, bias_table: bool, bidirectional: bool):
        super().__init__()
        self.h, self.bidi = heads, bidirectional
        self.q, self.k, self.v, self.o = (nn.Linear(d, d, bias=False) for _ in range(4))
        self.rel = nn.Embedding(32, heads) if bias_table else None

    def bias(self, sq: int, sk: int):
        ctx = torch.arange(sq)[:, None]
        mem = torch.arange(sk)[None, :]
        b = _t5_buckets(mem - ctx, self.bidi, 32, 128)
        return self.rel(b).permute(2, 0, 1)[None]  # [1, heads, sq, sk]

    def forward(self, x, kv=None, bias=None, causal=False):
        kv = x if kv is None else kv
        b, s, d = x.shape
        sk = kv.shape[1]
        q = self.q(x).view(b, s, self.h, -1).transpose(1, 2)
        k = self.k(kv).view(b, sk, self.h, -1).transpose(1, 2)
        v = self.v(kv).view(b, sk, self.h, -1).transpose(1, 2)
        scores = q @ k.transpose(-1, -2)  # T5 does not scale its scores
        if bias is not None:
            scores = scores + bias
        if causal:
            scores = scores.masked_fill(torch.ones(s, sk, dtype=torch.bool).triu(1), float("-inf"))
        y = F.dropout(scores.softmax(-1), 0.1, self.training) @ v
        return self.o(y.transpose(1, 2).reshape(b, s, d))


class T5Layer(nn.Module):
    def __init__(self, d: int, heads: int, first: bool, decoder: bool):
        super().__init__()
        self.decoder = decoder
        self.n1, self.n3 = T5Norm(d), T5Norm(d)
        self.att = T5Attention(d, heads, first, not decoder)
        if decoder:
            self.n2, self.cross = T5Norm(d), T5Attention(d, heads, False, True)
        self.wi, self.wo = nn.Linear(d, 2 * d, bias=False), nn.Linear(2 * d, d, bias=False)

    def forward(self, x, bias, enc=None):
        x = x + self.att(self.n1(x), bias=bias, causal=self.decoder)
        if self.decoder:
            x = x + self.cross(self.n2(x), kv=enc)
        return x + self.wo(F.dropout(F.relu(self.wi(self.n3(x))), 0.1, self.training))


@capture("t5-train", "T5-style encoder-decoder: relative position bias buckets (abs, log, min, where), T5 norm "
         "(pow, mean, rsqrt), unscaled attention with the bias, cross-attention, a shared embedding; "
         "Adagrad(foreach); 8 x 128 tokens, d 256 on a GPU")
def t5_train():
    b, s, d, heads, vocab = (8, 128, 256, 4, 4096) if gpu() else (2, 12, 16, 2, 50)

    class T5(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(vocab, d)
            self.enc = nn.ModuleList(T5Layer(d, heads, i == 0, False) for i in range(2))
            self.dec = nn.ModuleList(T5Layer(d, heads, i == 0, True) for i in range(2))
            self.ne, self.nd = T5Norm(d), T5Norm(d)

        def forward(self, src, tgt):
            x = self.emb(src)
            eb = self.enc[0].att.bias(s, s)
            for layer in self.enc:
                x = layer(x, eb)
            enc = self.ne(x)
            y = self.emb(tgt)
            db = self.dec[0].att.bias(s, s)
            for layer in self.dec:
                y = layer(y, db, enc)
            return self.nd(y) * d ** -0.5 @ self.emb.weight.t()

    m = T5()
    src, tgt = torch.randint(0, vocab, (b, s)), torch.randint(0, vocab, (b, s))
    opt = torch.optim.Adagrad(m.parameters(), lr=1e-2, foreach=True)
    return cm.train_step(m, lambda: F.cross_entropy(m(src, tgt).flatten(0, 1), tgt.flatten()), opt)


# ---------------------------------------------------------------- MLP-Mixer


class MixerBlock(nn.Module):
    def __init__(self, patches: int, d: int):
        super().__init__()
        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.tok = nn.Sequential(nn.Linear(patches, 2 * patches), nn.GELU(), nn.Linear(2 * patches, patches))
        self.ch = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        x = x + self.tok(self.n1(x).transpose(1, 2)).transpose(1, 2)
        return x + self.ch(self.n2(x))


@capture("mixer-train", "MLP-Mixer: patch embedding, token-mixing MLPs over transposed patches, channel-mixing "
         "MLPs, LayerNorm, GELU, global average; NAdam(foreach, decoupled weight decay); 32 x 3 x 64 x 64 on a GPU")
def mixer_train():
    n, img, patch, d, classes = (32, 64, 8, 256, 100) if gpu() else (2, 16, 4, 16, 5)
    patches = (img // patch) ** 2

    class Mixer(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Conv2d(3, d, patch, patch)
            self.blocks = nn.Sequential(MixerBlock(patches, d), MixerBlock(patches, d))
            self.norm, self.head = nn.LayerNorm(d), nn.Linear(d, classes)

        def forward(self, x):
            x = self.blocks(self.embed(x).flatten(2).transpose(1, 2))
            return self.head(self.norm(x).mean(1))

    m = Mixer()
    x, y = torch.randn(n, 3, img, img), torch.randint(0, classes, (n,))
    opt = torch.optim.NAdam(m.parameters(), lr=1e-3, weight_decay=0.01, decoupled_weight_decay=True, foreach=True)
    return cm.train_step(m, lambda: F.cross_entropy(m(x), y), opt)


# ---------------------------------------------------------------- Perceiver


@capture("perceiver-train", "Perceiver: learned latents cross-attending to Fourier-featured inputs "
         "(nn.MultiheadAttention with kdim/vdim), latent self-attention, mean readout; RAdam(foreach); "
         "8 x 1024 inputs, 64 latents of 256 on a GPU")
def perceiver_train():
    b, n, fin, lat, d, bands, classes = (8, 1024, 32, 64, 256, 8, 10) if gpu() else (2, 24, 6, 4, 16, 3, 3)
    kv_dim = fin + 2 * bands

    class Perceiver(nn.Module):
        def __init__(self):
            super().__init__()
            self.latents = nn.Parameter(torch.randn(lat, d) * 0.02)
            self.kv_norm, self.q_norm = nn.LayerNorm(kv_dim), nn.LayerNorm(d)
            self.cross = nn.MultiheadAttention(d, 1, kdim=kv_dim, vdim=kv_dim, batch_first=True)
            self.self_attn = nn.TransformerEncoderLayer(d, 2, 2 * d, dropout=0.1, batch_first=True, norm_first=True)
            self.head = nn.Linear(d, classes)

        def forward(self, x, pos):
            freqs = torch.linspace(1.0, bands, bands)
            ang = pos[..., None] * freqs * math.pi
            kv = self.kv_norm(torch.cat([x, torch.sin(ang), torch.cos(ang)], -1))
            q = self.q_norm(self.latents).expand(x.shape[0], -1, -1)
            z = q + self.cross(q, kv, kv, need_weights=False)[0]
            return self.head(self.self_attn(z).mean(1))

    m = Perceiver()
    x, pos = torch.randn(b, n, fin), torch.linspace(-1, 1, n)[None].expand(b, -1)
    y = torch.randint(0, classes, (b,))
    opt = torch.optim.RAdam(m.parameters(), lr=1e-3, foreach=True)
    return cm.train_step(m, lambda: F.cross_entropy(m(x, pos), y), opt)


# ---------------------------------------------------------------- VAE and VQ-VAE


@capture("vae-vq-train", "a conv VAE (mu/logvar, reparameterisation with randn_like and exp, KL, BCE) and a "
         "VQ-VAE (squared distances to a codebook, argmin, embedding lookup, straight-through, codebook and "
         "commitment MSE); Adagrad(fused); 32 x 1 x 32 x 32 on a GPU")
def vae_vq_train():
    n, c, z, codes = (32, 32, 16, 512) if gpu() else (2, 4, 4, 8)

    def enc(out):
        return nn.Sequential(nn.Conv2d(1, c, 4, 2, 1), nn.ReLU(), nn.Conv2d(c, out, 4, 2, 1))

    def dec(inp):
        return nn.Sequential(nn.ConvTranspose2d(inp, c, 4, 2, 1), nn.ReLU(), nn.ConvTranspose2d(c, 1, 4, 2, 1))

    class Both(nn.Module):
        def __init__(self):
            super().__init__()
            self.venc, self.vdec = enc(2 * z), dec(z)
            self.qenc, self.qdec = enc(z), dec(z)
            self.codebook = nn.Embedding(codes, z)

        def vae(self, x):
            mu, logvar = self.venc(x).chunk(2, 1)
            h = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar)
            rec = F.binary_cross_entropy_with_logits(self.vdec(h), x, reduction="sum") / x.shape[0]
            kl = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp()) / x.shape[0]
            return rec + kl

        def vq(self, x):
            ze = self.qenc(x).permute(0, 2, 3, 1)  # [n, h, w, z]
            flat = ze.reshape(-1, z)
            dist = (flat.pow(2).sum(1, keepdim=True) - 2 * flat @ self.codebook.weight.t()
                    + self.codebook.weight.pow(2).sum(1))
            idx = dist.argmin(1)
            zq = self.codebook(idx).view_as(ze)
            loss = F.mse_loss(zq, ze.detach()) + 0.25 * F.mse_loss(ze, zq.detach())
            zq = ze + (zq - ze).detach()  # straight-through
            return loss + F.mse_loss(self.qdec(zq.permute(0, 3, 1, 2)), x)

    m = Both()
    x = torch.rand(n, 1, 32 if gpu() else 8, 32 if gpu() else 8)
    opt = torch.optim.Adagrad(m.parameters(), lr=1e-2, fused=True)
    return cm.train_step(m, lambda: m.vae(x) + m.vq(x), opt)


# ---------------------------------------------------------------- NeRF


@capture("nerf-train", "NeRF-style: positional encoding (sin/cos of points at 2^k frequencies), an MLP with a "
         "skip cat, volume rendering (relu density, exp, cumprod transmittance, weights, sums), logcumsumexp and "
         "cummax along the rays; Adamax(foreach); 1024 rays of 64 samples on a GPU")
def nerf_train():
    rays, samples, freqs, w = (1024, 64, 10, 128) if gpu() else (8, 6, 3, 16)
    enc_dim = 3 + 3 * 2 * freqs

    class NeRF(nn.Module):
        def __init__(self):
            super().__init__()
            self.l1 = nn.Sequential(nn.Linear(enc_dim, w), nn.ReLU(), nn.Linear(w, w), nn.ReLU())
            self.l2 = nn.Sequential(nn.Linear(w + enc_dim, w), nn.ReLU())
            self.sigma, self.rgb = nn.Linear(w, 1), nn.Linear(w, 3)

        def forward(self, pts):
            scales = 2.0 ** torch.arange(freqs).float()
            ang = (pts[..., None, :] * scales[:, None]).flatten(-2)
            enc = torch.cat([pts, torch.sin(ang), torch.cos(ang)], -1)
            h = self.l2(torch.cat([self.l1(enc), enc], -1))
            return F.relu(self.sigma(h)).squeeze(-1), torch.sigmoid(self.rgb(h))

    m = NeRF()
    origins, dirs = torch.randn(rays, 3), F.normalize(torch.randn(rays, 3), dim=-1)
    t = torch.linspace(2.0, 6.0, samples).expand(rays, samples)
    target = torch.rand(rays, 3)
    opt = torch.optim.Adamax(m.parameters(), lr=1e-3, foreach=True)

    def loss():
        pts = origins[:, None] + dirs[:, None] * t[..., None]
        sigma, rgb = m(pts)
        delta = torch.cat([t[:, 1:] - t[:, :-1], torch.full((rays, 1), 1e10)], -1)
        alpha = 1 - torch.exp(-sigma * delta)
        trans = torch.cumprod(torch.cat([torch.ones(rays, 1), 1 - alpha + 1e-10], -1), -1)[:, :-1]
        weights = alpha * trans
        color = (weights[..., None] * rgb).sum(1)
        depth = (weights * t).sum(1)
        log_t = torch.logcumsumexp(torch.log(weights + 1e-10), -1)[:, -1]
        peak = torch.cummax(weights, -1).values[:, -1]
        return F.mse_loss(color, target) + 1e-3 * (depth.mean() + log_t.mean() - peak.mean())

    return cm.train_step(m, loss, opt)


# ---------------------------------------------------------------- CLIP


@capture("clip-train", "CLIP-style contrastive step: patch image tower, text tower with Embedding(max_norm) "
         "(embedding_renorm_), F.normalize, exp'd learnable logit scale, symmetric cross-entropy over the batch; "
         "AdamW(foreach); 64 pairs, d 256 on a GPU")
def clip_train():
    n, img, patch, vocab, s, d = (64, 32, 8, 1000, 16, 256) if gpu() else (4, 8, 4, 40, 6, 16)

    class CLIP(nn.Module):
        def __init__(self):
            super().__init__()
            self.patch = nn.Conv2d(3, d, patch, patch)
            self.img = nn.TransformerEncoderLayer(d, 2, 2 * d, dropout=0.0, batch_first=True)
            self.tok = nn.Embedding(vocab, d, max_norm=1.0)
            self.pos = nn.Parameter(torch.randn(s, d) * 0.01)
            self.txt = nn.TransformerEncoderLayer(d, 2, 2 * d, dropout=0.0, batch_first=True)
            self.pi, self.pt = nn.Linear(d, d, bias=False), nn.Linear(d, d, bias=False)
            self.logit_scale = nn.Parameter(torch.tensor(math.log(1 / 0.07)))

        def forward(self, x, ids):
            fi = self.img(self.patch(x).flatten(2).transpose(1, 2)).mean(1)
            ft = self.txt(self.tok(ids) + self.pos)
            ft = ft[torch.arange(ids.shape[0]), ids.argmax(-1)]  # the end-of-text token's feature
            fi, ft = F.normalize(self.pi(fi), dim=-1), F.normalize(self.pt(ft), dim=-1)
            logits = self.logit_scale.clamp(max=math.log(100)).exp() * fi @ ft.t()
            labels = torch.arange(x.shape[0])
            return (F.cross_entropy(logits, labels) + F.cross_entropy(logits.t(), labels)) / 2

    m = CLIP()
    x, ids = torch.randn(n, 3, img, img), torch.randint(0, vocab, (n, s))
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3, foreach=True)
    return cm.train_step(m, lambda: m(x, ids), opt)


# ---------------------------------------------------------------- grouped-query attention, LoRA, KV cache


class LoRALinear(nn.Module):
    def __init__(self, fin: int, fout: int, r: int):
        super().__init__()
        self.base = nn.Linear(fin, fout, bias=False)
        self.base.weight.requires_grad_(False)
        self.a, self.b = nn.Linear(fin, r, bias=False), nn.Linear(r, fout, bias=False)
        nn.init.normal_(self.b.weight, std=0.02)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        return self.base(x) + self.b(self.a(self.drop(x))) * 2.0


class GQABlock(nn.Module):
    def __init__(self, d: int, heads: int, kv_heads: int, r: int):
        super().__init__()
        self.h, self.kvh, self.hd = heads, kv_heads, d // heads
        self.q, self.v = LoRALinear(d, d, r), LoRALinear(d, kv_heads * self.hd, r)
        self.k = nn.Linear(d, kv_heads * self.hd, bias=False).requires_grad_(False)
        self.o = nn.Linear(d, d, bias=False).requires_grad_(False)
        self.norm = nn.LayerNorm(d)

    def forward(self, x, cache=None, at=None):
        b, s, d = x.shape
        h = self.norm(x)
        q = self.q(h).view(b, s, self.h, self.hd).transpose(1, 2)
        k = self.k(h).view(b, s, self.kvh, self.hd).transpose(1, 2)
        v = self.v(h).view(b, s, self.kvh, self.hd).transpose(1, 2)
        if cache is not None:  # static cache [2, b, kvh, max_len, hd]: write this step's K/V at position at
            cache[0].index_copy_(2, at, k)
            cache[1].index_copy_(2, at, v)
            k, v = cache[0][:, :, : int(at[-1]) + 1], cache[1][:, :, : int(at[-1]) + 1]
        rep = self.h // self.kvh
        k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=cache is None)
        return x + self.o(y.transpose(1, 2).reshape(b, s, d))


@capture("gqa-lora-train", "grouped-query attention (repeat_interleave of K/V heads) with LoRA adapters (dropout; "
         "frozen base weights) trained one step with SGD(momentum, foreach), then greedy decoding of 4 tokens "
         "with a static KV cache written by index_copy_; 8 x 128 tokens, d 512, 8 query / 2 KV heads on a GPU")
def gqa_lora_train():
    b, s, d, heads, kvh, r, vocab, new = (8, 128, 512, 8, 2, 8, 4096, 4) if gpu() else (2, 8, 16, 4, 2, 2, 30, 3)

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(vocab, d).requires_grad_(False)
            self.blocks = nn.ModuleList(GQABlock(d, heads, kvh, r) for _ in range(2))
            self.head = nn.Linear(d, vocab, bias=False).requires_grad_(False)

        def forward(self, idx, caches=None, at=None):
            x = self.emb(idx)
            for i, blk in enumerate(self.blocks):
                x = blk(x, None if caches is None else caches[i], at)
            return self.head(x)

    m = LM()
    idx = torch.randint(0, vocab, (b, s))
    params = [p for p in m.parameters() if p.requires_grad]
    opt = torch.optim.SGD(params, lr=1e-2, momentum=0.9, foreach=True)
    train = cm.train_step(m, lambda: F.cross_entropy(m(idx[:, :-1]).flatten(0, 1), idx[:, 1:].flatten()), opt)

    def step():
        m.train()
        train()
        m.eval()
        with torch.no_grad():
            caches = [torch.zeros(2, b, kvh, s + new, d // heads) for _ in m.blocks]
            m(idx, caches, torch.arange(s))  # prefill
            tok = idx[:, -1:]
            for i in range(new):
                tok = m(tok, caches, torch.tensor([s + i]))[:, -1].argmax(-1, keepdim=True)

    return step


# ---------------------------------------------------------------- super-resolution with parametrizations


@capture("sr-param-train", "ESPCN-like super-resolution: convolutions under parametrizations (weight_norm, "
         "spectral_norm, orthogonal 1x1 mixing by torch.nn.utils.parametrize), pixel_shuffle x2 and x2, L1; Adam; "
         "16 x 3 x 32 x 32 on a GPU")
def sr_param_train():
    from torch.nn.utils import parametrizations as P

    n, c, hw = (16, 64, 32) if gpu() else (2, 8, 6)

    class SR(nn.Module):
        def __init__(self):
            super().__init__()
            self.head = P.weight_norm(nn.Conv2d(3, c, 5, padding=2))
            self.body = P.spectral_norm(nn.Conv2d(c, c, 3, padding=1))
            self.mix = P.orthogonal(nn.Linear(c, c, bias=False))
            self.up1 = P.weight_norm(nn.Conv2d(c, 4 * c, 3, padding=1))
            self.up2 = nn.Conv2d(c, 3 * 4, 3, padding=1)

        def forward(self, x):
            h = torch.tanh(self.head(x))
            h = h + torch.tanh(self.body(h))
            h = self.mix(h.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
            h = F.pixel_shuffle(F.leaky_relu(self.up1(h), 0.1), 2)
            return F.pixel_shuffle(self.up2(h), 2)

    m = SR()
    x = torch.rand(n, 3, hw, hw)
    hr = torch.rand(n, 3, 4 * hw, 4 * hw)
    opt = torch.optim.Adam(m.parameters(), lr=1e-3)
    return cm.train_step(m, lambda: F.l1_loss(m(x), hr), opt)


# ---------------------------------------------------------------- distributions, sparse and jagged tensors


@capture("dist-sparse-train", "torch.distributions (Normal rsample/log_prob/entropy, Categorical sample/log_prob, "
         "MultivariateNormal log_prob, Dirichlet and Gamma samples, kl_divergence), a graph layer by torch.sparse.mm "
         "(COO) and a sparse CSR matmul; SGD; 256 nodes on a GPU")
def dist_sparse_train():
    from torch import distributions as D

    nodes, f, hid, acts = (256, 32, 64, 6) if gpu() else (10, 4, 8, 3)
    g = torch.Generator(device="cpu").manual_seed(0)
    edges = torch.randint(0, nodes, (2, 4 * nodes), generator=g).to(torch.get_default_device())
    adj = torch.sparse_coo_tensor(edges, torch.rand(edges.shape[1]), (nodes, nodes)).coalesce()
    adj_csr = adj.to_sparse_csr()

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.w1, self.w2 = nn.Linear(f, hid), nn.Linear(hid, hid)
            self.mu, self.logstd, self.pi = nn.Linear(hid, 2), nn.Linear(hid, 2), nn.Linear(hid, acts)

        def forward(self, x):
            h = F.relu(torch.sparse.mm(adj, self.w1(x)))
            h = F.relu(adj_csr @ self.w2(h))
            return h

    m = Net()
    x = torch.randn(nodes, f)
    cov = torch.eye(2) + 0.1
    opt = torch.optim.SGD(m.parameters(), lr=1e-2)

    def loss():
        h = m(x)
        pol = D.Normal(m.mu(h), m.logstd(h).clamp(-3, 1).exp())
        a = pol.rsample()
        cat = D.Categorical(logits=m.pi(h))
        choice = cat.sample()
        mvn = D.MultivariateNormal(torch.zeros(2), covariance_matrix=cov)
        conc = D.Dirichlet(torch.ones(acts)).sample((nodes,))
        gam = D.Gamma(torch.full((nodes,), 2.0), torch.ones(nodes)).sample()
        adv = mvn.log_prob(a.detach()) + gam
        kl = D.kl_divergence(cat, D.Categorical(probs=conc)).mean()
        pg = -(pol.log_prob(a).sum(-1) * adv).mean() - (cat.log_prob(choice) * adv).mean()
        return pg + kl - 0.01 * pol.entropy().mean()

    return cm.train_step(m, loss, opt)


# ---------------------------------------------------------------- DDP over gloo


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _ddp_step(rank: int):
    """rank's DDP model, optimizer and step (both ranks build the same ones, seeded alike)."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(0)
    b, fin, hid, classes = (64, 256, 512, 10) if gpu() else (4, 12, 24, 5)
    model = nn.Sequential(nn.Linear(fin, hid), nn.ReLU(), nn.Linear(hid, hid), nn.ReLU(), nn.Linear(hid, classes))
    ddp = DDP(model, bucket_cap_mb=0.001)  # small buckets: more than one gradient all_reduce
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-2, momentum=0.9)
    g = torch.Generator(device="cpu").manual_seed(rank)
    x, y = torch.randn(b, fin, generator=g), torch.randint(0, classes, (b,), generator=g)
    world = dist.get_world_size()

    def step():
        F.cross_entropy(ddp(x), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        with torch.no_grad():
            feats = model[0](x)
            gathered = torch.empty(world * feats.shape[0], feats.shape[1])
            dist.all_gather_into_tensor(gathered, feats)
            shard = torch.empty(gathered.shape[0] // world, gathered.shape[1])
            dist.reduce_scatter_tensor(shard, gathered)
            metric = torch.stack([shard.mean(), gathered.pow(2).mean()])
            dist.all_reduce(metric)

    return step


def _ddp_peer(rank: int, port: int, steps: int) -> None:
    """A rank other than 0: the same step as many times as rank 0 runs it (warm-up, profiled, counted)."""
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    step = _ddp_step(rank)
    for _ in range(steps):
        step()
    dist.destroy_process_group()


@capture("ddp-gloo-train", "DistributedDataParallel over gloo, 2 processes on the CPU (rank 0 profiled): an MLP "
         "step with small gradient buckets (all_reduce), SGD(momentum), then all_gather_into_tensor, "
         "reduce_scatter_tensor and an all_reduce of a metric; batch 64 per rank on a GPU")
def ddp_gloo_train():
    import torch.distributed as dist
    import torch.multiprocessing as mp

    if gpu():
        raise SystemExit("ddp-gloo-train runs on the CPU only (gloo)")
    port = _free_port()
    peer = mp.get_context("spawn").Process(target=_ddp_peer, args=(1, port, 3))
    peer.start()
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=2)
    return _ddp_step(0)


# ---------------------------------------------------------------- runner


ZOO6 = [n for n in cm.CAPTURES if n not in _EARLIER]


def main(argv: list[str] | None = None) -> int:
    return cm.main(argv, names_of=ZOO6, script=__file__, description=__doc__.split("\n\n")[0])


if __name__ == "__main__":
    raise SystemExit(main())

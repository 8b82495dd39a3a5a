"""Capture steps of model families none of the earlier captures hold (round 5), with FlopCounterMode beside each.

The method of `capture_cpu_models.py` (one warm-up step, one step under torch.profiler with
record_shapes, exported to NAME.json, then one step under FlopCounterMode written to NAME.flops.json),
at GPU sizes on a GPU and at small sizes on a CPU:

- gan-train:       a DCGAN-like step: a generator of ConvTranspose2d, BatchNorm2d, ReLU, Tanh; a discriminator
                   with spectral norm (power iteration: mv, normalize), LeakyReLU and InstanceNorm2d; two
                   Adam optimizers (betas 0.5), BCE with logits, the generator's fake detached for D;
- gpt-train:       a GPT-style decoder: complex rotary embeddings (view_as_complex, polar, view_as_real),
                   F.rms_norm, SDPA with is_causal and dropout, tied input/output embeddings, cross-entropy
                   with label smoothing and ignore_index, a LAMB-like optimizer written with _foreach ops
                   (trust ratios from _foreach_norm), clip_grad_norm_(foreach);
- deit-amp-train:  a DeiT-like step: patch embedding, class and distillation tokens, nn.MultiheadAttention
                   (training path), stochastic depth, mixup (lerp of images, soft targets), soft-target
                   cross-entropy plus a KL distillation loss, fp16 autocast on the CPU with a GradScaler
                   (_amp_foreach_non_finite_check_and_unscale_, _amp_update_scale_), Adam(amsgrad, foreach),
                   clip_grad_norm_(foreach) on the unscaled gradients;
- pyg-train:       a PyG graph classifier over a batch of 4 graphs: GATv2Conv with edge_attr, GINConv,
                   TransformerConv with edge features, global mean/max/add pooling, to_dense_batch and a
                   masked readout; Adam;
- recsys-train:    a DLRM-like step: EmbeddingBag tables (sum with per_sample_weights, mean) with sparse
                   gradients, a bottom MLP, pairwise interaction by bmm and the upper triangle gathered,
                   a top MLP, BCE; SGD with momentum over the sparse and dense parameters;
- audio-train:     an audio front-end and an LSTM over packed sequences: stft (Hann window), power, mel
                   filterbank matmul, log, SpecAugment (masked_fill over random time/frequency bands),
                   pack_padded_sequence, a 2-layer LSTM, pad_packed_sequence, istft of a predicted mask;
                   RMSprop;
- video-train:     a 3-d conv net: Conv3d (3x3x3 and factorized 1x3x3 / 3x1x1), BatchNorm3d, MaxPool3d,
                   AdaptiveAvgPool3d, trilinear upsampling, a residual, cross-entropy; SGD(momentum);
- retrieval-train: metric learning and retrieval: cdist, hard-negative mining (masked_fill, where, topk,
                   argsort), a triplet loss by gather, nn.Bilinear scoring, recall@k by sort, cumsum and
                   nonzero, scatter_reduce(mean) class centroids, index_put_; Rprop;
- asgd-lbfgs:      a small regression with LBFGS (closure, 3 iterations) and ASGD, and Adafactor where this
                   torch has it;
- gan-compiled:    the gan-train generator under torch.compile (Inductor C++ with cpp.enable_kernel_profile).

    python benchmarks/capture_zoo5.py --out DIR [NAME ...] [--device cuda]   # each in its own process
    python benchmarks/capture_zoo5.py --list
"""

from __future__ import annotations

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


def dev_type() -> str:
    return torch.get_default_device().type


# ---------------------------------------------------------------- GAN


def _generator(z: int, c: int) -> nn.Module:
    return nn.Sequential(
        nn.ConvTranspose2d(z, 4 * c, 4, 1, 0, bias=False), nn.BatchNorm2d(4 * c), nn.ReLU(True),
        nn.ConvTranspose2d(4 * c, 2 * c, 4, 2, 1, bias=False), nn.BatchNorm2d(2 * c), nn.ReLU(True),
        nn.ConvTranspose2d(2 * c, c, 4, 2, 1, bias=False), nn.BatchNorm2d(c), nn.ReLU(True),
        nn.ConvTranspose2d(c, 3, 4, 2, 1, bias=False), nn.Tanh())


def _discriminator(c: int) -> nn.Module:
    sn = nn.utils.spectral_norm
    return nn.Sequential(
        sn(nn.Conv2d(3, c, 4, 2, 1)), nn.LeakyReLU(0.2, True),
        sn(nn.Conv2d(c, 2 * c, 4, 2, 1)), nn.InstanceNorm2d(2 * c, affine=True), nn.LeakyReLU(0.2, True),
        sn(nn.Conv2d(2 * c, 4 * c, 4, 2, 1)), nn.InstanceNorm2d(4 * c, affine=True), nn.LeakyReLU(0.2, True),
        nn.Conv2d(4 * c, 1, 4, 1, 0), nn.Flatten())


def _gan_sizes():
    return (64, 100, 64) if gpu() else (4, 16, 8)


def _gan_step(compiled: bool):
    n, z, c = _gan_sizes()
    g, d = _generator(z, c), _discriminator(c)
    run_g = torch.compile(g) if compiled else g
    opt_g = torch.optim.Adam(g.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(d.parameters(), lr=2e-4, betas=(0.5, 0.999))
    real = torch.rand(n, 3, 32, 32) * 2 - 1
    ones, zeros = torch.ones(n, 1), torch.zeros(n, 1)

    def step():
        noise = torch.randn(n, z, 1, 1)
        fake = run_g(noise)
        loss_d = (F.binary_cross_entropy_with_logits(d(real), ones)
                  + F.binary_cross_entropy_with_logits(d(fake.detach()), zeros))
        opt_d.zero_grad(set_to_none=True)
        loss_d.backward()
        opt_d.step()
        loss_g = F.binary_cross_entropy_with_logits(d(fake), ones)
        opt_g.zero_grad(set_to_none=True)
        loss_g.backward()
        opt_g.step()

    return step


@capture("gan-train", "DCGAN-like step: ConvTranspose2d/BatchNorm2d/ReLU/Tanh generator; spectral-norm "
         "discriminator (LeakyReLU, InstanceNorm2d); two Adam (betas 0.5), BCE with logits; 64 x 3 x 32 x 32 "
         "on a GPU")
def gan_train():
    return _gan_step(compiled=False)


@capture("gan-compiled", "the gan-train step with the generator under torch.compile (Inductor, "
         "cpp.enable_kernel_profile)")
def gan_compiled():
    cm._kernel_profile()
    return _gan_step(compiled=True)


# ---------------------------------------------------------------- GPT with complex rotary, LAMB-like optimizer


class GPTBlock(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.w1, self.w2 = nn.Parameter(torch.ones(d)), nn.Parameter(torch.ones(d))
        self.qkv, self.o = nn.Linear(d, 3 * d, bias=False), nn.Linear(d, d, bias=False)
        self.up, self.down = nn.Linear(d, 4 * d, bias=False), nn.Linear(4 * d, d, bias=False)

    def forward(self, x, freqs):
        b, t, d = x.shape
        h = F.rms_norm(x, (d,), self.w1, 1e-6)
        q, k, v = self.qkv(h).view(b, t, 3, self.heads, d // self.heads).unbind(2)

        def rot(u):
            uc = torch.view_as_complex(u.float().reshape(*u.shape[:-1], -1, 2))
            return torch.view_as_real(uc * freqs[None, :, None]).flatten(3).type_as(u)

        q, k = rot(q).transpose(1, 2), rot(k).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v.transpose(1, 2), is_causal=True,
                                           dropout_p=0.1 if self.training else 0.0)
        x = x + self.o(y.transpose(1, 2).reshape(b, t, d))
        return x + self.down(F.gelu(self.up(F.rms_norm(x, (d,), self.w2, 1e-6))))


def _lamb_step(params, m, v, step: int, lr=1e-3, b1=0.9, b2=0.999, eps=1e-6, wd=0.01):
    """A LAMB-like update written with _foreach ops: Adam moments, a weight-decayed update, per-tensor trust
    ratios ||p|| / ||u||."""
    grads = [p.grad for p in params]
    torch._foreach_lerp_(m, grads, 1 - b1)
    torch._foreach_mul_(v, b2)
    torch._foreach_addcmul_(v, grads, grads, 1 - b2)
    mh = torch._foreach_div(m, 1 - b1 ** step)
    vh = torch._foreach_sqrt(torch._foreach_div(v, 1 - b2 ** step))
    torch._foreach_add_(vh, eps)
    upd = torch._foreach_div(mh, vh)
    torch._foreach_add_(upd, params, alpha=wd)
    pn, un = torch._foreach_norm(params), torch._foreach_norm(upd)
    ratio = [torch.where((a > 0) & (u > 0), a / u, torch.ones_like(a)) for a, u in zip(pn, un, strict=True)]
    torch._foreach_mul_(upd, ratio)
    torch._foreach_add_(params, upd, alpha=-lr)


@capture("gpt-train", "GPT-style decoder: complex rotary (view_as_complex, polar), F.rms_norm, SDPA(is_causal, "
         "dropout), tied embeddings, cross-entropy(label_smoothing, ignore_index), clip_grad_norm_(foreach), a "
         "LAMB-like _foreach optimizer; 8 x 256 tokens, d 512 on a GPU")
def gpt_train():
    b, t, d, heads, vocab, layers = (8, 256, 512, 8, 8192, 2) if gpu() else (2, 16, 32, 2, 96, 2)

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(vocab, d)
            self.blocks = nn.ModuleList(GPTBlock(d, heads) for _ in range(layers))
            self.wf = nn.Parameter(torch.ones(d))
            self.head = nn.Linear(d, vocab, bias=False)
            self.head.weight = self.emb.weight  # tied
            hd = d // heads
            inv = 1.0 / (10000 ** (torch.arange(0, hd, 2).float() / hd))
            ang = torch.outer(torch.arange(t).float(), inv)
            self.register_buffer("freqs", torch.polar(torch.ones_like(ang), ang), persistent=False)

        def forward(self, idx):
            x = self.emb(idx)
            for blk in self.blocks:
                x = blk(x, self.freqs)
            return self.head(F.rms_norm(x, (d,), self.wf, 1e-6))

    m = GPT()
    idx = torch.randint(0, vocab, (b, t))
    tgt = torch.cat([idx[:, 1:], torch.full((b, 1), -100)], 1)
    tgt[0, : t // 4] = -100  # a padded prompt
    params = list(m.parameters())
    mom = [torch.zeros_like(p) for p in params]
    var = [torch.zeros_like(p) for p in params]
    count = [0]

    def step():
        loss = F.cross_entropy(m(idx).flatten(0, 1), tgt.flatten(), ignore_index=-100, label_smoothing=0.1)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0, foreach=True)
        count[0] += 1
        with torch.no_grad():
            _lamb_step(params, mom, var, count[0])
        for p in params:
            p.grad = None

    return step


# ---------------------------------------------------------------- DeiT with AMP GradScaler


class DeiTBlock(nn.Module):
    def __init__(self, d: int, heads: int, drop_path: float):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, dropout=0.1, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Dropout(0.1), nn.Linear(4 * d, d))
        self.p = drop_path

    def drop(self, x):
        keep = torch.rand(x.shape[0], 1, 1) >= self.p
        return x * keep.to(x.dtype) / (1 - self.p)

    def forward(self, x):
        h = self.ln1(x)
        x = x + self.drop(self.attn(h, h, h, need_weights=False)[0])
        return x + self.drop(self.mlp(self.ln2(x)))


@capture("deit-amp-train", "DeiT-like: patch embedding, class + distillation tokens, nn.MultiheadAttention "
         "(training), stochastic depth, mixup, soft-target CE + KL distillation, fp16 autocast with a GradScaler, "
         "Adam(amsgrad, foreach), clip_grad_norm_(foreach); 32 x 3 x 64 x 64 on a GPU")
def deit_amp_train():
    n, img, patch, d, heads, classes = (32, 64, 8, 192, 3, 100) if gpu() else (2, 16, 4, 24, 2, 10)

    class DeiT(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Conv2d(3, d, patch, patch)
            self.cls, self.dist = nn.Parameter(torch.zeros(1, 1, d)), nn.Parameter(torch.zeros(1, 1, d))
            self.pos = nn.Parameter(torch.randn(1, (img // patch) ** 2 + 2, d) * 0.02)
            self.blocks = nn.Sequential(DeiTBlock(d, heads, 0.0), DeiTBlock(d, heads, 0.1))
            self.ln = nn.LayerNorm(d)
            self.head, self.head_dist = nn.Linear(d, classes), nn.Linear(d, classes)

        def forward(self, x):
            x = self.embed(x).flatten(2).transpose(1, 2)
            x = torch.cat([self.cls.expand(x.shape[0], -1, -1), self.dist.expand(x.shape[0], -1, -1), x], 1)
            x = self.ln(self.blocks(x + self.pos))
            return self.head(x[:, 0]), self.head_dist(x[:, 1])

    m = DeiT()
    teacher = nn.Linear(3 * img * img, classes)
    x, y = torch.randn(n, 3, img, img), torch.randint(0, classes, (n,))
    opt = torch.optim.Adam(m.parameters(), lr=1e-3, amsgrad=True, foreach=True)
    scaler = torch.amp.GradScaler(dev_type(), init_scale=2.0 ** 10)

    def step():
        lam = 0.7
        perm = torch.randperm(n)
        xm = torch.lerp(x[perm], x, lam)
        soft = torch.lerp(F.one_hot(y[perm], classes).float(), F.one_hot(y, classes).float(), lam)
        with torch.no_grad():
            t_logits = teacher(xm.flatten(1))
        with torch.autocast(dev_type(), dtype=torch.float16):
            out, out_d = m(xm)
            loss = torch.sum(-soft * F.log_softmax(out.float(), -1), -1).mean()
            loss = loss + F.kl_div(F.log_softmax(out_d.float() / 2, -1), F.log_softmax(t_logits / 2, -1),
                                   reduction="batchmean", log_target=True) * 4
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0, foreach=True)
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)

    return step


# ---------------------------------------------------------------- graphs


@capture("pyg-train", "PyG graph classification over a batch of 4 random graphs: GATv2Conv(edge_dim), GINConv, "
         "TransformerConv(edge_dim), global mean/max/add pooling, to_dense_batch with a masked readout; Adam; "
         "64 graphs of 200 nodes on a GPU")
def pyg_train():
    from torch_geometric.nn import (
        GATv2Conv,
        GINConv,
        TransformerConv,
        global_add_pool,
        global_max_pool,
        global_mean_pool,
    )
    from torch_geometric.utils import to_dense_batch

    graphs, nodes, f, hid, edim, classes = (64, 200, 32, 64, 8, 5) if gpu() else (4, 12, 8, 16, 4, 3)
    g = torch.Generator(device="cpu").manual_seed(0)
    src = torch.randint(0, nodes, (graphs, 3 * nodes), generator=g)
    dst = torch.randint(0, nodes, (graphs, 3 * nodes), generator=g)
    off = (torch.arange(graphs) * nodes)[:, None]
    edge_index = torch.stack([(src + off).flatten(), (dst + off).flatten()]).to(torch.get_default_device())
    x = torch.randn(graphs * nodes, f)
    edge_attr = torch.randn(edge_index.shape[1], edim)
    batch = torch.arange(graphs).repeat_interleave(nodes)
    y = torch.randint(0, classes, (graphs,))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.gat = GATv2Conv(f, hid // 2, heads=2, edge_dim=edim, dropout=0.1)
            self.gin = GINConv(nn.Sequential(nn.Linear(hid, hid), nn.BatchNorm1d(hid), nn.ReLU(),
                                             nn.Linear(hid, hid)), train_eps=True)
            self.tc = TransformerConv(hid, hid // 2, heads=2, edge_dim=edim, beta=True)
            self.att = nn.Linear(hid, 1)
            self.out = nn.Linear(4 * hid, classes)

        def forward(self):
            h = F.elu(self.gat(x, edge_index, edge_attr))
            h = F.relu(self.gin(h, edge_index))
            h = self.tc(h, edge_index, edge_attr)
            dense, mask = to_dense_batch(h, batch)
            score = self.att(dense).squeeze(-1).masked_fill(~mask, float("-inf")).softmax(-1)
            read = (score.unsqueeze(-1) * dense).sum(1)
            pooled = torch.cat([global_mean_pool(h, batch), global_max_pool(h, batch), global_add_pool(h, batch),
                                read], 1)
            return self.out(pooled)

    m = Net()
    opt = torch.optim.Adam(m.parameters(), lr=5e-3, weight_decay=5e-4)
    return cm.train_step(m, lambda: F.cross_entropy(m(), y), opt)


# ---------------------------------------------------------------- recommendation


@capture("recsys-train", "DLRM-like: EmbeddingBag tables (sum with per_sample_weights, mean; sparse gradients), "
         "bottom MLP, pairwise interaction by bmm + upper triangle, top MLP, BCE; SGD(momentum) over sparse and "
         "dense parameters; batch 2048, 8 tables of 100k rows on a GPU")
def recsys_train():
    b, dense_in, d, tables, rows, bag = (2048, 13, 64, 8, 100_000, 4) if gpu() else (8, 13, 8, 3, 50, 3)

    class DLRM(nn.Module):
        def __init__(self):
            super().__init__()
            self.bags = nn.ModuleList(nn.EmbeddingBag(rows, d, mode="sum" if i % 2 == 0 else "mean", sparse=True)
                                      for i in range(tables))
            self.bottom = nn.Sequential(nn.Linear(dense_in, 32), nn.ReLU(), nn.Linear(32, d), nn.ReLU())
            pairs = (tables + 1) * tables // 2
            self.top = nn.Sequential(nn.Linear(d + pairs, 32), nn.ReLU(), nn.Linear(32, 1))
            iu = torch.triu_indices(tables + 1, tables + 1, offset=1)
            self.register_buffer("iu", iu, persistent=False)

        def forward(self, dense, idx, offsets, psw):
            z = self.bottom(dense)
            embs = [bag(idx[i], offsets, per_sample_weights=psw[i] if bag.mode == "sum" else None)
                    for i, bag in enumerate(self.bags)]
            t = torch.stack([z, *embs], 1)  # [b, tables + 1, d]
            inter = torch.bmm(t, t.transpose(1, 2))
            flat = inter[:, self.iu[0], self.iu[1]]
            return self.top(torch.cat([z, flat], 1)).squeeze(1)

    m = DLRM()
    dense = torch.randn(b, dense_in)
    idx = torch.randint(0, rows, (tables, b * bag))
    offsets = torch.arange(0, b * bag, bag)
    psw = torch.rand(tables, b * bag)
    y = torch.randint(0, 2, (b,)).float()
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    return cm.train_step(m, lambda: F.binary_cross_entropy_with_logits(m(dense, idx, offsets, psw), y), opt)


# ---------------------------------------------------------------- audio


@capture("audio-train", "stft (Hann), power, mel filterbank matmul, log, SpecAugment (masked_fill), "
         "pack_padded_sequence, LSTM (2 layers), pad_packed_sequence, a mask applied to the spectrum, istft, L1 "
         "on the waveform; RMSprop; 8 x 16000 samples on a GPU")
def audio_train():
    b, samples, nfft, hop, mels, hidden = (8, 16000, 512, 128, 64, 128) if gpu() else (2, 512, 64, 16, 8, 12)
    bins = nfft // 2 + 1
    window = torch.hann_window(nfft)
    fb = torch.relu(1 - (torch.arange(bins)[None, :] - torch.linspace(0, bins - 1, mels)[:, None]).abs() / 4)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(mels, hidden, num_layers=2, batch_first=True)
            self.mask = nn.Linear(hidden, bins)

        def forward(self, wav, lengths):
            spec = torch.stft(wav, nfft, hop, window=window, return_complex=True)  # [b, bins, frames]
            power = spec.abs().pow(2)
            mel = torch.log(fb @ power + 1e-6).transpose(1, 2)  # [b, frames, mels]
            frames = mel.shape[1]
            tmask = (torch.arange(frames)[None] >= 3) & (torch.arange(frames)[None] < 6)
            fmask = torch.arange(mels)[None] == 2
            mel = mel.masked_fill(tmask[..., None], 0.0).masked_fill(fmask[:, None], 0.0)
            packed = nn.utils.rnn.pack_padded_sequence(mel, lengths, batch_first=True, enforce_sorted=False)
            h, _ = self.lstm(packed)
            h, _ = nn.utils.rnn.pad_packed_sequence(h, batch_first=True, total_length=frames)
            gain = torch.sigmoid(self.mask(h)).transpose(1, 2)  # [b, bins, frames]
            return torch.istft(spec * gain, nfft, hop, window=window, length=wav.shape[-1])

    m = Net()
    wav = torch.randn(b, samples)
    frames = samples // hop + 1
    lengths = torch.linspace(frames // 2, frames, b, device="cpu").long()
    opt = torch.optim.RMSprop(m.parameters(), lr=1e-3)
    return cm.train_step(m, lambda: F.l1_loss(m(wav, lengths), wav), opt, clip=1.0)


# ---------------------------------------------------------------- video


class Conv3dBlock(nn.Module):
    def __init__(self, cin: int, cout: int, factorized: bool):
        super().__init__()
        if factorized:
            self.conv = nn.Sequential(nn.Conv3d(cin, cout, (1, 3, 3), padding=(0, 1, 1), bias=False),
                                      nn.Conv3d(cout, cout, (3, 1, 1), padding=(1, 0, 0), bias=False))
        else:
            self.conv = nn.Conv3d(cin, cout, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm3d(cout)

    def forward(self, x):
        return F.relu(self.bn(self.conv(x)))


@capture("video-train", "3-d conv net: Conv3d 3x3x3 and factorized (1x3x3 then 3x1x1), BatchNorm3d, MaxPool3d, "
         "trilinear upsampling and a residual, AdaptiveAvgPool3d, cross-entropy; SGD(momentum, weight_decay); "
         "8 clips of 16 x 112 x 112 on a GPU")
def video_train():
    n, t, hw, c, classes = (8, 16, 112, 32, 100) if gpu() else (2, 4, 16, 4, 5)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = Conv3dBlock(3, c, False)
            self.pool = nn.MaxPool3d((1, 2, 2))
            self.b1 = Conv3dBlock(c, 2 * c, True)
            self.pool2 = nn.MaxPool3d(2)
            self.b2 = Conv3dBlock(2 * c, 2 * c, False)
            self.gap = nn.AdaptiveAvgPool3d(1)
            self.fc = nn.Linear(2 * c, classes)

        def forward(self, x):
            h = self.pool(self.stem(x))
            h1 = self.b1(h)
            h2 = self.b2(self.pool2(h1))
            h = h1 + F.interpolate(h2, scale_factor=2, mode="trilinear", align_corners=False)
            return self.fc(self.gap(h).flatten(1))

    m = Net()
    x, y = torch.randn(n, 3, t, hw, hw), torch.randint(0, classes, (n,))
    opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    return cm.train_step(m, lambda: F.cross_entropy(m(x), y), opt)


# ---------------------------------------------------------------- retrieval, metric learning


@capture("retrieval-train", "metric learning and retrieval: cdist, hard-negative mining (masked_fill, where, "
         "topk, argsort), a triplet loss by gather, nn.Bilinear scores, recall@k (sort, cumsum, nonzero), "
         "scatter_reduce(mean) centroids, index_put_; Rprop; 256 x 128 embeddings on a GPU")
def retrieval_train():
    n, fin, d, classes, k = (256, 256, 128, 16, 10) if gpu() else (16, 12, 8, 4, 3)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Sequential(nn.Linear(fin, 2 * d), nn.ReLU(), nn.Linear(2 * d, d))
            self.bil = nn.Bilinear(d, d, 1)

        def forward(self, x):
            return F.normalize(self.enc(x), dim=-1)

    m = Net()
    x, y = torch.randn(n, fin), torch.arange(n) % classes
    opt = torch.optim.Rprop(m.parameters(), lr=1e-3)

    def loss():
        e = m(x)
        dist = torch.cdist(e, e)
        same = y[:, None] == y[None, :]
        pos = torch.where(same, dist, torch.zeros_like(dist)).argmax(1)
        neg_d = dist.masked_fill(same, float("inf"))
        neg = torch.topk(neg_d, 1, dim=1, largest=False).indices.squeeze(1)
        order = torch.argsort(neg_d, dim=1)
        d_ap = dist.gather(1, pos[:, None]).squeeze(1)
        d_an = dist.gather(1, neg[:, None]).squeeze(1)
        trip = F.relu(d_ap - d_an + 0.2).mean()
        score = m.bil(e, e[pos]).squeeze(1) - m.bil(e, e[neg]).squeeze(1)
        with torch.no_grad():
            srt, _ = torch.sort(dist.masked_fill(torch.eye(n, dtype=torch.bool), float("inf")), dim=1)
            hits = (y[order[:, :k]] == y[:, None]).float().cumsum(1)
            torch.nonzero(hits[:, -1] > 0)
            cent = torch.zeros(classes, d).scatter_reduce(0, y[:, None].expand(-1, d), e, "mean", include_self=False)
            counts = torch.zeros(classes)
            counts.index_put_((y,), torch.ones(n), accumulate=True)
            (srt[:, 0].sum() + cent.sum() + counts.sum()).item()
        return trip + F.softplus(-score).mean()

    return cm.train_step(m, loss, opt)


@capture("asgd-lbfgs", "a small regression with LBFGS (a closure, 3 iterations, strong-Wolfe line search), "
         "ASGD and Adafactor (where this torch has it) on three copies of an MLP; batch 64 on a GPU")
def asgd_lbfgs():
    fin, hid, n = (64, 128, 64) if gpu() else (16, 32, 16)
    models = [nn.Sequential(nn.Linear(fin, hid), nn.Tanh(), nn.Linear(hid, 1)) for _ in range(3)]
    x, y = torch.randn(n, fin), torch.randn(n, 1)
    lbfgs = torch.optim.LBFGS(models[0].parameters(), lr=0.5, max_iter=3, line_search_fn="strong_wolfe")
    asgd = torch.optim.ASGD(models[1].parameters(), lr=1e-2)
    ada = torch.optim.Adafactor(models[2].parameters(), lr=1e-2) if hasattr(torch.optim, "Adafactor") else \
        torch.optim.SGD(models[2].parameters(), lr=1e-2)

    def closure():
        lbfgs.zero_grad()
        loss = F.mse_loss(models[0](x), y)
        loss.backward()
        return loss

    def step():
        lbfgs.step(closure)
        for mod, opt in ((models[1], asgd), (models[2], ada)):
            F.mse_loss(mod(x), y).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

    return step


# ---------------------------------------------------------------- runner


ZOO5 = [n for n in cm.CAPTURES if n not in _EARLIER]


def main(argv: list[str] | None = None) -> int:
    return cm.main(argv, names_of=ZOO5, script=__file__, description=__doc__.split("\n\n")[0])


if __name__ == "__main__":
    raise SystemExit(main())

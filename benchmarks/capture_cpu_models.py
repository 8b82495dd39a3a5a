"""Capture small CPU traces of plain-torch models and training features, with FlopCounterMode beside each.

Each capture builds a tiny model (random weights, no downloads), runs one warm-up step, one
step under `torch.profiler.profile(activities=[CPU], record_shapes=True)` with one thread
(exported to NAME.json) and then one step under `torch.utils.flop_counter.FlopCounterMode`
(the reference counts, written to NAME.flops.json). A training step is forward,
backward and the optimizer (and its scheduler, gradient clipping); an inference step is the
forward under `torch.no_grad` or `torch.inference_mode`.

What it captures (`--list`): recurrent layers (LSTM, GRU, RNN; packed sequences), 1-d, 3-d,
transposed, grouped, depthwise and dilated convolutions, resampling (interpolate, pixel_shuffle,
grid_sample, unfold/fold), pooling (with indices, adaptive, 3-d), normalization (RMSNorm,
instance, local response), attention (SDPA with a mask, causal, dropout; MultiheadAttention;
einsum; baddbmm), FFT, scans, sorts and selection, scatters and embedding bags, losses, every
torch.optim optimizer with clipping and schedulers, bf16 autocast, torch.compile (Inductor's
C++ kernels), torch.jit.script, torch.func.vmap and grad, activation checkpointing.

    python benchmarks/capture_cpu_models.py --out DIR [NAME ...]   # all when none named, each in its own process
    python benchmarks/capture_cpu_models.py --out DIR --device cuda # the same on a GPU (CPU + CUDA activity)
    python benchmarks/capture_cpu_models.py --list
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile
from torch.utils.flop_counter import FlopCounterMode

CAPTURES: dict[str, Callable[[], Callable[[], None]]] = {}
NOTES: dict[str, str] = {}


def gpu() -> bool:
    """Whether the capture runs on a GPU (its sizes are then the GPU ones)."""
    return torch.get_default_device().type != "cpu"


def capture(name: str, note: str):
    """Register a builder that returns the step to profile."""

    def deco(fn):
        CAPTURES[name] = fn
        NOTES[name] = note
        return fn

    return deco


def train_step(model: nn.Module, loss_fn: Callable[[], torch.Tensor], opt: torch.optim.Optimizer,
               clip: float | None = None, sched=None) -> Callable[[], None]:
    def step():
        loss = loss_fn()
        loss.backward()
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        if sched is not None:
            sched.step()
        opt.zero_grad(set_to_none=True)

    return step


# ---------------------------------------------------------------- recurrent


@capture("rnn-train", "LSTM (2 layers, bidirectional) + GRU + RNN(tanh), 4 x 12 x 16; Adam(foreach=False), "
         "clip_grad_norm_, weighted nll_loss")
def rnn_train():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(16, 24, num_layers=2, batch_first=True, bidirectional=True)
            self.gru = nn.GRU(48, 24, batch_first=True)
            self.rnn = nn.RNN(24, 24, batch_first=True)
            self.fc = nn.Linear(24, 10)

        def forward(self, x):
            y, _ = self.lstm(x)
            y, _ = self.gru(y)
            y, h = self.rnn(y)
            return F.log_softmax(self.fc(y[:, -1]), dim=-1)

    m = Net()
    x, t = torch.randn(4, 12, 16), torch.randint(0, 10, (4,))
    w = torch.rand(10)
    opt = torch.optim.Adam(m.parameters(), lr=1e-3, foreach=False)
    return train_step(m, lambda: F.nll_loss(m(x), t, weight=w), opt, clip=1.0)


@capture("lstm-packed-infer", "LSTM over a packed batch of 4 sequences (lengths 12, 9, 5, 3), proj_size 8; "
         "inference_mode")
def lstm_packed_infer():
    m = nn.LSTM(16, 24, num_layers=1, batch_first=True, proj_size=8).eval()
    x = torch.randn(4, 12, 16)
    lengths = torch.tensor([12, 9, 5, 3], device="cpu")  # pack_padded_sequence wants them on the host

    def step():
        with torch.inference_mode():
            p = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True)
            y, _ = m(p)
            nn.utils.rnn.pad_packed_sequence(y, batch_first=True)

    return step


# ---------------------------------------------------------------- convolutions


@capture("conv1d-train", "Conv1d, dilated Conv1d, grouped and depthwise Conv1d, ConvTranspose1d over 2 x 8 x 32; "
         "SGD(momentum, nesterov, weight_decay), smooth_l1 + l1 loss")
def conv1d_train():
    m = nn.Sequential(
        nn.Conv1d(8, 16, 3, padding=1), nn.ReLU(),
        nn.Conv1d(16, 16, 3, padding=2, dilation=2), nn.Tanh(),
        nn.Conv1d(16, 16, 3, padding=1, groups=4), nn.GELU(),
        nn.Conv1d(16, 16, 5, padding=2, groups=16), nn.SiLU(),
        nn.ConvTranspose1d(16, 8, 4, stride=2, padding=1),
    )
    x, t = torch.randn(2, 8, 32), torch.randn(2, 8, 64)
    opt = torch.optim.SGD(m.parameters(), lr=1e-2, momentum=0.9, nesterov=True, weight_decay=1e-4)

    def loss():
        y = m(x)
        return F.smooth_l1_loss(y, t) + F.l1_loss(y, t)

    return train_step(m, loss, opt)


@capture("conv3d-train", "Conv3d, grouped Conv3d, ConvTranspose3d, max_pool3d, avg_pool3d, InstanceNorm3d over "
         "2 x 4 x 8 x 8 x 8; RMSprop(momentum), mse loss")
def conv3d_train():
    m = nn.Sequential(
        nn.Conv3d(4, 8, 3, padding=1), nn.InstanceNorm3d(8, affine=True), nn.LeakyReLU(0.1),
        nn.MaxPool3d(2),
        nn.Conv3d(8, 8, 3, padding=1, groups=2), nn.ELU(),
        nn.AvgPool3d(2),
        nn.ConvTranspose3d(8, 4, 4, stride=4),
    )
    x = torch.randn(2, 4, 8, 8, 8)
    t = torch.randn(2, 4, 8, 8, 8)
    opt = torch.optim.RMSprop(m.parameters(), lr=1e-3, momentum=0.9)
    return train_step(m, lambda: F.mse_loss(m(x), t), opt)


@capture("convt2d-train", "ConvTranspose2d (stride 2, groups 2), pixel_shuffle/unshuffle, interpolate nearest, "
         "bilinear, bicubic, grid_sample over 2 x 8 x 8 x 8; Adagrad, huber loss")
def convt2d_train():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.up = nn.ConvTranspose2d(8, 16, 4, stride=2, padding=1, groups=2)
            self.conv = nn.Conv2d(4, 16, 3, padding=1)
            self.out = nn.Conv2d(16, 3, 1)

        def forward(self, x):
            y = F.pixel_shuffle(self.up(x), 2)  # [2, 4, 32, 32]
            y = F.pixel_unshuffle(y, 2)[:, :4]  # [2, 4, 16, 16]
            y = self.conv(y)
            y = F.interpolate(y, scale_factor=2, mode="nearest") + \
                F.interpolate(y, scale_factor=2, mode="bilinear", align_corners=False)
            y = F.interpolate(y, size=(24, 24), mode="bicubic", align_corners=True)
            theta = torch.tensor([[1.0, 0.1, 0.0], [-0.1, 1.0, 0.0]]).expand(2, 2, 3)
            grid = F.affine_grid(theta, [2, 16, 20, 20], align_corners=False)
            y = F.grid_sample(y, grid, mode="bilinear", align_corners=False)
            return self.out(y)

    m = Net()
    x, t = torch.randn(2, 8, 8, 8), torch.randn(2, 3, 20, 20)
    opt = torch.optim.Adagrad(m.parameters(), lr=1e-2)
    return train_step(m, lambda: F.huber_loss(m(x), t, delta=0.5), opt)


# ---------------------------------------------------------------- pooling, resampling, norms


@capture("pool-train", "max_pool2d with indices + max_unpool2d, adaptive avg/max pool, F.unfold/fold, "
         "LocalResponseNorm, over 2 x 8 x 16 x 16; Adamax, cross entropy")
def pool_train():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1)
            self.lrn = nn.LocalResponseNorm(3)
            self.fc = nn.Linear(8 * 4 * 4 + 8 * 2 * 2, 5)

        def forward(self, x):
            y = self.lrn(F.relu(self.conv(x)))
            p, idx = F.max_pool2d(y, 2, return_indices=True)
            y = F.max_unpool2d(p, idx, 2) + y
            cols = F.unfold(y, kernel_size=2, stride=2)  # [2, 32, 64]
            y = F.fold(cols * 0.5, output_size=(16, 16), kernel_size=2, stride=2)
            a = F.adaptive_avg_pool2d(y, (4, 4)).flatten(1)
            b = F.adaptive_max_pool2d(y, (2, 2)).flatten(1)
            return self.fc(torch.cat([a, b], 1))

    m = Net()
    x, t = torch.randn(2, 3, 16, 16), torch.randint(0, 5, (2,))
    opt = torch.optim.Adamax(m.parameters(), lr=1e-3)
    return train_step(m, lambda: F.cross_entropy(m(x), t), opt)


@capture("norm-train", "nn.RMSNorm, InstanceNorm2d, GroupNorm, LayerNorm over a conv net 2 x 8 x 8 x 8 and a "
         "2 x 16 x 32 sequence; NAdam(weight_decay), kl_div loss")
def norm_train():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(8, 8, 3, padding=1)
            self.inorm = nn.InstanceNorm2d(8, affine=True, track_running_stats=True)
            self.gn = nn.GroupNorm(2, 8)
            self.rms = nn.RMSNorm(32)
            self.ln = nn.LayerNorm(32)
            self.fc = nn.Linear(32, 32)

        def forward(self, x, s):
            y = self.gn(self.inorm(self.conv(x))).mean((2, 3))  # [2, 8]
            z = self.fc(self.ln(self.rms(s)))  # [2, 16, 32]
            return F.log_softmax(z.mean(1) + y.repeat(1, 4), dim=-1)

    m = Net()
    x, s = torch.randn(2, 8, 8, 8), torch.randn(2, 16, 32)
    target = F.softmax(torch.randn(2, 32), -1)
    opt = torch.optim.NAdam(m.parameters(), lr=1e-3, weight_decay=1e-2)
    return train_step(m, lambda: F.kl_div(m(x, s), target, reduction="batchmean"), opt)


# ---------------------------------------------------------------- attention


@capture("attn-train", "SDPA with a float attn_mask, with is_causal, with dropout; nn.MultiheadAttention; "
         "einsum attention; baddbmm scores; 2 x 16 tokens x 32 wide, 4 heads; RAdam, label-smoothed CE")
def attn_train():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(32, 96)
            self.mha = nn.MultiheadAttention(32, 4, batch_first=True)
            self.out = nn.Linear(32, 11)

        def forward(self, x):
            b, s, _ = x.shape
            q, k, v = self.qkv(x).view(b, s, 3, 4, 8).permute(2, 0, 3, 1, 4)
            mask = torch.randn(s, s)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            y = y + F.scaled_dot_product_attention(q, k, v, is_causal=True)
            y = y + F.scaled_dot_product_attention(q, k, v, dropout_p=0.1)
            scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / 8 ** 0.5
            y = y + torch.einsum("bhqk,bhkd->bhqd", scores.softmax(-1), v)
            qf, kf = q.reshape(b * 4, s, 8), k.reshape(b * 4, s, 8)
            bias = torch.zeros(b * 4, s, s)
            p = torch.baddbmm(bias, qf, kf.transpose(1, 2), alpha=8 ** -0.5).softmax(-1)
            y = y + torch.bmm(p, v.reshape(b * 4, s, 8)).view(b, 4, s, 8)
            y = y.transpose(1, 2).reshape(b, s, 32)
            y, _ = self.mha(y, y, y, need_weights=False)
            return self.out(y)

    m = Net()
    x, t = torch.randn(2, 16, 32), torch.randint(0, 11, (2, 16))
    opt = torch.optim.RAdam(m.parameters(), lr=1e-3)
    return train_step(m, lambda: F.cross_entropy(m(x).reshape(-1, 11), t.reshape(-1), label_smoothing=0.1), opt)


@capture("mha-infer", "nn.TransformerEncoderLayer (32 wide, 4 heads, FFN 64) with a key padding mask, "
         "2 x 16; inference_mode (fast path)")
def mha_infer():
    m = nn.TransformerEncoderLayer(32, 4, 64, batch_first=True).eval()
    x = torch.randn(2, 16, 32)
    pad = torch.zeros(2, 16, dtype=torch.bool)
    pad[1, 12:] = True

    def step():
        with torch.inference_mode():
            m(x, src_key_padding_mask=pad)

    return step


# ---------------------------------------------------------------- tensor ops


@capture("fft-infer", "rfft/irfft, fft2/ifft2, cumsum/cumprod, sort/topk/argsort, quantile, where, masked_fill, "
         "over 4 x 64 and 4 x 16 x 16; no_grad")
def fft_infer():
    x = torch.randn(4, 64)
    img = torch.randn(4, 16, 16)

    def step():
        with torch.no_grad():
            f = torch.fft.rfft(x, dim=-1)
            y = torch.fft.irfft(f * 0.5, n=64, dim=-1)
            g = torch.fft.ifft2(torch.fft.fft2(img)).real
            c = torch.cumsum(y, -1) + torch.cumprod(torch.sigmoid(y), -1)
            s, _ = torch.sort(c, -1)
            v, i = torch.topk(c, 5, -1)
            a = torch.argsort(g.flatten(1), -1, descending=True)
            q = torch.quantile(c, torch.tensor([0.25, 0.5, 0.9]), dim=-1)
            w = torch.where(c > 0, c, -c).masked_fill(c < -1, 0.0)
            (s.sum() + v.sum() + i.sum() + a.sum() + q.sum() + w.sum()).item()

    return step


@capture("scatter-train", "scatter_reduce (sum, amax), index_put_ with accumulate, embedding_bag (sum, mean, max, "
         "per-sample weights), one_hot, gumbel_softmax; Adam(foreach=True), bce_with_logits")
def scatter_train():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.bag_sum = nn.EmbeddingBag(50, 16, mode="sum")
            self.bag_mean = nn.EmbeddingBag(50, 16, mode="mean")
            self.bag_max = nn.EmbeddingBag(50, 16, mode="max")
            self.fc = nn.Linear(16 + 8, 8)

        def forward(self, idx, off, psw, seg):
            e = self.bag_sum(idx, off, per_sample_weights=psw) + self.bag_mean(idx, off) + self.bag_max(idx, off)
            h = self.fc(torch.cat([e, F.one_hot(seg, 8).float()], 1))  # [4, 8]
            pooled = torch.zeros(3, 8).scatter_reduce(0, seg[:, None].remainder(3).expand(-1, 8), h, "sum")
            mx = torch.full((3, 8), -1e9).scatter_reduce(0, seg[:, None].remainder(3).expand(-1, 8), h, "amax",
                                                         include_self=False)
            acc = torch.zeros(3, 8).index_put_((seg.remainder(3),), h, accumulate=True)
            g = F.gumbel_softmax(h, tau=0.5, hard=True)
            return (pooled + mx + acc).sum(0) + g.sum(0)

    m = Net()
    idx = torch.randint(0, 50, (20,))
    off = torch.tensor([0, 5, 9, 14])
    psw = torch.rand(20)
    seg = torch.tensor([1, 5, 2, 7])
    t = torch.rand(8)
    opt = torch.optim.Adam(m.parameters(), lr=1e-3, foreach=True)
    return train_step(m, lambda: F.binary_cross_entropy_with_logits(m(idx, off, psw, seg), t), opt)


@capture("losses-train", "mse, l1, smooth_l1, huber, bce, bce_with_logits (pos_weight), kl_div, ctc_loss, weighted "
         "nll, label-smoothed CE, cosine_embedding, triplet_margin, margin_ranking, soft_margin on one "
         "Linear(16, 24) over 8 rows; SGD")
def losses_train():
    m = nn.Linear(16, 24)
    x = torch.randn(8, 16)
    tgt = torch.randn(8, 24)
    cls = torch.randint(0, 24, (8,))
    w = torch.rand(24)
    ctc_t = torch.randint(1, 6, (2, 3))

    def loss():
        y = m(x)
        p = torch.sigmoid(y)
        lp = F.log_softmax(y, -1)
        total = F.mse_loss(y, tgt) + F.l1_loss(y, tgt) + F.smooth_l1_loss(y, tgt, beta=0.5)
        total = total + F.huber_loss(y, tgt) + F.binary_cross_entropy(p, tgt.sigmoid())
        total = total + F.binary_cross_entropy_with_logits(y, tgt.sigmoid(), pos_weight=torch.full((24,), 2.0))
        total = total + F.kl_div(lp, F.softmax(tgt, -1), reduction="batchmean")
        total = total + F.nll_loss(lp, cls, weight=w) + F.cross_entropy(y, cls, label_smoothing=0.2)
        ctc_lp = lp[:, :6].reshape(4, 2, 6).log_softmax(-1)
        total = total + F.ctc_loss(ctc_lp, ctc_t, torch.tensor([4, 4]), torch.tensor([3, 2]))
        a, b = y[:4], y[4:]
        total = total + F.cosine_embedding_loss(a, b, torch.tensor([1, -1, 1, -1]))
        total = total + F.triplet_margin_loss(a, b, b.flip(0))
        total = total + F.margin_ranking_loss(a[:, 0], b[:, 0], torch.tensor([1.0, -1.0, 1.0, -1.0]))
        return total + F.soft_margin_loss(a, torch.sign(b).detach())

    opt = torch.optim.SGD(m.parameters(), lr=1e-2)
    return train_step(m, loss, opt)


# ---------------------------------------------------------------- optimizers


def _mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 16))


@capture("optim-zoo", "eight Linear(32,64)-ReLU-Linear(64,16) MLPs, each with its own optimizer: SGD(nesterov), "
         "Adam(foreach=False), Adam(foreach, amsgrad), AdamW(weight_decay), RMSprop(centered), Adagrad, Adamax, "
         "NAdam, RAdam(decoupled); clip_grad_norm_ per model; batch 8")
def optim_zoo():
    torch.manual_seed(0)
    makers = [
        lambda p: torch.optim.SGD(p, lr=1e-2, momentum=0.9, nesterov=True),
        lambda p: torch.optim.Adam(p, lr=1e-3, foreach=False),
        lambda p: torch.optim.Adam(p, lr=1e-3, foreach=True, amsgrad=True),
        lambda p: torch.optim.AdamW(p, lr=1e-3, weight_decay=0.1),
        lambda p: torch.optim.RMSprop(p, lr=1e-3, centered=True),
        lambda p: torch.optim.Adagrad(p, lr=1e-2),
        lambda p: torch.optim.Adamax(p, lr=1e-3),
        lambda p: torch.optim.NAdam(p, lr=1e-3),
        lambda p: torch.optim.RAdam(p, lr=1e-3, decoupled_weight_decay=True, weight_decay=0.01),
    ]
    models = [_mlp() for _ in makers]
    opts = [mk(m.parameters()) for mk, m in zip(makers, models, strict=True)]
    x, t = torch.randn(8, 32), torch.randn(8, 16)

    def step():
        for m, o in zip(models, opts, strict=True):
            F.mse_loss(m(x), t).backward()
            torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
            o.step()
            o.zero_grad(set_to_none=True)

    return step


@capture("adamw-fused-train", "MLP 32-64-64-16 (LayerNorm, GELU, dropout) batch 16; AdamW(fused=True, "
         "weight_decay), clip_grad_norm_(foreach), OneCycleLR, cosine_similarity loss")
def adamw_fused_train():
    m = nn.Sequential(nn.Linear(32, 64), nn.LayerNorm(64), nn.GELU(), nn.Dropout(0.1), nn.Linear(64, 64),
                      nn.GELU(), nn.Linear(64, 16))
    x, t = torch.randn(16, 32), torch.randn(16, 16)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3, weight_decay=0.05, fused=True)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=1e-2, total_steps=100)
    return train_step(m, lambda: (1 - F.cosine_similarity(m(x), t)).mean(), opt, clip=1.0, sched=sched)


@capture("autocast-bf16-train", "Conv2d-BatchNorm-ReLU + Linear under torch.autocast('cpu', bfloat16), "
         "2 x 3 x 16 x 16; SGD(momentum), StepLR, no GradScaler")
def autocast_train():
    m = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.AdaptiveAvgPool2d(4),
                      nn.Flatten(), nn.Linear(256, 10))
    x, t = torch.randn(2, 3, 16, 16), torch.randint(0, 10, (2,))
    opt = torch.optim.SGD(m.parameters(), lr=1e-2, momentum=0.9)
    sched = torch.optim.lr_scheduler.StepLR(opt, 10)

    def loss():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return F.cross_entropy(m(x), t)

    return train_step(m, loss, opt, sched=sched)


# ---------------------------------------------------------------- compilers and transforms


class _Block(nn.Module):
    def __init__(self, d: int = 32):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 2 * d)
        self.fc2 = nn.Linear(2 * d, d)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.ln(x))))


def _kernel_profile() -> None:
    """Have Inductor's C++ kernels record themselves as ops (`graph_0_cpp_fused_..._0`) when the
    profiler runs; without it their time is the self time of `Torch-Compiled Region`."""
    import torch._inductor.config as inductor_config

    if hasattr(inductor_config.cpp, "enable_kernel_profile"):
        inductor_config.cpp.enable_kernel_profile = True


@capture("compile-infer", "torch.compile (Inductor, CPU C++) of LayerNorm-Linear-GELU-Linear + residual, "
         "2 x 16 x 32; no_grad; cpp.enable_kernel_profile")
def compile_infer():
    _kernel_profile()
    m = _Block().eval()
    c = torch.compile(m)
    x = torch.randn(2, 16, 32)

    def step():
        with torch.no_grad():
            c(x)

    return step


@capture("compile-train", "torch.compile (Inductor, CPU C++) of the same block, forward and backward, "
         "2 x 16 x 32; SGD; cpp.enable_kernel_profile")
def compile_train():
    _kernel_profile()
    m = _Block()
    c = torch.compile(m)
    x = torch.randn(2, 16, 32)
    opt = torch.optim.SGD(m.parameters(), lr=1e-2)
    return train_step(m, lambda: c(x).square().mean(), opt)


@capture("jit-script-infer", "torch.jit.script of a conv-BN-ReLU-pool-Linear net, 2 x 3 x 16 x 16; no_grad")
def jit_infer():
    m = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                      nn.Flatten(), nn.Linear(8 * 8 * 8, 10)).eval()
    s = torch.jit.script(m)
    x = torch.randn(2, 3, 16, 16)

    def step():
        with torch.no_grad():
            s(x)

    return step


@capture("func-vmap", "torch.func: per-sample gradients (vmap over grad of functional_call) of an MLP 16-32-4, "
         "batch 8, and a jacrev")
def func_vmap():
    from torch.func import functional_call, grad, jacrev, vmap

    m = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 4))
    params = {k: v.detach() for k, v in m.named_parameters()}
    x, t = torch.randn(8, 16), torch.randn(8, 4)

    def loss(p, xi, ti):
        return F.mse_loss(functional_call(m, p, (xi[None],)), ti[None])

    def step():
        vmap(grad(loss), in_dims=(None, 0, 0))(params, x, t)
        jacrev(lambda xi: m(xi))(x[0])

    return step


@capture("checkpoint-train", "torch.utils.checkpoint (use_reentrant=False) over two residual MLP blocks, "
         "2 x 16 x 32; AdamW (foreach)")
def checkpoint_train():
    from torch.utils.checkpoint import checkpoint

    blocks = nn.ModuleList([_Block(), _Block()])
    x = torch.randn(2, 16, 32)

    def fwd():
        y = x
        for b in blocks:
            y = checkpoint(b, y, use_reentrant=False)
        return y.square().mean()

    opt = torch.optim.AdamW(blocks.parameters(), lr=1e-3)
    return train_step(blocks, fwd, opt)


# ---------------------------------------------------------------- runner


def run(name: str, out: Path, device: str = "cpu") -> dict:
    torch.manual_seed(0)
    torch.set_num_threads(1)
    activities = [ProfilerActivity.CPU]
    if device != "cpu":  # the same models on a GPU: every factory and module parameter made there
        torch.set_default_device(device)
        activities.append(ProfilerActivity.CUDA)
    step = CAPTURES[name]()
    t0 = time.perf_counter()
    step()  # warm-up (and, for torch.compile, the compilation)
    if device != "cpu":
        torch.cuda.synchronize()
    warm = time.perf_counter() - t0
    with profile(activities=activities, record_shapes=True) as prof:
        step()
        if device != "cpu":
            torch.cuda.synchronize()
    trace = out / f"{name}.json"
    prof.export_chrome_trace(str(trace))
    # FlopCounterMode after the profiled step: its global module hooks make a torch.compile'd module
    # fall back to eager on the next calls, which would then be what the profiler records
    flops: dict[str, int] = {}
    fcm_error = None
    try:
        with FlopCounterMode(display=False) as fc:
            step()
        flops = {"aten::" + str(k).split(".", 1)[1]: int(v) for k, v in fc.get_flop_counts().get("Global", {}).items()}
    except Exception as exc:  # noqa: BLE001 (a transform FlopCounterMode cannot run under: say so)
        fcm_error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
    meta = {"name": name, "note": NOTES[name], "flops": flops, "flop_counter_error": fcm_error,
            "warmup_s": round(warm, 2), "torch": torch.__version__, "device": device}
    (out / f"{name}.flops.json").write_text(json.dumps(meta, indent=1))
    return meta


def main(argv: list[str] | None = None, names_of: list[str] | None = None, script: str | None = None,
         description: str | None = None) -> int:
    """The command line over the captures `names_of` (default: every registered one), each run by `script`
    (default: this file) in a process of its own."""
    names_of = list(CAPTURES) if names_of is None else names_of
    script = script or __file__
    ap = argparse.ArgumentParser(description=description or __doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", help="captures to run (all when none)")
    ap.add_argument("--out", type=Path, help="folder for NAME.json and NAME.flops.json")
    ap.add_argument("--list", action="store_true", help="list the captures and exit")
    ap.add_argument("--device", default="cpu", help="cpu (default), or cuda: the same models on the GPU, "
                    "profiled with CUDA activity too")
    a = ap.parse_args(argv)
    if a.list or a.out is None:
        for n in names_of:
            print(f"{n:22} {NOTES[n]}")
        return 0 if a.list else 2
    unknown = [n for n in a.names if n not in names_of]
    if unknown:
        print(f"unknown captures: {', '.join(unknown)} (see --list)", file=sys.stderr)
        return 2
    a.out.mkdir(parents=True, exist_ok=True)
    names = a.names or names_of
    if len(names) > 1:  # one process each: no compiled code, Dynamo skip marks or configs carried over
        rcs = [subprocess.run([sys.executable, script, "--out", str(a.out), "--device", a.device, n]).returncode
               for n in names]
        return max(rcs)
    t0 = time.perf_counter()
    meta = run(names[0], a.out, a.device)
    err = f"  FlopCounterMode: {meta['flop_counter_error']}" if meta["flop_counter_error"] else ""
    print(f"{names[0]:22} {time.perf_counter() - t0:6.1f} s  {sum(meta['flops'].values()):>12,} FLOP (FCM){err}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

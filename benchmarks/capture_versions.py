"""Capture small CPU traces with whatever torch is installed (1.13 and later), with FlopCounterMode beside each.

For checking that wlprof reads traces of PyTorch versions other than the one it runs with. Each capture
builds a tiny model (random weights, no downloads), runs one step unprofiled, then three steps under
`torch.profiler.profile(activities=[CPU], schedule=schedule(wait=0, warmup=1, active=2))` with one
thread, calling `prof.step()` after each (so the trace holds `ProfilerStep#1` and `ProfilerStep#2`),
and exports the trace; then one more step under `torch.utils.flop_counter.FlopCounterMode` (torch 2.1
and later), whose per-op counts go to NAME.flops.json with the torch version (`flop_counter_error`
says why there are none: the module is absent before torch 2.1).

- transformer:     a pre-LN transformer block (embedding, fused QKV projection, causal attention by
                   `F.scaled_dot_product_attention` where torch has it, else matmul-softmax-matmul,
                   LayerNorm, GELU MLP, tied head), cross-entropy, AdamW(foreach); record_shapes;
- convnet:         conv-bn-relu, max pool, conv-bn-relu, adaptive average pool, linear, cross-entropy,
                   SGD(momentum, nesterov, foreach); record_shapes;
- rnn:             embedding, a 2-layer LSTM, a GRU, linear, cross-entropy, Adam; record_shapes; written
                   by `export_chrome_trace` straight to NAME.json.gz;
- noshapes:        the transformer step with record_shapes=False;
- stack-memory:    the transformer step with record_shapes, with_stack and profile_memory;
- flops-modules:   the conv net step with record_shapes, with_flops and with_modules.

    python benchmarks/capture_versions.py --out DIR [NAME ...]   # all when none named, each in its own process
    python benchmarks/capture_versions.py --list
"""

import argparse
import json
import os
import subprocess
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile, schedule

# name -> (builder, profiler options, written gzipped by the profiler, note)
CAPTURES = {}
PROFILED_STEPS = 2


def capture(name, note, gz=False, **options):
    """Register a builder returning the step to profile, with the profiler options it runs under."""

    def deco(fn):
        CAPTURES[name] = (fn, options, gz, note)
        return fn

    return deco


def _optimizer(cls, params, **kw):
    """`cls(params, foreach=True, **kw)` where this torch's optimizer takes `foreach`, else without it."""
    try:
        return cls(params, foreach=True, **kw)
    except TypeError:
        return cls(params, **kw)


def _train(model, loss_fn, opt):
    def step():
        loss = loss_fn()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


class Block(nn.Module):
    """A pre-LN transformer block with causal self-attention."""

    def __init__(self, d, heads):
        super().__init__()
        self.h = heads
        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.o = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def attend(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4)
        if hasattr(F, "scaled_dot_product_attention"):
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # torch < 2.0
            scores = q @ k.transpose(-1, -2) / (d // self.h) ** 0.5
            mask = torch.ones(s, s, dtype=torch.bool).triu(1)
            y = scores.masked_fill(mask, float("-inf")).softmax(-1) @ v
        return self.o(y.transpose(1, 2).reshape(b, s, d))

    def forward(self, x):
        x = x + self.attend(self.n1(x))
        return x + self.mlp(self.n2(x))


def _transformer():
    b, s, d, heads, vocab = 2, 16, 32, 2, 64

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(vocab, d)
            self.block = Block(d, heads)
            self.norm = nn.LayerNorm(d)

        def forward(self, ids):
            return self.norm(self.block(self.emb(ids))) @ self.emb.weight.t()

    m = LM()
    ids = torch.randint(0, vocab, (b, s + 1))
    opt = _optimizer(torch.optim.AdamW, m.parameters(), lr=1e-3, weight_decay=0.01)
    return _train(m, lambda: F.cross_entropy(m(ids[:, :-1]).reshape(-1, vocab), ids[:, 1:].reshape(-1)), opt)


def _convnet():
    n, c, img, classes = 4, 8, 16, 10
    m = nn.Sequential(
        nn.Conv2d(3, c, 3, padding=1), nn.BatchNorm2d(c), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(c, 2 * c, 3, padding=1), nn.BatchNorm2d(2 * c), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2 * c, classes))
    x, y = torch.randn(n, 3, img, img), torch.randint(0, classes, (n,))
    opt = _optimizer(torch.optim.SGD, m.parameters(), lr=0.1, momentum=0.9, nesterov=True)
    return _train(m, lambda: F.cross_entropy(m(x), y), opt)


@capture("transformer", "pre-LN transformer block (SDPA where torch has it, else matmul-softmax-matmul), "
         "LayerNorm, GELU MLP, tied head, cross-entropy, AdamW(foreach); 2 x 16 tokens, d 32",
         record_shapes=True)
def transformer():
    return _transformer()


@capture("convnet", "conv-bn-relu, max pool, conv-bn-relu, adaptive avg pool, linear, cross-entropy, "
         "SGD(momentum, nesterov, foreach); 4 x 3 x 16 x 16", record_shapes=True)
def convnet():
    return _convnet()


@capture("rnn", "embedding, 2-layer LSTM, GRU, linear, cross-entropy, Adam; 4 x 10 tokens, d 16 "
         "(exported straight to .json.gz)", gz=True, record_shapes=True)
def rnn():
    b, s, d, vocab = 4, 10, 16, 50

    class RNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(vocab, d)
            self.lstm = nn.LSTM(d, d, num_layers=2, batch_first=True)
            self.gru = nn.GRU(d, d, batch_first=True)
            self.head = nn.Linear(d, vocab)

        def forward(self, ids):
            h, _ = self.lstm(self.emb(ids))
            h, _ = self.gru(h)
            return self.head(h)

    m = RNN()
    ids = torch.randint(0, vocab, (b, s + 1))
    opt = torch.optim.Adam(m.parameters(), lr=1e-3)
    return _train(m, lambda: F.cross_entropy(m(ids[:, :-1]).reshape(-1, vocab), ids[:, 1:].reshape(-1)), opt)


@capture("noshapes", "the transformer step with record_shapes=False", record_shapes=False)
def noshapes():
    return _transformer()


@capture("stack-memory", "the transformer step with record_shapes, with_stack and profile_memory",
         record_shapes=True, with_stack=True, profile_memory=True)
def stack_memory():
    return _transformer()


@capture("flops-modules", "the conv net step with record_shapes, with_flops and with_modules",
         record_shapes=True, with_flops=True, with_modules=True)
def flops_modules():
    return _convnet()


def _flop_counts(step):
    """FlopCounterMode's per-op counts of one call of `step` (op names as the profiler writes them), and the
    reason there are none."""
    try:
        from torch.utils.flop_counter import FlopCounterMode
    except ImportError as exc:
        return {}, f"ImportError: {exc} (FlopCounterMode is in torch 2.1 and later)"
    with FlopCounterMode(display=False) as fc:
        step()
    counts = fc.get_flop_counts().get("Global", {})
    return {"aten::" + str(k).split(".", 1)[1]: int(v) for k, v in counts.items()}, None


def run(name, out):
    fn, options, gz, note = CAPTURES[name]
    torch.manual_seed(0)
    torch.set_num_threads(1)
    step = fn()
    step()  # warm-up, unprofiled
    path = os.path.join(out, name + (".json.gz" if gz else ".json"))
    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=0, warmup=1, active=PROFILED_STEPS),
                 on_trace_ready=lambda p: p.export_chrome_trace(path), **options) as prof:
        for _ in range(1 + PROFILED_STEPS):
            step()
            prof.step()
    if gz:  # torch writes a .gz path compressed from 1.13 on (check, do not assume)
        with open(path, "rb") as f:
            assert f.read(2) == b"\x1f\x8b", f"{path} was not written gzipped"
    flops, error = _flop_counts(step)
    meta = {"name": name, "note": note, "torch": torch.__version__, "device": "cpu",
            "profiler_options": options, "profiled_steps": PROFILED_STEPS, "flops": flops,
            "flop_counter_error": error}
    with open(os.path.join(out, name + ".flops.json"), "w") as f:
        json.dump(meta, f, indent=1)
    return meta


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", help="captures to run (all when none)")
    ap.add_argument("--out", help="folder for NAME.json[.gz] and NAME.flops.json")
    ap.add_argument("--list", action="store_true", help="list the captures and exit")
    a = ap.parse_args(argv)
    if a.list or a.out is None:
        for n, (_, _, _, note) in CAPTURES.items():
            print(f"{n:14} {note}")
        return 0 if a.list else 2
    unknown = [n for n in a.names if n not in CAPTURES]
    if unknown:
        print(f"unknown captures: {', '.join(unknown)} (see --list)", file=sys.stderr)
        return 2
    os.makedirs(a.out, exist_ok=True)
    names = a.names or list(CAPTURES)
    if len(names) > 1:  # one process each
        return max(subprocess.run([sys.executable, __file__, "--out", a.out, n]).returncode for n in names)
    t0 = time.perf_counter()
    meta = run(names[0], a.out)
    err = f"  FlopCounterMode: {meta['flop_counter_error']}" if meta["flop_counter_error"] else ""
    print(f"{names[0]:14} torch {meta['torch']:14} {time.perf_counter() - t0:5.1f} s "
          f"{sum(meta['flops'].values()):>10,} FLOP (FCM, one step){err}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`predict --trace --scale` against a real capture at the scaled size, call by call, on the CPU.

Small models (a transformer block, an MLP, a convolutional net, an LSTM tagger) each run a training
step (forward, backward, optimizer) under torch.profiler (CPU, record_shapes, a schedule that marks
each step) at a base batch and at the batch or sequence the scaling names. The base trace's first
step is ingested and rescaled as `wlprof predict --trace FILE --scale DIM=F` rescales it, both on
the ingested ops table (`scale.ingest_trace`, as for a GPU trace) and on the calls a GPU would launch
(`predict_profile._cpu_calls`, what `--trace` predicts for a CPU trace and a GPU profile); the real
capture goes through the same reading, and the two are aligned op by op: names, input dims, strides
and the FLOPs and bytes `predict` costs each call with.

    python benchmarks/scale_check_cpu.py --out scale.md [--keep DIR]
"""

from __future__ import annotations

import argparse
import difflib
import json
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn as nn
import torch.nn.functional as F
from spec_check import cost_differences, described  # the same costing of calls as the spec check's
from torch.profiler import ProfilerActivity, profile, schedule

PROFILE = Path(__file__).parent / "profiles" / "h200"


class Block(nn.Module):
    """A pre-norm transformer block (causal SDPA, GELU MLP) with a token embedding and an LM head."""

    def __init__(self, vocab=97, d=48, heads=4, ff=136):
        super().__init__()
        self.emb, self.heads = nn.Embedding(vocab, d), heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, ff), nn.Linear(ff, d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, tokens):
        x = self.emb(tokens)
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (t.view(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, d)
        x = x + self.proj(a)
        x = x + self.fc2(F.gelu(self.fc1(self.ln2(x))))
        return self.head(x)


def transformer(batch: int, seq: int):
    torch.manual_seed(0)
    m = Block()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3, foreach=True)
    tokens = torch.randint(0, 97, (batch, seq))
    target = torch.randint(0, 97, (batch, seq))
    return m, opt, lambda: F.cross_entropy(m(tokens).flatten(0, 1), target.flatten())


def mlp(batch: int, seq: int):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(60, 212), nn.ReLU(), nn.Linear(212, 92), nn.SiLU(), nn.Linear(92, 11))
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, foreach=True)
    x, y = torch.randn(batch, 60), torch.randint(0, 11, (batch,))
    return m, opt, lambda: F.cross_entropy(m(x), y)


def convnet(batch: int, seq: int):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 12, 3, padding=1), nn.BatchNorm2d(12), nn.ReLU(), nn.MaxPool2d(2),
                      nn.Conv2d(12, 20, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                      nn.Linear(20, 10))
    opt = torch.optim.Adam(m.parameters(), lr=1e-3, foreach=True)
    x, y = torch.randn(batch, 3, seq, seq), torch.randint(0, 10, (batch,))  # seq: the image's side
    return m, opt, lambda: F.cross_entropy(m(x), y)


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb, self.lstm, self.out = nn.Embedding(53, 28), nn.LSTM(28, 44, batch_first=True), nn.Linear(44, 7)

    def forward(self, tokens):
        return self.out(self.lstm(self.emb(tokens))[0])


def lstm(batch: int, seq: int):
    torch.manual_seed(0)
    m = Tagger()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3, foreach=True)
    tokens, tags = torch.randint(0, 53, (batch, seq)), torch.randint(0, 7, (batch, seq))
    return m, opt, lambda: F.cross_entropy(m(tokens).flatten(0, 1), tags.flatten())


MODELS = {"transformer": transformer, "mlp": mlp, "convnet": convnet, "lstm": lstm}
# (model, base batch, base sequence (a convnet: its image's side), the scaling as --scale names it, the
# batch and sequence it means)
CASES = [
    ("transformer", 3, 13, "batch=2", 6, 13), ("transformer", 3, 13, "batch=4", 12, 13),
    ("transformer", 3, 13, "13=2", 3, 26),  # the sequence, named by its value
    ("mlp", 5, 0, "batch=2", 10, 0), ("mlp", 5, 0, "batch=4", 20, 0),
    ("convnet", 3, 18, "batch=2", 6, 18), ("convnet", 3, 18, "batch=4", 12, 18),
    ("convnet", 3, 18, "18=2", 3, 36),  # the image's side, named by its value
    ("lstm", 3, 17, "batch=2", 6, 17), ("lstm", 3, 17, "batch=4", 12, 17), ("lstm", 3, 17, "17=2", 3, 34),
    ("lstm", 3, 17, "3=2", 6, 17),  # the batch named by its value
]


def capture(model: str, batch: int, seq: int, path: Path) -> None:
    """One training step of `model` profiled (after a warm-up step, with a step marker), one thread."""
    torch.set_num_threads(1)
    m, opt, loss_fn = MODELS[model](batch, seq)

    def step():
        opt.zero_grad(set_to_none=True)
        loss_fn().backward()
        opt.step()

    step()
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                 schedule=schedule(wait=0, warmup=1, active=1, repeat=1)) as prof:
        for _ in range(2):
            step()
            prof.step()
    prof.export_chrome_trace(str(path))


def read(path: Path, launching: frozenset, cpu_calls: bool) -> pd.DataFrame:
    """The first step's calls as `predict --trace` reads them (the ops table, or a GPU's calls)."""
    from wlprof.cli.predict_profile import _cpu_calls
    from wlprof.predict.scale import ingest_trace

    ops = ingest_trace(str(path))
    steps = sorted(s for s in ops.step.unique() if s >= 0)
    ops = ops[ops.step == steps[0]]
    if cpu_calls:
        class P:
            meta = {"op_names": sorted(launching)}

        ops, _ = _cpu_calls(path, ops, P())
    return ops.sort_values("ts_us", kind="stable").reset_index(drop=True)


def compare(scaled: pd.DataFrame, real: pd.DataFrame) -> dict:
    a, b = described(scaled.reset_index(drop=True)), described(real.reset_index(drop=True))
    names = difflib.SequenceMatcher(a=list(b.op_name), b=list(a.op_name), autojunk=False)
    rows, unmatched = [], 0
    for tag, i1, i2, j1, j2 in names.get_opcodes():
        if tag != "equal":
            unmatched += max(i2 - i1, j2 - j1)
            rows += [("only in the real capture", b.op_name.iat[i], b.op_input_dims.iat[i], "") for i in range(i1, i2)]
            rows += [("only in the rescaled", a.op_name.iat[j], a.op_input_dims.iat[j], "") for j in range(j1, j2)]
            continue
        for i, j in zip(range(i1, i2), range(j1, j2), strict=True):
            ra, rb = a.iloc[j], b.iloc[i]
            what = []
            if ra.op_input_dims != rb.op_input_dims:
                what.append(f"dims: rescaled {ra.op_input_dims} real {rb.op_input_dims}")
            elif str(ra.op_input_strides) != str(rb.op_input_strides):
                what.append(f"strides: rescaled {ra.op_input_strides} real {rb.op_input_strides}")
            what += cost_differences(ra, rb, ("rescaled", "real"))
            if what:
                rows.append(("differs", ra.op_name, ra.op_input_dims if ra.op_input_dims == rb.op_input_dims else "",
                             "; ".join(what)))
    return {"calls": (len(a), len(b)), "unmatched": unmatched, "rows": rows,
            "flops": (float(np.nansum(a.flops)), float(np.nansum(b.flops))),
            "bytes": (float(np.nansum(a.bytes)), float(np.nansum(b.bytes)))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--keep", type=Path, help="keep the traces in this folder")
    args = ap.parse_args()

    from wlprof.predict.scale import parse_scale, scaled

    launching = frozenset(json.loads((PROFILE / "predictor.json").read_text())["predictor"]["meta"]["op_names"])
    tmp = tempfile.TemporaryDirectory()
    folder = args.keep or Path(tmp.name)
    folder.mkdir(parents=True, exist_ok=True)
    lines = ["| model | base (batch, seq) | --scale | real (batch, seq) | reading | calls rescaled / real | "
             "unmatched | matched, differing | FLOPs rescaled / real | bytes rescaled / real |",
             "|---|---|---|---|---|---:|---:|---:|---:|---:|"]
    details = []
    for model, b0, s0, text, b1, s1 in CASES:
        base, real_path = folder / f"{model}-b{b0}-s{s0}.json", folder / f"{model}-b{b1}-s{s1}.json"
        for b, s, p in ((b0, s0, base), (b1, s1, real_path)):
            if not p.exists():
                capture(model, b, s, p)
        dim, factor = parse_scale(text)
        for reading, cpu in (("ops table", False), ("GPU calls", True)):
            ops = read(base, launching, cpu)
            new, _ = scaled(ops, dim, factor)
            r = compare(new, read(real_path, launching, cpu))
            differing = sum(1 for x in r["rows"] if x[0] == "differs")
            lines.append(f"| {model} | {b0}, {s0 or '-'} | {text} | {b1}, {s1 or '-'} | {reading} | "
                         f"{r['calls'][0]} / {r['calls'][1]} | {r['unmatched']} | {differing} | "
                         f"{r['flops'][0]:,.0f} / {r['flops'][1]:,.0f} | {r['bytes'][0]:,.0f} / {r['bytes'][1]:,.0f} |")
            if r["rows"]:
                details.append(f"- {model} {text} ({reading}):")
                details += [f"  - {kind}: {name} {dims} {what}".rstrip() for kind, name, dims, what in r["rows"][:12]]
                if len(r["rows"]) > 12:
                    details.append(f"  - ... {len(r['rows']) - 12} more")
            print(lines[-1], flush=True)
    text = "\n".join(lines + ["", "## Per op", ""] + details) + "\n"
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()

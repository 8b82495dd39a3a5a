"""Capture real training steps and other traces wlprof did not generate, with reference counts.

Each capture is a raw torch.profiler trace (CPU + CUDA, record_shapes) of a few
steps of a model trained the way people train it, beside FlopCounterMode's count
of one step of the same model (per aten op), so that ingest, the join and the
cost registry can be checked on work wlprof never generated:

- transformer:   2 pre-LN transformer layers, embedding, SDPA (default backend), GELU
                 MLP, cross-entropy over an 8192-token vocabulary; fp32 weights under
                 bf16 autocast; fwd + bwd + AdamW (foreach). Eager and torch.compile
                 (default config, and with Inductor's benchmark_kernel metadata on).
- sdpa_<backend>: attention forward + backward forced onto one SDPA backend each.
- convnet:       a small ResNet-style net (conv-bn-relu, max pool, two residual blocks,
                 average pool, linear), cross-entropy, SGD with momentum.
- moe:           an MoE layer (router, top-2, torch._grouped_mm experts, index_add
                 combine) in bf16, fwd + bwd + AdamW.
- gcn:           a 2-layer PyG GCN on a generated graph, fwd + bwd + Adam.
- streams:       compute on the default stream while a side stream copies device to
                 device and another copies from pinned host memory.
- nccl:          a one-rank NCCL process group: all_reduce, all_gather, reduce_scatter,
                 all_to_all_single (record_param_comms and NCCL kernels in the trace).
- bandwidth:     read, write and copy bandwidth over working-set sizes from 1 MiB to 4 GiB
                 (CUDA events, warm repeats), and bf16 GEMM rate: where the L2 plateau ends.

Run on the device machine from the repository root:
    python3 benchmarks/h200/capture_training.py --out $OUT
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tarfile
import time
import traceback
from pathlib import Path

for _k in ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS"):
    os.environ[_k] = "0" if _k == "NCCL_NVLS_ENABLE" else "1"

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.profiler import ProfilerActivity, profile, record_function, schedule  # noqa: E402

DEV_TYPE = "cuda"


def log(*a):
    print(f"[{time.strftime('%H:%M:%S')}]", *a, flush=True)


def flop_counts(fn) -> dict:
    """FlopCounterMode's per-op counts of one call of `fn` (Global module)."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as fc:
        fn()
    counts = fc.get_flop_counts().get("Global", {})
    return {str(k): int(v) for k, v in counts.items()}


def capture(name: str, step, out: Path, steps: int = 2, warmup: int = 2, meta: dict | None = None) -> dict:
    """Profile `steps` steps of `step` after `warmup` unprofiled ones; write <name>.pt.trace.json."""
    device_sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    for _ in range(warmup):
        step()
    device_sync()
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    path = out / f"{name}.pt.trace.json"
    t0 = time.perf_counter()
    with profile(activities=acts, record_shapes=True, schedule=schedule(wait=0, warmup=1, active=steps),
                 on_trace_ready=lambda p: p.export_chrome_trace(str(path))) as prof:
        for _ in range(1 + steps):
            step()
            device_sync()
            prof.step()
    info = {"name": name, "trace": path.name, "profiled_steps": steps, "seconds": time.perf_counter() - t0,
            "bytes": path.stat().st_size, **(meta or {})}
    log(f"captured {name}: {info['bytes'] / 1e6:.1f} MB")
    return info


# ----------------------------------------------------------------------------- models


class Block(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class Transformer(nn.Module):
    def __init__(self, vocab=8192, d=1024, heads=16, layers=2):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        x = self.emb(idx)
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln(x))


def transformer_step(model, opt, idx, tgt):
    def step():
        with torch.autocast(DEV_TYPE, dtype=torch.bfloat16):
            logits = model(idx)
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)).float(), tgt.view(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return step


class ConvNet(nn.Module):
    def __init__(self, classes=100):
        super().__init__()
        def cbr(i, o, s=1):
            return nn.Sequential(nn.Conv2d(i, o, 3, s, 1, bias=False), nn.BatchNorm2d(o), nn.ReLU(inplace=True))
        self.stem = nn.Sequential(cbr(3, 64, 2), nn.MaxPool2d(3, 2, 1))
        self.b1 = nn.Sequential(cbr(64, 64), nn.Conv2d(64, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64))
        self.down = nn.Sequential(nn.Conv2d(64, 128, 1, 2, bias=False), nn.BatchNorm2d(128))
        self.b2 = nn.Sequential(cbr(64, 128, 2), nn.Conv2d(128, 128, 3, 1, 1, bias=False), nn.BatchNorm2d(128))
        self.fc = nn.Linear(128, classes)

    def forward(self, x):
        x = self.stem(x)
        x = F.relu(x + self.b1(x))
        x = F.relu(self.down(x) + self.b2(x))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


class MoE(nn.Module):
    def __init__(self, d=1024, f=2048, experts=16, top_k=2):
        super().__init__()
        self.router = nn.Linear(d, experts, bias=False)
        self.top_k, self.experts = top_k, experts
        # stored as nn.Linear stores weights ([out, in]); _grouped_mm takes their transposed views
        self.w1 = nn.Parameter(torch.randn(experts, f, d) / d ** 0.5)
        self.w3 = nn.Parameter(torch.randn(experts, f, d) / d ** 0.5)
        self.w2 = nn.Parameter(torch.randn(experts, d, f) / f ** 0.5)

    def forward(self, x):
        probs = torch.softmax(self.router(x), dim=-1, dtype=torch.float32)
        gate, ids = torch.topk(probs, self.top_k, dim=-1)
        gate = (gate / gate.sum(-1, keepdim=True)).to(x.dtype)
        flat = ids.reshape(-1)
        order = torch.argsort(flat, stable=True)
        tok = order // self.top_k
        xs = x.index_select(0, tok)
        counts = torch.bincount(flat, minlength=self.experts)
        offs = counts.cumsum(0).to(torch.int32)
        w1, w3, w2 = self.w1.transpose(1, 2), self.w3.transpose(1, 2), self.w2.transpose(1, 2)
        h = F.silu(torch._grouped_mm(xs, w1, offs=offs)) * torch._grouped_mm(xs, w3, offs=offs)
        y = torch._grouped_mm(h, w2, offs=offs)
        g = gate.reshape(-1).index_select(0, order)
        return torch.zeros_like(x).index_add(0, tok, y * g[:, None])


# ----------------------------------------------------------------------------- captures


def cap_transformer(out: Path, results: list, dev):
    torch.manual_seed(0)
    b, t, vocab = (4, 1024, 8192) if dev.type == "cuda" else (2, 128, 1024)
    idx = torch.randint(0, vocab, (b, t), device=dev)
    tgt = torch.randint(0, vocab, (b, t), device=dev)
    model = Transformer(vocab).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    step = transformer_step(model, opt, idx, tgt)
    step()

    def fwd_bwd():
        with torch.autocast(DEV_TYPE, dtype=torch.bfloat16):
            logits = model(idx)
            loss = F.cross_entropy(logits.view(-1, vocab).float(), tgt.view(-1))
        loss.backward()
    counts = flop_counts(fwd_bwd)
    model.zero_grad(set_to_none=True)
    results.append(capture("transformer_eager", step, out, meta={"flop_counter": counts, "batch": b, "seq": t,
                                                                 "d_model": 1024, "layers": 2, "vocab": vocab}))
    for bench in (False, True):
        import torch._dynamo as dynamo
        import torch._inductor.config as ic

        dynamo.reset()
        ic.benchmark_kernel = bench
        ic.force_disable_caches = bench  # a cached graph would come back without the metadata
        torch.manual_seed(0)
        m2 = Transformer(vocab).to(dev)
        opt2 = torch.optim.AdamW(m2.parameters(), lr=1e-4)
        cm = torch.compile(m2)
        t0 = time.perf_counter()
        s2 = transformer_step(cm, opt2, idx, tgt)
        s2()
        s2()
        log(f"compiled (benchmark_kernel={bench}) in {time.perf_counter() - t0:.0f} s")
        name = "transformer_compiled" + ("_benchmark_kernel" if bench else "")
        results.append(capture(name, s2, out, meta={"flop_counter": counts, "benchmark_kernel": bench}))
    ic.benchmark_kernel = False
    ic.force_disable_caches = False


def cap_sdpa(out: Path, results: list, dev):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    b, h, t, dh = 4, 16, 1024, 64
    g = torch.Generator(device=dev).manual_seed(0)
    q, k, v = (torch.randn(b, h, t, dh, device=dev, dtype=torch.bfloat16, generator=g).requires_grad_()
               for _ in range(3))
    for backend in (SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION,
                    SDPBackend.MATH):
        name = f"sdpa_{backend.name.lower()}"

        def step(backend=backend):
            with sdpa_kernel(backend):
                o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            o.sum().backward()
        try:
            step()
            counts = flop_counts(step)
            results.append(capture(name, step, out, meta={"flop_counter": counts, "shape": [b, h, t, dh],
                                                          "causal": True}))
        except Exception as exc:  # noqa: BLE001
            log(f"{name} failed: {exc}")
            results.append({"name": name, "error": str(exc)[:300]})


def cap_convnet(out: Path, results: list, dev):
    torch.manual_seed(0)
    model = ConvNet().to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(64, 3, 64, 64, device=dev)
    y = torch.randint(0, 100, (64,), device=dev)

    def step():
        with torch.autocast(DEV_TYPE, dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    def fwd_bwd():
        with torch.autocast(DEV_TYPE, dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
    step()
    counts = flop_counts(fwd_bwd)
    model.zero_grad(set_to_none=True)
    results.append(capture("convnet", step, out, meta={"flop_counter": counts, "batch": 64, "image": 64}))


def cap_moe(out: Path, results: list, dev):
    torch.manual_seed(0)
    model = MoE().to(dev, torch.bfloat16)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(4096, 1024, device=dev, dtype=torch.bfloat16)

    def step():
        model(x).float().pow(2).mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    step()
    counts = flop_counts(lambda: model(x).float().pow(2).mean().backward())
    model.zero_grad(set_to_none=True)
    results.append(capture("moe", step, out, meta={"flop_counter": counts, "tokens": 4096, "experts": 16,
                                                   "top_k": 2}))


def random_graph(dev, n: int, e: int, f: int, c: int):
    """(edge_index [2, e], features [n, f], labels in 0..c-1) of a uniform random graph, seeded."""
    torch.manual_seed(0)
    g = torch.Generator(device=dev).manual_seed(0)
    edge_index = torch.randint(0, n, (2, e), device=dev, generator=g)
    return edge_index, torch.randn(n, f, device=dev, generator=g), torch.randint(0, c, (n,), device=dev, generator=g)


def cap_gcn(out: Path, results: list, dev):
    from torch_geometric.nn import GCNConv

    n, e, f, c = 1 << 14, 16 << 14, 128, 16
    edge_index, x, y = random_graph(dev, n, e, f, c)

    class GCN(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1, self.c2 = GCNConv(f, f), GCNConv(f, c)

        def forward(self, x, ei):
            return self.c2(F.relu(self.c1(x, ei)), ei)

    model = GCN().to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)

    def step():
        F.cross_entropy(model(x, edge_index), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    step()
    counts = flop_counts(lambda: F.cross_entropy(model(x, edge_index), y).backward())
    model.zero_grad(set_to_none=True)
    results.append(capture("gcn", step, out, meta={"flop_counter": counts, "nodes": n, "edges": e,
                                                   "features": f}))


def cap_streams(out: Path, results: list, dev):
    a = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
    src = torch.randn(64 << 20, device=dev)
    dst = torch.empty_like(src)
    host = torch.randn(32 << 20).pin_memory()
    dev_buf = torch.empty(32 << 20, device=dev)
    s_copy, s_h2d = torch.cuda.Stream(), torch.cuda.Stream()

    def step():
        with record_function("streams/compute"):
            c = a @ a
            for _ in range(3):
                c = c @ a
        with torch.cuda.stream(s_copy), record_function("streams/d2d"):
            dst.copy_(src, non_blocking=True)
        with torch.cuda.stream(s_h2d), record_function("streams/h2d"):
            dev_buf.copy_(host, non_blocking=True)
        torch.cuda.current_stream().wait_stream(s_copy)
        torch.cuda.current_stream().wait_stream(s_h2d)
        return c

    results.append(capture("streams", step, out, meta={"d2d_bytes": src.numel() * 4, "h2d_bytes": host.numel() * 4}))


def cap_nccl(out: Path, results: list, dev):
    import torch.distributed as dist

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29531")
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda", torch.cuda.current_device()))
    x = torch.randn(16 << 20, device=dev, dtype=torch.bfloat16)
    gathered = torch.empty(16 << 20, device=dev, dtype=torch.bfloat16)
    a2a = torch.empty_like(x)

    def step():
        dist.all_reduce(x)
        dist.all_gather_into_tensor(gathered, x)
        dist.reduce_scatter_tensor(a2a, gathered)
        dist.all_to_all_single(a2a, x)
        return x * 2

    try:
        results.append(capture("nccl", step, out, meta={"world_size": 1, "nccl": ".".join(map(str, torch.cuda.nccl.version()))}))
    finally:
        dist.destroy_process_group()


def bandwidth(out: Path, results: list, dev):
    """Read, write and copy GB/s per working-set size (bytes touched per call), warm repeats."""
    rows = []

    def timed(fn, reps):
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        out_us = []
        for _ in range(reps):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            e.synchronize()
            out_us.append(s.elapsed_time(e) * 1e3)
        return out_us

    for log2 in range(20, 33):
        nbytes = 1 << log2
        n = nbytes // 4
        x = torch.randn(n, device=dev)
        y = torch.empty_like(x)
        reps = 50 if log2 < 28 else 15
        # several calls per event pair for small sizes: a single launch would be all overhead
        inner = max(1, (1 << 26) // nbytes)
        kernels = {
            "read": (lambda x=x, inner=inner: [torch.sum(x) for _ in range(inner)], nbytes),
            "write": (lambda y=y, inner=inner: [y.fill_(1.0) for _ in range(inner)], nbytes),
            "copy": (lambda x=x, y=y, inner=inner: [y.copy_(x) for _ in range(inner)], 2 * nbytes),
        }
        for kind, (fn, touched) in kernels.items():
            us = [t / inner for t in timed(fn, reps)]
            med = statistics.median(us)
            rows.append({"kind": kind, "tensor_bytes": nbytes, "bytes_per_call": touched, "calls_per_sample": inner,
                         "median_us": med, "min_us": min(us), "max_us": max(us),
                         "gbps_median": touched / med / 1e3, "gbps_best": touched / min(us) / 1e3})
        del x, y
        torch.cuda.empty_cache()
    a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    us = timed(lambda: a @ a, 20)
    rows.append({"kind": "bf16 gemm 8192", "median_us": statistics.median(us),
                 "tflops_median": 2 * 8192 ** 3 / statistics.median(us) / 1e6})
    (out / "bandwidth.json").write_text(json.dumps(rows, indent=1))
    results.append({"name": "bandwidth", "rows": len(rows)})
    for r in rows:
        if "gbps_median" in r:
            log(f"{r['kind']:5s} {r['tensor_bytes'] / 2**20:8.0f} MiB: {r['gbps_median']:8.0f} GB/s median "
                f"({r['gbps_best']:.0f} best)")


def run_captures(fns, work: Path, dev, only: str, info: dict, results: list, prefix: str = "") -> None:
    """Run each capture `fn(work, results, dev)` named in `only` (all when empty; a name is the function's,
    less `prefix`), keeping the others when one fails; `work/captures.json` is rewritten after each."""
    for fn in fns:
        if only and fn.__name__.removeprefix(prefix) not in only.split(","):
            continue
        t0 = time.perf_counter()
        try:
            fn(work, results, dev)
        except Exception as exc:  # noqa: BLE001 - one failed capture must not lose the others
            traceback.print_exc()
            results.append({"name": fn.__name__, "error": f"{type(exc).__name__}: {str(exc)[:300]}"})
        log(f"{fn.__name__} took {time.perf_counter() - t0:.0f} s")
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        (work / "captures.json").write_text(json.dumps({**info, "captures": results}, indent=1))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default="")
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()
    out = Path(args.out)
    work = out / "traces"
    work.mkdir(parents=True, exist_ok=True)
    global DEV_TYPE
    dev = torch.device(args.device)
    DEV_TYPE = dev.type
    torch.backends.cuda.matmul.allow_tf32 = False
    results: list = []
    info = {"torch": torch.__version__, "cuda": torch.version.cuda,
            "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
            "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "argv": sys.argv}
    try:
        import torch_geometric

        info["torch_geometric"] = torch_geometric.__version__
    except ImportError:
        pass
    sections = [bandwidth, cap_transformer, cap_sdpa, cap_convnet, cap_moe, cap_gcn, cap_streams, cap_nccl]
    run_captures(sections, work, dev, args.only, info, results)
    with tarfile.open(out / "training_traces.tgz", "w:gz") as tar:
        tar.add(work, arcname="training_traces")
    for p in work.iterdir():
        p.unlink()
    work.rmdir()
    log("done")


if __name__ == "__main__":
    main()

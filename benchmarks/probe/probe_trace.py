"""One-off probe: capture raw torch.profiler traces of representative ops on the GPU.

Used once to learn the exact trace format (event categories, args) before
writing the parser. Output lands in $OUT.
"""
import gzip
import json
import os

import torch
from torch.profiler import ProfilerActivity, profile, record_function

out = os.environ.get("OUT", "/tmp/probe")
os.makedirs(out, exist_ok=True)
dev = "cuda"
print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name(), torch.cuda.get_device_capability())
print("grouped_mm:", hasattr(torch, "_grouped_mm"))
bf = torch.bfloat16
a = torch.randn(256, 512, device=dev, dtype=bf)
w = torch.nn.Linear(512, 1024, device=dev, dtype=bf)
x32 = torch.randn(1 << 20, device=dev)
idx = torch.randint(0, 1000, (5000,), device=dev)
src = torch.randn(5000, 64, device=dev)
feat = torch.randn(1000, 64, device=dev)
n = 1000
rows = torch.randint(0, n, (5000,), device=dev); cols = torch.randint(0, n, (5000,), device=dev)
adj = torch.sparse_coo_tensor(torch.stack([rows, cols]), torch.ones(5000, device=dev), (n, n)).coalesce().to_sparse_csr()

def step():
    with record_function("t/gemm"):
        y = w(a); z = a @ a.T; zz = torch.mm(a, a.T)
    with record_function("t/elementwise"):
        r = torch.relu(x32); g = torch.nn.functional.gelu(x32); s = torch.nn.functional.silu(x32)
        d = torch.dot(x32, x32); ad = x32 + x32; mu = x32 * 2.0
        sm = torch.softmax(y.float(), -1); ln = torch.nn.functional.layer_norm(y, (1024,))
        su = y.sum(); mx = y.max(dim=-1)
    with record_function("t/index"):
        gs = feat.index_select(0, idx)
        out = torch.zeros(1000, 64, device=dev).scatter_add_(0, idx[:, None].expand(-1, 64), src)
        out2 = torch.zeros(1000, 64, device=dev).index_add_(0, idx, src)
        sp = torch.sparse.mm(adj, feat)
        tk = torch.topk(x32, 8); so = torch.sort(x32[:4096]); cs = torch.cumsum(x32, 0); bc = torch.bincount(idx)
        e = torch.nn.functional.embedding(idx, feat)
        c = torch.cat([feat, feat]); cc = feat.t().contiguous(); t16 = feat.to(bf)
    if hasattr(torch, "_grouped_mm"):
        with record_function("t/grouped"):
            xg = torch.randn(64, 256, device=dev, dtype=bf); wg = torch.randn(4, 256, 128, device=dev, dtype=bf)
            offs = torch.tensor([16, 32, 48, 64], device=dev, dtype=torch.int32)
            gm = torch._grouped_mm(xg, wg, offs=offs)
    nz = (idx == 3).nonzero()
    torch.cuda.synchronize()

for _ in range(3): step()
g = torch.cuda.CUDAGraph()
s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    for _ in range(2): yy = w(a); rr = torch.relu(yy)
torch.cuda.current_stream().wait_stream(s)
with torch.cuda.graph(g):
    yy = w(a); rr = torch.relu(yy)
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True,
             schedule=torch.profiler.schedule(wait=0, warmup=1, active=2),
             on_trace_ready=lambda p: p.export_chrome_trace(os.path.join(out, "probe_trace.json.gz"))) as prof:
    for i in range(3):
        with record_function(f"wlprof/step#{i}"):
            step()
            g.replay(); torch.cuda.synchronize()
        prof.step()
p = os.path.join(out, "probe_trace.json.gz")
print("trace bytes", os.path.getsize(p))
d = json.load(gzip.open(p))
print({k: (v if k != "traceEvents" else len(v)) for k, v in d.items()})
from collections import Counter

print(Counter(e.get("cat") for e in d["traceEvents"]))
print(Counter(e["name"] for e in d["traceEvents"] if e.get("cat") in ("cuda_runtime", "cuda_driver")))
# timing semantics
def tm(fn, n=50):
    ts = []
    for _ in range(n):
        torch.cuda.synchronize(); s0 = torch.cuda.Event(enable_timing=True); s1 = torch.cuda.Event(enable_timing=True)
        s0.record(); fn(); s1.record(); torch.cuda.synchronize(); ts.append(s0.elapsed_time(s1) * 1e3)
    ts.sort(); return ts[len(ts)//2]
small = torch.randn(64, 64, device=dev)
print("64x64 add single-call us", tm(lambda: small + small))
try:
    from torch.utils.flop_counter import FlopCounterMode
    with FlopCounterMode(display=False) as fc:
        w(a); torch.sparse.mm(adj, feat)
        xg = torch.randn(64, 256, device=dev, dtype=bf); wg = torch.randn(4, 256, 128, device=dev, dtype=bf)
        offs = torch.tensor([16, 32, 48, 64], device=dev, dtype=torch.int32)
        torch._grouped_mm(xg, wg, offs=offs)
    print("flopcounter", fc.get_total_flops())
except Exception as ex:
    print("flopcounter err", ex)
import subprocess

print(subprocess.run(["bash", "-lc", "which ncu; ncu --version | tail -1; nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv"], capture_output=True, text=True).stdout)

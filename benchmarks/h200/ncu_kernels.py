"""Kernels for ncu to measure DRAM bytes of: the roofline micro-kernels at 2^26 bf16 elements.

Run under `ncu --clock-control none --metrics dram__bytes_read.sum,dram__bytes_write.sum,...`
(benchmarks/h200/core.sh). Each op runs once after one warm-up, on inputs four times the
L2, so DRAM traffic is comparable with wlprof's compulsory bytes:
copy/relu/gelu/silu read 2^27 bytes and write 2^27 bytes; dot reads 2^28.
"""

import torch
import torch.nn.functional as F

n = 1 << 26
x = torch.randn(n, device="cuda", dtype=torch.bfloat16)
y = torch.randn(n, device="cuda", dtype=torch.bfloat16)
dst = torch.empty_like(x)
ops = {"copy": lambda: dst.copy_(x), "relu": lambda: torch.relu(x), "gelu": lambda: F.gelu(x),
       "silu": lambda: F.silu(x), "dot": lambda: torch.dot(x, y)}
for name, fn in ops.items():
    fn()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push(name)
    fn()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()

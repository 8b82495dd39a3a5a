#!/usr/bin/env bash
# call X (2026-12-02): the GPU tests and the fast tier on torch 2.11 with CUDA after session 11's changes
# (the distributed launcher's messages and threads, costs read from a caller's record, the predictor's
# dtype transfer, mask copies, SpMM passes and host timeline).
#   bash benchmarks/h200/call_x.sh      # on the H200, from the repository root
source "$(dirname "$0")/common.sh"
{
step "machine"; machine
N=""; python3 -c "import xdist" 2>/dev/null && N="-n 8 --dist loadfile"; echo "xdist: ${N:-none}"
step "the GPU tests"
timeout 120 python3 -m pytest -q -m gpu -o addopts= -p no:cacheprovider > "$OUT/pytest_gpu.txt" 2>&1; echo "rc $?"
tail -3 "$OUT/pytest_gpu.txt"
step "the fast tier"
timeout 300 python3 -m pytest -q -m "not slow" -o addopts= $N -p no:cacheprovider > "$OUT/pytest_fast.txt" 2>&1
echo "rc $?"; tail -6 "$OUT/pytest_fast.txt"
step "a prediction on this machine"
$WL predict --profile benchmarks/profiles/h200 --spec 'gemm shapes=2048x2048x8192 dtype=float16' 2>&1 | tail -8
echo "done at $SECONDS s"
} 2>&1 | quiet_log | tee "$OUT/log.txt"
rm -rf "$OUT/cache"

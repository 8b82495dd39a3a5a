#!/usr/bin/env bash
# call X (2026-12-02): the GPU tests and the fast tier on torch 2.11 with CUDA after session 11's changes
# (the distributed launcher's messages and threads, costs read from a caller's record, the predictor's
# dtype transfer, mask copies, SpMM passes and host timeline).
#   bash benchmarks/h200/call_x.sh      # on the H200, from the repository root
source "$(dirname "$0")/common.sh"
{
step "machine"; machine
suite_steps
step "a prediction on this machine"
$WL predict --profile benchmarks/profiles/h200 --spec 'gemm shapes=2048x2048x8192 dtype=float16' 2>&1 | tail -8
echo "done at $SECONDS s"
} 2>&1 | quiet_log | tee "$OUT/log.txt"
rm -rf "$OUT/cache"

#!/usr/bin/env bash
# call Y (2026-12-02): held-out set K (workloads/heldout/set_k, committed at 88bda80 before any model change
# it judges) measured once; the GPU tests. Tables only come back (tgz, no Chrome traces).
#   bash benchmarks/h200/call_y.sh      # on the H200, from the repository root
source "$(dirname "$0")/common.sh"
{
step "machine"; machine
step "held-out set_k"
timeout 420 python3 benchmarks/h200/sweep_many.py --traces "$T/heldout_k" --device cuda workloads/heldout/set_k/*.toml
tar czf "$OUT/heldout_set_k.tgz" --exclude=_chrome -C "$T" heldout_k
echo "set k at $SECONDS s"
step "the GPU tests"
timeout 120 python3 -m pytest -q -m gpu -o addopts= -p no:cacheprovider > "$OUT/pytest_gpu.txt" 2>&1; echo "rc $?"
tail -3 "$OUT/pytest_gpu.txt"
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv
ls -la "$OUT"
echo "done at $SECONDS s"
} 2>&1 | quiet_log | tee "$OUT/log.txt"
rm -rf "$OUT/cache"

#!/usr/bin/env bash
# call W (2026-12-02): held-out set J (workloads/heldout/set_j, committed at 661cd73 before any model change
# it judges) measured once; the GPU tests after the distributed launcher's changes. Tables only come back
# (tgz, no Chrome traces).
#   bash benchmarks/h200/call_w.sh      # on the H200, from the repository root
source "$(dirname "$0")/common.sh"
{
step "machine"; machine
git log --oneline -1 2>/dev/null || true
step "held-out set_j"
timeout 330 python3 benchmarks/h200/sweep_many.py --traces "$T/heldout_j" --device cuda workloads/heldout/set_j/*.toml
tar czf "$OUT/heldout_set_j.tgz" --exclude=_chrome -C "$T" heldout_j
echo "set j at $SECONDS s"
step "the GPU tests"
timeout 120 python3 -m pytest -q -m gpu -o addopts= -p no:cacheprovider > "$OUT/pytest_gpu.txt" 2>&1; echo "rc $?"
tail -3 "$OUT/pytest_gpu.txt"
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv
ls -la "$OUT"
echo "done at $SECONDS s"
} 2>&1 | quiet_log | tee "$OUT/log.txt"
rm -rf "$OUT/cache"

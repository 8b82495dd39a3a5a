#!/usr/bin/env bash
# call Y, second command (2026-12-02): set K's k_moe_a, whose concentrated:1 (infeasible at top-2) was refused
# in the first command, rerun with concentrated:2; no model or profile had changed in between.
#   bash benchmarks/h200/call_y2.sh      # on the H200, from the repository root
source "$(dirname "$0")/common.sh"
{
step "machine"; machine
step "held-out set_k, k_moe_a"
timeout 300 python3 benchmarks/h200/sweep_many.py --traces "$T/heldout_k" --device cuda workloads/heldout/set_k/k_moe_a.toml
tar czf "$OUT/heldout_set_k_moe_a.tgz" --exclude=_chrome -C "$T" heldout_k
echo "done at $SECONDS s"
} 2>&1 | quiet_log | tee "$OUT/log.txt"
rm -rf "$OUT/cache"

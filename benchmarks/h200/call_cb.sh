#!/usr/bin/env bash
# call CB (2026-12-04): held-out set P (optimizer steps at launch-splitting tensor counts; odd-K GEMMs in the
# nt, linear and nn layouts), written before this call.
#   bash benchmarks/h200/call_cb.sh      # on the H200, from the repository root
source "$(dirname "$0")/common.sh"
{
step "machine"; machine
step "held-out set P"
timeout 300 python3 benchmarks/h200/sweep_many.py --traces "$T/heldout_p" --device cuda workloads/heldout/set_p/*.toml
tar czf "$OUT/heldout_set_p.tgz" --exclude=_chrome -C "$T" heldout_p
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv
echo "done at $SECONDS s"
} 2>&1 | quiet_log > "$OUT/log.txt"
cat "$OUT/log.txt"
rm -rf "$OUT/cache"

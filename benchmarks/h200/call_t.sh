#!/usr/bin/env bash
# call T (2026-12-02): held-out set I (workloads/heldout/set_i, written before any model change it judges)
# measured once, and sets E, F, G and H again for their tables (their earlier runs were not kept), for the
# Level-3 work on the CPU. Tables only come back (tgz, no Chrome traces).
#   bash benchmarks/h200/call_t.sh      # on the H200, from the repository root
source "$(dirname "$0")/common.sh"
{
step "machine"; machine
for s in i h e f g; do
  step "held-out set_$s"
  timeout 200 python3 benchmarks/h200/sweep_many.py --traces "$T/heldout_$s" --device cuda workloads/heldout/set_$s/*.toml
  tar czf "$OUT/heldout_set_$s.tgz" --exclude=_chrome -C "$T" heldout_$s
  echo "set $s at $SECONDS s"
done
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv
ls -la "$OUT"
echo "done at $SECONDS s"
} 2>&1 | quiet_log | tee "$OUT/log.txt"
rm -rf "$OUT/cache"

#!/usr/bin/env bash
# call AB (2026-12-03): held-out sets E-I measured again for their tables (the runs of earlier calls were not
# kept), for a Level-3 model round on the CPU judged on those sets; set K stays the round's final judge.
# Tables only come back (tgz, no Chrome traces).
#   bash benchmarks/h200/call_ab.sh      # on the H200, from the repository root
source "$(dirname "$0")/common.sh"
{
step "machine"; machine
for s in ${SETS:-e f g h i}; do
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

#!/usr/bin/env bash
# call AC (2026-12-03): training steps at several batches for `predict --trace --scale batch=F`
# (capture_scaled.py), then held-out sets E-I measured again for their tables while the call's time
# lasts (each set's tgz written when it ends).
#   bash benchmarks/h200/call_ac.sh      # on the H200, from the repository root
source "$(dirname "$0")/common.sh"
{
step "machine"; machine
step "training steps at several batches"
timeout 200 python3 benchmarks/h200/capture_scaled.py --out "$OUT"
echo "captures at $SECONDS s"
for s in ${SETS:-e f g h i}; do
  if [ "$SECONDS" -gt "${STOP_AT:-430}" ]; then echo "set $s left out at $SECONDS s"; continue; fi
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

#!/usr/bin/env bash
# call FB (2026-12-07): on an H100, the committed H100 profile (benchmarks/profiles/h100, 5 GPU-minutes) extended
# by the sections its budget left out, up to ten GPU-minutes in all, then held-out set M on that H100 to score it;
# on an H200, call FA's H200 steps instead (the shipped profile extended by the new layers and mixed-precision
# kernels, held-out sets K and M).
#   bash benchmarks/h200/call_fb.sh      # on the device machine, from the repository root
source "$(dirname "$0")/common.sh"
MAX=${MAX:-560}
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case $name in
  "NVIDIA H200") exec bash "$(dirname "$0")/call_fa.sh" ;;
  *H100*) ;;
  *) echo "no step for $name"; exit 3 ;;
esac
{
step "machine"; machine
step "profile --extend ($name)"
cp -r benchmarks/profiles/h100 "$T/profile"
have=$(python3 -c "import json; print(json.load(open('$T/profile/profile.json'))['gpu_minutes'])")
bud=$(python3 -c "print(round(min(9.9 - $have, ($MAX - 250) / 60), 2))")
echo "profile holds $have GPU-minutes; extending by $bud"
timeout $(python3 -c "print(int($bud * 60 + 90))") $WL profile --device cuda -o "$T/profile" --extend --budget-minutes "$bud" 2>&1 | tail -12
tar czf "$OUT/profile.tgz" --exclude=traces -C "$T" profile
if [ "$SECONDS" -lt $(( MAX - 170 )) ]; then
  step "held-out set_m"
  timeout $(( MAX - SECONDS - 10 )) python3 benchmarks/h200/sweep_many.py --traces "$T/heldout_m" --device cuda workloads/heldout/set_m/*.toml
  tar czf "$OUT/heldout_set_m.tgz" --exclude=_chrome -C "$T" heldout_m
fi
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv
ls -la "$OUT"
echo "done at $SECONDS s"
} 2>&1 | quiet_log | tee "$OUT/log.txt"
rm -rf "$OUT/cache"

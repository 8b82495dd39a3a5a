#!/usr/bin/env bash
# call AH (2026-12-03): the grid's layer studies `images amp` and `images large` and its optim section
# (AdamW and SGD, foreach and fused, over 4 and 32 float32 tensors of 4,096 to 33,554,432 elements)
# measured again into a copy of the shipped profile, after `wlprof profile` took the device's ceilings
# out of the first section's seconds (calls AF and AG charged the calibration to it).
#   bash benchmarks/h200/call_ah.sh      # on the H200, from the repository root
source "$(dirname "$0")/common.sh"
P=$T/profile
{
step "machine"; machine
cp -r benchmarks/profiles/h200 "$P"
$WL profile -o "$P" --drop 'profile:layers images amp' --drop 'profile:layers images large' \
  --reason "measured again in call AH, the calibration outside the sections' seconds" -q
step "profile --extend --section layers --section optim"
timeout 240 $WL profile --device cuda -o "$P" --extend --section layers --section optim --budget-minutes 1.5 -q
python3 -c "import json; p=json.load(open('$P/profile.json')); print(p['gpu_minutes'], p['extended'][-1]['calibration'], [(s['study'], s['points'], s['seconds']) for s in p['sections'][-3:]])"
tar czf "$OUT/profile.tgz" -C "$T" profile/profile.json profile/predictor.json profile/ops.parquet profile/steps.parquet
echo "profile at $SECONDS s"
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv
echo "done at $SECONDS s"
} 2>&1 | quiet_log | tee "$OUT/log.txt"
rm -rf "$OUT/cache"

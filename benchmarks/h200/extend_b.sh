#!/usr/bin/env bash
# H200 device call: extend the shipped profile with the studies its budget left out, then score the
# profile before and after on held-out set B (workloads/heldout/set_b/), which no earlier call measured.
#
#   bash benchmarks/h200/extend_b.sh                 # on the H200, from the repository root (~8 minutes)
#   DEVICE=cpu bash benchmarks/h200/extend_b.sh      # the same steps as a CPU miniature (a dry run)
#
# 1. `wlprof profile --device cuda -o $T/profile --extend` on a copy of benchmarks/profiles/h200 (BUDGET_MIN,
#    default 3.3 minutes of grid: the profile stays within ten GPU-minutes);
# 2. the set-B studies in one process into $T/heldout_b;
# 3. benchmarks/heldout.py on set B with the shipped profile and with the extended one;
# 4. $OUT: log.txt, profile.tgz (the extended profile), heldout_b.tgz (the runs without Chrome traces),
#    heldout_before.md, heldout_after.md.
source "$(dirname "$0")/common.sh"
DEVICE=${DEVICE:-cuda}
BUDGET_MIN=${BUDGET_MIN:-3.3}
if [ "$DEVICE" = cpu ]; then SHRINK=--shrink; else SHRINK=; fi
P=$T/profile
H=$T/heldout_b
START=$(date +%s)
qlog() { grep --line-buffered -v -e '^USDT' -e 'Profiler clears events' -e '_warn_once'; }
elapsed() { echo $(( $(date +%s) - START )); }
LIMIT=${LIMIT:-575}
left() { echo $(( LIMIT - $(elapsed) )); }
{
step "machine"
if [ "$DEVICE" = cuda ]; then machine; else python3 -c "import torch; print('torch', torch.__version__)"; fi
SRC=${PROFILE:-benchmarks/profiles/h200}
cp -r "$SRC" "$P"

step "profile --extend ($BUDGET_MIN min budget)"
timeout 300 $WL profile --device "$DEVICE" -o "$P" --extend --budget-minutes "$BUDGET_MIN"
tar czf "$OUT/profile.tgz" -C "$T" profile/profile.json profile/predictor.json profile/ops.parquet profile/steps.parquet
echo "profile done at $(elapsed) s"

step "held-out set B"
timeout $(( $(left) < 230 ? $(left) : 230 )) python3 benchmarks/h200/sweep_many.py --traces "$H" --device "$DEVICE" \
  $SHRINK workloads/heldout/set_b/*.toml
tar czf "$OUT/heldout_b.tgz" --exclude=_chrome -C "$T" heldout_b
echo "held-out done at $(elapsed) s"

step "the ladder on set B: the shipped profile, then the extended one"
for which in before after; do
  prof=$SRC; [ "$which" = after ] && prof=$P
  [ "$(left)" -gt 20 ] && timeout $(( $(left) - 5 )) python3 benchmarks/heldout.py --profile "$prof" --traces "$H" \
    --out "$OUT/heldout_$which.md" > "$T/heldout_$which.log" 2>&1
  grep -E "^\| L3 profile \| all|^\| noise floor \| all" "$OUT/heldout_$which.md"
done
echo "scoring done at $(elapsed) s"
step "done"; [ "$DEVICE" = cuda ] && nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv
} 2>&1 | qlog | tee "$OUT/log.txt"
rm -rf "$OUT/cache"
ls -la "$OUT"

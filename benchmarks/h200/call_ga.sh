#!/usr/bin/env bash
# call GA (2026-12-07): held-out set R (written before this call), the shipped profile extended with the grid's
# studies it lacks (the layers studies added after it was measured, mixed precision's micro-kernels), then
# held-out sets M and Q again (their earlier captures did not survive), each within what the call has left.
#   bash benchmarks/h200/call_ga.sh      # on the H200, from the repository root (~9 minutes)
#   REQUIRE=H200 bash benchmarks/h200/call_ga.sh   # run nothing on another GPU
# $OUT: heldout_set_{r,m,q}.tgz (the runs), profile.tgz (the extended profile: the H100's on an H100), log.txt.
source "$(dirname "$0")/common.sh"
P=$T/profile
LIMIT=${LIMIT:-585}
{
step "machine"; machine
require_gpu
capture r 200
step "profile --extend"
SRC=benchmarks/profiles/h200; nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H100 && SRC=benchmarks/profiles/h100
echo "extending $SRC"; cp -r "$SRC" "$P"
timeout 150 $WL profile --device cuda -o "$P" --extend --section layers --section "elementwise mixed" --budget-minutes 1.5 -q
tar czf "$OUT/profile.tgz" -C "$T" profile/profile.json profile/predictor.json profile/ops.parquet profile/steps.parquet
echo "profile done at $SECONDS s"
capture m 170
capture q 200
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv
ls -la "$OUT"
echo "done at $SECONDS s"
} 2>&1 | quiet_log | tee "$OUT/log.txt"
rm -rf "$OUT/cache"

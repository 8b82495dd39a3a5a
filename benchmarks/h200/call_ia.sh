#!/usr/bin/env bash
# call IA (2026-12-08): held-out set S (written before any model change it is to judge) on whatever GPU comes;
# on an H200 first the shipped H200 profile extended with the grid's studies it lacks (the layers studies added
# after it was measured, mixed precision's micro-kernels), then set S, then set R (whose only capture is the H100's).
#   bash benchmarks/h200/call_ia.sh   # from the repository root
#   LIMIT=400 ...                     # stop starting captures past this many seconds
# $OUT: profile.tgz (H200 only), heldout_set_{s,r}.tgz (the runs), log.txt.
source "$(dirname "$0")/common.sh"
LIMIT=${LIMIT:-585}
{
step "machine"; machine
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  extend_profile benchmarks/profiles/h200
  capture s 220
  capture r 200
else
  capture s 300
fi
finish
} 2>&1 | quiet_log | tee "$OUT/log.txt"
rm -rf "$OUT/cache"

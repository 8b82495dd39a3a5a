#!/usr/bin/env bash
# call HA (2026-12-08): the shipped H200 profile extended with the grid's studies it lacks (the layers studies
# added after it was measured, mixed precision's micro-kernels), then held-out set R on the H200 (set R's only
# capture is the H100's), then held-out sets M and Q for choosing what to drop, each within what the call has left.
#   REQUIRE=H200 bash benchmarks/h200/call_ha.sh   # from the repository root; runs nothing on another GPU
#   LIMIT=400 ...                                   # stop starting captures past this many seconds
# $OUT: profile.tgz (the extended profile), heldout_set_{r,m,q}.tgz (the runs), log.txt.
source "$(dirname "$0")/common.sh"
LIMIT=${LIMIT:-585}
{
step "machine"; machine
require_gpu
SRC=benchmarks/profiles/h200; nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H100 && SRC=benchmarks/profiles/h100
extend_profile "$SRC"
capture r 200
capture m 170
capture q 200
finish
} 2>&1 | quiet_log | tee "$OUT/log.txt"
rm -rf "$OUT/cache"

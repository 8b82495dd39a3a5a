#!/usr/bin/env bash
# H200, device call I: the placement of every committed mix validated on the device (place.sh, with the
# committed H200 offline profile for the profile planner), the ceilings re-measured with the best of
# several GEMM sizes and every committed kernel re-placed (part_g.sh), and the halo exchange with
# narrow strips (halo.sh). Each part writes its own folder, packed as one archive ($OUT/{p,g,h}.tgz).
# Run from the repository root on the device machine:  bash benchmarks/h200/part_i.sh  (about 8 minutes)
set -u
HERE=$(dirname "$0")
OUT=${OUT:-/tmp/wlprof-out}; mkdir -p "$OUT"
START=$(date +%s)
OUT=$OUT/p PROFILE=${PROFILE:-benchmarks/results/2026-11-29-h200/offline} BUDGET=${BUDGET:-280} bash "$HERE/place.sh"
echo "place done at $(( $(date +%s) - START )) s"
OUT=$OUT/g bash "$HERE/part_g.sh"
echo "ceilings done at $(( $(date +%s) - START )) s"
OUT=$OUT/h bash "$HERE/halo.sh"
echo "halo done at $(( $(date +%s) - START )) s"
for d in p g h; do tar czf "$OUT/$d.tgz" -C "$OUT" "$d" && rm -rf "${OUT:?}/$d"; done
ls -la "$OUT"

#!/usr/bin/env bash
# H200 device call: extend the shipped profile with the grid studies added to it (the GNN fill-in at mean
# degrees 32 and 6, the odd-width GEMMs), then measure held-out sets A and C again for their tables.
#
#   bash benchmarks/h200/extend_grid.sh            # on the H200, from the repository root (~6 minutes)
#
# 1. `wlprof profile --device cuda -o $T/profile --extend --section "gnn raw" --section "gemm odd"` on a copy
#    of benchmarks/profiles/h200; $OUT/profile.tgz: its profile.json, predictor.json, ops and steps;
# 2. SET=. (set A: workloads/heldout/*.toml) and SET=set_c with benchmarks/h200/heldout_set.sh, PLACE=0,
#    each under $OUT/set_a, $OUT/set_c (their runs and their scores with the shipped profile).
# The studies the new ones replace are dropped from the profile afterwards (benchmarks/profile_drop.py).
source "$(dirname "$0")/common.sh"
P=$T/profile
{
step "machine"
machine
cp -r benchmarks/profiles/h200 "$P"
step "profile --extend"
timeout 240 $WL profile --device cuda -o "$P" --extend --section "gnn raw" --section "gemm odd" --budget-minutes 2.5
tar czf "$OUT/profile.tgz" -C "$T" profile/profile.json profile/predictor.json profile/ops.parquet profile/steps.parquet
echo "profile done at $SECONDS s"
} 2>&1 | quiet_log | tee "$OUT/log.txt"
OUT=$OUT/set_a SET=. PLACE=0 bash "$(dirname "$0")/heldout_set.sh" > /dev/null 2>&1
echo "set A done at $SECONDS s" | tee -a "$OUT/log.txt"
OUT=$OUT/set_c SET=set_c PLACE=0 bash "$(dirname "$0")/heldout_set.sh" > /dev/null 2>&1
echo "set C done at $SECONDS s" | tee -a "$OUT/log.txt"
rm -rf "$OUT/cache"

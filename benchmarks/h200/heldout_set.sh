#!/usr/bin/env bash
# H200 device call: measure one held-out set and score the shipped profile on it; then, with what the
# call's time leaves, the placement of the committed mixes planned with that profile (place.sh).
#
#   SET=set_c bash benchmarks/h200/heldout_set.sh          # on the H200, from the repository root
#   DEVICE=cpu SET=set_c bash benchmarks/h200/heldout_set.sh   # the same steps as a CPU miniature
#
# 1. the studies of workloads/heldout/$SET/*.toml in one process into $T/heldout;
# 2. benchmarks/heldout.py with $PROFILE (default benchmarks/profiles/h200) on those runs;
# 3. PLACE=1 (default): benchmarks/h200/place.sh with that profile, its files under $OUT/place/;
# 4. $OUT: log.txt, heldout_$SET.md, heldout_$SET.tgz (the runs without Chrome traces).
source "$(dirname "$0")/common.sh"
DEVICE=${DEVICE:-cuda}
SET=${SET:?name a folder of workloads/heldout/, e.g. SET=set_c}
PROFILE=${PROFILE:-benchmarks/profiles/h200}
PLACE=${PLACE:-1}
if [ "$DEVICE" = cpu ]; then SHRINK=--shrink; else SHRINK=; fi
H=$T/heldout
{
step "machine"
if [ "$DEVICE" = cuda ]; then machine; else python3 -c "import torch; print('torch', torch.__version__)"; fi
step "held-out $SET"
timeout 260 python3 benchmarks/h200/sweep_many.py --traces "$H" --device "$DEVICE" $SHRINK workloads/heldout/"$SET"/*.toml
tar czf "$OUT/heldout_$SET.tgz" --exclude=_chrome -C "$T" heldout
step "the ladder on $SET with $PROFILE"
timeout 90 python3 benchmarks/heldout.py --profile "$PROFILE" --traces "$H" --out "$OUT/heldout_$SET.md" \
  > "$T/heldout.log" 2>&1
grep -E "^\| (L3 profile|noise floor) \| all" "$OUT/heldout_$SET.md" | sort -u
echo "scoring done at $SECONDS s"
} 2>&1 | quiet_log | tee "$OUT/log.txt"
if [ "$PLACE" = 1 ]; then
  mkdir -p "$OUT/place"
  OUT=$OUT/place PROFILE=$PROFILE DEVICE=$DEVICE BUDGET=${PLACE_BUDGET:-240} bash "$(dirname "$0")/place.sh" > /dev/null 2>&1
fi
rm -rf "$OUT/cache"
ls -la "$OUT"

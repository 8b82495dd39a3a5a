#!/usr/bin/env bash
# call FA (2026-12-07): on the H200, the shipped profile extended by the grid's new layers and mixed-precision kernels, held-out sets K and M again (the tuning data of the next model change,
# kept apart from set Q) and the model families of benchmarks/capture_zoo4.py on the GPU; on another device,
# a profile of that device first (the grid's coarse pass) and set K to score it. The GPU tests if time is left.
#   bash benchmarks/h200/call_fa.sh      # on the device machine, from the repository root
source "$(dirname "$0")/common.sh"
MAX=${MAX:-560}  # the seconds this call may take: later steps are skipped past them
heldout() {
  step "held-out set_$1"
  timeout "$2" python3 benchmarks/h200/sweep_many.py --traces "$T/heldout_$1" --device cuda workloads/heldout/set_$1/*.toml
  tar czf "$OUT/heldout_set_$1.tgz" --exclude=_chrome -C "$T" "heldout_$1"
  echo "set $1 at $SECONDS s"
}
{
step "machine"; machine
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
if [ "$name" = "NVIDIA H200" ]; then
  step "profile --extend: the grid's new layers and mixed-precision kernels"
  cp -r benchmarks/profiles/h200 "$T/profile"
  timeout 170 $WL profile --device cuda -o "$T/profile" --extend --section layers --section 'elementwise mixed' --budget-minutes 1.8 2>&1 | tail -12
  tar czf "$OUT/profile.tgz" --exclude=traces -C "$T" profile
  tar czf "$OUT/profile_traces.tgz" --exclude=_chrome --exclude='*.json.gz' -C "$T/profile" traces
  [ "$SECONDS" -lt $(( MAX - 150 )) ] && heldout k 150
  [ "$SECONDS" -lt $(( MAX - 230 )) ] && heldout m 170
  if [ "$SECONDS" -lt $(( MAX - 60 )) ]; then
  step "zoo4 captures"
  timeout $(( MAX - SECONDS < 150 ? MAX - SECONDS : 150 )) python3 benchmarks/capture_zoo4.py --out "$T/zoo4" --device cuda 2>&1 | grep -v -e Warning -e warn
  for f in "$T"/zoo4/*.json; do case $f in *.flops.json) ;; *) gzip -9 "$f";; esac; done
  tar czf "$OUT/zoo4.tgz" -C "$T" zoo4
  echo "captures at $SECONDS s"
  fi
else
  step "profile ($name)"
  bud=$(( (MAX - 220) / 60 )); [ "$bud" -gt 5 ] && bud=5; [ "$bud" -lt 1 ] && bud=1
  timeout $(( bud * 60 + 60 )) $WL profile --device cuda -o "$T/profile" --budget-minutes $bud 2>&1 | tail -15
  tar czf "$OUT/profile.tgz" --exclude=traces -C "$T" profile
  [ "$SECONDS" -lt $(( MAX - 150 )) ] && heldout k 150
fi
[ "$SECONDS" -lt $(( MAX - 90 )) ] && gpu_tests
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv
ls -la "$OUT"
echo "done at $SECONDS s"
} 2>&1 | quiet_log | tee "$OUT/log.txt"
rm -rf "$OUT/cache"

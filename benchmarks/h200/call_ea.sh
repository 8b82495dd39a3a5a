#!/usr/bin/env bash
# call EA (2026-12-07): the model families of benchmarks/capture_zoo4.py captured on the GPU (a trace and
# FlopCounterMode's counts per model), the device's ceilings where it is not the H200 the project measured,
# and the GPU tests.
#   bash benchmarks/h200/call_ea.sh      # on the device machine, from the repository root
source "$(dirname "$0")/common.sh"
{
step "machine"; machine
step "zoo4 captures"
timeout 300 python3 benchmarks/capture_zoo4.py --out "$T/zoo4" --device cuda 2>&1 | grep -v -e Warning -e warn
for f in "$T"/zoo4/*.json; do case $f in *.flops.json) ;; *) gzip -9 "$f";; esac; done
tar czf "$OUT/zoo4.tgz" -C "$T" zoo4
echo "captures at $SECONDS s"
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
if [ "$name" != "NVIDIA H200" ]; then
  step "calibrate ($name)"
  timeout 180 $WL calibrate --device cuda --out "$OUT/ceilings.json"; echo "rc $?"
fi
gpu_tests
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv
ls -la "$OUT"
echo "done at $SECONDS s"
} 2>&1 | quiet_log | tee "$OUT/log.txt"
rm -rf "$OUT/cache"

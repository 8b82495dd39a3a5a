#!/usr/bin/env bash
# call DA (2026-12-04): the held-out sets named as arguments (Q, written before this call, and K, L, M again:
# their earlier captures were scored in calls BA and CA), then the GPU tests if "tests" is named.
#   bash benchmarks/h200/call_da.sh q l tests      # on the H200, from the repository root
source "$(dirname "$0")/common.sh"
{
step "machine"; machine
for s in "$@"; do
  if [ "$s" = tests ]; then
    step "the GPU tests"
    timeout 120 python3 -m pytest -q -m gpu -o addopts= -p no:cacheprovider > "$OUT/pytest_gpu.txt" 2>&1; echo "rc $?"
    tail -3 "$OUT/pytest_gpu.txt"
    continue
  fi
  step "held-out set_$s"
  timeout 240 python3 benchmarks/h200/sweep_many.py --traces "$T/heldout_$s" --device cuda workloads/heldout/set_$s/*.toml
  tar czf "$OUT/heldout_set_$s.tgz" --exclude=_chrome -C "$T" "heldout_$s"
  echo "set $s at $SECONDS s"
done
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv
ls -la "$OUT"
echo "done at $SECONDS s"
} 2>&1 | quiet_log | tee "$OUT/log.txt"
rm -rf "$OUT/cache"

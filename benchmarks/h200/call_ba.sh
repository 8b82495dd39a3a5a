#!/usr/bin/env bash
# call BA (2026-12-04): the grid's candidate sections (gemm narrow, optim, the batch norm over channels)
# measured into a copy of the shipped profile; held-out set M (written before this call) and sets L and K
# again; the training steps at several batches (capture_scaled.py); the GPU tests.
#   bash benchmarks/h200/call_ba.sh      # on the H200, from the repository root
source "$(dirname "$0")/common.sh"
P=$T/profile
{
step "machine"; machine
cp -r benchmarks/profiles/h200 "$P"
step "profile --extend: gemm narrow, optim, layers"
timeout 170 $WL profile --device cuda -o "$P" --extend --section "gemm narrow" --section optim --section layers \
  --budget-minutes 2.5 -q
tar czf "$OUT/profile.tgz" -C "$T" profile/profile.json profile/predictor.json profile/ops.parquet profile/steps.parquet
echo "profile at $SECONDS s"
step "held-out set_m"
timeout 170 python3 benchmarks/h200/sweep_many.py --traces "$T/heldout_m" --device cuda workloads/heldout/set_m/*.toml
tar czf "$OUT/heldout_set_m.tgz" --exclude=_chrome -C "$T" heldout_m
echo "set m at $SECONDS s"
step "held-out set_l"
timeout 80 python3 benchmarks/h200/sweep_many.py --traces "$T/heldout_l" --device cuda workloads/heldout/set_l/*.toml
tar czf "$OUT/heldout_set_l.tgz" --exclude=_chrome -C "$T" heldout_l
echo "set l at $SECONDS s"
step "training steps at several batches"
timeout 100 python3 benchmarks/h200/capture_scaled.py --out "$OUT"
rm -rf "$OUT/scaled_traces"
echo "captures at $SECONDS s"
if [ "$SECONDS" -lt "${STOP_AT:-400}" ]; then
  step "held-out set_k"
  timeout 140 python3 benchmarks/h200/sweep_many.py --traces "$T/heldout_k" --device cuda workloads/heldout/set_k/*.toml
  tar czf "$OUT/heldout_set_k.tgz" --exclude=_chrome -C "$T" heldout_k
  echo "set k at $SECONDS s"
fi
if [ "$SECONDS" -lt 540 ]; then
  step "the GPU tests"
  timeout 50 python3 -m pytest -q -m gpu -o addopts= -p no:cacheprovider > "$OUT/pytest_gpu.txt" 2>&1; echo "rc $?"
  tail -3 "$OUT/pytest_gpu.txt"
fi
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv
ls -la "$OUT"
echo "done at $SECONDS s"
} 2>&1 | quiet_log | tee "$OUT/log.txt"
rm -rf "$OUT/cache"

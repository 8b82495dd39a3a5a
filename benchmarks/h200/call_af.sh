#!/usr/bin/env bash
# call AF (2026-12-03): the grid's new layer studies (`images amp`: batch norm with float32 weights over
# channels and values per channel; `images large`: convolution and pooling at batch 128) measured into a
# copy of the shipped profile; the training steps at several batches again (capture_scaled.py); held-out
# sets L (training layers, written before these studies were measured) and K; the GPU tests.
#   bash benchmarks/h200/call_af.sh      # on the H200, from the repository root
source "$(dirname "$0")/common.sh"
P=$T/profile
{
step "machine"; machine
cp -r benchmarks/profiles/h200 "$P"
step "profile --extend --section layers"
timeout 120 $WL profile --device cuda -o "$P" --extend --section layers --budget-minutes 1.5 -q
tar czf "$OUT/profile.tgz" -C "$T" profile/profile.json profile/predictor.json profile/ops.parquet profile/steps.parquet
echo "profile at $SECONDS s"
step "held-out set_l"
timeout 150 python3 benchmarks/h200/sweep_many.py --traces "$T/heldout_l" --device cuda workloads/heldout/set_l/*.toml
tar czf "$OUT/heldout_set_l.tgz" --exclude=_chrome -C "$T" heldout_l
echo "set l at $SECONDS s"
step "training steps at several batches"
timeout 200 python3 benchmarks/h200/capture_scaled.py --out "$OUT"
rm -rf "$OUT/scaled_traces"
echo "captures at $SECONDS s"
if [ "$SECONDS" -lt "${STOP_AT:-380}" ]; then
  step "held-out set_k"
  timeout 160 python3 benchmarks/h200/sweep_many.py --traces "$T/heldout_k" --device cuda workloads/heldout/set_k/*.toml
  tar czf "$OUT/heldout_set_k.tgz" --exclude=_chrome -C "$T" heldout_k
  echo "set k at $SECONDS s"
fi
step "the GPU tests"
timeout 60 python3 -m pytest -q -m gpu -o addopts= -p no:cacheprovider > "$OUT/pytest_gpu.txt" 2>&1; echo "rc $?"
tail -3 "$OUT/pytest_gpu.txt"
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv
ls -la "$OUT"
echo "done at $SECONDS s"
} 2>&1 | quiet_log | tee "$OUT/log.txt"
rm -rf "$OUT/cache"

#!/usr/bin/env bash
# call BB (2026-12-04): the grid's bfloat16 optimizer study measured into a copy of the shipped profile;
# held-out set N (bfloat16 optimizer steps, written before this call); the GPU tests.
#   bash benchmarks/h200/call_bb.sh      # on the H200, from the repository root
source "$(dirname "$0")/common.sh"
P=$T/profile
{
step "machine"; machine
cp -r benchmarks/profiles/h200 "$P"
step "profile --extend: optim (bf16)"
timeout 150 $WL profile --device cuda -o "$P" --extend --section optim --budget-minutes 1.5 -q
tar czf "$OUT/profile.tgz" -C "$T" profile/profile.json profile/predictor.json profile/ops.parquet profile/steps.parquet
echo "profile at $SECONDS s"
step "held-out set_n"
timeout 90 python3 benchmarks/h200/sweep_many.py --traces "$T/heldout_n" --device cuda workloads/heldout/set_n/*.toml
tar czf "$OUT/heldout_set_n.tgz" --exclude=_chrome -C "$T" heldout_n
echo "set n at $SECONDS s"
step "the GPU tests"
timeout 150 python3 -m pytest -q -m gpu -o addopts= -p no:cacheprovider > "$OUT/pytest_gpu.txt" 2>&1; echo "rc $?"
tail -3 "$OUT/pytest_gpu.txt"
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv
ls -la "$OUT"
echo "done at $SECONDS s"
} 2>&1 | quiet_log | tee "$OUT/log.txt"
rm -rf "$OUT/cache"

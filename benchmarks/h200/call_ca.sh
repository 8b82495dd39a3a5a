#!/usr/bin/env bash
# call CA (2026-12-04): the grid's optim study measured again now that the optim workload records its
# tensor lists' shapes (lists of more than 30 tensors were `[]`), into a copy of the shipped profile;
# held-out set N again (its 48-tensor lists were `[]`) and set O (written before this call); training
# steps of models with more parameters than the profiler's list limit (capture_optim_models.py); the GPU tests.
#   bash benchmarks/h200/call_ca.sh      # on the H200, from the repository root
source "$(dirname "$0")/common.sh"
P=$T/profile
{
step "machine"; machine
cp -r benchmarks/profiles/h200 "$P"
step "profile: drop the optim study, measure it again"
$WL profile -o "$P" --drop 'profile:optim' --reason "measured again with the optimizer lists' shapes recorded (call CA)" | tail -1
timeout 150 $WL profile --device cuda -o "$P" --extend --section optim --budget-minutes 1.5 -q
tar czf "$OUT/profile.tgz" -C "$T" profile/profile.json profile/predictor.json profile/ops.parquet profile/steps.parquet
echo "profile at $SECONDS s"
step "held-out sets N and O"
timeout 150 python3 benchmarks/h200/sweep_many.py --traces "$T/heldout_no" --device cuda workloads/heldout/set_n/*.toml workloads/heldout/set_o/*.toml
tar czf "$OUT/heldout_set_no.tgz" --exclude=_chrome -C "$T" heldout_no
echo "sets at $SECONDS s"
step "training steps with long optimizer lists"
timeout 150 python3 benchmarks/h200/capture_optim_models.py --out "$OUT/optim_models"
echo "captures at $SECONDS s"
step "the GPU tests"
timeout 150 python3 -m pytest -q -m gpu -o addopts= -p no:cacheprovider > "$OUT/pytest_gpu.txt" 2>&1; echo "rc $?"
tail -3 "$OUT/pytest_gpu.txt"
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv
ls -la "$OUT" "$OUT/optim_models"
echo "done at $SECONDS s"
} 2>&1 | quiet_log | tee "$OUT/log.txt"
rm -rf "$OUT/cache"

#!/usr/bin/env bash
# call AG (2026-12-03): the grid's optim section (AdamW and SGD, foreach and fused, over 4 and 32 float32
# tensors of 4,096 to 8,388,608 elements) measured into a copy of the shipped profile; held-out
# l_optim (workloads/heldout/set_l/l_optim.toml, written before the section was measured).
#   bash benchmarks/h200/call_ag.sh      # on the H200, from the repository root
source "$(dirname "$0")/common.sh"
P=$T/profile
{
step "machine"; machine
cp -r benchmarks/profiles/h200 "$P"
step "profile --extend --section optim"
timeout 150 $WL profile --device cuda -o "$P" --extend --section optim --budget-minutes 1 -q
tar czf "$OUT/profile.tgz" -C "$T" profile/profile.json profile/predictor.json profile/ops.parquet profile/steps.parquet
echo "profile at $SECONDS s"
step "held-out l_optim"
timeout 120 python3 benchmarks/h200/sweep_many.py --traces "$T/heldout_l_optim" --device cuda workloads/heldout/set_l/l_optim.toml
tar czf "$OUT/heldout_l_optim.tgz" --exclude=_chrome -C "$T" heldout_l_optim
echo "l_optim at $SECONDS s"
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv
ls -la "$OUT"
echo "done at $SECONDS s"
} 2>&1 | quiet_log | tee "$OUT/log.txt"
rm -rf "$OUT/cache"

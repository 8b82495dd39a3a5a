#!/usr/bin/env bash
# call U (2026-12-02): the GPU tests and the fast tier on torch 2.11 with CUDA after this session's changes
# (the join without a per-event loop, the parser's column steps, the L3 index bases); matrix rates
# sustained and in bursts (benchmarks/h200/diag_matrix_burst.py), to see why the zoo3 FP8 GEMMs run above
# the calibrated FP8 roof.
#   bash benchmarks/h200/call_u.sh      # on the H200, from the repository root
source "$(dirname "$0")/common.sh"
{
step "machine"; machine
suite_steps
step "matrix rates, sustained and in bursts"
timeout 200 python3 benchmarks/h200/diag_matrix_burst.py --out "$OUT"; echo "diag rc $?"
nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv
echo "done at $SECONDS s"
} 2>&1 | quiet_log | tee "$OUT/log.txt"
rm -rf "$OUT/cache"

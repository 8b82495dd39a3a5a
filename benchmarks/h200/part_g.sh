#!/usr/bin/env bash
# H200, device call G: the ceilings of format 2 and every committed kernel placed against them.
#  1. wlprof calibrate: bf16/fp16/tf32/fp32 GEMM rates; HBM read (best of torch.sum and gemv), write
#     (fill_) and copy on 2 GiB buffers; the L2 (60 MB) by a stride-0 broadcast read of a quarter- and a
#     half-L2 buffer inside one reduction and by CUDA-graph replay of 64 back-to-back sums; each with its
#     method, sizes, repeats, median and p10-p90 spread. Written to $OUT/ceilings-h200.json.
#  2. Two small studies placed online against them: the three equal-FLOPs GEMMs, and mul/add from
#     1M to 256M bf16 elements (3M: 18.9 MB per call, L2-resident when repeated).
#  3. benchmarks/h200/ceilings.py: every kernel of the committed studies (traces/, offline/) and of step 2
#     re-placed against the new ceilings: $OUT/placement/{placement.md,kernels.csv.gz,roofline-*.png}.
# Run from the repository root on the device machine:  bash benchmarks/h200/part_g.sh
# (about 2-3 minutes; every step has a timeout, 290 s in all: a study cut short keeps its finished points)
source "$(dirname "$0")/common.sh"
{
step "machine"
machine
git log -1 --format='commit %H' 2>/dev/null || true
step "calibrate"; timeout 90 $WL calibrate --out "$OUT/ceilings-h200.json"
step "study gemm_same_flops"; timeout 50 $WL sweep workloads/gemm_same_flops.toml --traces "$T/traces" -q
step "mul and add, 1M to 256M elements"
timeout 50 $WL run elementwise --ops mul,add --numel 1048576,3145728,16777216,268435456 --traces "$T/traces" -q
step "placement"
timeout 100 python3 benchmarks/h200/ceilings.py --ceilings "$OUT/ceilings-h200.json" --out "$OUT" \
  --traces benchmarks/results/2026-11-29-h200/traces --traces benchmarks/results/2026-11-29-h200/offline \
  --traces "$T/traces"
step "done"; nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv
} 2>&1 | quiet_log | tee "$OUT/log_g.txt"
tar czf "$OUT/traces_g.tgz" --exclude=_chrome -C "$T" traces
rm -rf "$OUT/cache"
ls -la "$OUT" "$OUT/placement"

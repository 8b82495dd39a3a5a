#!/usr/bin/env bash
# One device call on the H200 for the core issue: calibrate, the three studies,
# fidelity and overhead benchmarks, an ncu check of bytes, and the test fixtures.
# Run from the repository root on the device machine:  bash benchmarks/h200/core.sh
# Everything lands in $OUT (log, markdown, tarballs of the traces folders).
source "$(dirname "$0")/common.sh"
SCRATCH=$T
{
step "machine"
machine
step "calibrate"; $WL calibrate
step "gemm study"; $WL sweep workloads/gemm_same_flops.toml --traces "$SCRATCH/traces" -q
step "mlp study"; $WL sweep workloads/mlp_batch.toml --traces "$SCRATCH/traces" -q
step "roofline study"; $WL sweep workloads/roofline_kernels.toml --traces "$SCRATCH/traces" -q
step "fidelity"; python3 benchmarks/fidelity.py --traces "$SCRATCH/traces" --out "$OUT/fidelity.md"
step "overhead"; python3 benchmarks/overhead.py --out "$OUT/overhead_gpu.md"
step "fixtures"
$WL sweep tests/fixtures/studies/h200_fixture_gemm.toml --traces "$SCRATCH/fixtures" -q
$WL sweep tests/fixtures/studies/h200_fixture_mlp.toml --traces "$SCRATCH/fixtures" -q
step "ncu: DRAM bytes of the micro-kernels vs wlprof's compulsory bytes"
timeout 240 ncu --clock-control none --metrics dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum \
  --csv python3 benchmarks/h200/ncu_kernels.py > "$OUT/ncu.csv" 2> "$OUT/ncu.err" || echo "ncu exit $?"
tail -3 "$OUT/ncu.err"
step "done"
} 2>&1 | grep -v '^USDT' | tee "$OUT/log.txt"
tar czf "$OUT/traces.tgz" -C "$SCRATCH" traces
tar czf "$OUT/fixtures.tgz" -C "$SCRATCH" fixtures
ls -la "$OUT"

#!/usr/bin/env bash
# H200, device call A: ceilings, the core studies (GEMM shapes, MLP batch, roofline
# micro-kernels), the MoE studies, fidelity (per op, replayed) and overhead, the bare
# grouped-GEMM comparison, and the GEMM/MLP/MoE test fixtures.
# Run from the repository root on the device machine:  bash benchmarks/h200/part_a.sh
source "$(dirname "$0")/common.sh"
{
step "machine"
machine
step "calibrate"; timeout 120 $WL calibrate
for s in gemm_same_flops mlp_batch roofline_kernels; do
  step "study $s"; timeout 200 $WL sweep workloads/$s.toml --traces "$T/traces" -q
done
for s in moe_routing_128 moe_routing_8192 moe_zipf; do
  step "study $s"; timeout 240 $WL sweep workloads/$s.toml --traces "$T/traces" -q
done
step "fidelity (core studies, per op replayed)"
timeout 240 python3 benchmarks/fidelity.py --traces "$T/traces" --replay --workloads gemm,mlp,elementwise --out "$OUT/fidelity.md"
step "grouped MoE vs bare torch._grouped_mm"; timeout 120 python3 benchmarks/moe_grouped.py --traces "$T/traces" --out "$OUT/moe_grouped.md"
step "overhead"; timeout 120 python3 benchmarks/overhead.py --out "$OUT/overhead_gpu.md"
step "fixtures"
for s in gemm mlp moe; do timeout 120 $WL sweep tests/fixtures/studies/h200_fixture_$s.toml --traces "$T/fixtures" -q; done
step "done"; nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv
} 2>&1 | quiet_log | tee "$OUT/log_a.txt"
tar czf "$OUT/traces_a.tgz" -C "$T" traces
tar czf "$OUT/fixtures_a.tgz" -C "$T" fixtures
ls -la "$OUT"

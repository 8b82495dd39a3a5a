#!/usr/bin/env bash
# H200, device call C: the MoE studies again with the grouped dispatch's workload-stated
# expert cost (call A ran before it), the grouped-GEMM benchmark on them, the MoE test
# fixture, and the denser Level-3 GEMM and micro-kernel grids.
# Run from the repository root on the device machine:  bash benchmarks/h200/part_c.sh
source "$(dirname "$0")/common.sh"
{
step "machine"
machine
step "calibrate"; timeout 120 $WL calibrate
for s in moe_routing_128 moe_routing_8192 moe_zipf; do
  step "study $s"; timeout 240 $WL sweep workloads/$s.toml --traces "$T/traces" -q
done
step "grouped MoE vs bare torch._grouped_mm"; timeout 150 python3 benchmarks/moe_grouped.py --traces "$T/traces" --out "$OUT/moe_grouped.md"
step "fixtures"; timeout 120 $WL sweep tests/fixtures/studies/h200_fixture_moe.toml --traces "$T/fixtures" -q
for s in l3_grid_gemm l3_grid_elementwise; do
  step "study $s"; timeout 240 $WL sweep workloads/$s.toml --traces "$T/grid" -q
done
step "done"; nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv
} 2>&1 | quiet_log | tee "$OUT/log_c.txt"
tar czf "$OUT/traces_c.tgz" -C "$T" traces
tar czf "$OUT/grid_c.tgz" -C "$T" grid
tar czf "$OUT/fixtures_c.tgz" -C "$T" fixtures
ls -la "$OUT"

#!/usr/bin/env bash
# H200, device call B: the GNN studies, the Level-3 training grid (GEMM shapes,
# micro-kernel sizes, gather/scatter sizes), the GNN test fixtures, and, with call A's
# traces carried in .gpu_in/traces_a, the per-op fidelity and grouped-GEMM benchmarks.
# Run from the repository root on the device machine:  bash benchmarks/h200/part_b.sh
source "$(dirname "$0")/common.sh"
{
step "machine"
machine
step "calibrate"; timeout 120 $WL calibrate
for s in gnn_backends gnn_pyg; do
  step "study $s"; timeout 240 $WL sweep workloads/$s.toml --traces "$T/traces" -q
done
for s in l3_grid_gemm l3_grid_elementwise l3_grid_gather; do
  step "study $s"; timeout 200 $WL sweep workloads/$s.toml --traces "$T/grid" -q
done
step "fixtures"; timeout 120 $WL sweep tests/fixtures/studies/h200_fixture_gnn.toml --traces "$T/fixtures" -q
# Call A's traces, carried in .gpu_in/traces_a (device call with carry=[".gpu_in"]):
if [ -d .gpu_in/traces_a ]; then
  step "fidelity (core studies of call A, per op replayed with rotating inputs)"
  timeout 300 python3 benchmarks/fidelity.py --traces .gpu_in/traces_a --replay --workloads gemm,mlp,elementwise \
    --out "$OUT/fidelity.md"
  step "grouped MoE vs bare torch._grouped_mm (MoE runs of call A)"
  timeout 150 python3 benchmarks/moe_grouped.py --traces .gpu_in/traces_a --out "$OUT/moe_grouped.md"
fi
step "done"; nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv
} 2>&1 | quiet_log | tee "$OUT/log_b.txt"
tar czf "$OUT/traces_b.tgz" -C "$T" traces
tar czf "$OUT/grid_b.tgz" -C "$T" grid
tar czf "$OUT/fixtures_b.tgz" -C "$T" fixtures
ls -la "$OUT"

#!/usr/bin/env bash
# H200, device call B: the GNN studies, the Level-3 training grid (GEMM shapes,
# micro-kernel sizes, gather/scatter sizes), the GNN test fixtures, and, with call A's
# traces carried in .gpu_in/traces_a, the per-op fidelity and grouped-GEMM benchmarks.
# Run from the repository root on the device machine:  bash benchmarks/h200/part_b.sh
set -u -o pipefail
OUT=${OUT:-/tmp/wlprof-out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 WLPROF_CACHE_DIR=$OUT/cache
T=$(mktemp -d)
WL="python3 -m wlprof.cli.main"
step() { echo; echo "=== $(date -u +%H:%M:%S) $*"; }
{
step "machine"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
step "calibrate"; timeout 120 $WL calibrate
for s in gnn_backends gnn_pyg; do
  step "study $s"; timeout 240 $WL sweep workloads/$s.toml -o "$T/traces" -q
done
for s in l3_grid_gemm l3_grid_elementwise l3_grid_gather; do
  step "study $s"; timeout 200 $WL sweep workloads/$s.toml -o "$T/grid" -q
done
step "fixtures"; timeout 120 $WL sweep tests/fixtures/studies/h200_fixture_gnn.toml -o "$T/fixtures" -q
# Call A's traces, carried in .gpu_in/traces_a (device call with carry=[".gpu_in"]):
if [ -d .gpu_in/traces_a ]; then
  step "fidelity (core studies of call A, per op replayed with rotating inputs)"
  timeout 300 python3 benchmarks/fidelity.py --traces .gpu_in/traces_a --replay --workloads gemm,mlp,elementwise \
    --out "$OUT/fidelity.md"
  step "grouped MoE vs bare torch._grouped_mm (MoE runs of call A)"
  timeout 150 python3 benchmarks/moe_grouped.py --traces .gpu_in/traces_a --out "$OUT/moe_grouped.md"
fi
step "done"; nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv
} 2>&1 | grep -v -e '^USDT' -e 'Profiler clears events' -e '_warn_once' | tee "$OUT/log_b.txt"
tar czf "$OUT/traces_b.tgz" -C "$T" traces
tar czf "$OUT/grid_b.tgz" -C "$T" grid
tar czf "$OUT/fixtures_b.tgz" -C "$T" fixtures
ls -la "$OUT"

#!/usr/bin/env bash
# H200, device call D: the offline profile for the Level-3 model. Every study again, the
# MoE and GNN ones on another data draw (--set seed=1: new dispersed counts, token order,
# gates and inputs; new graphs of the same generators), and the parts of the L3
# micro-kernel grid that call C did not run (mul and add, and sizes 256 and 512).
# Run from the repository root on the device machine:  bash benchmarks/h200/part_d.sh
source "$(dirname "$0")/common.sh"
{
step "machine"
machine
git log -1 --format='commit %H' 2>/dev/null || true
step "calibrate"; timeout 120 $WL calibrate
for s in gemm_same_flops mlp_batch roofline_kernels; do
  step "study $s"; timeout 200 $WL sweep workloads/$s.toml --traces "$T/traces" -q
done
for s in moe_routing_128 moe_routing_8192 moe_zipf gnn_backends gnn_pyg; do
  step "study $s --set seed=1"; timeout 240 $WL sweep workloads/$s.toml --traces "$T/traces" -q --set seed=1
done
step "grid: mul and add"
timeout 150 $WL sweep workloads/l3_grid_elementwise.toml --traces "$T/grid" -q --set 'ops=["mul","add"]'
step "grid: the other vector ops at 256 and 512 elements"
timeout 90 $WL sweep workloads/l3_grid_elementwise.toml --traces "$T/grid" -q \
  --set 'ops=["copy","relu","gelu","silu","dot"]' --set 'numel=[256,512]'
step "done"; nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv
} 2>&1 | quiet_log | tee "$OUT/log_d.txt"
tar czf "$OUT/traces_d.tgz" --exclude=_chrome -C "$T" traces grid
cp "$OUT"/cache/*.json "$OUT/" 2>/dev/null || true
rm -rf "$OUT/cache"
ls -la "$OUT"

#!/usr/bin/env bash
# H200, device call E: a third capture for the Level-3 model. Every study again, the
# MoE and GNN ones on a third data draw (--set seed=2: new dispersed counts, token order,
# gates and inputs; new graphs of the same generators).
# Run from the repository root on the device machine:  bash benchmarks/h200/part_e.sh
source "$(dirname "$0")/common.sh"
{
step "machine"
machine
step "calibrate"; timeout 120 $WL calibrate
for s in gemm_same_flops mlp_batch roofline_kernels; do
  step "study $s"; timeout 200 $WL sweep workloads/$s.toml --traces "$T/traces" -q
done
for s in moe_routing_128 moe_routing_8192 moe_zipf gnn_backends gnn_pyg; do
  step "study $s --set seed=2"; timeout 240 $WL sweep workloads/$s.toml --traces "$T/traces" -q --set seed=2
done
step "done"; nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv
} 2>&1 | quiet_log | tee "$OUT/log_e.txt"
tar czf "$OUT/traces_e.tgz" --exclude=_chrome -C "$T" traces
cp "$OUT"/cache/*.json "$OUT/" 2>/dev/null || true
rm -rf "$OUT/cache"
ls -la "$OUT"

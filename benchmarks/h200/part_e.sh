#!/usr/bin/env bash
# H200, device call E: a third capture for the Level-3 model. Every study again, the
# MoE and GNN ones on a third data draw (--set seed=2: new dispersed counts, token order,
# gates and inputs; new graphs of the same generators).
# Run from the repository root on the device machine:  bash benchmarks/h200/part_e.sh
set -u -o pipefail
OUT=${OUT:-/tmp/wlprof-out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 WLPROF_CACHE_DIR=$OUT/cache
T=$(mktemp -d)
WL="python3 -m wlprof.cli.main"
step() { echo; echo "=== $(date -u +%H:%M:%S) $*"; }
{
step "machine"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
python3 -c "import torch, torch_geometric as g; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'pyg', g.__version__)"
step "calibrate"; timeout 120 $WL calibrate
for s in gemm_same_flops mlp_batch roofline_kernels; do
  step "study $s"; timeout 200 $WL sweep workloads/$s.toml -o "$T/traces" -q
done
for s in moe_routing_128 moe_routing_8192 moe_zipf gnn_backends gnn_pyg; do
  step "study $s --set seed=2"; timeout 240 $WL sweep workloads/$s.toml -o "$T/traces" -q --set seed=2
done
step "done"; nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv
} 2>&1 | grep -v -e '^USDT' -e 'Profiler clears events' -e '_warn_once' | tee "$OUT/log_e.txt"
tar czf "$OUT/traces_e.tgz" --exclude=_chrome -C "$T" traces
cp "$OUT"/cache/*.json "$OUT/" 2>/dev/null || true
rm -rf "$OUT/cache"
ls -la "$OUT"

#!/usr/bin/env bash
# call P (2026-12-02): the test suite's fast tier on torch 2.11 with CUDA, the GPU tests, the MoE's and the
# GNN's stated costs on real CUDA runs, and the zoo's packed-LSTM capture (which failed in call O).
#   bash benchmarks/h200/call_p.sh      # on the H200, from the repository root
source "$(dirname "$0")/common.sh"
{
step "machine"; machine
N=""; python3 -c "import xdist" 2>/dev/null && N="-n 8 --dist loadfile"; echo "xdist: ${N:-none}"
step "the fast tier"
timeout 330 python3 -m pytest -q -m "not slow" -o addopts= $N -p no:cacheprovider > "$OUT/pytest_fast.txt" 2>&1
echo "rc $?"; tail -4 "$OUT/pytest_fast.txt"
step "the GPU tests"
timeout 90 python3 -m pytest -q -m gpu -o addopts= -p no:cacheprovider > "$OUT/pytest_gpu.txt" 2>&1; echo "rc $?"
tail -2 "$OUT/pytest_gpu.txt"
step "stated costs on CUDA runs"
timeout 60 $WL run moe --device cuda --tokens 256 --experts 8 --top-k 2 --d-model 1024 --d-ff 2048 \
  --routing balanced,concentrated --dispatch grouped,loop -q --traces "$T/moe" > /dev/null 2>&1; echo "moe rc $?"
timeout 60 $WL run gnn --device cuda --graph rmat --scale 12 --features 64 --backend scatter,index_add,segment,csr,pyg:gcn-csr \
  --reduction sum,mean -q --traces "$T/gnn" > /dev/null 2>&1; echo "gnn rc $?"
python3 - "$T" <<'PY' 2>&1 | tee "$OUT/stated.txt"
import sys, wlprof
t = sys.argv[1]
k = wlprof.load(f"{t}/moe"); s = k[(k.region == "moe/expert") & (k.step >= 0)]
for v, g in s.groupby("variant"):
    first = g[g.step == g.step.min()]
    print(v, first.groupby(["op_name", "flops_source"]).flops.sum().round(1).to_dict())
steps = wlprof.load(f"{t}/moe", table="steps")
print(steps[["variant", "grouped_path", "useful_flops", "executed_flops"]].to_string())
k = wlprof.load(f"{t}/gnn"); a = k[(k.region == "gnn/aggregate") & (k.step >= 0)]
for v, g in a.groupby("variant"):
    first = g[g.step == g.step.min()]
    print(v, first.groupby(["op_name", "flops_source"])[["flops", "bytes"]].sum().round(1).to_dict("index"))
PY
step "zoo: the packed LSTM"
timeout 60 python3 benchmarks/capture_cpu_models.py --out "$T/zoo" --device cuda lstm-packed-infer; echo "rc $?"
gzip -9 "$T/zoo/lstm-packed-infer.json" && cp "$T/zoo/lstm-packed-infer.json.gz" "$T/zoo/lstm-packed-infer.flops.json" "$OUT/"
echo "done at $SECONDS s"
} 2>&1 | quiet_log | tee "$OUT/log.txt"
rm -rf "$OUT/cache"

#!/usr/bin/env bash
# call V (2026-12-02): `wlprof calibrate` with the matrix rates also timed in bursts at full clock (a
# sustained GEMM runs at the clock the power limit allows), and the zoo3 fixture traces placed against
# those ceilings: their GEMMs' fractions of the matrix roof.
#   bash benchmarks/h200/call_v.sh      # on the H200, from the repository root
source "$(dirname "$0")/common.sh"
{
step "machine"; machine
step "calibrate"
timeout 300 $WL calibrate --device cuda --out "$OUT/ceilings.json" > "$OUT/calibrate.txt" 2>&1; echo "calibrate rc $?"
cat "$OUT/calibrate.txt" | head -60
step "the zoo3 traces against these ceilings"
timeout 120 $WL ingest tests/fixtures/h200_zoo3 --traces "$T/zoo3" --name zoo3 > "$OUT/ingest_zoo3.txt" 2>&1; echo "ingest rc $?"
python3 -c "
import sys, wlprof
k = wlprof.load(sys.argv[1]); k = k[(k.kind == 'kernel') & (k.cost_unit == 'matrix')]
g = k.groupby(['variant', 'cost_dtype']).agg(kernels=('name', 'size'), us=('dur_us', 'sum'), tflops=('achieved_tflops', 'median'), tflops_max=('achieved_tflops', 'max'), roof=('roofline_fraction', 'median'), roof_max=('roofline_fraction', 'max'), over=('roofline_fraction', lambda s: int((s > 1).sum())))
print(g.to_string())
print(k[k.roofline_fraction > 1].groupby(['variant', 'roof_note'], dropna=False).size().to_string())" "$T/zoo3" > "$OUT/zoo3_matrix.txt" 2>&1; cat "$OUT/zoo3_matrix.txt"
python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))
for k, m in d['measurements'].items():
    if k.startswith('matrix'):
        print(k, round(m['value'], 1), m['sizes'], [(round(a['value'], 1), a['sizes']) for a in m.get('alternatives', [])])" "$OUT/ceilings.json"
echo "done at $SECONDS s"
} 2>&1 | quiet_log | tee "$OUT/log.txt"
rm -rf "$OUT/cache"

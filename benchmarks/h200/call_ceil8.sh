#!/usr/bin/env bash
# call ceil8 (2026-12-02): the GPU tests and the fast tier on torch 2.11 with CUDA after this session's
# changes; `wlprof calibrate` with the 8-bit matrix ceilings (FP8 torch._scaled_mm, int8 torch._int_mm);
# the zoo3 fixture traces ingested against those ceilings.
#   bash benchmarks/h200/call_ceil8.sh      # on the H200, from the repository root
source "$(dirname "$0")/common.sh"
{
step "machine"; machine
suite_steps
step "calibrate"
timeout 240 $WL calibrate --device cuda --out "$OUT/ceilings.json" > "$OUT/calibrate.txt" 2>&1; echo "calibrate rc $?"
cat "$OUT/calibrate.txt"
step "the zoo3 traces against these ceilings"
timeout 120 $WL ingest tests/fixtures/h200_zoo3 --traces "$T/zoo3" --name zoo3 > "$OUT/ingest_zoo3.txt" 2>&1; echo "ingest rc $?"
tail -8 "$OUT/ingest_zoo3.txt"
python3 -c "
import sys, wlprof
k = wlprof.load(sys.argv[1]); k = k[(k.kind == 'kernel') & (k.cost_unit == 'matrix')]
g = k.groupby(['variant', 'cost_dtype']).agg(kernels=('name', 'size'), us=('dur_us', 'sum'), tflops=('achieved_tflops', 'median'), roof=('roofline_fraction', 'median'), over=('roofline_fraction', lambda s: int((s > 1).sum())))
print(g.to_string())" "$T/zoo3" > "$OUT/zoo3_matrix.txt" 2>&1; cat "$OUT/zoo3_matrix.txt"
echo "done at $SECONDS s"
} 2>&1 | quiet_log | tee "$OUT/log.txt"
rm -rf "$OUT/cache"

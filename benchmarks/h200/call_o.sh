#!/usr/bin/env bash
# call O (2026-12-02): the profile's elementwise fill-in at irregular sizes (odd and round decimal ones
# between the powers of two), then the CPU model zoo of benchmarks/capture_cpu_models.py on the GPU.
#   bash benchmarks/h200/call_o.sh      # on the H200, from the repository root
source "$(dirname "$0")/common.sh"
P=$T/p5
{
step "machine"; machine
step "profile: extend the elementwise section (pass 2 at irregular sizes)"
cp -r benchmarks/profiles/h200 "$P"
timeout 150 $WL profile --device cuda -o "$P" --extend --section elementwise --budget-minutes 0.6 -q
echo "extend rc $?"
python3 -c "import json; d=json.load(open('$P/profile.json')); print('grid_seconds', d['grid_seconds'], 'gpu_minutes', d['gpu_minutes'], 'points', d.get('points'), 'throttled', d.get('throttled_points'), 'noisy', d.get('noisy_points')); print([s['study'] for s in d['sections'] if 'irregular' in s['study']])"
tar czf "$OUT/profile_p5.tgz" --exclude=traces -C "$T" p5
step "the CPU model zoo on the GPU"
mkdir -p "$T/zoo"
timeout 380 python3 benchmarks/capture_cpu_models.py --out "$T/zoo" --device cuda
echo "zoo rc $?"
ls "$T/zoo" | wc -l
gzip -9 "$T"/zoo/*.json 2>/dev/null; gunzip "$T"/zoo/*.flops.json.gz 2>/dev/null
tar czf "$OUT/zoo_cuda.tgz" -C "$T" zoo
ls -la "$OUT"
echo "done at $SECONDS s"
} 2>&1 | quiet_log | tee "$OUT/log.txt"
rm -rf "$OUT/cache"

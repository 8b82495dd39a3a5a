#!/usr/bin/env bash
# call Y: the profile's `layers` section (training layers, forward and backward) measured into a copy of the
# shipped H200 profile with `wlprof profile --extend`; the layers workload's defaults on the GPU.
#   bash benchmarks/h200/call_y.sh      # on the H200, from the repository root; files under $OUT
source "$(dirname "$0")/common.sh"
{
step "machine"; machine
step "profile --extend --section layers"
rm -rf /tmp/prof && cp -r benchmarks/profiles/h200 /tmp/prof
timeout 300 $WL profile --device cuda -o /tmp/prof --extend --section layers --budget-minutes 3 -q
echo "profile rc $?"
mkdir -p "$OUT/profile" && cp /tmp/prof/*.json /tmp/prof/*.parquet "$OUT/profile/"
tar czf "$OUT/layers_runs.tgz" --exclude=_chrome -C /tmp/prof traces
python3 -c "import json; r = json.load(open('/tmp/prof/profile.json')); print('gpu_minutes', r['gpu_minutes'], 'grid_seconds', r['grid_seconds']); [print(s['study'], s['points'], s['seconds'], s['status']) for s in r['sections'] if 'layers' in s['study']]"
step "wlprof run layers (defaults) on the GPU"
timeout 150 $WL run layers --traces $T/t -q > $OUT/layers_run.txt 2>&1; echo "run layers rc $?"
timeout 60 $WL show $(ls $T/t | head -1) --traces $T/t --top 6 > $OUT/layers_show.txt 2>&1
python3 - "$T/t" <<'PY'
import sys, wlprof
s = wlprof.load(sys.argv[1], table="steps")
print(s[["variant", "kernel_us", "flops", "bytes", "unknown_time_share", "bytes_unknown_time_share"]].to_string())
PY
echo "done at $SECONDS s"
} 2>&1 | quiet_log | tee "$OUT/log.txt"
rm -rf "$OUT/cache"

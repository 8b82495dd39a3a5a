#!/usr/bin/env bash
# call R (2026-12-02): held-out set H (workloads/heldout/set_h, written before any model change it judges)
# measured and scored with the shipped profile; sets E, F and G measured again for their tables (their
# earlier runs were not kept); the profile's new `gemm ragged` section measured on a copy of the
# shipped profile (`--extend`), for the model's ragged-shape work on the CPU.
#   bash benchmarks/h200/call_r.sh      # on the H200, from the repository root
source "$(dirname "$0")/common.sh"
P=$T/p6
{
step "machine"; machine
step "held-out set_h"
timeout 200 python3 benchmarks/h200/sweep_many.py --traces "$T/heldout_h" --device cuda workloads/heldout/set_h/*.toml
tar czf "$OUT/heldout_set_h.tgz" --exclude=_chrome -C "$T" heldout_h
timeout 100 python3 benchmarks/heldout.py --profile benchmarks/profiles/h200 --traces "$T/heldout_h" \
  --out "$OUT/heldout_set_h.md" > "$T/heldout.log" 2>&1; echo "score rc $?"
grep -E "^\| (L3 profile|noise floor) \| all" "$OUT/heldout_set_h.md" | sort -u
step "profile: the gemm ragged section"
cp -r benchmarks/profiles/h200 "$P"
timeout 150 $WL profile --device cuda -o "$P" --extend --section "gemm ragged" --budget-minutes 1.5 -q
echo "extend rc $?"
python3 -c "import json; d=json.load(open('$P/profile.json')); print('grid_seconds', d['grid_seconds'], 'gpu_minutes', d['gpu_minutes'], 'points', d.get('points')); print([(s['study'], s['points'], s['seconds']) for s in d['sections'] if 'ragged' in s['study']])"
tar czf "$OUT/profile_p6.tgz" --exclude=traces -C "$T" p6
for s in e f g; do
  step "held-out set_$s again"
  timeout 120 python3 benchmarks/h200/sweep_many.py --traces "$T/heldout_$s" --device cuda workloads/heldout/set_$s/*.toml | tail -1
  tar czf "$OUT/heldout_set_$s.tgz" --exclude=_chrome -C "$T" heldout_$s
  echo "set $s at $SECONDS s"
done
ls -la "$OUT"
echo "done at $SECONDS s"
} 2>&1 | quiet_log | tee "$OUT/log.txt"
rm -rf "$OUT/cache"

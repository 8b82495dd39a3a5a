#!/usr/bin/env bash
# call N (2026-12-02): the MoE section of the shipped profile measured again on the new MoE grid (five
# widths, top-k up to 8, token midpoints), then held-out set F (workloads/heldout/set_f) measured and
# scored with the shipped profile and the new one on the same runs.
#   bash benchmarks/h200/call_n.sh      # on the H200, from the repository root
source "$(dirname "$0")/common.sh"
P=$T/p2
H=$T/heldout_f
{
step "machine"; machine
step "profile: drop the old MoE studies, measure the new MoE grid"
cp -r benchmarks/profiles/h200 "$P"
$WL profile -o "$P" --drop 'profile:moe *' --reason "replaced by the MoE grid of five widths, top-k up to 8 and token midpoints (call N)" -q
echo "drop rc $?"
timeout 300 $WL profile --device cuda -o "$P" --extend --section moe --budget-minutes 3.2 -q
echo "extend rc $?"
python3 -c "import json; d=json.load(open('$P/profile.json')); print('grid_seconds', d['grid_seconds'], 'gpu_minutes', d['gpu_minutes'], 'points', d.get('points'), 'throttled', d.get('throttled_points'), 'noisy', d.get('noisy_points'))"
tar czf "$OUT/profile_p2.tgz" --exclude=traces -C "$T" p2
step "held-out set_f"
timeout 240 python3 benchmarks/h200/sweep_many.py --traces "$H" --device cuda workloads/heldout/set_f/*.toml
tar czf "$OUT/heldout_set_f.tgz" --exclude=_chrome -C "$T" heldout_f
for p in benchmarks/profiles/h200 "$P"; do
  step "the ladder on set_f with $p"
  timeout 100 python3 benchmarks/heldout.py --profile "$p" --traces "$H" --out "$OUT/heldout_set_f_$(basename $p).md" \
    > "$T/heldout.log" 2>&1; echo "rc $?"
  grep -E "^\| (L3 profile|noise floor) \| all" "$OUT/heldout_set_f_$(basename $p).md" | sort -u
done
echo "done at $SECONDS s"
} 2>&1 | quiet_log | tee "$OUT/log.txt"
rm -rf "$OUT/cache"

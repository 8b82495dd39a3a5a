#!/usr/bin/env bash
# call Z: held-out set E measured again and scored with two profiles on the same runs: the working tree's
# benchmarks/profiles/h200 and the one before it (carried as .oldprof), to see what a profile change did.
#   bash benchmarks/h200/call_z.sh      # on the H200, from the repository root, with .oldprof carried
source "$(dirname "$0")/common.sh"
H=$T/heldout
{
step "machine"; machine
step "held-out set_e"
timeout 270 python3 benchmarks/h200/sweep_many.py --traces "$H" --device cuda workloads/heldout/set_e/*.toml
tar czf "$OUT/heldout_set_e.tgz" --exclude=_chrome -C "$T" heldout
for p in benchmarks/profiles/h200 .oldprof; do
  step "the ladder on set_e with $p"
  timeout 120 python3 benchmarks/heldout.py --profile "$p" --traces "$H" --out "$OUT/heldout_set_e_$(basename $p).md" \
    > "$T/heldout.log" 2>&1; echo "rc $?"
  grep -E "^\| (L3 profile|noise floor) \| all" "$OUT/heldout_set_e_$(basename $p).md" | sort -u
done
echo "done at $SECONDS s"
} 2>&1 | quiet_log | tee "$OUT/log.txt"
rm -rf "$OUT/cache"

#!/usr/bin/env bash
# call Q (2026-12-02): held-out set G (workloads/heldout/set_g), measured once after the last change to
# the profile and the model, and scored with the shipped profile.
#   bash benchmarks/h200/call_q.sh      # on the H200, from the repository root
source "$(dirname "$0")/common.sh"
H=$T/heldout_g
{
step "machine"; machine
step "held-out set_g"
timeout 300 python3 benchmarks/h200/sweep_many.py --traces "$H" --device cuda workloads/heldout/set_g/*.toml
tar czf "$OUT/heldout_set_g.tgz" --exclude=_chrome -C "$T" heldout_g
step "the ladder on set_g with the shipped profile"
timeout 120 python3 benchmarks/heldout.py --profile benchmarks/profiles/h200 --traces "$H" --out "$OUT/heldout_set_g.md" \
  > "$T/heldout.log" 2>&1; echo "rc $?"
grep -E "^\| (L3 profile|noise floor) \| all" "$OUT/heldout_set_g.md" | sort -u
echo "done at $SECONDS s"
} 2>&1 | quiet_log | tee "$OUT/log.txt"
rm -rf "$OUT/cache"

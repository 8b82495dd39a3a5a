#!/usr/bin/env bash
# call FC (2026-12-07): held-out set M on whichever GPU is lent (H100: scored with benchmarks/profiles/h100;
# H200: with benchmarks/profiles/h200), nothing else: the runs come back in $OUT/heldout_set_m.tgz.
#   bash benchmarks/h200/call_fc.sh      # on the device machine, from the repository root
source "$(dirname "$0")/common.sh"
MAX=${MAX:-240}
{
step "machine"; machine
step "held-out set_m"
timeout $(( MAX - SECONDS - 15 )) python3 benchmarks/h200/sweep_many.py --traces "$T/heldout_m" --device cuda workloads/heldout/set_m/*.toml
tar czf "$OUT/heldout_set_m.tgz" --exclude=_chrome -C "$T" heldout_m
ls -la "$OUT"
echo "done at $SECONDS s"
} 2>&1 | quiet_log | tee "$OUT/log.txt"
rm -rf "$OUT/cache"

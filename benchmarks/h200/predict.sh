#!/usr/bin/env bash
# H200 device call: build the Level-3 offline profile and score it on configurations it never saw.
#
#   bash benchmarks/h200/predict.sh                 # on the H200, from the repository root (~9 minutes)
#   DEVICE=cpu bash benchmarks/h200/predict.sh      # the same steps as a CPU miniature (a dry run)
#
# 1. `wlprof profile --device cuda` into $T/profile within a budget (BUDGET_MIN, default 4.3 minutes
#    of grid; the coarse pass of every section first);
# 2. the held-out studies (workloads/heldout/heldout_*.toml) in one process into $T/heldout;
# 3. `wlprof predict --profile ... --test` on every held-out run; five `--spec` predictions and three
#    `--trace --scale` ones beside their measured runs (predict_examples.py), the same through the
#    command line once each; benchmarks/heldout.py (the ladder per family);
# 4. $OUT: log.txt, profile.tgz (profile.json, predictor.json, ops/steps Parquet; in 15 MB parts when
#    larger), heldout.tgz (the held-out runs without their Chrome traces, the MLP's raw traces kept),
#    predict_test.md, spec.md, heldout.md.
source "$(dirname "$0")/common.sh"
DEVICE=${DEVICE:-cuda}
BUDGET_MIN=${BUDGET_MIN:-4.3}
if [ "$DEVICE" = cpu ]; then SHRINK=--shrink; BUDGET_MIN=${CPU_BUDGET_MIN:-4}; LIMIT=${LIMIT:-1500}; else SHRINK=; fi
P=$T/profile
H=$T/heldout
START=$(date +%s)
# common.sh's quiet_log, line-buffered: a call cut short at its time limit still leaves its log
qlog() { grep --line-buffered -v -e '^USDT' -e 'Profiler clears events' -e '_warn_once'; }
elapsed() { echo $(( $(date +%s) - START )); }
LIMIT=${LIMIT:-575}  # seconds: the call's 10 minutes less the final listing; later steps start only before it
left() { echo $(( LIMIT - $(elapsed) )); }
pack_profile() {  # at most 8 files of at most 16 MB: the profile is split in parts when larger
  if [ -f "$P/ops.parquet" ]; then
    tar czf "$T/profile.tgz" -C "$T" profile/profile.json profile/predictor.json profile/ops.parquet \
      profile/steps.parquet || return
  else  # the profile was cut short: its runs' tables as they are (predict fits them)
    tar czf "$T/profile.tgz" --exclude=_chrome --no-wildcards-match-slash \
      --exclude='profile/traces/*/p[0-9]*.parquet' -C "$T" profile || return
  fi
  if [ "$(stat -c %s "$T/profile.tgz")" -gt 15000000 ]; then
    split -b 15000000 -d "$T/profile.tgz" "$OUT/profile.tgz.part"   # cat profile.tgz.part* > profile.tgz
  else cp "$T/profile.tgz" "$OUT/profile.tgz"; fi
}
pack_heldout() {  # the held-out runs without their Chrome traces, but with the MLP's raw ones (for --trace)
  local mlp
  mlp=$(python3 -c "import json; print(next(r['run_id'] for r in json.load(open('$H/_runs.json')) if r['name']=='heldout_mlp'))" 2>/dev/null)
  tar cf "$T/heldout.tar" --exclude=_chrome -C "$T" heldout || return
  [ -n "$mlp" ] && (cd "$T" && tar rf heldout.tar heldout/"$mlp"/_chrome/*.raw.json.gz)
  gzip -c "$T/heldout.tar" > "$OUT/heldout.tgz"
}
{
step "machine"
if [ "$DEVICE" = cuda ]; then machine; else python3 -c "import torch; print('torch', torch.__version__)"; fi

step "profile ($BUDGET_MIN min budget)"
timeout 400 $WL profile --device "$DEVICE" -o "$P" --budget-minutes "$BUDGET_MIN"
pack_profile
echo "profile done at $(elapsed) s"

step "held-out studies"
timeout $(( $(left) < 170 ? $(left) : 170 )) python3 benchmarks/h200/sweep_many.py --traces "$H" --device "$DEVICE" $SHRINK \
  workloads/heldout/heldout_gemm.toml workloads/heldout/heldout_mlp.toml workloads/heldout/heldout_mlp_wide.toml \
  workloads/heldout/heldout_elementwise.toml workloads/heldout/heldout_moe_a.toml workloads/heldout/heldout_moe_b.toml \
  workloads/heldout/heldout_moe_spec.toml workloads/heldout/heldout_gnn.toml workloads/heldout/heldout_gnn_pyg.toml \
  workloads/gemm_same_flops.toml
pack_heldout
echo "held-out done at $(elapsed) s"
RUNS=$(python3 -c "import json; print(' '.join('--test ' + r['run_id'] for r in json.load(open('$H/_runs.json')) if r['run_id']))")

step "predict --test (every held-out run)"
[ "$(left)" -gt 90 ] && timeout $(( $(left) - 60 )) $WL predict --profile "$P" $RUNS --traces "$H" -o "$OUT/predict_test.md"

step "predict --spec and --trace --scale: five configurations and three rescaled traces beside their measured runs"
[ "$(left)" -gt 60 ] && timeout $(( $(left) - 30 )) python3 benchmarks/h200/predict_examples.py --profile "$P" \
  --heldout "$H" --out "$OUT/spec.md" $( [ "$DEVICE" = cpu ] && echo --cpu ) > "$T/examples.log" 2>&1
head -40 "$T/examples.log"
echo "examples done at $(elapsed) s"
# the same through the command line, once each
if [ "$DEVICE" = cuda ]; then SPEC="moe tokens=4096 experts=32 top_k=2 routing=zipf:1.1 dispatch=grouped"
else SPEC="moe tokens=48 experts=6 top_k=2 d_model=48 d_ff=96 routing=zipf:1.1 dispatch=grouped dtype=float32"; fi
[ "$(left)" -gt 45 ] && timeout 40 $WL predict --profile "$P" --spec "$SPEC" --top 10
MLP_RUN=$(python3 -c "import json; print(next(r['run_id'] for r in json.load(open('$H/_runs.json')) if r['name']=='heldout_mlp'))")
f=$(ls "$H/$MLP_RUN"/_chrome/p00[14]-*.raw.json.gz 2>/dev/null | tail -1)
[ -n "$f" ] && [ "$(left)" -gt 35 ] && timeout 30 $WL predict --profile "$P" --trace "$f" --scale batch=4 --top 6

step "the ladder per family on the held-out runs"
[ "$(left)" -gt 30 ] && timeout $(( $(left) - 5 )) python3 benchmarks/heldout.py --profile "$P" --traces "$H" \
  --out "$OUT/heldout.md" > "$T/heldout.log" 2>&1
head -30 "$T/heldout.log"
echo "scoring done at $(elapsed) s"
step "done"; [ "$DEVICE" = cuda ] && nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv
} 2>&1 | qlog | tee "$OUT/log.txt"
rm -rf "$OUT/cache"
ls -la "$OUT"

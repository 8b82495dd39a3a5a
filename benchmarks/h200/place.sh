#!/usr/bin/env bash
# H200, placement (issue 16): every committed mix (workloads/mixes/mix_*.toml) planned with every planner
# and validated on the device: each plan's GPU groups co-run one at a time, the oracle measuring
# every group of each mix (6 models: 63 groups). Run from the repository root on the device machine:
#   PROFILE=DIR bash benchmarks/h200/place.sh    # an offline profile of this device: all four planners
#   bash benchmarks/h200/place.sh                # no profile: flops, roofline and oracle
#   DEVICE=cpu REPS=3 LIMIT=300 BUDGET=900 bash benchmarks/h200/place.sh   # the same at the mixes' CPU sizes
# (`benchmarks/profiles/h200` is the shipped H200 profile of torch 2.11: PROFILE=that works.)
# Each mix takes about a minute on an H200; the call stops starting mixes after BUDGET seconds.
# Everything lands in $OUT: the log, the plans' tables (place_summary.md), the ceilings, and
# placement.tgz (per mix: plan.json, plan.md, validation/groups/costs Parquet, coloc.json, Chrome traces).
source "$(dirname "$0")/common.sh"
PROFILE=${PROFILE:-${1:-}}
DEVICE=${DEVICE:-cuda}
REPS=${REPS:-20}
LIMIT=${LIMIT:-110}   # seconds per mix at most
BUDGET=${BUDGET:-340}  # seconds for the whole call: no mix starts a run past it (6 minutes with the tar)
left() { local l=$((BUDGET - SECONDS)); [ $l -gt "$LIMIT" ] && l=$LIMIT; echo $l; }
PLANNERS=flops,roofline,oracle
PROF_ARGS=()
if [ -n "$PROFILE" ]; then
  PLANNERS=all
  PROF_ARGS=(--profile "$PROFILE")
fi
# mix:GPUs, the most telling first
MIXES=${MIXES:-"flops_mislead:3 moe_gnn_dense:3 dense:3"}
{
step "machine"
[ "$DEVICE" = cpu ] || machine
echo "profile: ${PROFILE:-none}; planners: $PLANNERS; device: $DEVICE; waves per group: $REPS"
step "calibrate"; timeout 60 $WL calibrate --device "$DEVICE" $([ "$DEVICE" = cpu ] && echo --quick)
for m in $MIXES; do
  name=${m%%:*}; gpus=${m##*:}
  step "place $name --gpus $gpus"
  if [ "$(left)" -lt 20 ]; then echo "place $name: skipped, the call's budget is spent"; continue; fi
  timeout "$(left)" $WL place "workloads/mixes/mix_$name.toml" --gpus "$gpus" --validate --planner "$PLANNERS" \
    ${PROF_ARGS[@]+"${PROF_ARGS[@]}"} --device "$DEVICE" --reps "$REPS" -o "$T/placement/$name"
  rc=$?
  if [ $rc -eq 2 ] && [ -n "$PROFILE" ] && [ "$(left)" -ge 20 ]; then  # the profile refused (bad input, before any work): the rest still runs
    echo "place $name: exit 2 with --profile $PROFILE; again without the profile planner"
    timeout "$(left)" $WL place "workloads/mixes/mix_$name.toml" --gpus "$gpus" --validate --planner flops,roofline,oracle \
      --device "$DEVICE" --reps "$REPS" -o "$T/placement/$name"
    rc=$?
  fi
  [ $rc -eq 0 ] || echo "place $name: exit $rc"
done
step "done"; [ "$DEVICE" = cpu ] || nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv
} 2>&1 | quiet_log | tee "$OUT/log_place.txt"
cat "$T"/placement/*/plan.md > "$OUT/place_summary.md" 2>/dev/null || true
tar czf "$OUT/placement.tgz" -C "$T" placement 2>/dev/null || true
cp "$OUT"/cache/*.json "$OUT/" 2>/dev/null || true
rm -rf "$OUT/cache" "$T"
ls -la "$OUT"

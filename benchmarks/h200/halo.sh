#!/usr/bin/env bash
# The halo exchange on one H200 (issue 14): serial vs overlapped, the exchange on the copy engine
# (device to device on two side streams, and through pinned host memory: device to host on one
# side stream, host to device on the other), at two grid sizes, then through host memory with the
# grid cut into 16 and 64 strips (a larger exchange); `wlprof overlap` on each run; the
# Chrome traces of the overlapped points (compute on the default stream, copies on two side streams)
# kept, and one of them ingested back and put through `wlprof overlap` as a foreign trace would be.
# Run from the repository root on the device machine:  bash benchmarks/h200/halo.sh
# On a CPU first:                                     bash benchmarks/h200/halo.sh --device cpu
# At most ~5 minutes; everything lands in $OUT (5 files).
source "$(dirname "$0")/common.sh"
DEV=()
if [ "${1:-}" = "--device" ]; then DEV=(--device "$2"); fi
if [ "${DEV[1]:-cuda}" = "cpu" ]; then
  SIZES=(--nodes 1024,4096 --features 16)
  NARROW=(16); NARROW_SIZES=(--nodes 4096 --features 16)
else
  SIZES=(--nodes 262144,1048576 --features 128)
  NARROW=(16 64); NARROW_SIZES=(--nodes 262144 --features 128)
fi
TR="$T/traces"
{
step "machine"
if [ "${DEV[1]:-cuda}" = "cpu" ]; then python3 -c "import torch; print('torch', torch.__version__, 'cpu')"; else machine; fi
step "calibrate"; timeout 90 $WL calibrate "${DEV[@]}"
for X in d2d host; do
  step "halo, exchange $X: serial vs overlap"
  timeout 80 $WL run halo --schedule serial,overlap --exchange "$X" --partitions 4 "${SIZES[@]}" "${DEV[@]}" \
    --traces "$TR" -q --reps 10 || echo "halo $X exit $?"
done
# narrower strips: the exchange grows with the borders (2 (P - 1) of them), the compute stays; through
# pinned host memory the exchange becomes a sizeable share of the step, and overlap has something to hide
for P in "${NARROW[@]}"; do
  step "halo, exchange host, $P strips: serial vs overlap"
  timeout 60 $WL run halo --schedule serial,overlap --exchange host --partitions "$P" "${NARROW_SIZES[@]}" "${DEV[@]}" \
    --traces "$TR" -q --reps 10 || echo "halo host P=$P exit $?"
done
for RUN in $(ls "$TR"); do
  step "wlprof overlap $RUN"; timeout 30 $WL overlap "$RUN" --traces "$TR"
done
step "the overlapped points' traces: compute plus copies on two side streams"
n=0
for RUN in $(ls "$TR"); do
  X=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['study']['params'].get('exchange','d2d'))" "$TR/$RUN/_manifest.json")
  F=$(ls "$TR/$RUN/_chrome/"*overlap*.json.gz 2>/dev/null | grep -v '\.raw\.' | tail -1)
  if [ -n "$F" ]; then cp "$F" "$OUT/halo_trace_${X}_overlap.json.gz"; n=$((n+1)); fi
done
step "ingest one back, as a foreign trace"
timeout 40 $WL ingest "$OUT/halo_trace_host_overlap.json.gz" --traces "$T/ingested" -q --name halo-host
for RUN in $(ls "$T/ingested"); do timeout 30 $WL overlap "$RUN" --traces "$T/ingested"; done
step "done"
[ "${DEV[1]:-cuda}" = "cpu" ] || nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv
} 2>&1 | quiet_log | tee "$OUT/log_halo.txt"
tar czf "$OUT/halo_runs.tgz" -C "$T" traces ingested
cp "$OUT"/cache/*.json "$OUT/" 2>/dev/null || true
rm -rf "$OUT/cache" "$T"
ls -la "$OUT"

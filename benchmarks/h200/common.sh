# Sourced by every device-call script: the output folder, the environment, a scratch
# folder, the wlprof command, a step banner, the machine's state, and a log filter.
# NVLink multicast stays off in every process a call starts.
set -u -o pipefail
OUT=${OUT:-/tmp/wlprof-out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 WLPROF_CACHE_DIR=$OUT/cache
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
T=$(mktemp -d)
WL="python3 -m wlprof.cli.main"
step() { echo; echo "=== $(date -u +%H:%M:%S) $*"; }
machine() {
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
  python3 -c "import torch, torch_geometric as g; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'pyg', g.__version__)"
}
quiet_log() { grep -v -e '^USDT' -e 'Profiler clears events' -e '_warn_once'; }
# the GPU tests, their output in $OUT/pytest_gpu.txt
gpu_tests() {
  step "the GPU tests"
  timeout 120 python3 -m pytest -q -m gpu -o addopts= -p no:cacheprovider > "$OUT/pytest_gpu.txt" 2>&1; echo "rc $?"
  tail -3 "$OUT/pytest_gpu.txt"
}
# the GPU tests, then the fast tier (8 workers where pytest-xdist is there), their output under $OUT
suite_steps() {
  local N=""; python3 -c "import xdist" 2>/dev/null && N="-n 8 --dist loadfile"; echo "xdist: ${N:-none}"
  gpu_tests
  step "the fast tier"
  timeout 300 python3 -m pytest -q -m "not slow" -o addopts= $N -p no:cacheprovider > "$OUT/pytest_fast.txt" 2>&1
  echo "rc $?"; tail -6 "$OUT/pytest_fast.txt"
}
# stop the call (exit 0, nothing measured) where $REQUIRE is set and the GPU's name does not hold it
require_gpu() {
  if [ -n "${REQUIRE:-}" ] && ! nvidia-smi --query-gpu=name --format=csv,noheader | grep -q "$REQUIRE"; then
    echo "not an $REQUIRE: nothing run"; exit 0
  fi
}
# capture SET TIMEOUT: held-out set SET's studies into $T/heldout_SET, within TIMEOUT and what is left of $LIMIT
# seconds, then $OUT/heldout_set_SET.tgz
capture() {
  step "held-out set_$1"
  local t=$(( LIMIT - SECONDS - 5 )); [ "$2" -lt "$t" ] && t=$2
  [ "$t" -gt 30 ] || { echo "no time left for set $1"; return; }
  timeout "$t" python3 benchmarks/h200/sweep_many.py --traces "$T/heldout_$1" --device cuda workloads/heldout/set_$1/*.toml
  tar czf "$OUT/heldout_set_$1.tgz" --exclude=_chrome -C "$T" "heldout_$1"
  echo "set $1 at $SECONDS s"
}
# extend_profile SRC: a copy of profile SRC in $T/profile, extended within 170 s with the grid's studies it lacks
# among the layers studies and mixed precision's micro-kernels, then $OUT/profile.tgz
extend_profile() {
  step "profile --extend"
  echo "extending $1"; cp -r "$1" "$T/profile"
  timeout 170 $WL profile --device cuda -o "$T/profile" --extend --section layers --section "elementwise mixed" \
    --budget-minutes 1.5 -q
  tar czf "$OUT/profile.tgz" -C "$T" profile/profile.json profile/predictor.json profile/ops.parquet profile/steps.parquet
  echo "profile done at $SECONDS s"
}
# the machine's state at the end of a call, and what it leaves in $OUT
finish() {
  nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv
  ls -la "$OUT"
  echo "done at $SECONDS s"
}

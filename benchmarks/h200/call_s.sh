#!/usr/bin/env bash
# call S (2026-12-02): the suite's fast tier and the GPU tests on torch 2.11 with CUDA after this session's
# parser, join, CLI and ingest changes (that image has neither msgspec nor orjson: the dict path runs), and
# a rank folder's ingest through both entry points with the fork server started early.
#   bash benchmarks/h200/call_s.sh      # on the H200, from the repository root
source "$(dirname "$0")/common.sh"
{
step "machine"; machine
python3 -c "import importlib.util as u; print({m: bool(u.find_spec(m)) for m in ('msgspec', 'orjson', 'xdist')})"
N=""; python3 -c "import xdist" 2>/dev/null && N="-n 8 --dist loadfile"; echo "xdist: ${N:-none}"
step "the fast tier"
timeout 330 python3 -m pytest -q -m "not slow" -o addopts= $N -p no:cacheprovider > "$OUT/pytest_fast.txt" 2>&1
echo "rc $?"; tail -4 "$OUT/pytest_fast.txt"
step "the GPU tests"
timeout 90 python3 -m pytest -q -m gpu -o addopts= -p no:cacheprovider > "$OUT/pytest_gpu.txt" 2>&1; echo "rc $?"
tail -2 "$OUT/pytest_gpu.txt"
step "a rank folder through both entry points"
for entry in "wlprof.cli.main" "wlprof"; do
  /usr/bin/time -f "%e s" python3 -m $entry ingest tests/fixtures/public/hta_2023_two_ranks --traces "$T/ing_$entry" -q > "$T/ing.txt" 2>&1
  echo "$entry rc $?"; tail -3 "$T/ing.txt"
done
python3 -c "import wlprof, sys; k = wlprof.load(sys.argv[1]); print(len(k), 'kernel rows', sorted(k['rank'].unique()))" "$T/ing_wlprof"
step "a CUDA run"
timeout 60 $WL run gemm --device cuda --shapes 1024x1024x1024,4096x4096x4096 -q --traces "$T/gemm" > /dev/null 2>&1; echo "gemm rc $?"
python3 -c "import wlprof, sys; k = wlprof.load(sys.argv[1]); k = k[k.step >= 0]; print(k.groupby('variant').agg(kernels=('name', 'size'), tflops=('achieved_tflops', 'median')).to_string())" "$T/gemm"
echo "done at $SECONDS s"
} 2>&1 | quiet_log | tee "$OUT/log.txt"
rm -rf "$OUT/cache"

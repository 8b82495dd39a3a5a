#!/usr/bin/env bash
# call X: mutation testing (benchmarks/mutation.py cost store, or the groups named in $MUT_GROUPS; not $GROUPS, a bash variable) on the device's CPU cores in the background,
# and the GPU tests beside it. `PART=1` starts the run; `PART=2`, the call right after, waits for it and
# brings back its output. Wheels for mutmut and its needs travel in .whl (carry).
#
#   PART=1 bash benchmarks/h200/call_x.sh ; PART=2 bash benchmarks/h200/call_x.sh   # two device calls
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
M=/tmp/mut
progress() {  # mutants with a result so far, per group folder (mutmut's .meta files)
  python3 - "$M" <<'PY'
import json, pathlib, sys
for g in sorted(pathlib.Path(sys.argv[1]).glob("*/mutants")):
    done = total = 0
    for f in g.rglob("*.meta"):
        codes = json.loads(f.read_text()).get("exit_code_by_key", {})
        total += len(codes); done += sum(v is not None for v in codes.values())
    print(f"{g.parent.name}: {done} of {total} mutants have a result")
PY
}
bring_back() {
  cp "$M"/mutation.txt "$M"/mutation.json "$OUT"/ 2>/dev/null
  for g in "$M"/*/; do [ -f "$g/mutmut-run.log" ] && tail -c 20000 "$g/mutmut-run.log" > "$OUT/$(basename "$g")-mutmut-run.log"; done
  progress > "$OUT/progress.txt" 2>&1; cat "$OUT/progress.txt"
}
if [ "${PART:-1}" = 1 ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  mkdir -p "$M"; nproc; date -u
  git rev-parse HEAD 2>/dev/null || echo "no git folder here"
  setsid nohup env PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH WLPROF_MUTATION_DIR=$M OMP_NUM_THREADS=1 \
    python3 benchmarks/mutation.py ${MUT_GROUPS:-cost store} --max-children 15 --json $M/mutation.json \
    > $M/mutation.txt 2>&1 < /dev/null &
  export PYTHONPATH=. WLPROF_CACHE_DIR=$OUT/cache
  timeout 240 python3 -m pytest -q -m gpu -o addopts= -p no:cacheprovider > $OUT/pytest_gpu.txt 2>&1; tail -3 $OUT/pytest_gpu.txt
  timeout 120 python3 -m wlprof run gemm --device cuda --steps 2 --warmup 2 --reps 5 -q --traces /tmp/t > $OUT/gemm.txt 2>&1
  echo "gemm rc $?"
  python3 -c "import wlprof; k = wlprof.load('/tmp/t'); print('rank values', k['rank'].unique().tolist(), len(k))"
  while [ $SECONDS -lt 580 ] && ! grep -q "^total:" $M/mutation.txt 2>/dev/null; do sleep 10; done
  bring_back
else
  while [ $SECONDS -lt 570 ] && ! grep -q "^total:" $M/mutation.txt 2>/dev/null; do sleep 10; done
  bring_back
  tail -5 "$M"/mutation.txt
fi

#!/usr/bin/env bash
# call W: the host-link ceilings on the H200, and the copies placed against them
export PYTHONPATH=. NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export WLPROF_CACHE_DIR=$OUT/cache COLUMNS=160
F="--steps 3 --warmup 3 --reps 10 -q"
python3 -m wlprof calibrate -o $OUT/ceilings-h200.json > $OUT/calibrate.txt 2>&1; echo "calibrate rc $?"
python3 -m wlprof run halo --exchange host,d2d --graph grid --nodes 1048576 --features 128 $F --traces $OUT/t > $OUT/halo.txt 2> $OUT/halo.err; echo "halo rc $?"
python3 -m wlprof ingest tests/fixtures/h200_training/streams.pt.trace.json.gz -t $OUT/t -q > $OUT/ingest.txt 2>&1; echo "ingest rc $?"
python3 - > $OUT/copies.txt 2>&1 <<'PY'
import os, wlprof
k = wlprof.load(os.environ["OUT"] + "/t")
m = k[k.kind == "memcpy"]
g = m.groupby(["workload", "variant", m.name.str[:34], "roof"], dropna=False).agg(
    n=("dur_us", "size"), us=("dur_us", "median"), bytes=("bytes", "median"), gbps=("achieved_gbps", "median"),
    ceiling=("ceiling_gbps", "median"), frac=("roofline_fraction", "median"), fmax=("roofline_fraction", "max"),
    note=("roof_note", lambda x: sorted(set(x.dropna()))[:3]))
print(g.to_string())
PY
cat $OUT/copies.txt
timeout 60 python3 -m pytest -q -m gpu -o addopts= -p no:cacheprovider > $OUT/pytest_gpu.txt 2>&1; tail -1 $OUT/pytest_gpu.txt
grep -iE "host|link|device ->|-> device" $OUT/calibrate.txt
rm -rf $OUT/t/*/_chrome

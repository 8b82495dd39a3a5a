#!/usr/bin/env bash
# call V: workload configurations no test uses, on the H200; then the GPU tests
export PYTHONPATH=. NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export WLPROF_CACHE_DIR=$OUT/cache
mkdir -p $OUT/config_trial
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $OUT/nvidia-smi.csv 2>&1
python3 -c "import torch, torch_geometric; print(torch.__version__, torch.version.cuda, torch_geometric.__version__)" > $OUT/versions.txt 2>&1
timeout 520 python3 benchmarks/h200/config_trial.py --out $OUT/config_trial > $OUT/config_trial/log.txt 2>&1
echo "trial rc $?" >> $OUT/config_trial/log.txt
rm -rf $OUT/config_trial/traces/*/_chrome
du -sh $OUT/config_trial/traces >> $OUT/config_trial/log.txt
timeout 60 python3 -m pytest -q -m gpu -o addopts= -p no:cacheprovider > $OUT/pytest_gpu.txt 2>&1

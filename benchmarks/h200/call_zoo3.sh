#!/usr/bin/env bash
# call zoo3 (2026-12-02): training and inference steps written the way other projects write them
# (Llama-style bf16 decoder eager and under max-autotune, flex_attention, FP8 _scaled_mm and int8
# _int_mm, a BERT encoder with per-parameter AdamW, one-rank DDP and FSDP2 over NCCL, a sparse
# embedding with SparseAdam), each a raw torch.profiler trace beside FlopCounterMode's counts.
#   bash benchmarks/h200/call_zoo3.sh      # on the H200, from the repository root
source "$(dirname "$0")/common.sh"
{
step "machine"; machine
step "captures"
timeout 420 python3 benchmarks/h200/capture_zoo3.py --out "$OUT" ${ONLY:+--only $ONLY}; echo "capture rc $?"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); [print(c.get('name'), c.get('bytes'), c.get('error','')) for c in d['captures']]" "$OUT/zoo3_traces/captures.json"
rm -rf "$OUT/zoo3_traces"
ls -la "$OUT"
echo "done at $SECONDS s"
} 2>&1 | quiet_log | tee "$OUT/log.txt"
rm -rf "$OUT/cache"

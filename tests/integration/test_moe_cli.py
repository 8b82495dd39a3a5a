"""The MoE workload end to end through the CLI on the CPU: regions, facts and FLOPs by hand; bad input.

FLOPs per computed token-expert row for d_model 16, d_ff 32, swiglu (tests/unit/test_moe.py):
3 GEMMs 3 * 2 * 16 * 32 = 3072, silu 5 * 32 = 160, gate mul 1 * 32 = 32 -> 3264.
"""

from __future__ import annotations

import gzip
import json
import os

import pandas as pd
import pytest

from wlprof.workloads import moe as moe_mod
from wlprof.workloads.moe import grouped as moe_grouped

FAST = ["--steps", "2", "--warmup", "1", "--reps", "3", "-q"]


@pytest.mark.slow
def test_cli_end_to_end_regions_facts_and_flops(tmp_path, cli, cpu_ceilings, wlprof_cache_dir):
    assert os.environ["WLPROF_CACHE_DIR"] == str(wlprof_cache_dir)  # a tmp cache, never ~/.cache
    out = tmp_path / "traces"
    res = cli("run", "moe", "--routing", "explicit:1x5+1x3", "--tokens", "8", "--experts", "4", "--top-k", "1",
              "--d-model", "16", "--d-ff", "32", "--dispatch", "loop,padded,grouped", "--traces", out, *FAST)
    assert res.exit_code == 0, res.output
    k = pd.read_parquet(out)
    assert set(k.variant) == {"explicit:1x5+1x3 / loop", "explicit:1x5+1x3 / padded", "explicit:1x5+1x3 / grouped"}
    for variant, g in k[k.step >= 0].groupby("variant"):
        per_region = g.groupby("region").dur_us.sum()
        assert set(moe_mod.REGIONS) <= set(per_region.index), variant
        steps = g.step.nunique()
        expert = g[g.region == "moe/expert"].flops.sum() / steps
        # dropless: loop and grouped compute the 8 routed rows, 8 * 3264 = 26,112; padded
        # computes 4 experts x capacity 5 (the largest load) = 20 rows, 20 * 3264 = 65,280
        assert expert == pytest.approx(65_280 if variant.endswith("padded") else 26_112, rel=1e-9), variant
    # grouped on the CPU (torch's per-group path): _grouped_mm runs one mm per group, so the
    # workload's statement (for the fused kernel's rows, op aten::_grouped_mm) names no row here and
    # the nested mm keep their formulas, which read only the active experts' weights. fp32, groups
    # of 5 and 3 rows (R = 8, A = 2), d = 16, f = 32: x@W1 and x@W3 each 4*(8*16 + 2*16*32 + 8*32),
    # h@W2 4*(8*32 + 2*32*16 + 8*16), the two empty groups' mm 0; silu 4*2*8*32, mul 4*3*8*32:
    # 4*(3*128 + 3*1024 + 3*256 + 5*256) = 22,016 bytes; and the host's reads of offs (the
    # aten::_local_scalar_dense of each group end: 4 bytes each, 4 groups x 3 calls = 48)
    g = k[(k.dispatch == "grouped") & (k.region == "moe/expert") & (k.step >= 0)]
    assert (g.flops_source == "formula").all()
    assert set(g.op_name) == {"aten::mm", "aten::silu", "aten::mul", "aten::_local_scalar_dense"}
    assert g.groupby("step")["bytes"].sum().tolist() == pytest.approx([22_016 + 48] * g.step.nunique())
    row = k.iloc[0]
    assert (row.tokens, row.experts, row.top_k, row.d_model, row.d_ff, row.activation) == (8, 4, 1, 16, 32, "swiglu")
    assert list(row.expert_counts) == [5, 3, 0, 0]
    assert (row.active_experts, row.max_expert_share, row.imbalance) == (2, 5 / 8, 5 / 2)  # mean load 8/4 = 2

    steps = pd.concat(pd.read_parquet(f) for f in sorted(out.glob("*/_steps/*.parquet"))).set_index("dispatch")
    assert (steps.useful_flops == 26_112).all()
    assert steps.executed_flops.to_dict() == pytest.approx({"loop": 26_112, "padded": 65_280, "grouped": 26_112})
    assert steps.loc["padded", "capacity"] == 5 and steps.loc["padded", "dropped_tokens"] == 0
    assert steps.loc["grouped", "grouped_path"] == moe_grouped.PATH_TORCH_LOOP
    assert "active 2/4 experts" in steps.loc["loop", "note"]

    # the dispatches launch genuinely different ops
    ops = pd.concat(pd.read_parquet(f) for f in sorted(out.glob("*/_ops/*.parquet")))
    expert_ops = ops[ops.region == "moe/expert"].groupby("dispatch").op_name.agg(set)
    names = ops.groupby("dispatch").op_name.agg(set)
    assert "aten::nonzero" in names["loop"]  # per-expert host syncs (where(mask) dispatches to nonzero)
    assert "aten::bmm" in expert_ops["padded"] and "aten::index_copy_" in names["padded"]
    assert "aten::sort" in names["grouped"] and "aten::bmm" not in expert_ops["grouped"]
    # the ops table holds the ops that did the work (on the CPU: _grouped_mm's nested mm);
    # the Chrome trace keeps aten::_grouped_mm itself, in moe/expert
    [chrome] = [f for f in out.glob("*/_chrome/*grouped.json.gz")]
    events = json.loads(gzip.decompress(chrome.read_bytes()))["traceEvents"]
    assert any(e.get("name") == "aten::_grouped_mm" for e in events)


SIZES = ["--tokens", "8", "--experts", "4", "--d-model", "16", "--d-ff", "32"]


@pytest.mark.parametrize("args,flag,value", [
    (["--top-k", "5"], "--top-k", "5"),
    (["--tokens", "0", "--experts", "4"], "--tokens", "'0'"),
    (["--routing", "uniform"], "--routing", "'uniform'"),
    (["--routing", "zipf:-1"], "--routing", "'zipf:-1'"),
    (["--routing", "explicit:2x64"], "--routing", "'explicit:2x64'"),
    (["--dispatch", "grouped", "--dtype", "float64"], "--dtype", "'float64'"),
    (["--dispatch", "sorted"], "--dispatch", "'sorted'"),
    (["--capacity-factor", "-1"], "--capacity-factor", "-1"),
    (["--ffn", "relu"], "--ffn", "'relu'"),
    (["--dispatch", "grouped", "--d-model", "10"], "--d-model", "10"),
])
def test_bad_input_names_the_flag_and_value_and_writes_nothing(tmp_path, cli, args, flag, value):
    out = tmp_path / "traces"
    res = cli("run", "moe", *SIZES, *args, "--traces", out, *FAST)
    assert res.exit_code == 2, res.output
    assert f"error: {flag} " in res.output and value in res.output, res.output
    assert not out.exists() or not any(out.iterdir())



"""The enriched Chrome trace's kernel args: what README says a kernel shows is what `enriched_trace` writes."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd

from wlprof.trace.enrich import ARG_COLUMNS, enriched_trace

README = Path(__file__).resolve().parents[2] / "README.md"


def _args(kernels: pd.DataFrame) -> list[dict]:
    events = [{"ph": "X", "name": f"k{i}", "args": {}} for i in range(len(kernels))]
    doc = json.loads(gzip.decompress(enriched_trace({}, events, kernels.assign(_event_idx=range(len(kernels))), {})))
    return [e["args"] for e in doc["traceEvents"]]


def test_region_only_inside_a_region_and_unknowns_left_out():
    k = pd.DataFrame({"flops": [2.0e6, np.nan], "bytes": [4096.0, 8.0], "flops_source": ["formula", "unknown"],
                      "bound": ["compute", None], "region": ["moe/dispatch", None]})
    inside, outside = _args(k)
    assert inside == {"flops": 2.0e6, "bytes": 4096.0, "bound": "compute", "flops source": "formula",
                      "wlprof region": "moe/dispatch"}
    assert outside == {"bytes": 8.0, "flops source": "unknown"}  # no region, no FLOPs, no bound


def test_readme_names_every_arg_and_says_the_region_is_conditional():
    text = " ".join(README.read_text(encoding="utf-8").split())
    start = text.index("clicking a kernel shows")
    para = text[start:text.index("Every column", start)]
    named = set(re.findall(r"`([^`]+)`", para))
    assert set(ARG_COLUMNS.values()) <= named, set(ARG_COLUMNS.values()) - named
    assert "`wlprof region` only for a kernel launched inside a `record_function` region" in para

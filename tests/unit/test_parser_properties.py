"""Property tests: on any event stream the parser raises only wlprof's own errors, and the join holds.

Derandomized so CI is reproducible; explore further with `pytest --hypothesis-seed=N` (seeds 1-13
were run clean; seed 1 found the three bugs fixed in wlprof.trace.parse and OpCall.from_args).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wlprof import pipeline
from wlprof.errors import WlprofError
from wlprof.trace.parse import read_trace

scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=False),
                    st.text(max_size=8))
values = st.recursive(scalars, lambda c: st.one_of(st.lists(c, max_size=4), st.dictionaries(st.text(max_size=6), c,
                                                                                              max_size=4)),
                      max_leaves=8)
CATS = ["cpu_op", "user_annotation", "cuda_runtime", "cuda_driver", "kernel", "gpu_memcpy", "gpu_memset", "ac2g"]
ids = st.integers(-1, 6)
well_formed = st.fixed_dictionaries({
    "ph": st.sampled_from(["X", "X", "X", "f", "s", "M"]),
    "cat": st.sampled_from(CATS),
    "name": st.sampled_from(["aten::mm", "aten::add", "aten::sum", "wlprof/step#1", "r", "k", "aten::linear"]),
    "ts": st.one_of(st.floats(0, 1e6, allow_nan=False), st.integers(0, 10**6)),
    "dur": st.one_of(st.floats(0, 1e3, allow_nan=False), st.integers(-5, 1000)),
    "pid": st.sampled_from([1, 2, "Spans"]),
    "tid": st.sampled_from([1, 7, "x"]),
    "args": st.fixed_dictionaries({}, optional={
        "External id": ids, "correlation": ids, "stream": ids, "grid": values, "block": values,
        "Input Dims": values, "Input type": values, "Input Strides": values, "Concrete Inputs": values,
        "bytes": values}),
})
anything = st.dictionaries(st.sampled_from(["ph", "cat", "name", "ts", "dur", "pid", "tid", "args", "id"]), values,
                           max_size=8)
events = st.lists(st.one_of(well_formed, well_formed, anything, values), max_size=30)
docs = st.one_of(events.map(lambda e: {"traceEvents": e}), events, values)


def _run(doc, tmp_path, layout):
    path = tmp_path / "t.json"
    if layout == "lines" and isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list) and doc["traceEvents"]:
        body = ",\n  ".join(json.dumps(e) for e in doc["traceEvents"])
        path.write_text('{"traceEvents": [\n  ' + body + "\n  ]\n}")
    else:
        path.write_text(json.dumps(doc))
    try:
        trace = read_trace(path, keep_events=(layout == "whole"))
        c = pipeline.costed(trace, None)
    except WlprofError:
        return None
    return trace, c, c.kernels, c.ops


@settings(max_examples=120, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@pytest.mark.slow
@given(doc=docs, layout=st.sampled_from(["whole", "lines"]))
def test_only_wlprof_errors_and_the_join_invariants_hold(tmp_path, doc, layout):
    got = _run(doc, tmp_path, layout)
    if got is None:
        return
    trace, c, kernels, ops = got
    rows = c.rows
    n_ops = len(c.joined.ops)
    pos = rows.op_pos.to_numpy()
    assert ((pos >= -1) & (pos < max(n_ops, 1))).all()
    assert (rows.has_op.to_numpy() == (pos >= 0)).all()  # a row has its op exactly when it points at one
    if c.joined.device_rows is not None:
        assert len(rows) == len(trace.device)  # every device activity is a row: none dropped
    assert len(kernels) == len(rows)
    # costs are counted once: kernels and ops agree where both are known
    known_ops = ops[ops.flops.notna()]
    k_known = kernels[kernels.flops.notna() & kernels.external_id.isin(known_ops.external_id)]
    assert np.isclose(k_known.flops.sum(), known_ops.flops.sum(), rtol=1e-9, atol=1e-6)
    assert kernels.flops_source.isin(["formula", "workload", "unknown"]).all()
    assert (kernels.dur_us.dropna() >= -1e-3).all() or c.joined.device_rows is not None
    for table in ("ops", "annotations", "launches", "device"):  # each table's names, once each
        df = getattr(trace, table)
        names = trace.names_in(table).tolist()
        assert len(names) == len(set(names)) and set(names) == (set(df["name"]) if "name" in df else set())


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=200))
def test_arbitrary_bytes_raise_only_wlprof_errors(tmp_path, data):
    path = tmp_path / "b.json"
    path.write_bytes(data)
    try:
        read_trace(path, keep_events=False)
    except WlprofError:
        pass




@pytest.mark.parametrize("seed", range(24))
def test_the_last_event_boundaries_are_those_of_the_whole_span(seed):
    """A minified trace's chunk ends at one of the last boundaries `}`,`{` (whitespace allowed): searched from
    the end in windows, they are the last `_TRIES` matches of the search over the whole span, last first.
    Events of up to 8 kB make spans where the last 64 kB hold fewer than `_TRIES` boundaries."""
    import random

    from wlprof.trace.parse import _BOUNDARY, _TRIES, _last_boundaries

    rng = random.Random(seed)
    longest = rng.choice([50, 500, 2000, 8000])
    seps = [b"},{", b"}, {", b"}\n ,\n {", b"},", b"}{", b"a"]
    buf = bytearray(b" " + b"".join(b"a" * rng.randint(0, longest) + rng.choice(seps)
                                    for _ in range(rng.randint(1, 400))))
    for tail in (1, rng.randint(1, len(buf)), max(1, len(buf) - rng.randint(0, 200_000))):
        whole = [m.start() for m in _BOUNDARY.finditer(buf, tail)][::-1][:_TRIES]
        assert _last_boundaries(buf, tail) == whole, tail

"""The per-class models on synthetic profiles with known answers: what they learn, and where from."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from wlprof.predict import model
from wlprof.predict.calls import describe
from wlprof.predict.neighbours import Table, exact_distance

BF = "c10::BFloat16"
K = model.Constants(sms=132, matrix={"bfloat16": 800e6}, vector=50e6, bandwidth=4e6, floor=2.0, tile=128)


def _row(name, dims, types, strides, dur, point=0, step=0, run="r", **extra):
    j = lambda v: json.dumps(v, separators=(",", ":"))  # noqa: E731
    return {"run_id": run, "point": point, "step": step, "workload": "synthetic", "op_name": name,
            "op_input_dims": j(dims), "op_input_types": j(types), "op_input_strides": j(strides),
            "op_concrete_inputs": j([""] * len(dims)), "dur_us": dur, **extra}


def copy_row(n, dur, **kw):
    return _row("aten::copy_", [[n], [n], []], [BF, BF, "Scalar"], [[1], [1], []], dur, **kw)


def mm_row(m, k, n, dur, **kw):
    return _row("aten::mm", [[m, k], [k, n]], [BF, BF], [[k, 1], [1, k]], dur, **kw)


# ---------------------------------------------------------------- the interpolator


def test_table_interpolates_between_points_and_returns_a_profiled_point_exactly():
    x = np.array([[0.0], [1.0], [2.0], [3.0]])
    r = np.array([0.0, 0.1, 0.2, 0.3])  # residual linear in the coordinate
    t = Table(x, r, np.ones(4))
    pred, dist = t.query(np.array([[1.5], [2.0], [2.25]]))
    assert pred == pytest.approx([0.15, 0.2, 0.225], abs=2e-3)
    assert dist == pytest.approx([0.5, 0.0, 0.25])


def test_table_carries_the_nearest_correction_beyond_the_profile_and_ignores_constant_coordinates():
    t = Table(np.array([[0.0, 5.0], [1.0, 5.0], [2.0, 5.0]]), np.array([0.0, 0.1, 0.2]), np.ones(3))
    pred, dist = t.query(np.array([[10.0, 5.0], [1.0, 7.0]]))
    assert pred[0] == pytest.approx(0.2)  # clipped to the neighbours' residuals: no extrapolated slope
    assert pred[1] == pytest.approx(0.1, abs=1e-3) and dist[1] == pytest.approx(2.0)  # off in the shared one


# ---------------------------------------------------------------- memory-bound ops


def test_memory_op_learns_its_bandwidth_and_floor_between_profiled_sizes():
    # true: 1.5 us floor, 3.2 TB/s (an L2-resident 2x faster below 32 MiB), base assumes 2 us and 4 TB/s
    def true(n):
        nbytes = 4.0 * n  # bf16 copy: read + write
        bw = 6.4e6 if nbytes < 32 * 2**20 else 3.2e6
        return 1.5 + nbytes / bw

    sizes = [2 ** i for i in range(10, 29)]
    prof = pd.DataFrame([copy_row(n, true(n), point=i) for i, n in enumerate(sizes)])
    p = model.fit(prof, K)
    tests = [int(1.5 * 2 ** i) for i in range(10, 28) if abs(1.5 * 2 ** i * 4 - 32 * 2**20) > 8 * 2**20]
    q = pd.DataFrame([copy_row(n, 1.0) for n in tests])
    pred, src = p.predict(q)
    want = np.array([true(n) for n in tests])
    assert np.abs(pred / want - 1).max() < 0.05
    assert set(src) == {model.SOURCES.index("near")}


def test_a_widening_copy_is_answered_by_widening_copies_only():
    # bfloat16 -> float32 copies take twice the time of float32 -> bfloat16 ones of the same bytes (6 bytes an
    # element either way): a profile of both answers each direction from its own calls
    def cast(n, up, dur, **kw):
        types = ["float", BF, "Scalar"] if up else [BF, "float", "Scalar"]
        return _row("aten::copy_", [[n], [n], []], types, [[1], [1], []], dur, **kw)

    def true(n, up):
        return (2.0 if up else 1.0) * (1.0 + 6.0 * n / 3.2e6)

    sizes = [2 ** i for i in range(10, 27)]
    prof = pd.DataFrame([cast(n, up, true(n, up), point=2 * i + up) for i, n in enumerate(sizes) for up in (0, 1)])
    p = model.fit(prof, K)
    tests = [(3000, 1), (3000, 0), (5_000_000, 1), (5_000_000, 0)]
    pred, src = p.predict(pd.DataFrame([cast(n, up, 1.0) for n, up in tests]))
    assert pred == pytest.approx([true(n, up) for n, up in tests], rel=0.05)
    assert {model.SOURCES[s] for s in src} == {"near"}


def test_a_scalar_read_back_of_another_dtype_is_answered_by_the_profiles_scalar_reads():
    # item() of an int64 and of a bool 0-d tensor took 1.44 and 1.56 us in the profile (a 2 us floor in K);
    # a float32 one, which it never ran, is its op's scalars of any dtype (the weighted mean, 1.50 us): its
    # launch is its time, not its 4 bytes
    def item(t, dur, **kw):
        return _row("aten::_local_scalar_dense", [[]], [t], [[]], dur, **kw)

    prof = pd.DataFrame([item("long int", 1.44, point=0), item("bool", 1.56, point=1),
                         copy_row(1 << 20, 2.0 + 4.0 * (1 << 20) / 4e6, point=2)])
    p = model.fit(prof, K)
    pred, src = p.predict(pd.DataFrame([item("float", 1.0)]))
    assert model.SOURCES[src[0]] == "op" and pred[0] == pytest.approx(1.50, abs=0.01)


def test_a_memory_op_near_the_l2s_edge_is_answered_from_its_own_side_of_it():
    # true: 1 us floor, 8 TB/s while the copy's bytes (read + write) stay under 40 MiB of a 64 MiB L2, 4 TB/s
    # past it; the profile holds powers of two, the queries lie between 16 and 128 MiB, next to the edge
    l2 = 64 * 2**20

    def true(n):
        nbytes = 4.0 * n
        return 1.0 + nbytes / (8e6 if nbytes < 40 * 2**20 else 4e6)

    sizes = [2 ** i for i in range(16, 28)]
    prof = pd.DataFrame([copy_row(n, true(n), point=i) for i, n in enumerate(sizes)])
    k = model.Constants(sms=132, matrix={"bfloat16": 800e6}, vector=50e6, bandwidth=4e6, floor=2.0, tile=128, l2=l2)
    # 9,437,184 elements (36 MiB, under 0.7 of the L2: its side) and 12,582,912 (48 MiB, past it)
    tests = [9 * 2**20, 12 * 2**20]
    q = pd.DataFrame([copy_row(n, 1.0) for n in tests])
    want = np.array([true(n) for n in tests])
    pred, _ = model.fit(prof, k).predict(q)
    assert np.abs(pred / want - 1).max() < 0.05
    # without the L2's size, neighbours from both sides of the edge mix: the 36 MiB copy is 9% off
    blind, _ = model.fit(prof, K).predict(q)
    assert abs(blind[0] / want[0] - 1) > 0.08


def test_a_copy_past_the_l2_is_no_faster_than_memory_whatever_its_l2_resident_neighbours():
    # the profile holds copies up to 16 MiB (read + write) of a 64 MiB L2, all at the L2's 8 TB/s; memory reads at
    # 4.0, writes at 4.4 and copies at 3.8 TB/s. A copy of 256 MiB cannot run at the L2's rate its neighbours carry:
    # it takes at least its bytes at the fastest of those (4.4 TB/s); one of 8 MiB stays at its neighbours' rate
    l2 = 64 * 2**20
    sizes = [2 ** i for i in range(12, 23)]  # 16 KiB .. 16 MiB moved
    prof = pd.DataFrame([copy_row(n, 1.0 + 4.0 * n / 8e6, point=i) for i, n in enumerate(sizes)])
    k = model.Constants(sms=132, matrix={"bfloat16": 800e6}, vector=50e6, bandwidth=3.8e6, floor=2.0, tile=128,
                        l2=l2, read=4.0e6, write=4.4e6)
    big, small = 64 * 2**20, 2**21  # 256 MiB and 8 MiB moved
    pred, _ = model.fit(prof, k).predict(pd.DataFrame([copy_row(big, 1.0), copy_row(small, 1.0)]))
    assert pred[0] == pytest.approx(4.0 * big / 4.4e6, rel=1e-6)
    assert pred[1] == pytest.approx(1.0 + 4.0 * small / 8e6, rel=0.02)
    # the constants keep the write bandwidth through the predictor's JSON
    assert model.Constants.from_dict(k.to_dict()).write == 4.4e6


def test_a_profiled_call_is_answered_by_its_own_median_and_noisy_samples_count_less():
    rows = [copy_row(4096, d, step=s) for s, d in enumerate([2.0, 2.1, 1.9])]
    p = model.fit(pd.DataFrame(rows), K)
    pred, src = p.predict(pd.DataFrame([copy_row(4096, 0.0)]))
    assert pred[0] == pytest.approx(2.0) and src[0] == model.SOURCES.index("same call")
    noisy = [copy_row(8192, d, step=s, point=1) for s, d in enumerate([2.0, 4.0, 3.0])]
    p = model.fit(pd.DataFrame(rows + noisy), K)
    assert p.meta["noisy"] == 1


def test_each_distinct_call_gets_the_spread_of_its_own_samples():
    # copies and GEMMs met in turn, at sizes out of order: in odd points the copy's samples are 2, 4 and 3 us
    # ((p90 - p10) / median = (3.8 - 2.2) / 3), every other call's three samples are equal (spread 0)
    rows = []
    for p, n in enumerate(2**k for k in (14, 11, 16, 10, 13, 12, 15)):
        rows += [copy_row(n, 3.0 + (p % 2) * d, step=s, point=p) for s, d in enumerate([-1.0, 1.0, 0.0])]
        rows += [mm_row(n // 64, 64, 64, 5.0, step=s, point=p) for s in range(3)]
    ops = pd.DataFrame(rows)
    calls = model.distinct_calls(ops, describe(ops))
    want = [(3.8 - 2.2) / 3.0 if p % 2 and g.startswith("memory") else 0.0 for p, g in zip(calls.point, calls.group,
                                                                                           strict=True)]
    assert calls.spread.to_numpy() == pytest.approx(want)
    assert model.fit(ops, K).meta["noisy"] == 3


# ---------------------------------------------------------------- GEMMs


def test_gemm_base_counts_tiles_and_waves_over_the_sms():
    d = describe(pd.DataFrame([mm_row(128 * 132, 4096, 1024, 1.0), mm_row(128 * 133, 4096, 1024, 1.0),
                               mm_row(1, 4096, 14336, 1.0), mm_row(256, 16384, 1024, 1.0)]))
    b = model.base_us(d, K)
    tile = 2 * 128 * 128 * 4096 / (800e6 / 132)  # one 128 x 128 tile's time on one SM
    assert b[0] == pytest.approx(2.0 + 8 * tile)  # 132 x 8 tiles: 8 full waves
    # one more row of tiles: 17 waves of 64-row (or 64-column) tiles beat 9 of full ones
    assert b[1] == pytest.approx(2.0 + 17 * tile / 2)
    assert b[2] == pytest.approx(2.0 + (4096 + 4096 * 14336 + 14336) * 2 / 4e6)  # skinny: the weights' bytes
    # 2 x 8 = 16 tiles on 132 SMs: K split 8 ways, one wave of an eighth of K
    assert b[3] == pytest.approx(2.0 + max(2 * 128 * 128 * 2048 / (800e6 / 132),
                                           (256 * 16384 + 16384 * 1024 + 256 * 1024) * 2 / 4e6))


def test_grouped_gemm_base_pads_each_groups_rows_to_whole_tiles():
    def grouped(counts):
        row = _row("aten::_grouped_mm", [[4096, 1024], [4, 1024, 4096], [4], [], []], [BF, BF, "int", "", ""],
                   [[1024, 1], [4194304, 1, 1024], [1], [], []], 1.0, workload="moe", dispatch="grouped")
        return {**row, "expert_counts": counts}

    d = describe(pd.DataFrame([grouped([1024] * 4), grouped([1, 1, 1, 4093]), grouped(None)]))
    b = model.base_us(d, K)
    tile = 2 * 128 * 128 * 1024 / (800e6 / 132)  # one 128 x 128 tile's time on one SM
    # balanced: 4 x 1024 rows = 32 tiles of 128 rows x 32 of 128 columns = 1024 tiles, 8 waves (the best of
    # the tile shapes); the weights' and activations' bytes take less
    assert b[0] == pytest.approx(2.0 + 8 * tile)
    # 1, 1, 1 and 4093 rows: 3 + 64 tiles of 64 rows x 32 columns = 2144 half tiles, 17 waves of them
    assert b[1] == pytest.approx(2.0 + 8.5 * tile)
    # no counts: half a tile of padding per group, 64 + 2 rows of 64 x 32 = 2112 half tiles, 16 waves
    assert b[2] == pytest.approx(2.0 + 8 * tile)


def test_an_op_that_computes_outside_the_gemms_is_based_on_its_flops_where_they_take_longer():
    # cudnn_convolution of x [32, 256, 56, 56] by w [256, 256, 3, 3], bf16, padding 1 (the formula's
    # 2 * 32 * 256 * 256 * 9 * 3136 = 118,380,036,096 FLOPs on the matrix unit): 148 ms at 800 TFLOP/s,
    # far longer than its (25,690,112 * 2 + 589,824 + 25,690,112) * 2 bytes at 4 TB/s (39 us)
    conv = _row("aten::cudnn_convolution", [[32, 256, 56, 56], [256, 256, 3, 3], [], [], [], [], [], [], []],
                [BF, BF, "ScalarList", "ScalarList", "ScalarList", "Scalar", "Scalar", "Scalar", "Scalar"],
                [[802816, 3136, 56, 1], [2304, 9, 3, 1], [], [], [], [], [], [], []], 1.0)
    conv["op_concrete_inputs"] = json.dumps(["", "", "[1, 1]", "[1, 1]", "[1, 1]", "1", "False", "False", "True"])
    d = describe(pd.DataFrame([conv, copy_row(1 << 20, 1.0)]))
    assert d.cls.tolist() == ["compute", "memory"] and d.matrix_unit.tolist() == [True, False]
    flops = 2 * 32 * 256 * 256 * 9 * 56 * 56
    assert d.flops[0] == flops
    b = model.base_us(d, K)
    assert b[0] == pytest.approx(2.0 + flops / 800e6)
    # a copy has no FLOPs: its bytes, read and written, at the bandwidth
    assert b[1] == pytest.approx(2.0 + 2 * (1 << 20) * 2 / 4e6)
    # the same convolution without a bf16 matrix peak falls back to the vector unit's
    k2 = model.Constants(sms=132, matrix={}, vector=50e6, bandwidth=4e6, floor=2.0, tile=128)
    assert model.base_us(d, k2)[0] == pytest.approx(2.0 + flops / 50e6)


def test_gemm_generalises_to_unprofiled_shapes_of_its_layout():
    # a device 20% under the base's peak, 10% under its bandwidth, and a 3 us floor
    def true(shapes):
        d = describe(pd.DataFrame([mm_row(m, k, n, 1.0) for m, k, n in shapes]))
        slow = model.Constants(sms=132, matrix={"bfloat16": 640e6}, bandwidth=3.6e6, floor=3.0)
        return np.asarray(model.base_us(d, slow), dtype=float)

    ms = [1 << i for i in range(14)] + [3 << i for i in range(12)]
    kn = [1024, 2048, 4096, 8192, 16384]
    grid = [(m, k, n) for m in ms for k in kn for n in kn]
    prof = pd.DataFrame([mm_row(m, k, n, t, point=i) for i, ((m, k, n), t) in enumerate(zip(grid, true(grid), strict=True))])
    p = model.fit(prof, K)
    shapes = [(5, 3072, 6144), (40, 6144, 3072), (320, 5120, 5120), (1000, 3072, 12288), (2500, 2560, 10240),
              (700, 12288, 3072), (12, 12288, 12288)]
    q = pd.DataFrame([mm_row(m, k, n, 1.0) for m, k, n in shapes])
    pred, src = p.predict(q)
    want = true(shapes)
    assert np.abs(pred / want - 1).max() < 0.06
    assert all(model.SOURCES[s] in ("near", "same call") for s in src)


# ---------------------------------------------------------------- index ops


def scatter_row(e, f, n, skew_max, dur, **kw):
    return _row("aten::scatter_add_", [[n, f], [], [e, f], [e, f]], ["float", "Scalar", "long int", "float"],
                [[f, 1], [], [1, 0], [f, 1]], dur, max_in_degree=skew_max, mean_in_degree=e / n, backend="scatter",
                **kw)


def test_index_op_time_follows_the_graphs_skew_not_its_shapes_alone():
    # the bytes at 3 TB/s, and a hub destination's updates serialized: 0.5 ns per element reduced into it
    def true(e, f, n, mx):
        return 2.0 + e * f * 4 * 3 / 3e6 + 5e-4 * mx * f

    rows, i = [], 0
    for s in (14, 16, 18, 20):
        for f in (32, 64, 128, 256):
            n, e = 1 << s, 16 << s
            for mx in (32, 256, 4096):
                rows.append(scatter_row(e, f, n, mx, true(e, f, n, mx), point=i))
                i += 1
    p = model.fit(pd.DataFrame(rows), K)
    cases = [(16 << 17, 96, 1 << 17, 1024), (16 << 19, 48, 1 << 19, 100), (16 << 15, 192, 1 << 15, 64),
             (16 << 18, 128, 1 << 18, 20000)]
    pred, src = p.predict(pd.DataFrame([scatter_row(*c, 1.0) for c in cases]))
    want = np.array([true(*c) for c in cases])
    assert np.abs(pred / want - 1).max() < 0.05
    # the same shapes on a flat graph: the skew coordinate moves the prediction
    flat, _ = p.predict(pd.DataFrame([scatter_row(16 << 18, 128, 1 << 18, 16, 1.0)]))
    assert flat[0] < pred[3] * 0.8


def cumsum_row(rows, cols, dim, dur, **kw):
    return _row("aten::cumsum", [[rows, cols], [], []], ["long int", "Scalar", ""], [[cols, 1], [], []], dur,
                **kw) | {"op_concrete_inputs": json.dumps(["", str(dim), ""])}


def test_a_scan_along_an_outer_dim_follows_its_extent_not_its_bytes():
    # cumsum over dim 0 of [rows, cols]: one thread per column walks the rows, 0.18 us a step, whatever the
    # columns (what the H100 measured of the MoE router's [tokens, experts] scans: [24576, 8] 4,350 us,
    # [49152, 16] 8,888 us, [8192, 32] 1,529 us); its bytes at 4 TB/s would put [24576, 8] at 2.4 us
    def true(r, c):
        return 2.0 + 0.18 * r

    shapes = [(r, c) for r in (64, 384, 2048, 8192, 24576) for c in (8, 16, 32)]
    p = model.fit(pd.DataFrame([cumsum_row(r, c, 0, true(r, c), point=i) for i, (r, c) in enumerate(shapes)]), K)
    cases = [(13200, 64), (4096, 8), (1000, 24)]
    pred, _ = p.predict(pd.DataFrame([cumsum_row(r, c, 0, 1.0) for r, c in cases]))
    assert pred == pytest.approx([true(r, c) for r, c in cases], rel=0.05)
    d = describe(pd.DataFrame([cumsum_row(13200, 64, 0, 1.0), cumsum_row(13200, 64, 1, 1.0),
                               cumsum_row(13200, 64, -2, 1.0), cumsum_row(13200, 1, 0, 1.0)]))
    # along the rows (dim 0 or -2): a scan of 13200 steps over 64 columns; along the columns, or over a
    # single column: the innermost dim, a memory-class call
    assert d.cls.tolist() == ["scan", "memory", "scan", "memory"]
    assert (d.L.iat[0], d.R.iat[0]) == (13200.0, 64.0)


def test_a_scan_past_the_l2s_edge_is_answered_from_its_own_side_of_it():
    # an 8 MB L2 (5.6 MB resident); the scan's bytes by the formula: 8 per int64 element read, 8 written. Its
    # steps take 0.18 us below the edge, twice that past it (each waits on memory); a scan of 256 columns
    # just past the edge (6 MB) must not take its neighbours' L2 rate, nor one just below it memory's
    k = model.Constants(sms=132, matrix={"bfloat16": 800e6}, vector=50e6, bandwidth=4e6, floor=2.0, tile=128,
                        l2=8e6)

    def true(r, c):
        return 2.0 + (0.36 if r * c * 16 > 0.7 * 8e6 else 0.18) * r

    shapes = [(r, c) for r in (256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096) for c in (8, 16, 32, 64, 128, 256, 512)]
    p = model.fit(pd.DataFrame([cumsum_row(r, c, 0, true(r, c), point=i) for i, (r, c) in enumerate(shapes)]), k)
    cases = [(1400, 300), (1100, 300)]  # 6.7 MB, past the edge; 5.3 MB, below it
    pred, _ = p.predict(pd.DataFrame([cumsum_row(r, c, 0, 1.0) for r, c in cases]))
    assert pred == pytest.approx([true(r, c) for r, c in cases], rel=0.1)


# ---------------------------------------------------------------- fallbacks and persistence


def test_unprofiled_ops_fall_back_to_their_class_then_the_base():
    prof = pd.DataFrame([copy_row(2 ** i, 2.0 + 4.0 * 2 ** i / 2e6, point=i) for i in range(10, 26)])
    p = model.fit(prof, K)
    relu = _row("aten::relu", [[1 << 20]], [BF], [[1]], 1.0)
    mm = mm_row(256, 1024, 1024, 1.0)
    pred, src = p.predict(pd.DataFrame([relu, mm]))
    assert model.SOURCES[src[0]] == "class"  # a memory op: the copies' correction at its base time
    assert model.SOURCES[src[1]] == "base"  # no GEMM profiled at all
    assert pred[0] == pytest.approx(2.0 + 4.0 * 2**20 / 2e6, rel=0.05)


def mul_row(n, dur, **kw):
    return _row("aten::mul", [[n], [n]], [BF, BF], [[1], [1]], dur, **kw)


def test_an_unprofiled_memory_op_is_answered_by_the_profiled_ops_of_its_kind():
    # the profile: copies (a move) 3x their base time, muls (a stream) at 1.2x it; bf16 [n] x [n] -> [n] moves
    # 6n bytes, a copy 4n; base = floor 2 us + bytes / 4 TB/s (4e6 bytes per us)
    rows = []
    for i in range(10, 24):
        n = 2 ** i
        rows.append(copy_row(n, 3.0 * (2.0 + 4.0 * n / 4e6), point=i))
        rows.append(mul_row(n, 1.2 * (2.0 + 6.0 * n / 4e6), point=i))
    p = model.fit(pd.DataFrame(rows), K)
    assert model.memory_kind("aten::relu") == "stream" and model.memory_kind("aten::copy_") == "move"
    assert model.memory_kind("aten::sum") == "reduce" and model.memory_kind("triton_poi_fused_add_0") == "stream"
    assert model.memory_kind("my::custom_op") == ""
    n = 3 << 18  # relu bf16 [n] -> [n]: 4n bytes, between profiled sizes
    relu = _row("aten::relu", [[n]], [BF], [[1]], 1.0)
    clone = _row("aten::clone", [[n], []], [BF, ""], [[1], []], 1.0)
    pred, src = p.predict(pd.DataFrame([relu, clone]))
    assert [model.SOURCES[s] for s in src] == ["class", "class"]
    base = 2.0 + 4.0 * n / 4e6
    assert pred[0] == pytest.approx(1.2 * base, rel=0.03)  # the muls' correction, not the copies' 3x
    assert pred[1] == pytest.approx(3.0 * base, rel=0.03)  # a clone moves like the copies
    # an op no formula names is answered by the whole class (every kind's calls)
    assert model._class_key(np.array(["memory", "gemm"]), np.array(["memory|my::custom_op|x", "gemm|aten::mm"])
                            ).tolist() == ["memory", "gemm"]


def test_a_class_answers_from_its_ops_not_from_one_ops_dense_sweep():
    # the profile's stream ops at bases of 8-16 us (bf16 [n] x [n] -> [n]: 6n bytes; base = 2 us + 6n / 4 TB/s):
    # muls at 40 sizes, 2.7x their base (e^1); adds, gelus, silus and divs at two sizes each, at their base
    def base(n):
        return 2.0 + 6.0 * n / 4e6

    def binary(name, n, dur, **kw):
        return _row(name, [[n], [n]], [BF, BF], [[1], [1]], dur, **kw)

    rows = [mul_row(int(n), math.e * base(n), point=i) for i, n in enumerate(np.linspace(4.2e6, 9e6, 40))]
    for j, name in enumerate(("aten::add", "aten::gelu_backward", "aten::silu_backward", "aten::div")):
        rows += [binary(name, n, base(n), point=100 + 2 * j + k) for k, n in enumerate((4_500_000, 8_500_000))]
    p = model.fit(pd.DataFrame(rows), K)
    # a sigmoid's backward of the same size (the class and kind, stream, of all five; profiled never): the ops of its
    # class answer, one each in its octave of base time: within 1.4x of its base, not the muls' 2.7x
    n = 6_000_000
    pred, src = p.predict(pd.DataFrame([binary("aten::sigmoid_backward", n, 1.0)]))
    assert model.SOURCES[src[0]] == "class" and model.memory_kind("aten::sigmoid_backward") == "stream"
    assert base(n) <= pred[0] < 1.4 * base(n)
    # the muls are one point of their class's table per octave: two, beside the other four ops' two (their calls at
    # the same sizes, one point each, of their summed weight)
    t = p.classes["memory|stream"]
    assert sorted(zip(t.r.round(6).tolist(), t.w.tolist(), strict=True)) == [(0.0, 4.0), (0.0, 4.0), (1.0, 1.0), (1.0, 1.0)]


def test_an_ops_other_scalars_answer_a_memory_call_only_near_it_and_its_kind_answers_farther():
    # the profile: means over the last dim of [m, 256] (the reduce kind) at 1.2x their base, and one sum over
    # the last dim of [64, 256] at 3x its base; asked: sums over the last dim with keepdim (other scalars: the
    # relaxed group)
    def red(name, m, n, dim, dur, keep=False, **kw):
        r = _row(name, [[m, n], [], [], []], [BF, "ScalarList", "Scalar", ""], [[n, 1], [], [], []], dur, **kw)
        r["op_concrete_inputs"] = json.dumps(["", f"[{dim}]", str(keep), ""])
        return r

    def base(m, n):  # [m, n] read, [m] written, bf16
        return 2.0 + 2 * (m * n + m) / 4e6

    rows = [red("aten::mean", 2 ** i, 256, -1, 1.2 * base(2 ** i, 256), point=i) for i in range(6, 20)]
    rows.append(red("aten::sum", 64, 256, -1, 3.0 * base(64, 256), point=99))
    p = model.fit(pd.DataFrame(rows), K)
    # [64, 256] with keepdim: the profiled sum's coordinates (answered by it); [2^16, 4096]: 2^10 times its
    # rows, 2^4 its width (a log2 distance over RELAXED_NEAR), answered by the reduce kind's means
    near, far = red("aten::sum", 64, 256, -1, 1.0, keep=True), red("aten::sum", 1 << 16, 4096, -1, 1.0, keep=True)
    pred, src = p.predict(pd.DataFrame([near, far]))
    assert [model.SOURCES[s] for s in src] == ["op", "class"]
    assert pred[0] == pytest.approx(3.0 * base(64, 256), rel=0.05)
    assert pred[1] == pytest.approx(1.2 * base(1 << 16, 4096), rel=0.05)
    # a sum down the rows (over dim 0, keeping the innermost dim) is no other scalar of the profiled sum
    # along them: the reduce kind's means answer it even at the profiled sum's size
    _, src = p.predict(pd.DataFrame([red("aten::sum", 64, 256, 0, 1.0)]))
    assert [model.SOURCES[s] for s in src] == ["class"]


def test_a_far_gemm_of_another_layout_is_answered_by_its_class_not_by_that_layouts_calls():
    # the profile: bf16 A @ B.T GEMMs at 1.05x their base, and one small float32 A @ B (B row-major) at 2x
    # its own; asked: float32 A @ B.T, a large one (far from that call: the bf16 calls of its layout answer,
    # rebased on float32's peak) and a small one near it (the float32 call answers, as its other layout)
    k2 = model.Constants(sms=132, matrix={"bfloat16": 800e6, "float32": 50e6}, vector=50e6, bandwidth=4e6,
                         floor=2.0, tile=128)

    def mm32(m, k, n, b_rows=False, **kw):
        return _row("aten::mm", [[m, k], [k, n]], ["float", "float"], [[k, 1], [n, 1] if b_rows else [1, k]], 1.0,
                    **kw)

    prof = pd.DataFrame([mm_row(m, k, k, 1.0, point=10 * i + k // 1024)
                         for i, m in enumerate((256, 512, 1024, 2048, 4096, 8192)) for k in (1024, 4096)])
    prof["dur_us"] = 1.05 * model.fitted_base(describe(prof), k2, {})
    one = pd.DataFrame([mm32(64, 128, 128, b_rows=True, point=99)])
    one["dur_us"] = 2.0 * model.fitted_base(describe(one), k2, {})
    p = model.fit(pd.concat([prof, one], ignore_index=True), k2)
    q = pd.DataFrame([mm32(2048, 4096, 4096), mm32(64, 128, 256)])
    pred, src = p.predict(q)
    assert [model.SOURCES[s] for s in src] == ["other dtype", "op"]
    np.testing.assert_allclose(pred / model.fitted_base(describe(q), k2, {}), [1.05, 2.0], rtol=0.02)


def test_a_predictor_survives_its_json():
    prof = pd.DataFrame([copy_row(2 ** i, 1.0 + i, point=i) for i in range(10, 20)])
    p = model.fit(prof, K)
    q = pd.DataFrame([copy_row(3000, 0.0), copy_row(300000, 0.0)])
    back = model.Predictor.from_dict(json.loads(json.dumps(p.to_dict())))
    np.testing.assert_allclose(back.predict(q)[0], p.predict(q)[0], rtol=1e-4)  # rounded to 5 decimals


def test_a_profiled_call_is_the_same_call_after_the_predictor_s_json():
    # sizes whose log2 has more than 5 decimals (log2(3000) = 11.550746...; the file keeps 11.55075), each with
    # its own time off the smooth trend: asked again, each is answered by its own measured time ("same call")
    # from the fitted predictor and from the one read back from its JSON alike
    sizes = [3000, 7000, 90000, 1234567, 9000000]
    times = [3.0, 7.5, 4.0, 12.0, 30.0]
    prof = pd.DataFrame([copy_row(n, t, point=i) for i, (n, t) in enumerate(zip(sizes, times, strict=True))])
    p = model.fit(prof, K)
    back = model.Predictor.from_dict(json.loads(json.dumps(p.to_dict())))
    q = pd.DataFrame([copy_row(n, 0.0) for n in sizes])
    for pred in (p, back):
        got, src = pred.predict(q)
        assert [model.SOURCES[s] for s in src] == ["same call"] * len(sizes)
        np.testing.assert_allclose(got, times, rtol=2e-5)  # the file keeps the residual ln(t / base) to 5 decimals
    # a size 1% away is no profiled call: answered near it, not as it
    _, src = back.predict(pd.DataFrame([copy_row(3030, 0.0)]))
    assert model.SOURCES[src[0]] == "near"


def test_the_same_point_tolerance_is_the_file_s_rounding():
    # each coordinate rounded to 5 decimals moves at most 0.5e-5: over 4 coordinates at most 1e-5 (Euclidean)
    assert exact_distance(1) == pytest.approx(0.51e-5)
    assert exact_distance(4) == pytest.approx(1.02e-5)
    t = Table(np.array([[11.55075, 3.0], [12.0, 3.0], [13.0, 4.0]]), np.array([0.1, 0.2, 0.3]), np.ones(3))
    r, _ = t.query(np.array([[math.log2(3000), 3.0], [11.5508, 3.0]]))  # 4e-6 and 5e-5 from the first point
    assert r[0] == 0.1 and r[1] != 0.1


def test_a_gemm_group_whose_kernels_hide_the_wave_quantization_gets_a_smooth_base():
    # true: the fractional-wave base (no step at a tile or wave boundary), 10% slower; a quantized
    # base would put steps into the residuals that the neighbours then carry to unprofiled M
    def true(m, k, n):
        d = describe(pd.DataFrame([mm_row(m, k, n, 1.0)]))
        return 1.1 * float(model.base_us(d, K, waves=np.zeros(1, dtype=bool))[0])

    ms = [1 << i for i in range(4, 14)] + [3 << i for i in range(3, 12)]
    prof = pd.DataFrame([mm_row(m, 4096, n, true(m, 4096, n), point=i)
                         for i, (m, n) in enumerate((m, n) for m in ms for n in (1024, 4096, 16384))])
    p = model.fit(prof, K)
    (key, choice), = p.bases.items()
    assert key.startswith("gemm|aten::mm|") and choice[1] == 0.0  # fractional waves chosen
    q = pd.DataFrame([mm_row(m, 4096, n, 1.0) for m, n in ((131, 4096), (700, 16384), (2500, 1024))])
    pred, _ = p.predict(q)
    want = np.array([true(131, 4096, 4096), true(700, 4096, 16384), true(2500, 4096, 1024)])
    assert np.abs(pred / want - 1).max() < 0.03


def test_fractional_waves_count_a_partial_tile_and_wave_by_its_share():
    d = describe(pd.DataFrame([mm_row(128 * 133, 4096, 1024, 1.0)]))
    tile = 2 * 128 * 128 * 4096 / (800e6 / 132)
    # 133 x 8 tiles of 128 x 128 on 132 SMs: 1064 / 132 waves, each a whole tile's time
    smooth = model.base_us(d, K, waves=np.zeros(1, dtype=bool))[0]
    assert smooth == pytest.approx(2.0 + 133 * 8 / 132 * tile)
    assert model.base_us(d, K)[0] == pytest.approx(2.0 + 17 * tile / 2)  # whole waves: as before


# ---------------------------------------------------------------- a hub's chain, contexts, odd widths


def segment_row(e, f, n, mx, dur, **kw):
    return _row("aten::segment_reduce", [[e, f], [], [], [], [n + 1], [], [], []],
                ["float", "", "", "", "long int", "", "", ""], [[f, 1], [], [], [], [1], [], [], []], dur,
                max_in_degree=mx, mean_in_degree=e / n, backend="segment", **kw)


def _segment_grid(true) -> pd.DataFrame:
    """A profile of segment reductions over four graph sizes, three widths and three hub sizes, each
    call's time `true(edges, features, nodes, max_degree)`."""
    rows, i = [], 0
    for s in (14, 16, 18, 20):
        for f in (32, 128, 512):
            n, e = 1 << s, 16 << s
            for mx in (32, 1 << (s - 2), 1 << s):
                rows.append(segment_row(e, f, n, mx, true(e, f, n, mx), point=i))
                i += 1
    return pd.DataFrame(rows)


def test_a_segment_reduce_hub_costs_its_chain_of_edges_whatever_the_width():
    # one thread per (segment, feature) walks its segment: a hub of mx edges takes 80 ns per edge
    # at every width, on top of the bytes at 3 TB/s
    def true(e, f, n, mx):
        return 3.0 + (e * f + n * f) * 4 / 3e6 + 0.08 * mx

    p = model.fit(_segment_grid(true), K)
    # a hub graph at a width the profile lacks: 8 << 17 edges, 24 features, a hub of 100,000 edges
    # true = 3 + (2^20 * 24 + 2^17 * 24) * 4 / 3e6 + 0.08 * 1e5 = 3 + 37.7 + 8000 us
    case = (8 << 17, 24, 1 << 17, 100_000)
    pred, _ = p.predict(pd.DataFrame([segment_row(*case, 1.0)]))
    assert pred[0] == pytest.approx(true(*case), rel=0.05)


def index_add_row(e, f, n, mx, dur, **kw):
    return _row("aten::index_add_", [[n, f], [], [e], [e, f], []], ["float", "Scalar", "long int", "float", "Scalar"],
                [[f, 1], [], [1], [f, 1], []], dur, max_in_degree=mx, mean_in_degree=e / n, backend="index_add",
                **kw)


def test_an_index_op_past_32_bit_offsets_costs_more_per_byte_and_the_fit_learns_where():
    # 0.004 us per MB (about 1.5 ns per element), 45% more once the source's elements pass 2^31
    def true(e, f):
        nbytes = describe(pd.DataFrame([index_add_row(e, f, e >> 4, 20, 1.0)]))["bytes"].iat[0]
        return 2.0 + nbytes * 4e-6 * (1.45 if e * f > 2**31 - 1 else 1.0)

    rows, i = [], 0
    for s in (14, 16, 18, 20):
        for f in (32, 64, 128, 256, 512):
            rows.append(index_add_row(16 << s, f, 1 << s, 20, true(16 << s, f), point=i))
            i += 1
    p = model.fit(pd.DataFrame(rows), K)
    group = next(g for g in p.bases if "index_add_" in g)
    assert p.bases[group][5] == pytest.approx(0.45 * p.bases[group][1], rel=0.02)
    # 2^23 edges at 384 features (3.2e9 elements, past 2^31) and at 192 (1.6e9, below): between the
    # profile's points on either side of the switch, both within 2%
    cases = [(1 << 23, 384), (1 << 23, 192)]
    pred, _ = p.predict(pd.DataFrame([index_add_row(e, f, e >> 4, 20, 1.0) for e, f in cases]))
    assert pred == pytest.approx([true(*c) for c in cases], rel=0.02)
    # a scatter whose time does not switch keeps no such term (it would only fit noise)
    shapes = [(16 << s, f, 1 << s) for s in (14, 16, 18, 20) for f in (32, 64, 128, 256, 512)]
    nbytes = describe(pd.DataFrame([scatter_row(*c, 20, 1.0) for c in shapes]))["bytes"].to_numpy()
    q = model.fit(pd.DataFrame([scatter_row(*c, 20, 2.0 + b * 3e-6, point=i)
                                for i, (c, b) in enumerate(zip(shapes, nbytes, strict=True))]), K)
    # (zero up to the solver's rounding: another BLAS leaves ~1e-23 where this one leaves 0)
    kept = next(v for g, v in q.bases.items() if "scatter_add_" in g)
    assert 0.0 <= kept[5] <= 1e-9 * kept[1]


def test_an_index_call_of_unknown_graph_takes_its_ops_correction_over_the_physical_base():
    # profiled scatters on graphs of in-degree skew 4 (max 64 over a mean of 16): their bytes at 3.3 TB/s plus a
    # hub's chain of 64 edges at 10 ns per element; the fitted base learns the hub from the graph's degrees
    def true(e, f, n, mx):
        nbytes = describe(pd.DataFrame([index_add_row(e, f, n, mx, 1.0)]))["bytes"].iat[0]
        return 2.0 + nbytes * 3e-7 + 0.01 * mx * f

    rows, i = [], 0
    for s in (14, 16, 18):
        for f in (32, 64, 128, 256):
            rows.append(index_add_row(16 << s, f, 1 << s, 64, true(16 << s, f, 1 << s, 64), point=i))
            i += 1
    p = model.fit(pd.DataFrame(rows), K)
    assert any("index_add_" in g for g in p.bases) and p.physical
    # the same scatter in an ingested trace, which knows its shapes but not its graph: no hub in its base, which is
    # the physical one; the correction its op's calls show over that base gives their time, not the base's
    e, f, n = 16 << 16, 128, 1 << 16
    ingested = _row("aten::index_add_", [[n, f], [], [e], [e, f], []],
                    ["float", "Scalar", "long int", "float", "Scalar"], [[f, 1], [], [1], [f, 1], []], 1.0, workload="")
    d = describe(pd.DataFrame([ingested]))
    assert not model._has_fitted_base(d, model._base_keys(d, model._free(d.group.to_numpy())), p.bases).any()
    pred, src = p.predict(pd.DataFrame([ingested]))
    assert model.SOURCES[src[0]] == "op"
    # (the skew the trace lacks sets the call 2 log2 units off its op's points: their correction is a local fit
    # over its neighbours, not the point's own: +6%)
    assert pred[0] == pytest.approx(true(e, f, n, 64), rel=0.1)
    # without the physical tables (the fitted bases' correction on the physical base) it was 42% too fast
    bare = model.Predictor(p.constants, p.groups, p.free, p.relaxed, p.classes, p.meta, p.bases, p.shifts, p.backward)
    assert bare.predict(pd.DataFrame([ingested]))[0][0] < 0.65 * true(e, f, n, 64)
    # and they survive the predictor's JSON
    back = model.Predictor.from_dict(json.loads(json.dumps(p.to_dict())))
    assert back.predict(pd.DataFrame([ingested]))[0][0] == pytest.approx(pred[0], rel=1e-4)


def gather_row(e, f, n, dur, **kw):
    return _row("aten::gather", [[n, f], [], [e, f], [], [e, f]], ["float", "Scalar", "long int", "Scalar", "float"],
                [[f, 1], [], [1, 0], [], [f, 1]], dur, max_in_degree=32, mean_in_degree=e / n, backend="segment",
                **kw)


def test_a_gather_whose_rows_and_bytes_overlap_gets_the_slower_of_the_two():
    # 0.6 ns per gathered row whatever its width, or its bytes at 3.9 TB/s, whichever takes longer:
    # flat up to about 256 features, then the bytes
    def true(e, f, n):
        nbytes = describe(pd.DataFrame([gather_row(e, f, n, 1.0)]))["bytes"].iat[0]
        return 2.0 + max(6e-4 * e, nbytes / 3.9e6)

    rows, i = [], 0
    for s in (14, 16, 18, 20):
        for f in (32, 64, 128, 256, 512):
            rows.append(gather_row(16 << s, f, 1 << s, true(16 << s, f, 1 << s), point=i))
            i += 1
    p = model.fit(pd.DataFrame(rows), K)
    assert next(v for g, v in p.bases.items() if "gather" in g)[-1] == model.OVERLAP_P
    # widths between the profiled ones, on both sides of where the bytes take over
    cases = [(1 << 23, 200, 1 << 19), (1 << 23, 384, 1 << 19), (1 << 21, 160, 1 << 17)]
    pred, _ = p.predict(pd.DataFrame([gather_row(*c, 1.0) for c in cases]))
    assert pred == pytest.approx([true(*c) for c in cases], rel=0.03)  # the additive form: +4% to +9%
    # an index op whose terms add keeps the additive form (p = 1)
    q = model.fit(pd.DataFrame([gather_row(16 << s, f, 1 << s, 2.0 + 6e-4 * (16 << s) * (1 + f / 256), point=i)
                                for i, (s, f) in enumerate((s, f) for s in (14, 16, 18, 20)
                                                           for f in (32, 64, 128, 256, 512))]), K)
    assert next(v for g, v in q.bases.items() if "gather" in g)[-1] == 1.0


def test_a_hub_chain_steps_at_the_speed_of_the_memory_its_rows_come_from():
    # a hub's chain: 60 ns a step where the call's bytes fit the near half of a 64 MB L2, 95 ns a step
    # for the share beyond it, on top of the bytes at 3 TB/s
    k = model.Constants(**{**K.to_dict(), "l2": 64e6})

    def true(e, f, n, mx):
        nbytes = describe(pd.DataFrame([segment_row(e, f, n, mx, 1.0)]))["bytes"].iat[0]
        hit = min(1.0, 32e6 / nbytes)
        return 3.0 + nbytes / 3e6 + mx * (0.06 * hit + 0.095 * (1 - hit))

    p = model.fit(_segment_grid(true), k)
    coef = next(v for g, v in p.bases.items() if "segment_reduce" in g)
    assert (coef[4], coef[model.MISSED]) == pytest.approx((0.06, 0.095), rel=0.02)
    # hub graphs the profile lacks: one whose bytes the L2 holds, one far larger
    cases = [(8 << 15, 24, 1 << 15, 30_000), (8 << 19, 200, 1 << 19, 400_000)]
    pred, _ = p.predict(pd.DataFrame([segment_row(*c, 1.0) for c in cases]))
    assert pred == pytest.approx([true(*c) for c in cases], rel=0.03)
    # the L2's size comes from the profile's ceilings and survives the predictor's JSON
    assert model.Constants.from_ceilings({"copy_gbps": 4000, "cache_bytes": {"l2": 64e6}}).l2 == 64e6
    assert model.Predictor.from_dict(json.loads(json.dumps(p.to_dict()))).constants.l2 == 64e6


def test_a_nearer_call_of_another_context_answers_before_a_far_one_of_its_own():
    # the GEMM study profiled 1024-wide layers (4 us flat), the MoE context only 8192-wide ones (40 us)
    gemm = [mm_row(m, 1024, 1024, 4.0, point=i, workload="gemm") for i, m in enumerate((1, 4, 16, 64))]
    moe = [mm_row(m, 8192, 8192, 40.0, point=10 + i, workload="moe") for i, m in enumerate((1, 4, 16, 64))]
    p = model.fit(pd.DataFrame(gemm + moe), K)
    q = pd.DataFrame([mm_row(8, 1024, 1024, 1.0, workload="moe"), mm_row(8, 8192, 8192, 1.0, workload="moe")])
    pred, src = p.predict(q)
    assert model.SOURCES[src[0]] == "other context" and pred[0] == pytest.approx(4.0, rel=0.05)
    assert model.SOURCES[src[1]] == "near" and pred[1] == pytest.approx(40.0, rel=0.05)


def test_a_memory_bound_gemm_is_answered_by_its_own_contexts_near_calls_before_another_contexts_same_shape():
    # 4096 x 4096 weights, bf16 (33.5 MB): at M 1..16 their bytes decide the time (an MLP whose other layer
    # evicts them from the L2: 12 us), the GEMM grid's same shapes ran with them in the L2 (8 us). An MLP's
    # M = 4 lies 1 log2 unit from its own M = 2 and 8, and exactly on the grid's M = 4: its own calls answer.
    # At M 2048..8192 its FLOPs decide (2 x 4096 x 4096 x 4096 = 137 GFLOP, 172 us at 800 TFLOP/s), where the
    # context matters little: the grid's call of the same shape answers (176 us; `fit_shifts` adds what the MLP's
    # calls show against the grid's, 188 us)
    grid = [mm_row(m, 4096, 4096, t, point=i, workload="gemm")
            for i, (m, t) in enumerate(((1, 8.0), (2, 8.0), (4, 8.0), (8, 8.0), (16, 8.0), (4096, 176.0)))]
    mlp = [mm_row(m, 4096, 4096, t, point=10 + i, workload="mlp")
           for i, (m, t) in enumerate(((1, 12.0), (2, 12.0), (8, 12.0), (16, 12.0), (2048, 90.0), (8192, 380.0)))]
    p = model.fit(pd.DataFrame(grid + mlp), K)
    pred, src = p.predict(pd.DataFrame([mm_row(4, 4096, 4096, 1.0, workload="mlp"),
                                        mm_row(4096, 4096, 4096, 1.0, workload="mlp")]))
    assert model.SOURCES[src[0]] == "near" and pred[0] == pytest.approx(12.0, rel=0.05)
    assert model.SOURCES[src[1]] == "other context" and pred[1] == pytest.approx(176.0, rel=0.08)


def test_a_memory_bound_gemms_own_context_answers_unless_another_lies_nearer_by_the_memory_margin():
    # the MoE loop profiled 8192-wide experts at 1.5x their base (cold weights), the GEMM grid 720-wide layers at
    # their base (warm). A loop's 16 x 2048 x 2048 call (2 x 16 x 2048^2 = 134 MFLOP, 0.17 us at the peak, against
    # 8.5 MB, 2.1 us at the bandwidth: its bytes decide) lies sqrt(2^2 + 2^2) = 2.83 log2 units from its own
    # context's calls and sqrt(2 x log2(2048 / 720)^2) = 2.13 from the grid's: nearer by 0.70, less than
    # MEMORY_CONTEXT_MARGIN, so its own context answers. A 64-wide call lies 9.90 from its own calls and 4.94
    # from the grid's: the grid answers
    def base(shapes):
        return np.asarray(model.base_us(describe(pd.DataFrame([mm_row(*s, 1.0) for s in shapes])), K), dtype=float)

    moe_s = [(m, 8192, 8192) for m in (1, 4, 16, 64)]
    grid_s = [(m, 720, 720) for m in (1, 4, 16, 64)]
    rows = [mm_row(*sh, 1.5 * t, point=i, workload="moe") for i, (sh, t) in enumerate(zip(moe_s, base(moe_s), strict=True))]
    rows += [mm_row(*sh, t, point=10 + i, workload="gemm") for i, (sh, t) in enumerate(zip(grid_s, base(grid_s), strict=True))]
    p = model.fit(pd.DataFrame(rows), K)
    asked = [(16, 2048, 2048), (64, 64, 64)]
    pred, src = p.predict(pd.DataFrame([mm_row(*sh, 1.0, workload="moe") for sh in asked]))
    assert [model.SOURCES[x] for x in src] == ["far", "other context"]
    np.testing.assert_allclose(pred / base(asked), [1.5, 1.0], rtol=0.05)
    # with the margin of a FLOP-bound call, the grid's nearer calls would answer it
    old = model.MEMORY_CONTEXT_MARGIN
    try:
        model.MEMORY_CONTEXT_MARGIN = model.CONTEXT_MARGIN
        _, src = p.predict(pd.DataFrame([mm_row(16, 2048, 2048, 1.0, workload="moe")]))
        assert model.SOURCES[src[0]] == "other context"
    finally:
        model.MEMORY_CONTEXT_MARGIN = old


def test_odd_widths_are_their_own_group_and_fall_back_to_the_aligned_one():
    # K = 1001 bf16 elements: 2002-byte rows, not a multiple of 16; K = 1024: 2048 bytes
    odd, even = describe(pd.DataFrame([mm_row(64, 1001, 4096, 1.0), mm_row(64, 1024, 4096, 1.0)])).group
    assert odd.split("|@")[0].endswith("|odd") and "|odd" not in even
    aligned = [mm_row(m, 1024, 4096, 5.0, point=i) for i, m in enumerate((16, 32, 64, 128))]
    p = model.fit(pd.DataFrame(aligned), K)
    pred, src = p.predict(pd.DataFrame([mm_row(64, 1001, 4096, 1.0)]))
    # the aligned calls' correction on the odd call's own base (a K of 1001, not 1024: within 15%)
    assert model.SOURCES[src[0]] == "near" and pred[0] == pytest.approx(5.0, rel=0.15)
    # once odd widths are profiled (three times slower), they answer
    slow = [mm_row(m, 1001, 4096, 15.0, point=10 + i) for i, m in enumerate((16, 32, 64, 128))]
    p = model.fit(pd.DataFrame(aligned + slow), K)
    pred, _ = p.predict(pd.DataFrame([mm_row(64, 1001, 4096, 1.0), mm_row(64, 1024, 4096, 1.0)]))
    assert pred == pytest.approx([15.0, 5.0], rel=0.05)


def test_an_odd_width_of_an_unprofiled_layout_is_answered_by_the_odd_widths_of_another():
    # odd widths profiled only as A @ B (15 us), aligned ones as A @ W.T (5 us): an odd A @ W.T call
    # (N = 20: 40-byte output rows) takes the odd calls' correction, not the aligned layout's
    def mm_nt(m, k, n, dur, **kw):
        return _row("aten::mm", [[m, k], [k, n]], [BF, BF], [[k, 1], [1, k]], dur, **kw)

    def mm_nn(m, k, n, dur, **kw):
        return _row("aten::mm", [[m, k], [k, n]], [BF, BF], [[k, 1], [n, 1]], dur, **kw)

    prof = [mm_nt(m, 2048, 16, 5.0, point=i) for i, m in enumerate((256, 512, 1024, 2048))]
    prof += [mm_nn(m, 2048, 36, 15.0, point=10 + i) for i, m in enumerate((256, 512, 1024, 2048))]
    p = model.fit(pd.DataFrame(prof), K)
    pred, src = p.predict(pd.DataFrame([mm_nt(1024, 2048, 20, 1.0)]))
    assert model.SOURCES[src[0]] == "op" and pred[0] == pytest.approx(15.0, rel=0.15)


def test_a_gemm_answered_from_another_context_gets_the_shift_its_own_context_shows_against_it():
    # the GEMM study back to back; the MoE loop 25% slower at the widths both profiled (cold weights)
    def true(shapes):
        d = describe(pd.DataFrame([mm_row(m, k, n, 1.0) for m, k, n in shapes]))
        slow = model.Constants(sms=132, matrix={"bfloat16": 640e6}, bandwidth=3.6e6, floor=3.0)
        return np.asarray(model.base_us(d, slow), dtype=float)

    ms = [1 << i for i in range(13)]
    g = [(m, k, n) for m in ms for k in (1024, 2048, 4096, 8192) for n in (1024, 2048, 4096, 8192)]
    e = [(m, k, n) for m in ms for k in (4096, 8192) for n in (4096, 8192)]
    rows = [mm_row(*s, t, point=i, workload="gemm") for i, (s, t) in enumerate(zip(g, true(g), strict=True))]
    rows += [mm_row(*s, 1.25 * t, point=1000 + i, workload="moe") for i, (s, t) in enumerate(zip(e, true(e), strict=True))]
    p = model.fit(pd.DataFrame(rows), K)
    assert [k for k in p.shifts if k.endswith("@moe")], p.shifts.keys()
    shapes = [(8, 1024, 1024), (300, 1024, 2048), (3000, 2048, 1024)]  # widths only the GEMM study holds
    q = pd.DataFrame([mm_row(*s, 1.0, workload="moe") for s in shapes])
    pred, src = p.predict(q)
    assert all(model.SOURCES[s] == "other context" for s in src)
    np.testing.assert_allclose(pred / true(shapes), 1.25, rtol=0.03)
    back = model.Predictor.from_dict(json.loads(json.dumps(p.to_dict())))
    np.testing.assert_allclose(back.predict(q)[0], pred, rtol=1e-4)
    # the same GEMMs in the GEMM context: answered by their own calls, no shift
    own, _ = p.predict(pd.DataFrame([mm_row(*s, 1.0, workload="gemm") for s in shapes]))
    np.testing.assert_allclose(own / true(shapes), 1.0, rtol=0.03)


def test_no_context_shift_where_the_contexts_agree_or_for_memory_ops():
    rows = [mm_row(m, k, 4096, 10.0 + m / 64, point=i, workload=w) for i, (m, k, w) in
            enumerate((m, k, w) for m in (1, 4, 16, 64, 256, 1024) for k in (1024, 2048, 4096) for w in ("gemm", "moe"))]
    rows += [copy_row(2 ** i, 1.0 + i * (1.5 if w == "moe" else 1.0), point=500 + i, workload=w)
             for i in range(10, 22) for w in ("gemm", "moe")]
    p = model.fit(pd.DataFrame(rows), K)
    assert p.shifts == {}


# ---------------------------------------------------------------- a dtype the profile does not hold

HALF, FLOAT = "c10::Half", "float"
K2 = model.Constants(sms=132, matrix={"bfloat16": 800e6, "float16": 400e6, "float32": 50e6}, vector=50e6,
                     bandwidth=4e6, floor=2.0, tile=128)


def test_a_float16_gemm_is_answered_from_bfloat16_at_float16s_matrix_peak():
    # bf16 GEMMs profiled 10% slower than their base; float16's measured matrix peak is half bfloat16's
    shapes = [(m, k, n) for m in (1, 16, 256, 1024, 4096, 8192) for k in (1024, 4096, 8192) for n in (1024, 4096, 8192)]
    d = describe(pd.DataFrame([mm_row(m, k, n, 1.0) for m, k, n in shapes]))
    true = 1.1 * model.base_us(d, K2)
    prof = pd.DataFrame([mm_row(m, k, n, t, point=i) for i, ((m, k, n), t) in enumerate(zip(shapes, true, strict=True))])
    p = model.fit(prof, K2)

    def half(m, k, n):
        return _row("aten::mm", [[m, k], [k, n]], [HALF, HALF], [[k, 1], [1, k]], 1.0)

    q = pd.DataFrame([half(8192, 8192, 8192), half(1, 8192, 8192)])
    dq = describe(q)
    pred, src = p.predict(q, dq)
    assert [model.SOURCES[s] for s in src] == ["other dtype", "other dtype"]
    assert list(dq.answered_dtype) == ["bfloat16", "bfloat16"]
    bf = true[shapes.index((8192, 8192, 8192))], true[shapes.index((1, 8192, 8192))]
    # 8192^3: compute-bound, 2 * 8192^3 / 800e6 = 1374 us in bf16, twice that at float16's peak (the 2 us floor aside)
    assert pred[0] / bf[0] == pytest.approx(2.0, rel=0.002)
    # 1 x 8192 x 8192: its weights' 134 MB at 4 TB/s (33.6 us) outlast its tiles at either peak (11 us, 22 us)
    assert pred[1] == pytest.approx(bf[1], rel=1e-6)
    assert "float16's matrix peak in the profile's ceilings (400 TFLOP/s against bfloat16's 800)" in p.transfer_notes(dq)[0]


def test_a_float32_memory_op_is_answered_from_bfloat16_at_the_same_bytes_not_the_same_elements():
    # bf16 copies: 1.5 us, 6.4 TB/s below 32 MiB moved, 3.2 TB/s above
    def true(nbytes):
        return 1.5 + nbytes / (6.4e6 if nbytes < 32 * 2**20 else 3.2e6)

    sizes = sorted({2 ** i for i in range(10, 27)} | {3 * 2 ** i for i in range(10, 25)})
    prof = pd.DataFrame([copy_row(n, true(4.0 * n), point=i) for i, n in enumerate(sizes)])
    p = model.fit(prof, K2)
    n = 6 * 2**20  # float32: 48 MiB moved (the slow side); a bf16 copy of as many elements moves 24 MiB (the fast)
    q = pd.DataFrame([_row("aten::copy_", [[n], [n], []], [FLOAT, FLOAT, "Scalar"], [[1], [1], []], 1.0)])
    dq = describe(q)
    pred, src = p.predict(q, dq)
    assert model.SOURCES[src[0]] == "other dtype" and dq.answered_dtype.iat[0] == "bfloat16"
    assert pred[0] == pytest.approx(1.5 + 48 * 2**20 / 3.2e6, rel=1e-3)  # 17.2 us; the same elements would say 5.4


def test_a_call_is_answered_from_the_profiled_dtype_of_its_element_size_first():
    assert model._nearest_dtypes("float16", ["float32", "bfloat16"]) == ["bfloat16", "float32"]
    assert model._nearest_dtypes("float64", ["bfloat16", "float32"]) == ["float32", "bfloat16"]
    assert model._swap_dtype("memory|aten::copy_|bfloat16,float32|cc||@moe:loop", "float32", "float16") == \
        "memory|aten::copy_|bfloat16,float16|cc||@moe:loop"
    assert model._swap_dtype("gemm|aten::mm|float16|nt||@gemm", "float16", "bfloat16") == "gemm|aten::mm|bfloat16|nt||@gemm"


def test_a_dtype_the_profile_holds_answers_its_own_calls():
    prof = pd.DataFrame([copy_row(2 ** i, 2.0 + 4.0 * 2 ** i / 2e6, point=i) for i in range(10, 26)])
    p = model.fit(prof, K2)
    q = pd.DataFrame([copy_row(3 * 2**15, 1.0)])
    dq = describe(q)
    _, src = p.predict(q, dq)
    assert model.SOURCES[src[0]] == "near" and dq.answered_dtype.iat[0] == "bfloat16"
    assert p.transfer_notes(dq) == []


def spmm_row(e, f, n, dur, **kw):
    return _row("aten::addmm", [[n, f], [n, n], [n, f], [], [], [0, 0]],
                ["float", "float", "float", "Scalar", "Scalar", "float"], [[f, 1], [], [f, 1], [], [], [1, 1]], dur,
                edges=e, max_in_degree=32, mean_in_degree=e / n, backend="csr", **kw)


def test_spmm_passes_count_a_dense_row_in_warp_wide_vectors_of_512_bytes():
    d = describe(pd.DataFrame([spmm_row(1000, f, 100, 1.0) for f in (32, 128, 129, 288, 512)]))
    assert model.spmm_passes(d).tolist() == [1.0, 1.0, 2.0, 3.0, 4.0]  # ceil(4 f / 512)
    # the bytes: per nonzero an index, a value and a dense row, the output read and written
    assert d["bytes"].iat[0] == 1000 * (8 + 4) + 1000 * 32 * 4 + 2 * 100 * 32 * 4
    # the rows term of the base counts every pass over every nonzero
    assert model._terms(d)[:, 2].tolist() == [1000.0, 1000.0, 2000.0, 3000.0, 4000.0]


def test_a_spmm_between_profiled_widths_costs_its_passes_not_a_share_of_the_width():
    # 0.08 ns per pass over a nonzero, plus the floor: 36 features cost what 128 do, 288 three passes
    def true(e, f):
        return 2.0 + 8e-5 * e * math.ceil(f * 4 / 512)

    rows, i = [], 0
    for s in (14, 16, 18, 20):
        for f in (32, 64, 128, 256, 512):
            rows.append(spmm_row(16 << s, f, 1 << s, true(16 << s, f), point=i))
            i += 1
    p = model.fit(pd.DataFrame(rows), K)
    cases = [(16 << 17, 36, 1 << 17), (16 << 17, 200, 1 << 17), (16 << 19, 288, 1 << 19), (16 << 15, 384, 1 << 15)]
    pred, _ = p.predict(pd.DataFrame([spmm_row(*c, 1.0) for c in cases]))
    assert pred == pytest.approx([true(e, f) for e, f, _ in cases], rel=0.02)


def test_a_norm_profiled_only_with_other_dtypes_beside_it_is_answered_from_its_op_in_that_dtype():
    # a bf16 layer norm backward profiled with float32 mean and rstd (bfloat16,float32), 3x slower than its
    # base; the same op in float32 throughout (under torch.autocast) has neither its group nor its dtype's
    # relaxed group in the profile: its op in bfloat16 (the relaxed group) answers, not the norm class
    def ln_bwd(rows, t, dur, **kw):
        x = [rows, 1024]
        return _row("aten::native_layer_norm_backward", [x, x, [], [rows, 1], [rows, 1], [1024], [1024], []],
                    [t, t, "ScalarList", FLOAT, FLOAT, t, t, "ScalarList"],
                    [[1024, 1], [1024, 1], [], [1, 1], [1, 1], [1], [1], []], dur, **kw)

    sizes = [2 ** i for i in range(6, 16)]
    d = describe(pd.DataFrame([ln_bwd(r, BF, 1.0) for r in sizes]))
    assert set(d.cls) == {"norm"} and set(d.relaxed) == {"norm|aten::native_layer_norm_backward|bfloat16"}
    true = 3.0 * model.base_us(d, K2)
    p = model.fit(pd.DataFrame([ln_bwd(r, BF, t, point=i) for i, (r, t) in enumerate(zip(sizes, true, strict=True))]),
                  K2)
    q = pd.DataFrame([ln_bwd(2048, FLOAT, 1.0)])
    dq = describe(q)
    pred, src = p.predict(q, dq)
    assert model.SOURCES[src[0]] == "other dtype" and dq.answered_dtype.iat[0] == "bfloat16"
    # its own base (float32 bytes) times the 3x its op in bfloat16 was measured at
    assert pred[0] == pytest.approx(3.0 * model.base_us(dq, K2)[0], rel=0.02)


def _list_row(name, tensors, numel, dtype, dur, point=0):
    # a _foreach_ op over one list: the trace records the shapes, its kernels name the dtype; the bytes
    # are the formula's (each element read and written once)
    size = {"float32": 4, "bfloat16": 2}[dtype]
    return _row(name, [[[numel]] * tensors, []], ["TensorList", "Scalar"], [[[1]] * tensors, []], dur,
                point=point, cost_dtype=dtype, flops_source="formula", bytes=2.0 * size * tensors * numel)


def test_a_bfloat16_tensor_list_is_its_own_group_answered_from_float32_lists_at_the_same_bytes():
    # float32 lists: 1.5 us, 6.4 TB/s below 24 MiB moved, 3.2 TB/s above
    def true(nbytes):
        return 1.5 + nbytes / (6.4e6 if nbytes < 24 * 2**20 else 3.2e6)

    pts = [(t, 2 ** i) for t in (4, 16) for i in range(10, 25)]
    prof = pd.DataFrame([_list_row("aten::_foreach_mul_", t, n, "float32", true(8.0 * t * n), point=j)
                         for j, (t, n) in enumerate(pts)])
    p = model.fit(prof, K2)
    q = pd.DataFrame([_list_row("aten::_foreach_mul_", 4, 2**20, "bfloat16", 1.0)])
    dq = describe(q)
    assert "|bfloat16" in dq.group.iat[0] and dq.dtype.iat[0] == "bfloat16"
    assert dq.bytes.iat[0] == 2 * 2 * 4 * 2**20  # 16 MiB: 4 tensors of 2^20 two-byte elements, read and written
    moved = model.transfer_dtype(dq, "float32")
    assert moved.c2.iat[0] == dq.c2.iat[0] == 2.0  # log2 of 4 tensors: a count, not a size
    assert moved.c0.iat[0] == dq.c0.iat[0] - 1.0  # as many float32 elements as bytes hold
    # a `--spec` step names no kernels: the run's dtype keys its lists
    spec = q.drop(columns=["cost_dtype", "flops_source", "bytes"]).assign(dtype="float32")
    assert "|float32" in describe(spec).group.iat[0]
    pred, src = p.predict(q, dq)
    assert model.SOURCES[src[0]] == "other dtype" and dq.answered_dtype.iat[0] == "float32"
    # 16 MiB moves at the fast side: 1.5 + 16.8e6 / 6.4e6 = 4.12 us (as many float32 elements move 32 MiB,
    # on the slow side)
    assert pred[0] == pytest.approx(true(16 * 2**20), rel=1e-3)


def test_a_gemm_larger_than_the_l2_is_never_predicted_faster_than_its_bytes_at_the_read_bandwidth():
    # skinny GEMMs profiled at a quarter of their base time (their weights stayed in a cache); the ceilings hold an
    # L2 of 1 MiB and a read bandwidth of 4e6 bytes/us
    k = model.Constants(sms=132, matrix={"bfloat16": 800e6}, vector=50e6, bandwidth=4e6, floor=2.0, tile=128,
                        l2=2**20, read=4e6)
    shapes = [(m, kk, n) for m in (1, 2, 4) for kk in (1024, 4096) for n in (1024, 4096)]
    d = describe(pd.DataFrame([mm_row(m, kk, n, 1.0) for m, kk, n in shapes]))
    fast = 0.25 * model.base_us(d, k)
    p = model.fit(pd.DataFrame([mm_row(m, kk, n, t, point=i) for i, ((m, kk, n), t)
                                in enumerate(zip(shapes, fast, strict=True))]), k)
    q = pd.DataFrame([mm_row(2, 2048, 2048, 1.0), mm_row(2, 512, 512, 1.0)])
    dq = describe(q)
    pred, _ = p.predict(q, dq)
    # 2 x 2048 x 2048: (2*2048 + 2048*2048 + 2*2048) * 2 bytes = 8.4 MB, 8x the L2: at least 8.4e6 / 4e6 = 2.1 us
    assert dq.bytes.iat[0] == (2 * 2048 + 2048 * 2048 + 2 * 2048) * 2
    assert pred[0] == pytest.approx(dq.bytes.iat[0] / 4e6, rel=1e-9)
    # 2 x 512 x 512: 0.5 MB fits the L2: the profile's faster time stands
    assert pred[1] == pytest.approx(0.25 * model.base_us(dq, k)[1], rel=0.05)
    assert model.Constants.from_dict(k.to_dict()).read == 4e6


def test_a_tensor_list_recorded_as_empty_is_never_learned_nor_answered_as_a_profiled_call():
    # torch.profiler records a list of more than 30 tensors as []: such a call of 20 us says nothing of its
    # size, so the profile learns only the sized list calls, and a [] call is no "same call" of another size
    sized = [_row("aten::_foreach_sqrt", [[[4096]] * 4], ["TensorList"], [[[1]] * 4], 3.0, step=s) for s in range(3)]
    empty = [_row("aten::_foreach_sqrt", [[]], ["TensorList"], [[]], 20.0, step=s, point=1) for s in range(3)]
    d = describe(pd.DataFrame(sized + empty))
    assert d.lists_unrecorded.tolist() == [False] * 3 + [True] * 3
    p = model.fit(pd.DataFrame(sized + empty), K)
    assert p.meta["calls"] == 3
    pred, src = p.predict(pd.DataFrame([_row("aten::_foreach_sqrt", [[]], ["TensorList"], [[]], 0.0)]))
    assert src[0] != model.SOURCES.index("same call") and pred[0] != pytest.approx(20.0)


def test_a_gemm_deeper_and_skinnier_than_its_groups_profiled_calls_gets_split_k():
    # a group whose profiled GEMMs (many tiles, K <= 4096) run unsplit: its base keeps K whole; a call of one
    # tile and K = 100,003 allows 132 splits (the SMs; K / 512 = 195), more than any profiled call allowed, and
    # cuBLAS splits such a K: its base is the split one (unsplit, one SM would take the whole K alone)
    unsplit = np.zeros(1, dtype=bool)
    shapes = [(m, kk, n) for m in (512, 1024, 2048) for kk in (1024, 2048, 4096) for n in (1024, 4096)]
    rows = []
    for i, (m, kk, n) in enumerate(shapes):
        d1 = describe(pd.DataFrame([mm_row(m, kk, n, 1.0)]))
        rows.append(mm_row(m, kk, n, float(model.base_us(d1, K, unsplit, np.ones(1, bool))[0]), point=i))
    p = model.fit(pd.DataFrame(rows), K)
    (choice,) = [v for g, v in p.bases.items() if g.startswith("gemm|aten::mm")]
    assert choice[0] == 0.0  # learned: K not split
    skinny = describe(pd.DataFrame([mm_row(3, 100003, 5, 1.0)]))
    split_base = model.base_us(skinny, K, np.ones(1, bool), np.zeros(1, bool))[0]
    whole_base = model.base_us(skinny, K, unsplit, np.zeros(1, bool))[0]
    assert split_base < whole_base / 50
    assert model.fitted_base(skinny, K, p.bases)[0] == pytest.approx(split_base)
    within = describe(pd.DataFrame([mm_row(1024, 2048, 1024, 1.0)]))  # inside the learned range: unsplit
    assert model.fitted_base(within, K, p.bases)[0] == pytest.approx(
        model.base_us(within, K, unsplit, np.zeros(1, bool))[0])


def nonzero_row(n, dur, **kw):
    return _row("aten::nonzero", [[n]], ["bool"], [[1]], dur, **kw)


def test_an_index_group_at_its_launch_floor_gets_no_fitted_base_to_carry_to_larger_calls():
    # nonzero of 8 .. 256 bools, all at a 5.3 us floor with 0.1 us of noise: no byte is visible in their
    # times (256 bytes at 4 TB/s are 64 ps), so no slope is fitted; a mask of 2^18 is answered from the
    # physical base (2 us + 2^18 bytes / 4 TB/s = 2.07 us) with the group's floor correction carried to it
    sizes = [8, 16, 32, 64, 128, 256]
    rows = [nonzero_row(n, 5.3 + 0.1 * (i % 2), point=i) for i, n in enumerate(sizes)]
    p = model.fit(pd.DataFrame(rows), K)
    assert not any("nonzero" in g for g in p.bases)
    pred, src = p.predict(pd.DataFrame([nonzero_row(1 << 18, 1.0)]))
    assert 5.0 < pred[0] < 6.5 and src[0] == model.SOURCES.index("far")
    # a group whose time grows with its bytes keeps its fitted base: 5 us + 0.25 ns per byte
    grown = [nonzero_row(n, 5.0 + 2.5e-4 * n, point=i) for i, n in enumerate([1 << s for s in range(12, 24, 2)])]
    q = model.fit(pd.DataFrame(grown), K)
    base = next(v for g, v in q.bases.items() if "nonzero" in g)
    assert base[0] == pytest.approx(5.0, rel=0.05) and base[1] == pytest.approx(2.5e-4, rel=0.05)


def test_a_copy_across_the_host_link_is_based_on_the_links_bandwidth():
    # the profile holds device copies only; a trace's copy_ of 2^25 fp32 from pinned host memory (transfer HtoD)
    # moves 2^27 bytes over a 50 GB/s link (5e4 bytes/us): 2 us + 2,684.4 us; back to the host at 25 GB/s over a
    # pageable buffer: its own group, 2 us + 5,368.7 us. A nonzero that reads its count back beside its kernels
    # stays an index op.
    k = model.Constants(sms=132, matrix={"bfloat16": 800e6}, vector=50e6, bandwidth=4e6, floor=2.0, tile=128,
                        host_to_device=5e4, device_to_host=2.5e4)
    prof = pd.DataFrame([copy_row(1 << s, 2.0 + 2 * (1 << s) / 3e6, point=i) for i, s in enumerate(range(12, 26))])
    p = model.fit(prof, k)
    n = 1 << 25
    f32 = "float"
    q = pd.DataFrame([
        _row("aten::copy_", [[n], [n], []], [f32, f32, "Scalar"], [[1], [1], []], 1.0, transfer="HtoD"),
        _row("aten::copy_", [[n], [n], []], [f32, f32, "Scalar"], [[1], [1], []], 1.0, transfer="DtoH pageable"),
        _row("aten::nonzero", [[n]], ["bool"], [[1]], 1.0, transfer="DtoH"),
        _row("aten::copy_", [[n], [n], []], [f32, f32, "Scalar"], [[1], [1], []], 1.0, transfer="DtoD")])
    d = describe(q)
    assert d.cls.tolist() == ["link", "link", "index", "memory"]
    assert d.group.tolist()[:2] == ["link|HtoD|float32", "link|DtoH pageable|float32"]
    pred, src = p.predict(q, d)
    assert pred[:2] == pytest.approx([2.0 + 4 * n / 5e4, 2.0 + 4 * n / 2.5e4])
    assert src[:2].tolist() == [model.SOURCES.index("base")] * 2
    # a profile whose ceilings hold no link: device memory's bandwidth stands in
    q2 = q.iloc[:1]
    assert model.base_us(describe(q2), K)[0] == pytest.approx(2.0 + 4 * n / 4e6)


def test_a_convolutions_flops_tell_apart_convolutions_of_the_same_input_size():
    # x [8, 256, 28, 28] and x [32, 64, 28, 28] hold the same 1,605,632 values; their 3x3 convolutions
    # C -> C differ 4x in FLOPs: 2 * 8 * 256 * 256 * 9 * 784 against 2 * 32 * 64 * 64 * 9 * 784
    def conv(n, c):
        row = _row("aten::cudnn_convolution", [[n, c, 28, 28], [c, c, 3, 3], [], [], [], [], [], [], []],
                   [BF, BF, "ScalarList", "ScalarList", "ScalarList", "Scalar", "Scalar", "Scalar", "Scalar"],
                   [[c * 784, 784, 28, 1], [c * 9, 9, 3, 1], [], [], [], [], [], [], []], 1.0)
        row["op_concrete_inputs"] = json.dumps(["", "", "[1, 1]", "[1, 1]", "[1, 1]", "1", "False", "False", "True"])
        return row

    d = describe(pd.DataFrame([conv(8, 256), conv(32, 64)]))
    assert d.group[0] == d.group[1] and d.c0[0] == d.c0[1] == pytest.approx(math.log2(8 * 256 * 784))
    assert d.flops[0] == 2 * 8 * 256 * 256 * 9 * 784 and d.flops[1] == 2 * 32 * 64 * 64 * 9 * 784
    assert d.c3[0] - d.c3[1] == pytest.approx(2.0)  # log2 of the FLOPs: 4x apart


def test_a_grouped_gemms_streaming_floor_counts_the_weights_of_its_active_groups_only():
    # 256 rows routed to 2 of 128 experts, w [128, 1024, 2816] bf16: all the weights are 738,197,504 bytes,
    # past the 60 MB L2, but the kernel reads the 2 active experts' (11,534,336) and the rows' 256 x (1024 +
    # 2816) x 2 = 1,966,080: 13,500,416 bytes, which the L2 holds, so no floor from memory's read bandwidth
    def grouped(counts):
        e = len(counts)
        row = _row("aten::_grouped_mm", [[256, 1024], [e, 1024, 2816], [e], [], []], [BF, BF, "int", "", ""],
                   [[1024, 1], [1024 * 2816, 1, 1024], [1], [], []], 1.0, workload="moe", dispatch="grouped")
        return {**row, "expert_counts": counts}

    k = model.Constants(sms=132, matrix={"bfloat16": 800e6}, vector=50e6, bandwidth=4e6, floor=2.0, tile=128,
                        l2=60e6, read=4.5e6)
    pred = model.Predictor(k, {}, {}, {}, {})
    d = describe(pd.DataFrame([grouped([128, 128] + [0] * 126), grouped([2] * 128)]))
    floor = pred._stream_floor(d)
    assert floor[0] == 0.0
    # every expert active: all 738,197,504 weight bytes and the rows' 1,966,080 stream from memory
    assert floor[1] == pytest.approx((738_197_504 + 1_966_080) / 4.5e6)


def bn_row(n, c, s, dur, weights="float", **kw):
    hw = s * s
    return _row("aten::native_batch_norm", [[n, c, s, s], [c], [c], [c], [c], [], [], []],
                [BF, weights, weights, weights, weights, "Scalar", "Scalar", "Scalar"],
                [[c * hw, hw, s, 1], [1], [1], [1], [1], [], [], []], dur, **kw)


def test_a_batch_norm_costs_its_blocks_steps_per_wave_of_channels_and_the_fit_learns_them():
    # true: 3 us, the bytes at 4 TB/s, and 0.2 us per serial step (`model.norm_steps` over 132 SMs)
    def true(n, c, s, weights="float"):
        d = describe(pd.DataFrame([bn_row(n, c, s, 1.0, weights)]))
        return 3.0 + d["bytes"].iat[0] / 4e6 + 0.2 * model.norm_steps(d, 132)[0]

    rows = [bn_row(n, c, s, true(n, c, s), point=i)
            for i, (n, c, s) in enumerate((n, c, s) for n in (4, 16, 64) for c in (32, 128, 512, 2048)
                                          for s in (8, 16, 32))]
    p = model.fit(pd.DataFrame(rows), K)
    # one base for the op in bfloat16 on a contiguous input, whatever its weights' dtype; a channels-last
    # input (strides N, H, W, C: [16384, 1, 1024, 64] for [8, 64, 16, 16]) runs other kernels, another base
    assert list(p.bases) == ["norm|aten::native_batch_norm|bfloat16|c"]
    last = bn_row(8, 64, 16, 1.0) | {"op_input_strides": "[[16384,1,1024,64],[1],[1],[1],[1],[],[],[]]"}
    d = describe(pd.DataFrame([bn_row(8, 64, 16, 1.0, weights=BF), last]))
    assert model._base_keys(d, model._free(d.group.to_numpy(dtype=object))).tolist() == [
        "norm|aten::native_batch_norm|bfloat16|c", "norm|aten::native_batch_norm|bfloat16|t"]
    # by hand: [32, 64, 24, 24]: 576 values a plane, 512 lanes, one image a row: 32 x 2 = 64 steps, 64
    # channels leave most of the 132 SMs idle: one wave, 0.2 x 64 = 12.8 us beside the bytes;
    # [8, 1024, 12, 12]: 144 values, 256 lanes x 2 rows: ceil(8 / 2) = 4 steps, 1024 / 132 = 7.76 waves,
    # the first whole and 6.76 more at half: 4 x (1 + 0.5 x 6.76) = 17.5 steps, 3.5 us
    d = describe(pd.DataFrame([bn_row(32, 64, 24, 1.0), bn_row(8, 1024, 12, 1.0)]))
    assert model.norm_steps(d, 132) == pytest.approx([64.0, 4 * (1 + 0.5 * (1024 / 132 - 1))])
    # unprofiled shapes within 3% (a base of the bytes alone, corrected by the nearest calls: -31%, -17%, -13%)
    cases = [(32, 64, 24), (8, 1024, 12), (128, 256, 20)]
    pred, _ = p.predict(pd.DataFrame([bn_row(*c, 1.0) for c in cases]))
    assert pred == pytest.approx([true(*c) for c in cases], rel=0.03)
    # bfloat16 weights, a group of its own profiled at 2 sizes only, too few for a base of its own: the op's
    # base answers it (the residuals of its 2 calls carry the rest)
    more = [bn_row(n, 256, 16, true(n, 256, 16, BF), weights=BF, point=100 + n) for n in (8, 32)]
    q = model.fit(pd.DataFrame(rows + more), K)
    pred, _ = q.predict(pd.DataFrame([bn_row(16, 2048, 32, 1.0, weights=BF)]))
    assert pred[0] == pytest.approx(true(16, 2048, 32, BF), rel=0.03)


def test_a_spmm_counts_the_flops_of_its_nonzeros_not_of_a_dense_matrix():
    # CSR SpMM over a 512-node graph of 2,082 edges, 30 features: a multiply and an add per nonzero and
    # feature, 2 x 2,082 x 30 = 124,920 FLOPs; the formula of addmm on the recorded dense sizes gave
    # 2 x 512 x 512 x 30 = 15,728,640 (the GNN workload states the useful FLOPs of an unweighted sum, the adds
    # alone: 2,082 x 30 = 62,460)
    d = describe(pd.DataFrame([spmm_row(2082, 30, 512, 1.0)]))
    assert d.cls.iat[0] == "spmm" and d.flops.iat[0] == 124_920


# ---------------------------------------------------------------- ops the profile never measured: launches, backward


def avg_pool_bwd_row(n, c, s, dur, **kw):
    """avg_pool2d_backward of a 2x2 window over bf16 [n, c, s, s]: grad_output [n, c, s/2, s/2], self."""
    h = s // 2
    row = _row("aten::avg_pool2d_backward", [[n, c, h, h], [n, c, s, s], [], [], [], [], [], []],
               [BF, BF, "ScalarList", "ScalarList", "ScalarList", "Scalar", "Scalar", ""],
               [[c * h * h, h * h, h, 1], [c * s * s, s * s, s, 1], [], [], [], [], [], []], dur, **kw)
    row["op_concrete_inputs"] = json.dumps(["", "", "[2, 2]", "[]", "[0, 0]", "False", "True", ""])
    return row


def max_pool_bwd_row(n, c, s, dur, **kw):
    """max_pool2d_with_indices_backward of a 2x2 window over bf16 [n, c, s, s], its int64 indices."""
    h = s // 2
    row = _row("aten::max_pool2d_with_indices_backward",
               [[n, c, h, h], [n, c, s, s], [], [], [], [], [], [n, c, h, h]],
               [BF, BF, "ScalarList", "ScalarList", "ScalarList", "ScalarList", "Scalar", "long int"],
               [[c * h * h, h * h, h, 1], [c * s * s, s * s, s, 1], [], [], [], [], [], [c * h * h, h * h, h, 1]],
               dur, **kw)
    row["op_concrete_inputs"] = json.dumps(["", "", "[2, 2]", "[2, 2]", "[0, 0]", "[1, 1]", "False", ""])
    return row


def upsample_bwd_row(n, c, s, dur, **kw):
    """upsample_nearest2d_backward of bf16 [n, c, s, s] to [n, c, s/2, s/2] (a 2x upsampling's gradient)."""
    row = _row("aten::upsample_nearest2d_backward", [[n, c, s, s], [], [], [], []],
               [BF, "ScalarList", "ScalarList", "Scalar", "Scalar"], [[c * s * s, s * s, s, 1], [], [], [], []],
               dur, **kw)
    row["op_concrete_inputs"] = json.dumps(["", f"[{s // 2}, {s // 2}]", f"[{n}, {c}, {s}, {s}]", "2.", "2."])
    return row


def threshold_bwd_row(n, dur, **kw):
    return _row("aten::threshold_backward", [[n], [n], []], [BF, BF, "Scalar"], [[1], [1], []], dur, **kw) | {
        "op_concrete_inputs": json.dumps(["", "", "0"])}


def _base(row) -> float:
    return float(model.base_us(describe(pd.DataFrame([row])), K)[0])


def test_the_class_level_adds_the_least_kernel_time_for_each_kernel_a_call_ran_past_its_first():
    # the profile: copies at 3x their base, one kernel each; the least kernel time given as 1.5 us. An unprofiled
    # clone that ran 5 kernels (its trace's count) is its class's 3x its base plus 4 x 1.5 us; one of unknown
    # count (a --spec step) the 3x alone; a profiled copy that ran 5 kernels its measured time
    k = model.Constants(**{**K.to_dict(), "kernel": 1.5})
    prof = pd.DataFrame([copy_row(2 ** i, 3.0 * _base(copy_row(2 ** i, 1.0)), point=i, kernel_count=1)
                         for i in range(10, 24)])
    p = model.fit(prof, k)
    n = 3 << 17
    clone = _row("aten::clone", [[n], []], [BF, ""], [[1], []], 1.0)
    q = pd.DataFrame([clone | {"kernel_count": 5}, clone, copy_row(2 ** 15, 1.0, kernel_count=5)])
    d = describe(q)
    assert model.launch_extra(d, p.constants).tolist() == [6.0, 0.0, 6.0]
    pred, src = p.predict(q, d)
    assert [model.SOURCES[s] for s in src] == ["class", "class", "same call"]
    assert pred[0] == pytest.approx(3.0 * _base(clone) + 4 * 1.5, rel=0.01)
    assert pred[1] == pytest.approx(3.0 * _base(clone), rel=0.01)
    assert pred[2] == pytest.approx(3.0 * _base(copy_row(2 ** 15, 1.0)), rel=1e-6)
    # a tensor-list call's multi-tensor-apply launches are in its base already: only kernels past those count
    d = pd.DataFrame({"kernels": [3.0, 3.0, np.nan], "launches": [3.0, 1.0, 1.0]})
    assert model.launch_extra(d, p.constants).tolist() == [0.0, 3.0, 0.0]


def test_a_call_that_is_its_launch_alone_takes_its_class_s_point_at_the_floor():
    # a class table over log2 base time: a point at the floor (2 us, coordinate 1: profiled calls of no bytes,
    # residual -0.4, i.e. 0.67x the floor) and points at 4, 8, 16 us (residuals 0.5, 0.6, 0.7). Bandwidth 4e6 B/us
    bw = 4e6
    t = Table(np.array([[1.0], [2.0], [3.0], [4.0]]), np.array([-0.4, 0.5, 0.6, 0.7]), np.ones(4))
    tables = {"memory": t, "bare": Table(np.array([[2.0], [3.0], [4.0]]), np.array([0.5, 0.6, 0.7]), np.ones(3))}
    # an 8-byte read (a scalar), a 64-byte one, one of 1e6 bytes; a 2-launch call of 4 bytes (floor 4 us); the
    # scalar again in a table with no point at the floor
    base = np.array([2.0 + 8 / bw, 2.0 + 64 / bw, 2.0 + 1e6 / bw, 4.0 + 4 / bw, 2.0 + 8 / bw])
    floor = np.array([2.0, 2.0, 2.0, 4.0, 2.0])
    keys = np.array(["memory"] * 4 + ["bare"], dtype=object)
    r, _ = model._class_query(keys, tables, base, floor, model.SCALAR_BYTES / bw, np.ones(5, dtype=bool))
    interpolated, _ = t.query(model._class_coords(base), exact=False)
    assert r[0] == pytest.approx(-0.4)  # its launch alone: the floor's point
    assert r[1] == interpolated[1] and r[1] != pytest.approx(-0.4)  # 64 bytes: more than a launch
    assert r[2] == interpolated[2]
    assert r[3] == pytest.approx(0.5)  # 2 launches: the point at its own floor, 4 us (coordinate 2)
    bare, _ = tables["bare"].query(model._class_coords(base[4:]), exact=False)
    assert r[4] == bare[0]  # no point at the floor: interpolated


def test_the_least_kernel_time_is_measured_on_the_profiles_one_kernel_calls():
    # 20 one-kernel copies of 1.5..20.5 us and one of 3 kernels at 0.5 us: the 5th percentile of the one-kernel
    # calls' times, the sample below 0.05 x 19 = 0.95 (the first): 1.5 us; the 3-kernel call does not count.
    # Above the 40th of 40 calls of 1..40 us: position 0.05 x 39 = 1.95, the second sample: 2.0 us
    rows = [copy_row(2 ** (10 + i), i + 1.5, point=i, kernel_count=1) for i in range(20)]
    rows.append(copy_row(2 ** 9, 0.5, point=99, kernel_count=3))
    p = model.fit(pd.DataFrame(rows), K)
    assert p.constants.kernel == pytest.approx(1.5)
    assert model.Predictor.from_dict(json.loads(json.dumps(p.to_dict()))).constants.kernel == pytest.approx(1.5)
    more = [copy_row(2 ** (10 + i % 20), float(i + 1), point=i, step=i // 20, kernel_count=1) for i in range(40)]
    assert model.fit(pd.DataFrame(more), K).constants.kernel_us == pytest.approx(2.0)
    # no count recorded: the launch floor stands in
    assert model.fit(pd.DataFrame(rows).drop(columns="kernel_count"), K).constants.kernel_us == K.floor


def test_backward_ops_are_told_by_atens_naming_not_by_inductors_kernel_names():
    assert model.is_backward("aten::convolution_backward") and model.is_backward("aten::_softmax_backward_data")
    assert model.is_backward("aten::_thnn_fused_lstm_cell_backward_impl")
    assert not model.is_backward("aten::gelu") and not model.is_backward("triton_poi_fused_gelu_gelu_backward_0")
    assert not model.is_backward("CompiledFunctionBackward")


def test_an_unprofiled_backward_op_is_its_class_forward_ops_times_the_profiles_backward_shift():
    # the profile (every call one kernel): copies (the move kind, forward) at 2x their base; two backward ops of
    # the move kind, avg pooling's at 6x (3x the forward ops) and max pooling's at 10x (5x); muls (the stream
    # kind) at 1.2x. Each backward op votes once: the move kind's shift is the median of ln 3 and ln 5,
    # sqrt(15) = 3.873x. Asked: an upsampling's backward (a move no profile call runs) is 2 x 3.873 its base; a
    # clone (a forward move: its kind's calls, backward ones among them, without the shift); a threshold backward
    # (a pointwise map: the stream kind, which no shift moves) the muls' 1.2x
    rows = []
    for i in range(10, 24):
        rows.append(copy_row(2 ** i, 2.0 * _base(copy_row(2 ** i, 1.0)), point=i, kernel_count=1))
        rows.append(mul_row(2 ** i, 1.2 * _base(mul_row(2 ** i, 1.0)), point=i, kernel_count=1))
    for j, (n, c, s) in enumerate((n, c, s) for n in (8, 32) for c in (64, 256) for s in (16, 32, 64)):
        rows.append(avg_pool_bwd_row(n, c, s, 6.0 * _base(avg_pool_bwd_row(n, c, s, 1.0)), point=100 + j,
                                     kernel_count=1))
        rows.append(max_pool_bwd_row(n, c, s, 10.0 * _base(max_pool_bwd_row(n, c, s, 1.0)), point=200 + j,
                                     kernel_count=1))
    p = model.fit(pd.DataFrame(rows), K)
    assert p.backward["shift"] == {"memory|move": pytest.approx(0.5 * (math.log(3) + math.log(5)), abs=1e-4)}
    # a kind that holds no backward op: the median of every vote and one of no shift, ln 3 of (0, ln 3, ln 5)
    assert p.backward["all"] == pytest.approx(math.log(3), abs=1e-4)
    assert "memory|move|forward" in p.classes and "memory|stream|forward" not in p.classes
    up, clone = upsample_bwd_row(16, 128, 48, 1.0), _row("aten::clone", [[3 << 17], []], [BF, ""], [[1], []], 1.0)
    thr = threshold_bwd_row(3 << 17, 1.0)
    q = pd.DataFrame([up, clone, thr])
    d = describe(q)
    pred, src = p.predict(q, d)
    assert [model.SOURCES[s] for s in src] == ["class"] * 3
    assert d.backward_shift.tolist() == [True, False, False]
    assert pred[0] == pytest.approx(2.0 * math.sqrt(15) * _base(up), rel=0.01)
    assert pred[2] == pytest.approx(1.2 * _base(thr), rel=0.01)
    from wlprof.predict.report import source_labels

    assert source_labels(d, src) == ["class (backward)", "class", "class"]
    note = p.backward_notes(d)
    assert len(note) == 1 and "aten::upsample_nearest2d_backward" in note[0] and "memory|move x3.87" in note[0]
    # the shift and the forward tables survive the predictor's JSON
    again = model.Predictor.from_dict(json.loads(json.dumps(p.to_dict())))
    assert again.predict(q)[0] == pytest.approx(pred, rel=1e-4)
    # one backward op speaks for its kind: with avg pooling's alone, the move kind's shift is its 3x
    one = model.fit(pd.DataFrame([r for r in rows if r["op_name"] != "aten::max_pool2d_with_indices_backward"]), K)
    assert one.backward["shift"] == {"memory|move": pytest.approx(math.log(3), abs=1e-4)}
    # ... but not for memory ops of no known kind (MIN_VOTERS): one such backward op at 16x the copies' and muls'
    # correction moves nothing of its own; two (16x and 4x the copies', which run 2x their base beside muls at 1.2x:
    # the forward table at their base times lies between the two) give the class the median of their two votes
    def odd_bwd(name, n, factor, point):
        r = _row(name, [[n], [n]], [BF, BF], [[1], [1]], 1.0, point=point, kernel_count=1)
        r["dur_us"] = factor * _base(r)
        return r

    fwd = [r for r in rows if r["op_name"] in ("aten::copy_", "aten::mul")]
    lone = model.fit(pd.DataFrame(fwd + [odd_bwd("my::scatter_backward", 2 ** i, 16 * 2.0, 300 + i)
                                         for i in range(12, 18)]), K)
    assert "memory" not in lone.backward["shift"]
    pair = model.fit(pd.DataFrame(fwd + [odd_bwd(name, 2 ** i, f * 2.0, 300 + 10 * j + i)
                                         for j, (name, f) in enumerate((("my::scatter_backward", 16), ("my::fold_backward", 4)))
                                         for i in range(12, 18)]), K)
    assert 4.0 * 2.0 / 2.0 < math.exp(pair.backward["shift"]["memory"]) < 16.0 * 2.0 / 1.2


def test_a_kind_the_profile_holds_only_backward_ops_of_answers_them_as_they_are():
    # the move kind holds avg pooling's backward alone (6x its base), the stream kind muls at 1.2x: no forward
    # move to measure a shift against, so an upsampling's backward is the kind's 6x as it is, unshifted; a
    # profile without backward ops learns no shift at all
    rows = [mul_row(2 ** i, 1.2 * _base(mul_row(2 ** i, 1.0)), point=i, kernel_count=1) for i in range(10, 24)]
    rows += [avg_pool_bwd_row(n, c, s, 6.0 * _base(avg_pool_bwd_row(n, c, s, 1.0)), point=100 + j, kernel_count=1)
             for j, (n, c, s) in enumerate((n, c, s) for n in (8, 32) for c in (64, 256) for s in (16, 32, 64))]
    p = model.fit(pd.DataFrame(rows), K)
    up = upsample_bwd_row(16, 128, 48, 1.0)
    d = describe(pd.DataFrame([up]))
    pred, src = p.predict(pd.DataFrame([up]), d)
    assert model.SOURCES[src[0]] == "class" and not d.backward_shift.iat[0]
    assert pred[0] == pytest.approx(6.0 * _base(up), rel=0.01)
    plain = model.fit(pd.DataFrame(rows[:14]), K)
    assert plain.backward == {}


def test_a_transfer_note_shows_a_cpus_small_peaks_and_a_gpus_large_ones_readably():
    # a CPU's 0.41 and 0.074 TFLOP/s read 0 at whole TFLOP/s; an FP8 peak of 1,502 reads whole, not 1.5e+03
    assert [model._tflops(v * 1e6) for v in (0.41, 0.0742, 5.33, 813.8, 1502.1)] == \
        ["0.41", "0.074", "5.3", "814", "1,502"]

"""Ceilings format 2: measurements with spreads, migration of format-1 caches and manifests, cache sizes
read from sysfs, and whether a run's ceilings are stale against this machine's current ones."""

from __future__ import annotations

import json

import pytest

from wlprof import ceilings
from wlprof.ceilings import Ceilings, Measurement

# A format-1 cache as wlprof wrote it before (the committed H200 call C cache, trimmed).
V1 = {
    "device_type": "cuda", "device_name": "NVIDIA H200",
    "matrix_tflops": {"bfloat16": 744.16, "float32": 49.5, "tf32": 398.3},
    "vector_tflops": 49.5, "copy_gbps": 4131.8, "source": "measured",
    "measured_at": "2026-11-29T09:46:12+00:00", "torch_version": "2.11.0+cu130",
    "method": {"reps": 10, "warmup": 3, "statistic": "median", "data": "randn", "matrix_bfloat16_n": 8192,
               "matrix_float32_n": 4096, "matrix_tf32_n": 8192, "copy_bytes_each_way": 1073741824},
    "datasheet": {"bfloat16": 989.4, "copy_gbps": 4800.0, "source": "NVIDIA H200 datasheet"},
}


def test_measurement_median_and_spread_by_hand():
    # rates 10, 20, 30, 40, 50: median 30; p10 at position 0.4 -> 10 + 0.4 * 10 = 14; p90 at 3.6 -> 46
    m = Measurement.of_rates([30.0, 10.0, 50.0, 20.0, 40.0], "GB/s", "m", {"buffer_bytes": 1}, warmup=2)
    assert (m.value, m.p10, m.p90, m.min, m.max, m.repeats, m.warmup) == (30.0, 14.0, 46.0, 10.0, 50.0, 5, 2)
    assert m.upper_ratio == pytest.approx(46 / 30) and m.lower_ratio == pytest.approx(14 / 30)
    # a CPU's statistic: the 90th percentile (46), the spread as before
    up = Measurement.of_rates([30.0, 10.0, 50.0, 20.0, 40.0], "GB/s", "m", {}, 2, statistic="p90")
    assert (up.value, up.p10, up.p90) == (46.0, 14.0, 46.0) and up.upper_ratio == pytest.approx(1.0)
    one = Measurement.of_rates([7.0], "GB/s", "m", {}, 0)
    assert (one.value, one.p10, one.p90) == (7.0, 7.0, 7.0)
    assert Measurement(5.0, "GB/s", "no spread").upper_ratio is None


def test_format_1_cache_migrates_to_a_copy_roof_without_spread():
    c = Ceilings.from_dict(V1)
    assert c.migrated_from == 1 and c.format_version == ceilings.FORMAT_VERSION
    assert c.copy_gbps == 4131.8 and c.bandwidth_gbps == {"hbm_copy": 4131.8}
    assert c.bandwidth("hbm_read") is None and c.cache_bytes == {} and c.cache_levels() == []
    copy = c.measurements["hbm_copy"]
    # format 1 timed 2 x reps copies of 1 GiB each way and kept only the median
    assert copy.value == 4131.8 and copy.repeats == 20 and copy.warmup == 3 and copy.p90 is None
    assert copy.sizes == {"buffer_bytes": 1073741824}
    assert c.measurements["matrix:bfloat16"].sizes == {"n": 8192}
    assert c.measurements["matrix:bfloat16"].value == 744.16
    assert c.compute_tflops("matrix", "bfloat16") == 744.16 and c.datasheet["copy_gbps"] == 4800.0
    # the migrated form round-trips as format 2
    again = Ceilings.from_dict(json.loads(json.dumps(c.to_dict())))
    assert again == c and again.migrated_from == 1


def test_a_cpu_format_1_manifest_names_dram():
    c = Ceilings.from_dict({**V1, "device_type": "cpu", "device_name": "Some CPU", "origin": "cache: x"})
    assert c.bandwidth_gbps == {"dram_copy": 4131.8} and c.memory == "dram"


def test_positional_construction_keeps_format_1_fields_and_fills_the_copy_roof():
    c = Ceilings("cuda", "NVIDIA H200", {"bfloat16": 800.0}, 50.0, 4000.0, "measured", "", "")
    assert c.bandwidth_gbps == {"hbm_copy": 4000.0} and c.memory_roofs() == {"hbm_copy": 4000.0}
    # ridge against the copy roof by default: 800e12 / 4000e9 = 200; against an unmeasured roof too
    assert c.ridge_flop_per_byte("matrix", "bfloat16") == 200.0
    assert c.ridge_flop_per_byte("matrix", "bfloat16", roof="hbm_read") == 200.0


def test_format_2_round_trip_and_roof_lists():
    m = Measurement.of_rates([4300.0, 4336.0, 4350.0], "GB/s", "torch.sum", {"buffer_bytes": 1 << 31}, 3)
    c = Ceilings("cuda", "NVIDIA H200", {"bfloat16": 790.0}, 50.0, 4272.0, "measured", "2026-12-01T00:00:00+00:00",
                 "2.13", bandwidth_gbps={"hbm_read": 4336.0, "hbm_write": 4617.0, "hbm_copy": 4272.0, "l2": 9000.0},
                 cache_bytes={"l2": 62914560}, measurements={"hbm_read": m})
    d = json.loads(json.dumps(c.to_dict()))
    assert d["format_version"] == 2 and d["measurements"]["hbm_read"]["p90"] == m.p90
    back = Ceilings.from_dict(d)
    assert back == c and isinstance(back.measurements["hbm_read"], Measurement)
    assert list(c.memory_roofs()) == ["hbm_read", "hbm_copy", "hbm_write", "l2"]
    assert c.cache_levels() == [("l2", 62914560, 9000.0)]
    # 790e12 / 4336e9 = 182.2 FLOP/byte against the read roof
    assert c.ridge_flop_per_byte("matrix", "bfloat16", roof="hbm_read") == pytest.approx(790e3 / 4336)


def test_a_newer_format_or_a_broken_dict_is_refused():
    with pytest.raises(ValueError, match="newer"):
        Ceilings.from_dict({**V1, "format_version": 99})
    with pytest.raises(KeyError):
        Ceilings.from_dict({"device_type": "cuda"})
    with pytest.raises(TypeError):
        Ceilings.from_dict([1, 2])


def test_a_format_1_cache_loads_migrated_but_a_run_measures_anew(tmp_path, monkeypatch):
    monkeypatch.setenv("WLPROF_CACHE_DIR", str(tmp_path))
    path = ceilings.cache_path("cuda", "NVIDIA H200")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(V1))
    c = ceilings.load_cached("cuda", "NVIDIA H200")
    assert c is not None and c.migrated_from == 1 and c.copy_gbps == 4131.8

    measured = Ceilings("cuda", "NVIDIA H200", {"bfloat16": 790.0}, 50.0, 4272.0, "measured", "now", "")
    monkeypatch.setattr(ceilings, "calibrate", lambda device, quick=False: measured)
    monkeypatch.setattr("wlprof.device.device_name", lambda device: "NVIDIA H200")

    class Dev:
        type = "cuda"

    got, origin = ceilings.get_ceilings(Dev())
    assert got is measured and "the cache was format 1" in origin
    assert ceilings.load_cached("cuda", "NVIDIA H200").migrated_from is None  # rewritten as format 2


def test_load_file_reads_a_cache_or_a_manifest(tmp_path):
    from wlprof.errors import InputError

    (tmp_path / "c.json").write_text(json.dumps(V1))
    (tmp_path / "m.json").write_text(json.dumps({"run_id": "r", "ceilings": {**V1, "origin": "x"}}))
    assert ceilings.load_file(tmp_path / "c.json").copy_gbps == 4131.8
    assert ceilings.load_file(tmp_path / "m.json").copy_gbps == 4131.8
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(InputError, match="--ceilings"):
        ceilings.load_file(tmp_path / "bad.json")
    with pytest.raises(InputError, match="--ceilings"):
        ceilings.load_file(tmp_path / "missing.json")


def _cache_dir(root, entries):
    for i, (level, kind, size, shared) in enumerate(entries):
        d = root / f"index{i}"
        d.mkdir(parents=True)
        (d / "level").write_text(f"{level}\n")
        (d / "type").write_text(f"{kind}\n")
        (d / "size").write_text(f"{size}\n")
        (d / "shared_cpu_list").write_text(f"{shared}\n")
    return root


def test_cpu_caches_from_sysfs_by_hand(tmp_path):
    root = _cache_dir(tmp_path, [(1, "Data", "48K", "0"), (1, "Instruction", "64K", "0"),
                                 (2, "Unified", "2048K", "0"), (3, "Unified", "32M", "0-7")])
    got = ceilings.cpu_caches(threads=2, root=root, cpus=8)
    assert sorted(got) == ["l1", "l2", "l3"]  # the instruction cache is not a data level
    # two threads on two cores: 2 x 48 KiB of L1, 2 x 2 MiB of L2, one shared 32 MiB L3
    assert (got["l1"]["bytes"], got["l1"]["instances"], got["l1"]["aggregate"]) == (49152, 2, 98304)
    assert got["l2"]["aggregate"] == 2 * 2048 * 1024
    assert (got["l3"]["shared_by"], got["l3"]["instances"], got["l3"]["aggregate"]) == (8, 1, 32 << 20)
    # more threads than instances of a level: capped at the instances there are
    assert ceilings.cpu_caches(threads=64, root=root, cpus=8)["l1"]["instances"] == 8


def test_cpu_caches_fall_back_to_sysconf(tmp_path, monkeypatch):
    sizes = {"SC_LEVEL1_DCACHE_SIZE": 32768, "SC_LEVEL2_CACHE_SIZE": 1 << 20, "SC_LEVEL3_CACHE_SIZE": 0}
    monkeypatch.setattr(ceilings.os, "sysconf", lambda name: sizes.get(name, -1))
    got = ceilings.cpu_caches(threads=4, root=tmp_path / "none", cpus=4)
    # L3 reports 0 (none); the largest level left (L2) is taken as shared, L1 as private per core
    assert sorted(got) == ["l1", "l2"]
    assert got["l1"]["aggregate"] == 4 * 32768 and got["l2"]["aggregate"] == 1 << 20
    assert got["l1"]["source"] == "os.sysconf(SC_LEVEL1_DCACHE_SIZE)"


def test_cpu_plan_sizes_each_level_between_the_one_below_and_its_own(tmp_path):
    root = _cache_dir(tmp_path, [(1, "Data", "48K", "0"), (2, "Unified", "2048K", "0"), (3, "Unified", "32M", "0-1")])
    plan = ceilings._cpu_plan(quick=False, threads=2, root=root)
    # L1: from a quarter to half of one 48 KiB instance (every thread reads the whole buffer)
    assert plan.cache_sizes["l1"][0] == 12288 and plan.cache_sizes["l1"][-1] == 24576
    # L2: past the L1s of both threads (2 x 2 x 48 KiB) up to half of one 2 MiB instance
    assert plan.cache_sizes["l2"][0] == 196608 and plan.cache_sizes["l2"][-1] == 1 << 20
    # L3: past both L2s (2 x 2 x 2 MiB) up to half the shared 32 MiB
    assert plan.cache_sizes["l3"][0] == 8 << 20 and plan.cache_sizes["l3"][-1] == 16 << 20
    assert plan.cache_bytes == {"l1": 98304, "l2": 4 << 20, "l3": 32 << 20}
    assert plan.main_bytes >= 4 * (32 << 20) and plan.notes["main_past_last_cache"] is True
    quick = ceilings._cpu_plan(quick=True, threads=2, root=root)
    assert all(len(v) == 1 for v in quick.cache_sizes.values())
    # a matrix rate for each dtype `wlprof run --dtype` takes (float16 and float64 GEMMs had no compute roof)
    assert plan.n_mm == {"float32": [1024], "bfloat16": [512], "float16": [512], "float64": [1024]}
    assert quick.n_mm == {"float32": [512], "bfloat16": [256], "float16": [256], "float64": [512]}


def _meas(v, p10, p90):
    return Measurement(v, "", "m", p10=p10, p90=p90)


def test_stale_against_by_value_spread_and_missing_roofs():
    run = Ceilings("cpu", "cpu X", {"float32": 0.10}, 0.10, 10.0, "measured", "2026-11-29T10:00:00+00:00", "")
    now = Ceilings("cpu", "cpu X", {"float32": 0.30}, 0.30, 10.2, "measured", "2026-11-30T10:00:00+00:00", "",
                   bandwidth_gbps={"dram_copy": 10.2, "dram_read": 12.0, "l1": 300.0},
                   measurements={"matrix:float32": _meas(0.30, 0.27, 0.31), "dram_copy": _meas(10.2, 9.9, 10.4)})
    why = ceilings.stale_against(run, now)
    # fp32 0.10 < 0.30 x min(0.27 / 0.30, 0.99) = 0.27: lower; copy 10.0 >= 10.2 x (9.9 / 10.2) = 9.9: not lower
    assert why == ["matrix float32 0.1 < 0.3 TFLOP/s now", "lacks dram_read, l1 (measured now)"]
    # the same values measured later are not stale; a run newer than the cache never is
    same = Ceilings.from_dict({**now.to_dict(), "measured_at": "2026-12-01T00:00:00+00:00"})
    assert ceilings.stale_against(now, same) == []
    assert ceilings.stale_against(now, run) == []
    # another device is never compared
    other = Ceilings.from_dict({**now.to_dict(), "device_name": "cpu Y"})
    assert ceilings.stale_against(run, other) == []


def test_lower_than_names_what_a_new_calibration_lost_beyond_the_old_spread():
    # the cache: bf16 0.39 (p10 0.36), fp32 0.11 (p10 0.10), dram_read 30 (p10 28)
    before = Ceilings("cpu", "cpu X", {"bfloat16": 0.39, "float32": 0.11}, 0.11, 34.0, "measured",
                      "2026-12-02T00:36:48+00:00", "", bandwidth_gbps={"dram_read": 30.0},
                      measurements={"matrix:bfloat16": _meas(0.39, 0.36, 0.39), "matrix:float32": _meas(0.11, 0.10, 0.11),
                                    "dram_read": _meas(30.0, 28.0, 30.0)})
    # measured under load: bf16 0.034 < 0.39 x 0.36 / 0.39 = 0.36; fp32 0.105 >= 0.11 x 0.10 / 0.11 = 0.10 (within
    # the spread); dram_read 21 < 28
    now = Ceilings("cpu", "cpu X", {"bfloat16": 0.034, "float32": 0.105}, 0.105, 17.0, "measured",
                   "2026-12-02T02:19:36+00:00", "", bandwidth_gbps={"dram_read": 21.0})
    assert ceilings.lower_than(now, before) == ["matrix bfloat16 0.034 < 0.39 TFLOP/s before",
                                                "dram_read 21.0 < 30.0 GB/s before"]
    assert ceilings.lower_than(before, now) == []
    assert ceilings.lower_than(now, Ceilings.from_dict({**before.to_dict(), "device_name": "cpu Y"})) == []


def test_a_cache_that_measured_slower_than_the_next_level_out_is_named():
    from wlprof.cli.calibrate import cache_inversions

    c = Ceilings("cpu", "x", {"float32": 1.0}, 1.0, 20.0, "measured", "t", "2.13",
                 bandwidth_gbps={"l1": 17.0, "l2": 247.0, "l3": 23.0, "dram_read": 15.0, "dram_copy": 20.0})
    assert cache_inversions(c) == ["l1 17 < l2 247 GB/s"]
    c.bandwidth_gbps = {"l1": 390.0, "l2": 250.0, "l3": 14.0, "dram_read": 15.0}
    assert cache_inversions(c) == ["l3 14 < dram_read 15 GB/s"]
    c.bandwidth_gbps = {"l2": 13000.0, "hbm_read": 4300.0}
    assert cache_inversions(c) == []

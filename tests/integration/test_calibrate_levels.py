"""`wlprof calibrate` on this CPU: every ceiling measured, with its method, sizes and spread; the cache
levels read from sysfs; a damaged cache rewritten. Timing relations are not asserted (a shared CPU)."""

from __future__ import annotations

import json

import pytest
import torch
from typer.testing import CliRunner

from wlprof import ceilings
from wlprof.ceilings import Ceilings

CPU = torch.device("cpu")
pytestmark = pytest.mark.calibrates  # these tests measure ceilings themselves


def _fake_sysfs(root):
    # three small levels so the quick sizes stay small: 32 KiB L1 and 256 KiB L2 per core, a shared 4 MiB L3
    for i, (level, kind, size, shared) in enumerate([(1, "Data", "32K", "0"), (1, "Instruction", "32K", "0"),
                                                      (2, "Unified", "256K", "0"), (3, "Unified", "4096K", "0-63")]):
        d = root / f"index{i}"
        d.mkdir(parents=True)
        for name, v in (("level", level), ("type", kind), ("size", size), ("shared_cpu_list", shared)):
            (d / name).write_text(f"{v}\n")
    return root


def _check_measurement(m, unit):
    assert m.unit == unit and m.method and m.repeats >= 3 and m.warmup >= 1
    assert len(m.samples) == m.repeats and all(s > 0 for s in m.samples)
    assert m.min <= m.p10 <= m.value <= m.p90 <= m.max


def test_quick_cpu_calibration_has_every_roof_with_method_sizes_and_spread(tmp_path):
    c = ceilings.calibrate(CPU, quick=True, cache_root=_fake_sysfs(tmp_path / "cache"))
    threads = torch.get_num_threads()
    assert c.format_version == 2 and c.migrated_from is None and c.source == "measured" and c.datasheet is None
    assert c.matrix_tflops["float32"] > 0 and c.vector_tflops == c.matrix_tflops["float32"]
    assert set(c.bandwidth_gbps) == {"dram_read", "dram_write", "dram_copy", "l1", "l2", "l3"}
    assert all(v > 0 for v in c.bandwidth_gbps.values()) and c.copy_gbps == c.bandwidth_gbps["dram_copy"]
    # capacities: the threads' private L1s and L2s added up, the L3 shared
    assert c.cache_bytes == {"l1": 32768 * threads, "l2": 262144 * threads, "l3": 4 << 20}
    assert [lv for lv, _, _ in c.cache_levels()] == ["l1", "l2", "l3"]
    for key in ("matrix:float32", "vector"):
        _check_measurement(c.measurements[key], "TFLOP/s")
    for key in c.bandwidth_gbps:
        _check_measurement(c.measurements[key], "GB/s")
        assert c.measurements[key].value == c.bandwidth_gbps[key]
    # each level's buffer fits one instance of it (every thread reads all of it) and is past the level below
    prev = 0
    for level, cap, _ in c.cache_levels():
        size = c.measurements[level].sizes["buffer_bytes"]
        per = cap // threads if level != "l3" else cap
        assert prev < size <= per and c.measurements[level].sizes["passes"] >= 4
        prev = cap
    # the main-memory buffers are past the last cache: 4 x 4 MiB at least
    assert c.measurements["dram_copy"].sizes["buffer_bytes"] >= 16 << 20
    assert c.method["main_past_last_cache"] is True
    # the read roof is the best of three methods (sum, gemv, row-vector GEMM), the others kept beside it
    read = c.measurements["dram_read"]
    assert len(read.alternatives) == 2 and all(a["value"] <= read.value for a in read.alternatives)
    assert Ceilings.from_dict(json.loads(json.dumps(c.to_dict()))) == c


def test_this_machines_levels_are_ordered_by_capacity():
    c = ceilings.calibrate(CPU, quick=True)
    levels = c.cache_levels()
    caps = [cap for _, cap, _ in levels]
    assert caps == sorted(caps) and len(set(caps)) == len(caps)
    assert all(c.bandwidth_gbps[lv] > 0 for lv, _, _ in levels)
    assert {"dram_read", "dram_write", "dram_copy"} <= set(c.bandwidth_gbps)


def test_a_damaged_cache_is_measured_again_and_rewritten(tmp_path, monkeypatch):
    monkeypatch.setenv("WLPROF_CACHE_DIR", str(tmp_path))
    from wlprof.device import device_name

    path = ceilings.cache_path("cpu", device_name(CPU))
    path.parent.mkdir(parents=True, exist_ok=True)
    for damage in (json.dumps({"device_type": "cpu"}), "[]", "{not json"):
        path.write_text(damage)
        assert ceilings.load_cached("cpu", device_name(CPU)) is None
    c, origin = ceilings.get_ceilings(CPU, quick=True)
    assert origin.startswith("measured now")
    assert Ceilings.from_dict(json.loads(path.read_text())) == c  # rewritten whole
    again, origin = ceilings.get_ceilings(CPU)
    assert origin.startswith("cache:") and again == c


def test_gpu_cache_measurement_survives_a_refused_graph_capture():
    # the GPU's L2 path, run on the CPU: the broadcast read is measured, the CUDA graph refused and said so
    plan = ceilings._Plan(n_mm={}, reps=3, warmup=1, warm_s=0.0, main_bytes=1 << 20,
                          cache_sizes={"l2": [1 << 16]}, cache_bytes={"l2": 1 << 18}, pass_bytes=1 << 22,
                          graph_calls=8)
    errors = {}
    got = ceilings._measure_caches(plan, CPU, True, errors)
    assert got["l2"].value > 0 and got["l2"].sizes["buffer_bytes"] == 1 << 16
    assert "l2/graph" in errors


def test_cli_calibrate_prints_every_roof_and_writes_the_file(tmp_path, monkeypatch):
    from wlprof.cli.main import app

    monkeypatch.setenv("WLPROF_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("COLUMNS", "200")  # the labels on one line each (at 100 columns rich wraps them)
    res = CliRunner().invoke(app, ["calibrate", "--device", "cpu", "--quick", "-o", str(tmp_path / "c.json")])
    assert res.exit_code == 0, res.output
    for text in ("matrix float32 TFLOP/s", "DRAM read GB/s", "DRAM write GB/s", "DRAM copy (read + write) GB/s",
                 "p10-p90", "method (sizes)"):
        assert text in res.output
    written = ceilings.load_file(tmp_path / "c.json")
    assert written.bandwidth("dram_read") > 0
    shown = CliRunner().invoke(app, ["calibrate", "--device", "cpu", "--show"])
    assert shown.exit_code == 0 and written.measured_at in shown.output


def test_the_gpu_calibration_assembles_its_roofs(monkeypatch):
    # the GPU plan's structure (hbm_* and l2, the datasheet beside) run at small sizes on the CPU; the CUDA
    # graph is refused here and said so, the broadcast read stands
    monkeypatch.setattr("wlprof.device.device_name", lambda device: "NVIDIA H200")
    plan = ceilings._Plan(n_mm={"bfloat16": [32, 64], "float32": [64], "tf32": [64]}, reps=3, warmup=1, warm_s=0.0,
                          main_bytes=1 << 22, cache_sizes={"l2": [1 << 16, 1 << 17]}, cache_bytes={"l2": 1 << 20},
                          pass_bytes=1 << 22, graph_calls=8, notes={"l2_cache_size": 1 << 20})
    c = ceilings._calibrate(CPU, plan, gpu=True, quick=True)
    assert c.device_type == "cuda" and c.datasheet["source"].startswith("NVIDIA H200")
    assert set(c.bandwidth_gbps) == {"hbm_read", "hbm_write", "hbm_copy", "l2"} and c.cache_bytes == {"l2": 1 << 20}
    # tf32 timed with TF32 on, sustained or in bursts (whichever measured higher on this machine)
    assert set(c.matrix_tflops) == {"bfloat16", "float32", "tf32"} and "(TF32 on)" in c.measurements["matrix:tf32"].method
    # read: the best of torch.sum, gemv and the row-vector GEMM; L2: the best of two buffer sizes
    assert len(c.measurements["hbm_read"].alternatives) == 2 and len(c.measurements["l2"].alternatives) == 1
    # bf16: the best of two sizes, each timed sustained and in bursts at full clock; the others kept beside it
    bf16 = c.measurements["matrix:bfloat16"]
    tried = [(bf16.sizes["n"], "burst_calls" in bf16.sizes)] + [(a["sizes"]["n"], "burst_calls" in a["sizes"])
                                                               for a in bf16.alternatives]
    assert sorted(tried) == [(32, False), (32, True), (64, False), (64, True)]
    burst = next(a for a in [bf16.summary(), *bf16.alternatives] if "burst_calls" in a["sizes"])
    assert burst["repeats"] == ceilings.BURSTS * (ceilings.BURST_CALLS - 1) and "full clock" in burst["method"]
    assert c.matrix_tflops["bfloat16"] == bf16.value
    assert "l2/graph" in c.method["errors"]
    assert Ceilings.from_dict(json.loads(json.dumps(c.to_dict()))) == c

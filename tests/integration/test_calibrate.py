"""Ceilings measured on this CPU and cached (the cache logic itself: tests/unit/test_ceilings.py)."""

from __future__ import annotations

import pytest
import torch

from wlprof import ceilings, jsonio
from wlprof.device import device_name


@pytest.mark.calibrates
def test_calibrate_cpu_measures_positive_rates_and_caches(tmp_path, monkeypatch):
    monkeypatch.setenv("WLPROF_CACHE_DIR", str(tmp_path))
    c, origin = ceilings.get_ceilings(torch.device("cpu"), quick=True)
    path = ceilings.cache_path("cpu", device_name(torch.device("cpu")))
    assert origin == f"measured now, cached in {path}"
    assert c.source == "measured" and c.device_type == "cpu"
    assert c.matrix_tflops["float32"] > 0 and c.copy_gbps > 0  # measured: no value to derive by hand
    assert c.vector_tflops == c.matrix_tflops["float32"]
    # quick sizes: 512^3 fp32 GEMMs; main memory at most 256 MiB each way (max(4 x the last cache, 256 MiB),
    # capped for --quick and at a sixth of free memory: docs/ceilings.md); 5 reps after at least 1 warm-up
    assert c.method["matrix_float32_n"] == 512 and c.method["copy_bytes_each_way"] <= 256 << 20
    assert c.measurements["dram_copy"].sizes["buffer_bytes"] == c.method["copy_bytes_each_way"]
    assert (c.method["reps"], c.method["warmup"], c.method["statistic"]) == (5, 1, "p90")
    # a CPU's ceiling is the 90th percentile of its repeats (a descheduled repeat only slows one down)
    m = c.measurements["dram_copy"]
    assert m.value == pytest.approx(m.p90) and m.value >= m.min
    assert c.datasheet is None  # never a datasheet for a CPU
    assert jsonio.loads(path.read_bytes()) == c.to_dict()
    again, origin = ceilings.get_ceilings(torch.device("cpu"))
    assert origin == f"cache: {path}" and again == c


def _low_calibration(tmp_path, monkeypatch):
    """A cache of bf16 0.39 TFLOP/s (p10 0.36) and a calibration under load that measures 0.034."""
    from wlprof.ceilings import Ceilings, Measurement

    monkeypatch.setenv("WLPROF_CACHE_DIR", str(tmp_path))
    name = device_name(torch.device("cpu"))
    before = Ceilings("cpu", name, {"bfloat16": 0.39}, 0.11, 34.0, "measured", "2026-12-02T00:36:48+00:00", "",
                      measurements={"matrix:bfloat16": Measurement(0.39, "", "m", p10=0.36, p90=0.39)})
    ceilings.save(before)
    now = Ceilings.from_dict({**before.to_dict(), "matrix_tflops": {"bfloat16": 0.034},
                              "measured_at": "2026-12-02T02:19:36+00:00", "measurements": {}})
    monkeypatch.setattr(ceilings, "calibrate", lambda dev, quick=False: now)
    return name


def test_calibrate_keeps_higher_ceilings_unless_replace(tmp_path, monkeypatch, cli):
    # 0.034 < 0.36 (the cache's p10): the cache stays, and the output says so and how to replace it
    name = _low_calibration(tmp_path, monkeypatch)
    res = cli("calibrate", "--device", "cpu", "--out", str(tmp_path / "new.json"))
    flat = " ".join(res.output.split())
    assert res.exit_code == 0, res.output
    assert ("kept the cache of 2026-12-02T00:36:48+00:00: these measured lower (matrix bfloat16 0.034 < 0.39 "
            "TFLOP/s before)") in flat and "--replace" in flat and "the cache stays in" in flat
    assert ceilings.load_cached("cpu", name).matrix_tflops == {"bfloat16": 0.39}
    # --out still writes what was measured
    assert jsonio.loads((tmp_path / "new.json").read_bytes())["matrix_tflops"] == {"bfloat16": 0.034}


def test_calibrate_replace_caches_lower_ceilings_and_says_what_it_lost(tmp_path, monkeypatch, cli):
    name = _low_calibration(tmp_path, monkeypatch)
    res = cli("calibrate", "--device", "cpu", "--replace")
    flat = " ".join(res.output.split())
    assert res.exit_code == 0, res.output
    assert ("lower than the cache it replaces (measured 2026-12-02T00:36:48+00:00): matrix bfloat16 0.034 < 0.39 "
            "TFLOP/s before") in flat
    assert ceilings.load_cached("cpu", name).matrix_tflops == {"bfloat16": 0.034}


def test_calibrate_caches_the_ceilings_that_rose_and_keeps_those_that_fell(tmp_path, monkeypatch, cli):
    # bf16 falls 0.39 -> 0.034 (below the cache's p10 0.36), the copy roof rises 34 -> 51 GB/s: the cache
    # takes 51 GB/s and keeps 0.39 TFLOP/s with its measurement
    from wlprof.ceilings import Measurement

    name = _low_calibration(tmp_path, monkeypatch)
    now = ceilings.calibrate(None)
    now.copy_gbps = 51.0
    now.bandwidth_gbps = {"dram_copy": 51.0}
    now.measurements = {"dram_copy": Measurement(51.0, "GB/s", "copy", p10=50.0, p90=51.0)}
    res = cli("calibrate", "--device", "cpu", "--out", str(tmp_path / "new.json"))
    flat = " ".join(res.output.split())
    assert res.exit_code == 0, res.output
    assert ("kept these from the cache of 2026-12-02T00:36:48+00:00, which measured lower now (matrix bfloat16 "
            "0.034 < 0.39 TFLOP/s before); cached the rest, which rose (dram_copy 51.0 > 34.0 GB/s)") in flat
    cached = ceilings.load_cached("cpu", name)
    assert cached.matrix_tflops == {"bfloat16": 0.39} and cached.copy_gbps == 51.0
    assert cached.bandwidth_gbps == {"dram_copy": 51.0}
    assert cached.measurements["matrix:bfloat16"].p10 == 0.36 and cached.measurements["dram_copy"].value == 51.0
    assert cached.method["kept_from_cache"] == {"matrix bfloat16": "2026-12-02T00:36:48+00:00"}
    assert cached.measured_at == "2026-12-02T02:19:36+00:00"
    # --out writes what was measured, not the merge
    assert jsonio.loads((tmp_path / "new.json").read_bytes())["matrix_tflops"] == {"bfloat16": 0.034}


@pytest.mark.parametrize("where", ["missing/dir/c.json", "afile/c.json", "adir"])
def test_calibrate_refuses_an_unwritable_out_before_measuring(tmp_path, monkeypatch, cli, where):
    # a bad --out is refused up front (status 2, named), not with a traceback after minutes of measuring
    monkeypatch.setenv("WLPROF_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "afile").write_text("x")
    (tmp_path / "adir").mkdir()
    (tmp_path / "missing").write_text("x")  # 'missing/dir' cannot be created under a file
    measured = []
    monkeypatch.setattr(ceilings, "calibrate", lambda dev, quick=False: measured.append(dev))
    res = cli("calibrate", "--device", "cpu", "--out", str(tmp_path / where))
    flat = " ".join(res.output.split())
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output and "error: --out must be a JSON file" in flat, flat
    assert measured == [] and not (tmp_path / "cache").exists()

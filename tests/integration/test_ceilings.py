"""Ceilings: measured on the device, cached per device, datasheet values only beside them."""

from __future__ import annotations

import math

import torch

from wlprof import ceilings, device
from wlprof.ceilings import Ceilings


def test_calibrate_cpu_measures_positive_rates_and_caches(tmp_path, monkeypatch):
    monkeypatch.setenv("WLPROF_CACHE_DIR", str(tmp_path))
    c, origin = ceilings.get_ceilings(torch.device("cpu"), quick=True)
    assert origin.startswith("measured now")
    assert c.source == "measured" and c.device_type == "cpu"
    assert c.matrix_tflops["float32"] > 0 and c.copy_gbps > 0
    assert c.vector_tflops == c.matrix_tflops["float32"]
    assert c.datasheet is None  # never a datasheet for a CPU
    again, origin = ceilings.get_ceilings(torch.device("cpu"))
    assert origin.startswith("cache:") and again == c


def test_damaged_cache_is_remeasured(tmp_path, monkeypatch):
    monkeypatch.setenv("WLPROF_CACHE_DIR", str(tmp_path))
    from wlprof.device import device_name

    path = ceilings.cache_path("cpu", device_name(torch.device("cpu")))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{not json")
    assert ceilings.load_cached("cpu", device.cpu_model()) is None


def test_compute_ceiling_lookup_and_ridge():
    c = Ceilings("cuda", "NVIDIA H200", {"bfloat16": 800.0, "float32": 50.0, "tf32": 400.0}, 50.0, 4000.0,
                 "measured", "", "", datasheet=ceilings.datasheet_for("NVIDIA H200"))
    assert c.compute_tflops("matrix", "bfloat16") == 800.0
    assert c.compute_tflops("matrix", "float32") == 50.0
    assert c.compute_tflops("matrix", "float32", tf32=True) == 400.0
    assert c.compute_tflops("vector", "bfloat16") == 50.0
    assert math.isnan(c.compute_tflops("matrix", "float8_e4m3fn"))
    # ridge = 800e12 / 4000e9 = 200 FLOP/byte
    assert c.ridge_flop_per_byte("matrix", "bfloat16") == 200.0
    assert c.datasheet["source"].startswith("NVIDIA H200") and c.datasheet["bfloat16"] == 989.4
    assert ceilings.datasheet_for("AMD EPYC") is None

"""The device a trace names (wlprof.trace.identity.device_of) where its deviceProperties give no name."""

from __future__ import annotations

import pandas as pd

from wlprof.trace.identity import described, device_of

# As ROCm 7 builds of PyTorch write them (sunxxuns/openpi-1 `traces/mi350_policy_inference_21ms_47hz.json`):
# an MI350-class GPU (gfx950) whose name is empty; Kineto's HIP build adds maxSharedMemoryPerMultiProcessor
MI350 = {"id": 0, "name": "", "totalGlobalMem": 270566162432, "computeMajor": 9, "computeMinor": 5,
         "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048, "regsPerBlock": 65536, "warpSize": 64,
         "sharedMemPerBlock": 163840, "numSms": 256, "maxSharedMemoryPerMultiProcessor": 163840}
# Kineto's CUDA build writes sharedMemPerMultiprocessor (an H100's values, the name left out)
CUDA = {"id": 1, "name": "", "totalGlobalMem": 85045477376, "computeMajor": 9, "computeMinor": 0, "warpSize": 32,
        "numSms": 132, "regsPerMultiprocessor": 65536, "sharedMemPerBlockOptin": 232448,
        "sharedMemPerMultiprocessor": 233472}


def _on(index: int) -> pd.DataFrame:
    return pd.DataFrame({"device_index": [index, index]})


def test_an_unnamed_gpu_is_named_by_its_vendor_compute_capability_units_and_memory():
    # 270,566,162,432 bytes = 251.99 GiB
    assert device_of({"deviceProperties": [MI350]}, _on(0)) == ("cuda", "AMD GPU (compute 9.5, 256 CUs, 252 GiB)")
    # 85,045,477,376 bytes = 79.21 GiB
    assert device_of({"deviceProperties": [MI350, CUDA]}, _on(1)) == ("cuda",
                                                                      "NVIDIA GPU (compute 9.0, 132 SMs, 79 GiB)")


def test_a_name_wins_and_properties_without_facts_name_nothing():
    assert device_of({"deviceProperties": [{**MI350, "name": "AMD Instinct MI355X"}]}, _on(0)) == (
        "cuda", "AMD Instinct MI355X")
    assert described({"id": 0, "name": ""}) is None
    assert device_of({"deviceProperties": [{"id": 0, "name": ""}]}, _on(0)) == ("cuda", "unknown GPU")
    # neither build's key: the vendor is not told
    assert described({"computeMajor": 8, "computeMinor": 0, "numSms": 108}) == "unnamed GPU (compute 8.0, 108 SMs)"

"""The step timeline: a step's back-to-back time and latency from its calls and the host's numbers."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from wlprof.predict.steps import Host, Plan, context_of, fit_host


def test_the_timeline_overlaps_launches_with_kernels_and_waits_at_a_sync():
    # launches every 2 us; kernels 10, 1, 1 us. Step 1: k0 runs 2-12, k1 12-13, k2 13-14 (the host done
    # at 6). Step 2 launches at 8, 10, 12 and its k0 waits for the device: 14-24, 24-25, 25-26.
    h = Host(launch_us=2.0, gemm_us=0.0, sync_us=0.0, step_us=0.0, latency_us=1.0)
    b2b, lat = Plan([10.0, 1.0, 1.0], [0, 0, 0], [False, False, False]).times(h)
    assert (b2b, lat) == pytest.approx((12.0, 15.0))
    # the last call reads a value back: the host waits for the device (14) plus 3 us before the next step,
    # whose launches then come at 19, 21, 23 and its kernels run 19-29, 29-30, 30-31
    h.sync_us = 3.0
    b2b, lat = Plan([10.0, 1.0, 1.0], [0, 0, 0], [False, False, True]).times(h)
    assert (b2b, lat) == pytest.approx((31.0 + 3.0 - 17.0, 17.0 + 1.0))
    # a GEMM costs the host gemm_us more to launch
    h = Host(launch_us=2.0, gemm_us=5.0, sync_us=0.0, step_us=0.0, latency_us=0.0)
    _, lat = Plan([1.0], [1], [False]).times(h)
    assert lat == pytest.approx(8.0)


def test_host_numbers_per_context_survive_json_and_fall_back_to_the_whole_fit():
    h = Host(launch_us=6.0, by_context={"moe:loop": Host(launch_us=20.0, sync_us=90.0)})
    back = Host.from_dict(json.loads(json.dumps(h.to_dict())))
    assert back.for_context("moe:loop").launch_us == 20.0 and back.for_context("moe:loop").sync_us == 90.0
    assert back.for_context("gemm") is back and back.launch_us == 6.0
    assert Host.from_dict({"launch_us": 3.0}).by_context == {}  # a predictor written before contexts


def _host_bound_profile(launch: dict[str, float]):
    """Per context, steps of n tiny kernels whose back-to-back time is the host's: n x launch + 4 us."""
    ops, described, steps = [], [], []
    for run, (ctx, per) in enumerate(launch.items()):
        for point, n in enumerate(range(1, 11)):
            for i in range(n):
                ops.append({"run_id": f"r{run}", "point": point, "step": 0, "ts_us": float(i), "dur_us": 0.5})
                described.append({"cls": "memory", "sync": False, "group": f"memory|aten::add|f|c||@{ctx}"})
            steps.append({"run_id": f"r{run}", "point": point, "back_to_back_us": n * per + 4.0,
                          "latency_us": n * per + 4.0 + 0.5 + 10.0})
    return pd.DataFrame(ops), pd.DataFrame(described), pd.DataFrame(steps)


def test_each_context_gets_the_host_numbers_of_its_own_steps():
    ops, described, steps = _host_bound_profile({"gemm": 5.0, "moe:loop": 20.0})
    host = fit_host(ops, described, steps)
    assert set(host.by_context) == {"gemm", "moe:loop"}
    assert host.by_context["gemm"].launch_us == pytest.approx(5.0, rel=0.1)
    assert host.by_context["moe:loop"].launch_us == pytest.approx(20.0, rel=0.1)
    # the whole fit lies between the two
    assert 5.0 < host.launch_us < 20.0
    assert context_of(described.iloc[:3]) == "gemm"
    # a step of the loop, predicted with its context's numbers: 10 launches of 20 us
    plan = Plan(np.full(10, 0.5), np.zeros(10), np.zeros(10, dtype=bool))
    b2b, _ = plan.times(host.for_context("moe:loop"))
    assert b2b == pytest.approx(204.0, rel=0.05)


def test_each_queued_kernel_holds_the_device_for_the_gap_after_it():
    # launches every 2 us, kernels 10, 1, 1 us and a gap of 1 us after each: step 1 runs 2-12, 13-14,
    # 15-16 and frees the device at 17; step 2 (launched at 8, 10, 12) waits for it: 17-27, 28-29, 30-31
    # and frees it at 32. Per step 15 us: the kernels and their three gaps.
    h = Host(launch_us=2.0, gemm_us=0.0, sync_us=0.0, step_us=0.0, latency_us=1.0, gap_us=1.0)
    b2b, lat = Plan([10.0, 1.0, 1.0], [0, 0, 0], [False, False, False]).times(h)
    assert (b2b, lat) == pytest.approx((15.0, 18.0))


def test_a_single_call_ends_at_its_last_kernel_or_the_hosts_tail_whichever_is_later():
    # launched at 2 us; the host records the end event 10 us after that, at 12
    h = Host(launch_us=2.0, gemm_us=0.0, sync_us=0.0, step_us=0.0, latency_us=3.0, tail_us=10.0)
    _, small = Plan([1.0], [0], [False]).times(h)  # the kernel ends at 3: the host's 12 decides
    _, large = Plan([50.0], [0], [False]).times(h)  # the kernel ends at 52
    assert (small, large) == pytest.approx((15.0, 55.0))
    # a predictor written before the gap and the tail: both zero, the latency the old max(gpu, cpu) + lead
    old = Host.from_dict({"launch_us": 2.0, "gemm_us": 0.0, "sync_us": 0.0, "step_us": 0.0, "latency_us": 3.0})
    assert (old.gap_us, old.tail_us) == (0.0, 0.0)
    assert Plan([1.0], [0], [False]).times(old)[1] == pytest.approx(6.0)


def test_the_fit_recovers_the_device_gap_and_the_hosts_tail():
    # one-kernel steps from 0.5 to 512 us, timed by a host of 12 us per launch, 3 us per step, a gap of
    # 3 us, a tail of 20 us and a lead of 5 us: the small steps are the host's, the large the device's
    true = Host(launch_us=12.0, gemm_us=0.0, sync_us=0.0, step_us=3.0, latency_us=5.0, gap_us=3.0, tail_us=20.0)
    ops, described, steps = [], [], []
    for point, k in enumerate([0.5, 1, 2, 4, 6, 8, 11, 16, 23, 32, 45, 64, 90, 128, 256, 512]):
        for n in (1, 2):
            pid = 2 * point + n - 1
            for i in range(n):
                ops.append({"run_id": "r", "point": pid, "step": 0, "ts_us": float(i), "dur_us": float(k)})
                described.append({"cls": "memory", "sync": False, "group": "memory|aten::add|f|c||@elementwise"})
            b2b, lat = Plan(np.full(n, float(k)), np.zeros(n), np.zeros(n, dtype=bool)).times(true)
            steps.append({"run_id": "r", "point": pid, "back_to_back_us": b2b, "latency_us": lat})
    host = fit_host(pd.DataFrame(ops), pd.DataFrame(described), pd.DataFrame(steps))
    assert host.gap_us == pytest.approx(3.0, abs=0.5)
    assert host.tail_us == pytest.approx(20.0, abs=2.0)
    assert host.latency_us + host.tail_us == pytest.approx(25.0, abs=2.0)


def test_a_context_whose_steps_are_all_the_devices_keeps_the_whole_fits_launch_cost():
    # "gemm": host-bound steps of n launches of 20 us. "big": one 1 ms kernel per step, timed at the kernel
    # and a 2 us gap, which no launch cost of under 1 ms changes: its launch cost is the whole fit's.
    ops, described, steps = _host_bound_profile({"gemm": 20.0})
    for point in range(10):
        ops = pd.concat([ops, pd.DataFrame([{"run_id": "big", "point": point, "step": 0, "ts_us": 0.0,
                                             "dur_us": 1000.0}])], ignore_index=True)
        described = pd.concat([described, pd.DataFrame([{"cls": "memory", "sync": False,
                                                         "group": "memory|aten::add|f|c||@big"}])],
                              ignore_index=True)
        steps = pd.concat([steps, pd.DataFrame([{"run_id": "big", "point": point, "back_to_back_us": 1002.0,
                                                 "latency_us": 1012.0}])], ignore_index=True)
    host = fit_host(ops, described, steps)
    assert host.by_context["big"].launch_us == pytest.approx(host.launch_us, rel=0.05)

"""Selecting runs (wlprof.store.selection): run ids as given on the command line, and the `wlprof ls` hint."""

from __future__ import annotations

from pathlib import Path

from wlprof.store.selection import ls_hint, split_runs


def test_run_ids_from_repeated_and_comma_separated_arguments():
    assert split_runs(["a,b", " c ", "d,,e,"]) == ["a", "b", "c", "d", "e"]
    assert split_runs(["gemm-1 mlp-2"]) == ["gemm-1 mlp-2"]  # only commas separate
    assert split_runs(None) == [] and split_runs([]) == []


def test_the_ls_hint_names_a_traces_folder_other_than_the_default():
    assert ls_hint("traces") == "see `wlprof ls`" and ls_hint(Path("traces")) == "see `wlprof ls`"
    assert ls_hint("/data/TRACES") == "see `wlprof ls --traces /data/TRACES`"


def test_load_runs_selects_filters_and_refuses_by_the_rule(tmp_path):
    import shutil

    import pytest

    from wlprof.errors import InputError
    from wlprof.store.selection import load_runs

    fixtures = Path(__file__).resolve().parents[1] / "fixtures"
    for run in [*(fixtures / "h200").iterdir(), *(fixtures / "cpu").iterdir()]:
        shutil.copytree(run, tmp_path / run.name)
    gemm, cpu = "gemm-20261129-093326-a9ee", "mlp-20261129-101232-e8e6"
    steps = load_runs(tmp_path, "steps", [gemm])
    assert set(steps.run_id) == {gemm} and (steps.status.fillna("ok") == "ok").all()
    assert set(load_runs(tmp_path, "steps", [gemm, "mlp-20261129-093337-6c80"], workload="mlp").workload) == {"mlp"}
    with pytest.raises(InputError) as err:  # an unknown run, with the closest one
        load_runs(tmp_path, "steps", ["gemm-20261129-093326-a9ef"])
    assert err.value.arg == "RUNS" and err.value.hint == f"did you mean {gemm!r}?"
    with pytest.raises(InputError, match="--workload must be one of"):
        load_runs(tmp_path, "steps", workload="gemmm")
    with pytest.raises(InputError, match="must come from one device, or pass --allow-mixed-devices"):
        load_runs(tmp_path, "steps", [gemm, cpu])
    both = load_runs(tmp_path, "steps", [gemm, cpu], allow_mixed_devices=True)
    assert set(both.device_name) == {"NVIDIA H200", *set(load_runs(tmp_path, "steps", [cpu]).device_name)}
    with pytest.raises(InputError, match="must select at least one finished sweep point"):
        load_runs(tmp_path, "steps", [gemm], workload="moe")


def test_run_ceilings_reads_each_runs_own_and_names_them_stale_against_the_cache(tmp_path, monkeypatch):
    import dataclasses
    import json
    import shutil

    from wlprof import ceilings as C
    from wlprof.store.selection import ceilings_of, run_ceilings

    monkeypatch.setenv("WLPROF_CACHE_DIR", str(tmp_path / "cache"))
    fixtures = Path(__file__).resolve().parents[1] / "fixtures"
    gemm = "gemm-20261129-093326-a9ee"
    shutil.copytree(fixtures / "h200" / gemm, tmp_path / "t" / gemm)
    own = ceilings_of(tmp_path / "t", gemm)
    assert own["device_name"] == "NVIDIA H200" and own["copy_gbps"] == json.loads(
        (fixtures / "h200" / gemm / "_manifest.json").read_text())["ceilings"]["copy_gbps"]
    rc = run_ceilings(tmp_path / "t", [gemm])[gemm]
    assert (rc.device_type, rc.device_name, rc.current, rc.stale) == ("cuda", "NVIDIA H200", None, [])
    assert rc.describe().startswith(f"measured {own['measured_at']} (format 1, migrated):")
    # this machine's cache holds newer H200 ceilings with a 10% faster copy: the run's are stale
    newer = dataclasses.replace(C.Ceilings.from_dict(own), copy_gbps=own["copy_gbps"] * 1.1,
                                measured_at="2026-12-01T00:00:00+00:00")
    newer.bandwidth_gbps = {**newer.bandwidth_gbps, "hbm_copy": own["copy_gbps"] * 1.1}
    C.save(newer)
    rc = run_ceilings(tmp_path / "t", [gemm])[gemm]
    assert rc.current is not None and rc.current.measured_at == "2026-12-01T00:00:00+00:00"
    assert rc.stale and any("hbm_copy" in s for s in rc.stale)


def test_describe_never_prints_a_measured_ceiling_as_zero():
    from wlprof.store.selection import _rate

    # a 2-core CPU's bfloat16 matmul: 0.0014 TFLOP/s printed '0.0' at one decimal, as if it had none
    assert _rate(0.0014, 1) == "0.0014"
    assert _rate(0.1, 1) == "0.1" and _rate(708.6, 1) == "708.6" and _rate(4326.2, 0) == "4,326"
    assert _rate(0.4, 0) == "0.4"  # a GB/s roof below 0.5 would read '0'
    assert _rate(0.0, 1) == "0.0"  # a true zero stays
    # the boundary 10 ** (1 - decimals): 1.0 at one decimal has its decimal, 5.0 keeps one too; at two
    # decimals 0.095 would read '0.10', so it takes two significant digits
    assert _rate(1.0, 1) == "1.0" and _rate(5.0, 1) == "5.0" and _rate(0.095, 2) == "0.095"

"""Ceilings: the lookup by unit and dtype, the ridge, datasheets, and the cache (a damaged file is
re-measured and replaced). `calibrate` is replaced by a constructed measurement: nothing is timed."""

from __future__ import annotations

import math

import pytest
import torch

from wlprof import ceilings, jsonio
from wlprof.ceilings import Ceilings
from wlprof.device import device_name

CPU = torch.device("cpu")


def _constructed(tflops: float) -> Ceilings:
    return Ceilings("cpu", device_name(CPU), {"float32": tflops}, tflops, 20.0, "measured", "now", "t")


@pytest.fixture
def fake_calibrate(monkeypatch, tmp_path):
    """`ceilings.calibrate` returning 1.5, 2.5, ... TFLOP/s on successive calls, counting them."""
    monkeypatch.setenv("WLPROF_CACHE_DIR", str(tmp_path))
    calls = []

    def calibrate(device, quick=False):
        calls.append((device.type, quick))
        return _constructed(0.5 + len(calls))

    monkeypatch.setattr(ceilings, "calibrate", calibrate)
    return calls


def test_first_use_measures_and_caches_then_reads_the_cache(fake_calibrate):
    path = ceilings.cache_path("cpu", device_name(CPU))
    assert not path.exists()
    c, origin = ceilings.get_ceilings(CPU, quick=True)
    assert fake_calibrate == [("cpu", True)] and c == _constructed(1.5)
    assert origin == f"measured now, cached in {path}"
    assert jsonio.loads(path.read_bytes()) == _constructed(1.5).to_dict()
    again, origin = ceilings.get_ceilings(CPU)
    assert fake_calibrate == [("cpu", True)]  # no second measurement
    assert again == c and origin == f"cache: {path}"
    # --recalibrate measures again and overwrites the cache
    new, origin = ceilings.get_ceilings(CPU, recalibrate=True)
    assert len(fake_calibrate) == 2 and new == _constructed(2.5) and origin.startswith("measured now")
    assert jsonio.loads(path.read_bytes()) == _constructed(2.5).to_dict()


@pytest.mark.parametrize("damage", [b"{not json", b"", b"[1, 2]", b'{"device_type": "cpu"}', b'"text"'])
def test_a_damaged_cache_is_remeasured_and_replaced(fake_calibrate, damage):
    path = ceilings.cache_path("cpu", device_name(CPU))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(damage)
    assert ceilings.load_cached("cpu", device_name(CPU)) is None  # not trusted
    c, origin = ceilings.get_ceilings(CPU, quick=True)
    assert fake_calibrate == [("cpu", True)]  # a new measurement ...
    assert c == _constructed(1.5) and origin == f"measured now, cached in {path}"
    assert jsonio.loads(path.read_bytes()) == c.to_dict()  # ... written over the damaged file
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file beside it
    assert ceilings.get_ceilings(CPU)[0] == c and len(fake_calibrate) == 1  # and read back next time


def test_cache_path_names_device_type_and_slug(monkeypatch, tmp_path):
    monkeypatch.setenv("WLPROF_CACHE_DIR", str(tmp_path))
    assert ceilings.cache_path("cuda", "NVIDIA H200") == tmp_path / "ceilings-cuda-nvidia-h200.json"
    monkeypatch.delenv("WLPROF_CACHE_DIR")
    assert ceilings.cache_dir() == ceilings.Path.home() / ".cache" / "wlprof"


def test_unwritable_cache_is_a_store_error(monkeypatch, tmp_path):
    from wlprof.errors import StoreError

    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("WLPROF_CACHE_DIR", str(blocker / "sub"))
    with pytest.raises(StoreError, match="cannot write the ceilings cache"):
        ceilings.save(_constructed(1.0))


def test_compute_ceiling_lookup_and_ridge():
    c = Ceilings("cuda", "NVIDIA H200", {"bfloat16": 800.0, "float32": 50.0, "tf32": 400.0}, 50.0, 4000.0,
                 "measured", "", "", datasheet=ceilings.datasheet_for("NVIDIA H200"))
    assert c.compute_tflops("matrix", "bfloat16") == 800.0
    assert c.compute_tflops("matrix", "float32") == 50.0
    assert c.compute_tflops("matrix", "float32", tf32=True) == 400.0
    assert c.compute_tflops("matrix", "bfloat16", tf32=True) == 800.0  # tf32 concerns float32 only
    assert c.compute_tflops("vector", "bfloat16") == 50.0
    assert c.compute_tflops("vector", None) == 50.0
    assert math.isnan(c.compute_tflops("matrix", "float8_e4m3fn"))
    assert math.isnan(c.compute_tflops("matrix", None))
    # ridge = 800e12 / 4000e9 = 200 FLOP/byte; vector: 50e12 / 4000e9 = 12.5
    assert c.ridge_flop_per_byte("matrix", "bfloat16") == 200.0
    assert c.ridge_flop_per_byte("vector", "float32") == 12.5
    # the H200 datasheet quotes 1,979 TFLOP/s bf16 with sparsity: 989.5 dense
    assert c.datasheet["source"].startswith("NVIDIA H200") and c.datasheet["bfloat16"] == 989.5
    assert ceilings.datasheet_for("NVIDIA H100 80GB HBM3")["copy_gbps"] == 3350.0
    assert ceilings.datasheet_for("AMD EPYC") is None
    assert Ceilings.from_dict({**c.to_dict(), "unknown_key": 1}) == c  # extra keys of a newer file ignored


def test_a_ceilings_argument_that_is_no_file_names_the_choices_and_the_missing_field(tmp_path):
    from wlprof.ceilings import load_file
    from wlprof.errors import InputError

    with pytest.raises(InputError) as err:  # was: 'must be a readable ceilings JSON file (No such file ...)'
        load_file(tmp_path / "curent")
    assert err.value.rule == "must be run, current, datasheet or a readable ceilings JSON file (No such file or directory)"
    with pytest.raises(InputError) as err:
        load_file("curent")
    assert err.value.hint == "did you mean 'current'?"
    (tmp_path / "other.json").write_text('{"hello": 1}')
    with pytest.raises(InputError) as err:  # was: "... written by wlprof ('device_type')"
        load_file(tmp_path / "other.json")
    assert err.value.rule == "must be a ceilings JSON file written by wlprof (it has no 'device_type' field)"


def test_a_cache_folder_that_cannot_be_written_is_named_before_anything_is_measured(tmp_path, monkeypatch, cli):
    # it was found after the calibration (a StoreError, exit 1, an empty traces folder left behind)
    from wlprof.errors import InputError

    (tmp_path / "afile").write_text("x")
    monkeypatch.setenv("WLPROF_CACHE_DIR", str(tmp_path / "afile"))
    monkeypatch.setattr(ceilings, "calibrate", lambda *a, **k: pytest.fail("the ceilings were measured"))
    with pytest.raises(InputError) as info:
        ceilings.get_ceilings(CPU)
    assert info.value.arg == "WLPROF_CACHE_DIR" and info.value.value == str(tmp_path / "afile")
    res = cli("run", "gemm", "--shapes", "8x8x8", "--device", "cpu", "--traces", tmp_path / "traces")
    assert res.exit_code == 2 and "error: WLPROF_CACHE_DIR must be a folder wlprof can write the ceilings " \
        "cache into, not a file" in res.output, res.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]
    monkeypatch.setenv("WLPROF_CACHE_DIR", str(tmp_path / "cache"))
    ceilings.check_cache_writable()  # a folder to be made is fine: made, nothing else in it
    assert list((tmp_path / "cache").iterdir()) == []

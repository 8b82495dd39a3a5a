"""End to end on the CPU through the real CLI: run, ls, show, sweep; and bad input."""

from __future__ import annotations

import gzip
import json
import os
import re
from pathlib import Path

import pandas as pd
import pytest
import torch
from conftest import HUNG_S, files_under

import wlprof
from wlprof import ceilings, schema
from wlprof.ceilings import Ceilings
from wlprof.device import device_name

FAST = ["--steps", "2", "--warmup", "1", "--reps", "3", "-q"]

# Ceilings constructed for the gemm run, so its roofline columns can be worked out by hand:
# 0.04 TFLOP/s (matrix fp32, and vector), 10 GB/s: ridge = 0.04e12 / 10e9 = 4 FLOP/byte.
CONSTRUCTED = Ceilings("cpu", device_name(torch.device("cpu")), {"float32": 0.04}, 0.04, 10.0,
                       "constructed by tests/integration/test_cli.py", "", "")


@pytest.fixture(scope="module")
def gemm_run(tmp_path_factory, cli):
    cache = tmp_path_factory.mktemp("constructed-ceilings")
    out = tmp_path_factory.mktemp("traces")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("WLPROF_CACHE_DIR", str(cache))
        ceilings.save(CONSTRUCTED)
        res = cli("run", "gemm", "--shapes", "64x32x48,4x128x96", "--traces", out, *FAST)
    assert res.exit_code == 0, res.output
    return out, res


def test_run_gemm_writes_the_trace_contract(gemm_run):
    out, res = gemm_run
    assert "balanced" not in res.output or "64x32x48" in res.output
    df = pd.read_parquet(out)  # one read over the traces folder: every kernel, params as columns
    assert set(df.columns) == {c.name for c in schema.columns("kernels")}
    assert set(df.variant) == {"balanced 64x32x48", "medium-skinny 4x128x96"}
    assert df.m.dtype.kind == "i" and set(df.m) == {64, 4}
    # fp32 on the CPU: 2*64*32*48 = 196,608 and 2*4*128*96 = 98,304 FLOPs per step
    per_step = df.groupby(["variant", "step"]).flops.sum().groupby("variant").first()
    assert per_step["balanced 64x32x48"] == 196_608
    assert per_step["medium-skinny 4x128x96"] == 98_304
    # bytes 4*(64*32 + 32*48 + 64*48) = 4*(2048 + 1536 + 3072) = 26,624
    assert df[df.m == 64].groupby("step")["bytes"].sum().iloc[0] == 26_624
    assert (df.device_type == "cpu").all() and (df.kind == "cpu_op").all() and set(df.op_name) == {"aten::mm"}
    assert res.output.count("ceilings: cache:") == 1  # the constructed ceilings, not a measurement
    # The roofline against CONSTRUCTED, per aten::mm row:
    #   64x32x48: 196,608 FLOPs / 26,624 bytes = 7.3846 FLOP/byte, past the ridge (4): compute-bound,
    #             roof = max(196,608 / 0.04e6, 26,624 / 10e3) = max(4.9152, 2.6624) = 4.9152 us
    #   4x128x96: 98,304 FLOPs / 4*(4*128 + 128*96 + 4*96) = 52,736 bytes = 1.8641 FLOP/byte: memory-bound,
    #             roof = max(98,304 / 0.04e6, 52,736 / 10e3) = max(2.4576, 5.2736) = 5.2736 us
    want = {64: (196_608, 26_624, "compute", 4.9152), 4: (98_304, 52_736, "memory", 5.2736)}
    for m, (flops, nbytes, bound, roof) in want.items():
        rows = df[df.m == m]
        assert (rows.flops == flops).all() and (rows["bytes"] == nbytes).all()
        assert (rows.bound == bound).all(), (m, set(rows.bound))
        assert rows.roofline_us.tolist() == pytest.approx([roof] * len(rows), rel=1e-12)
        assert rows.intensity_flop_per_byte.tolist() == pytest.approx([flops / nbytes] * len(rows))
        assert (rows.ceiling_tflops == 0.04).all() and (rows.ceiling_gbps == 10.0).all()
        assert rows.ridge_flop_per_byte.tolist() == pytest.approx([4.0] * len(rows))
        # achieved rates from each row's own duration: FLOPs / us / 1e6 = TFLOP/s, bytes / us / 1e3 = GB/s
        assert rows.achieved_tflops.tolist() == pytest.approx((flops / rows.dur_us / 1e6).tolist())
        assert rows.achieved_gbps.tolist() == pytest.approx((nbytes / rows.dur_us / 1e3).tolist())
        assert rows.roofline_fraction.tolist() == pytest.approx((roof / rows.dur_us).tolist())
    run_dir = next(p for p in out.iterdir() if p.is_dir())
    manifest = json.loads((run_dir / "_manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["schema_version"] == schema.SCHEMA_VERSION
    assert manifest["versions"]["torch"]
    recorded = dict(manifest["ceilings"])
    assert recorded.pop("origin").startswith("cache: ") and recorded == CONSTRUCTED.to_dict()
    assert manifest["command"].startswith("wlprof ")  # CliRunner: argv is pytest's; see the subprocess test
    assert [p["status"] for p in manifest["points"]] == ["ok", "ok"]
    steps = pd.read_parquet(run_dir / "_steps")
    assert len(steps) == 2 and steps.latency_us.gt(0).all() and steps.back_to_back_us.gt(0).all()
    # a step is one aten::mm: its roofline and bound are that row's (compute 4.9152 us, memory 5.2736 us)
    by_m = steps.set_index("m")
    assert by_m.bound.to_dict() == {64: "compute", 4: "memory"}
    assert by_m.roofline_us.to_dict() == pytest.approx({64: 4.9152, 4: 5.2736})
    assert by_m.flops.to_dict() == {64: 196_608, 4: 98_304}
    assert len(steps.latency_samples_us.iloc[0]) == 3  # --reps 3: raw samples kept
    assert steps.graph_us.isna().all() and steps.graph_error.str.contains("CUDA").all()
    ops = pd.read_parquet(run_dir / "_ops")
    assert ops.flops.sum() == df.flops.sum()
    # the enriched Chrome trace: kernels (CPU: working ops) carry wlprof's numbers in args
    chrome = manifest["points"][0]["files"]["chrome"]
    doc = json.loads(gzip.decompress((run_dir / chrome).read_bytes()))
    mm = [e for e in doc["traceEvents"] if e.get("name") == "aten::mm" and e.get("cat") == "cpu_op"]
    assert mm and all(e["args"]["flops"] == 196_608 for e in mm)
    assert all({"bytes", "achieved TFLOP/s", "achieved GB/s", "bound", "roof"} <= set(e["args"]) for e in mm)
    assert doc["wlprof"]["run_id"] == manifest["run_id"]
    # no temporary files left behind
    assert not [f for f in files_under(out) if ".tmp" in f or "/.raw" in f]


def test_ls_and_show(gemm_run, cli):
    out, _ = gemm_run
    res = cli("ls", "--traces", out)
    assert res.exit_code == 0 and "complete" in res.output and "2/2" in res.output, res.output
    run_id = next(p.name for p in out.iterdir() if p.is_dir())
    res = cli("show", run_id, "--traces", out)
    assert res.exit_code == 0, res.output
    flat = " ".join(res.output.split())
    assert "aten::mm" in res.output and re.search(r"kernels by mean time per step, over \d+ profiled step", flat)
    res = cli("show", run_id, "--traces", out, "--variant", "nope")
    assert res.exit_code == 2 and "--variant" in res.output


@pytest.mark.slow
def test_sweep_study_file_and_its_errors(tmp_path, cli, cpu_ceilings):
    study = tmp_path / "s.toml"
    study.write_text('[study]\nworkload = "mlp"\n[params]\nbatch = [2, 3]\nd_model = 16\nd_ff = 32\n'
                     '[capture]\nprofiled_steps = 2\nlatency_reps = 3\nwarmup = 1\n')
    out = tmp_path / "t"
    res = cli("sweep", study, "--traces", out, "-q")
    assert res.exit_code == 0, res.output
    df = pd.read_parquet(out)
    assert sorted(df.batch.unique()) == [2, 3] and set(df.region) == {"mlp/fc1", "mlp/act", "mlp/fc2"}
    # fc1 2*2*16*32 = 2,048; gelu 20*2*32 = 1,280; fc2 2,048: 5,376 per step at batch 2
    assert df[df.batch == 2].groupby("step").flops.sum().iloc[0] == 5_376
    bad = tmp_path / "bad.toml"
    bad.write_text('[study]\nworkload = "mlp"\n[params]\nbatch = [0]\n')
    res = cli("sweep", bad, "--traces", tmp_path / "t2")
    assert res.exit_code == 2 and "params.batch" in res.output and "0" in res.output
    assert not (tmp_path / "t2").exists()
    broken = tmp_path / "broken.toml"
    broken.write_text("[study\nworkload=")
    res = cli("sweep", broken, "--traces", tmp_path / "t3")
    assert res.exit_code == 2 and "TOML" in res.output


def test_sweep_a_study_with_toml_floats_records_them_as_numbers(tmp_path, cli, cpu_ceilings):
    # a TOML float (a capture's min_batch_ms, as the committed studies' [cpu.capture] write it) is read keeping
    # its text for messages; the manifest and the tables hold the number
    study = tmp_path / "f.toml"
    study.write_text('[study]\nworkload = "gemm"\n[params]\nshapes = "8x16x32"\n'
                     '[capture]\nprofiled_steps = 2\nlatency_reps = 3\nwarmup = 1\nmin_batch_ms = 1.5\n')
    out = tmp_path / "t"
    res = cli("sweep", study, "--traces", out, "-q")
    assert res.exit_code == 0, res.output
    (manifest,) = out.glob("*/_manifest.json")
    assert json.loads(manifest.read_text())["capture"]["min_batch_ms"] == 1.5
    # 2*8*16*32 = 8,192 FLOPs per GEMM
    assert set(pd.read_parquet(out).query("op_name == 'aten::mm'").flops) == {8_192}


@pytest.mark.parametrize(("args", "needle"), [
    (["run", "nosuch"], "WORKLOAD must be one of"),
    (["run", "mlp", "--batch", "-1"], "--batch must be a positive integer (got '-1')"),
    (["run", "mlp", "--batch", "1,x"], "--batch must be a positive integer (got 'x')"),
    (["run", "mlp", "--batch", "4", "--dtype", "int8"], "--dtype must be one of"),
    (["run", "mlp", "--batch", "4", "--device", "cuda"], "--device names a CUDA device but this machine has none"),
    (["run", "mlp", "--batch", "4", "--device", "tpu"], "--device must be"),
    (["run", "mlp", "--batch", "4", "--activation", "tanh"], "--activation must be one of gelu, relu, silu"),
    (["run", "gemm", "--shapes", "2x3"], "--shapes must be shapes MxKxN"),
    (["run", "gemm", "--shapes", "2x0x3"], "--shapes must be shapes MxKxN of positive integers, comma-separated (e.g. 2048x2048x2560) (got '2x0x3')"),
    (["run", "gemm", "--shapes", "2x2x2", "--steps", "0"], "--steps must be at least 1 (got 0)"),
    # past 64 bits the manifest could not be written (a traceback, a staging folder left)
    (["run", "gemm", "--shapes", "2x2x2", "--warmup", "99999999999999999999999"],
     "--warmup must be at most 1,000,000 (got 99999999999999999999999)"),
    (["run", "gemm", "--shapes", "2x2x2", "--reps", "1000000000000"], "--reps must be at most 1,000,000 (got 1000000000000)"),
    (["run", "gemm", "--shapes", "2x2x2", "--steps", "10001"], "--steps must be at most 10,000 (got 10001)"),
    (["run", "elementwise", "--ops", "relu,tanh"], "--ops must be one of"),
    (["run", "gemm", "--shapes", "2x2x2,2x2x2"], "must not repeat a sweep point"),
    (["run", "gemm", "--shapes", "1x1x1000000000000"], "--shapes must fit in host memory"),
    # the value given, not the point's label (got 'concentrated / loop')
    (["run", "moe", "--tokens", "10000000000"], "; lower --tokens (got '10000000000')"),
])
def test_bad_input_names_argument_rule_value_and_writes_nothing(tmp_path, cli, args, needle):
    out = tmp_path / "traces"
    res = cli(*args, "--traces", out) if args[1] != "nosuch" else cli(*args)
    assert res.exit_code == 2, res.output
    assert needle in res.output
    assert files_under(out) == []


def test_unwritable_output_folder(tmp_path, cli):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    res = cli("run", "gemm", "--shapes", "2x2x2", "--traces", blocker, *FAST)
    assert res.exit_code == 2 and "--traces" in res.output and str(blocker) in res.output
    assert blocker.read_text() == "not a folder"
    if os.geteuid() != 0:  # root ignores permission bits
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o500)
        res = cli("run", "gemm", "--shapes", "2x2x2", "--traces", ro, *FAST)
        assert res.exit_code == 2 and "--traces" in res.output


def test_show_refuses_a_run_id_that_escapes_the_traces_folder(tmp_path, cli):
    res = cli("show", "../etc", "--traces", tmp_path)
    assert res.exit_code == 2 and "RUN_ID" in res.output


@pytest.mark.slow
def test_entry_point_in_a_subprocess_records_the_command(tmp_path, cpu_ceilings):
    import subprocess
    import sys

    out = tmp_path / "traces"
    env = dict(os.environ)  # WLPROF_CACHE_DIR: the session's cache, where cpu_ceilings saved the CPU's
    cmd = [sys.executable, "-m", "wlprof.cli.main", "run", "elementwise", "--ops", "relu,dot", "--numel", "4096",
           "--traces", str(out), *FAST]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=HUNG_S)
    assert proc.returncode == 0, proc.stderr
    assert "relu n=4096" in proc.stdout and "read_parquet" in proc.stdout
    run_dir = next(out.iterdir())
    manifest = json.loads((run_dir / "_manifest.json").read_text())
    recorded = dict(manifest["ceilings"])
    assert recorded.pop("origin").startswith("cache: ")  # measured once for the session by cpu_ceilings
    assert recorded == cpu_ceilings.to_dict() and recorded["source"] == "measured"
    assert manifest["command"] == f"wlprof run elementwise --ops relu,dot --numel 4096 --traces {out} " + " ".join(FAST)
    df = pd.read_parquet(out)
    # relu: 4096 FLOPs (one compare each) over 4*4096 + 4*4096 = 32,768 bytes: intensity 1/8 in fp32
    relu = df[df.op == "relu"].groupby("step")[["flops", "bytes"]].sum().iloc[0]
    assert relu.flops == 4096 and relu["bytes"] == 32_768


@pytest.mark.slow
def test_binary_micro_kernels_mul_and_add(tmp_path, cli, cpu_ceilings):
    out = tmp_path / "traces"
    res = cli("run", "elementwise", "--ops", "mul,add", "--numel", "1000", "--traces", out, *FAST)
    assert res.exit_code == 0, res.output
    df = pd.read_parquet(out)
    for op, aten in (("mul", "aten::mul"), ("add", "aten::add")):
        step = df[(df.op == op) & (df.step >= 0)].groupby("step")
        # 1000 FLOPs (one per element) over two fp32 inputs read and one output written:
        # 3 * 4 * 1000 = 12,000 bytes, intensity 1/12
        assert (step.flops.sum() == 1000).all() and (step["bytes"].sum() == 12_000).all()
        assert set(df[df.op == op].op_name) == {aten}


def test_mixed_precision_micro_kernels_cast_and_add_mixed(tmp_path, cli, cpu_ceilings):
    out = tmp_path / "traces"
    res = cli("run", "elementwise", "--ops", "cast,add_mixed", "--numel", "1000", "--dtype", "bfloat16",
              "--traces", out, *FAST)
    assert res.exit_code == 0, res.output
    ops = wlprof.load(out, table="ops")
    ops = ops[ops.step == ops.step.max()]
    cast = ops[ops.op == "cast"]
    # bfloat16 -> float32 and back: two copies, each 1000 elements read at 2 bytes and written at 4 or the
    # reverse: 6,000 bytes each, no FLOPs
    assert sorted(cast.op_input_types) == ['["c10::BFloat16","float","Scalar"]', '["float","c10::BFloat16","Scalar"]']
    assert cast["bytes"].tolist() == [6_000, 6_000] and (cast.flops == 0).all()
    (add,) = ops[(ops.op == "add_mixed") & (ops.op_name == "aten::add")].itertuples()
    # float32 + bfloat16 -> float32: 1000 FLOPs, 4 + 2 bytes read and 4 written per element
    assert (add.op_input_types, add.flops, add.bytes) == ('["float","c10::BFloat16","Scalar"]', 1000, 10_000)


def test_a_report_refused_after_its_folder_check_leaves_no_empty_folder(tmp_path, cli):
    empty = tmp_path / "empty"
    empty.mkdir()
    res = cli("report", "--traces", empty, "--out", tmp_path / "rep")
    assert res.exit_code == 2 and "RUNS must select at least one finished sweep point" in res.output
    assert not (tmp_path / "rep").exists()
    (tmp_path / "mine").mkdir()  # a folder the user made stays
    res = cli("report", "--traces", empty, "--out", tmp_path / "mine")
    assert res.exit_code == 2 and (tmp_path / "mine").is_dir()


def test_ls_of_a_folder_that_does_not_exist_says_so(tmp_path, cli):
    res = cli("ls", "--traces", tmp_path / "nope")
    assert res.exit_code == 2 and "--traces must be an existing traces folder" in res.output


def test_ls_says_whether_a_run_was_generated_or_ingested_and_from_what(tmp_path, cli):
    import shutil

    from conftest import FIXTURES, h200_run

    gemm = h200_run("gemm")
    shutil.copytree(gemm, tmp_path / gemm.name)  # `wlprof sweep` of a study file
    trace = FIXTURES / "h200_zoo3" / "ddp.pt.trace.json.gz"
    assert cli("ingest", trace, "--traces", tmp_path, "-q", "--name", "ddp").exit_code == 0
    res = cli("ls", "--traces", tmp_path, "--wide")
    assert res.exit_code == 0, res.output
    rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:-1]]
            for line in res.output.splitlines() if line.startswith("│")}
    head = [c.strip() for c in next(x for x in res.output.splitlines() if x.startswith("┃")).split("┃")[2:-1]]
    ingested = next(r for r in rows if r.startswith("ddp-"))
    got = {run: dict(zip(head, cells, strict=True)) for run, cells in rows.items()}
    assert (got[gemm.name]["source"], got[gemm.name]["from"]) == ("generated", "h200_fixture_gemm.toml")
    assert (got[ingested]["source"], got[ingested]["from"]) == ("ingested", "ddp.pt.trace.json.gz")
    assert "source" in cli("ls", "--traces", tmp_path).output  # shown at the default width too


def test_show_without_a_run_id_shows_the_folder_s_only_run_and_refuses_a_choice(tmp_path, cli):
    trace = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "public" / "hta_2023_simple_add_ext_eq_corr.json.gz"
    out = tmp_path / "t"
    assert cli("ingest", trace, "--traces", out, "-q").exit_code == 0
    (run,) = [p.name for p in out.iterdir() if p.is_dir()]
    res = cli("show", "--traces", out)
    assert res.exit_code == 0, res.output
    assert res.output.split()[0] == run
    assert cli("ingest", trace, "--traces", out, "-q").exit_code == 0
    res = cli("show", "--traces", out)
    assert res.exit_code == 2
    assert f"RUN_ID is required where {out}/ holds 2 runs" in " ".join(res.output.split())

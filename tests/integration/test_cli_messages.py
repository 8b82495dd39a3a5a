"""Every option says what it does and its default; usage errors are one `error:` line naming the argument,
the rule and the value, with a close match where there is one."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import HUNG_S, copy_h200_runs
from typer.main import get_command
from typer.testing import CliRunner

from wlprof.cli.main import app
from wlprof.cli.usage import close_option

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args], terminal_width=200)


def _commands(cmd, path):
    if hasattr(cmd, "commands"):
        for name, sub in sorted(cmd.commands.items()):
            yield from _commands(sub, [*path, name])
    else:
        yield " ".join(path), cmd


PROFILE = str(Path(__file__).resolve().parents[2] / "benchmarks" / "profiles" / "h200")
COMMANDS = list(_commands(get_command(app), ["wlprof"]))


@pytest.mark.parametrize("path,cmd", COMMANDS, ids=[p for p, _ in COMMANDS])
def test_every_option_has_help_and_a_shown_default(path, cmd):
    for p in cmd.params:
        assert p.help, f"{path} {p.opts}: no help text"
        if p.param_type_name == "argument" and p.required:
            continue
        shown_by_typer = p.default is not None and not getattr(p, "is_flag", False) and p.show_default
        assert shown_by_typer or "Default:" in p.help or "required" in p.help, \
            f"{path} {p.opts}: no default shown ({p.help!r})"


@pytest.mark.parametrize("path,cmd", COMMANDS[:3] + [c for c in COMMANDS if c[0] == "wlprof run moe"],
                         ids=lambda x: x if isinstance(x, str) else "")
def test_help_shows_no_value_type_for_flags_and_ends_with_examples(path, cmd):
    res = invoke(*path.split()[1:], "--help")
    assert res.exit_code == 0, res.output
    assert "<bool>" not in res.output
    assert "Examples:" in res.output


@pytest.mark.parametrize("path,cmd", [c for c in COMMANDS if re.search(r"\[[a-z_]+\]", c[1].help or "")],
                         ids=lambda x: x if isinstance(x, str) else "")
def test_help_keeps_the_bracketed_words_of_its_text(path, cmd):
    # rich took '[cpu]' for markup: 'the scale its  section gives (the GPU sizes stay in )'
    res = invoke(*path.split()[1:], "--help")
    assert res.exit_code == 0, res.output
    words = re.findall(r"\\?(\[[a-z_]+\])", cmd.help)
    assert words and all(w in res.output for w in words), (words, res.output)


@pytest.mark.parametrize("args,needle", [
    (["run", "gemm", "--bogus"], "error: --bogus is not an option of `wlprof run gemm` (options: --shapes"),
    (["run", "gemm", "--step", "3"], "did you mean --steps?"),
    (["run", "moe", "--top_k", "2"], "did you mean --top-k?"),
    (["run", "gemm", "--batch", "4"], "--batch is an option of wlprof run layers, wlprof run mlp"),
    # a group listed its options as "(options: ; see ...)": the option belongs to a command not yet named
    (["run", "--shapes", "1x1x1"], "error: --shapes is not an option of `wlprof run`: name a command first "
     "(`wlprof run COMMAND [OPTIONS]`, COMMAND one of elementwise, gemm, gnn, halo, layers, mlp, moe, optim; see "
     "`wlprof run --help`); --shapes is an option of wlprof run gemm"),
    (["--traces", "x", "ls"], "error: --traces is not an option of `wlprof`: name a command first (`wlprof COMMAND"),
    (["report", "--outt", "x"], "did you mean --out?"),
    (["show", "x", "--top", "abc"], "error: --top must be an integer (got 'abc')"),
    (["show", "x", "y"], "error: got unexpected extra argument(s) (y) (see `wlprof show --help`)"),
    (["rn"], "error: COMMAND must be one of"),
    (["run", "gem"], "did you mean 'gemm'?"),
    (["run", "gemm", "--dtype", "flaot32"], "did you mean 'float32'?"),
    (["predict", "--profile", PROFILE, "--spec", "mlp batch=0"],
     "error: --spec's batch must be a positive integer (got 0)"),
    (["predict", "--profile", PROFILE],
     "error: --profile takes exactly one of --test RUN..., --spec SPEC and --trace FILE (got 'none of them')"),
    # --dtype with --trace was ignored, a negative --top dropped the last rows (Python's head(-1))
    (["predict", "--profile", PROFILE, "--trace", "x.json", "--dtype", "float16"],
     "error: --dtype applies to --spec (a trace or a run keeps its own dtypes) (got 'float16')"),
    (["predict", "--profile", PROFILE, "--spec", "mlp batch=2", "--top", "-1"],
     "error: --top must be 0 (all) or a positive number (got -1)"),
    (["compare", "a", "b", "--top", "-2"], "error: --top must be 0 (all) or a positive number (got -2)"),
    # an option of the other mode was ignored: the scores printed as if it had not been given
    (["predict", "--train", "a", "--test", "b", "--scale", "batch=2"],
     "error: --scale applies only with --profile and --trace (it rescales the trace's shapes) (got 'batch=2')"),
    (["predict", "--test", "b", "--top", "15"],
     "error: --top applies only with --profile and --spec or --trace (the op rows of their breakdown) (got 15)"),
    (["predict", "--test", "b", "--refit"],
     "error: --refit applies only with --profile (it fits the profile's runs again) (got true)"),
    (["predict", "--test", "b", "--dtype", "float16"],
     "error: --dtype applies only with --profile and --spec (a run keeps its own dtypes) (got 'float16')"),
    (["predict", "--profile", PROFILE, "--spec", "mlp batch=2", "--train", "a"],
     "error: --train does not apply with --profile, --spec or --trace (they predict from the profile) (got a)"),
    (["predict", "--profile", PROFILE, "--spec", "mlp batch=2", "--train-traces", "offline"],
     "error: --train-traces does not apply with --profile, --spec or --trace (they predict from the profile) "
     "(got 'offline')"),
    (["predict", "--profile", PROFILE, "--test", "b", "--allow-mixed-devices"],
     "error: --allow-mixed-devices does not apply with --profile, --spec or --trace (a profile is of one device) "
     "(got true)"),
    # a --dtype the spec path lacks was blamed on --spec, which held no dtype
    (["predict", "--profile", PROFILE, "--spec", "mlp batch=2", "--dtype", "float8"],
     "error: --dtype must be one of bfloat16, bf16, float16, fp16, float32, fp32 (got 'float8')"),
    (["predict", "--profile", PROFILE, "--spec", "mlp batch=2 dtype=int8"],
     "error: --spec dtype must be one of bfloat16, bf16, float16, fp16, float32, fp32 (got 'int8')"),
    # the unknown workload of a --spec was named WORKLOAD, an argument predict does not have
    (["predict", "--profile", PROFILE, "--spec", "foo"],
     "error: --spec must start with a workload, one of gemm, mlp, elementwise, moe, gnn, halo, layers, optim (got 'foo')"),
    (["predict", "--profile", PROFILE, "--spec", "mop tokens=4"], "(got 'mop'); did you mean 'moe'?"),
    # the routing was drawn on this CPU without a check: numpy's ArrayMemoryError (7.28 TiB) and a traceback
    (["predict", "--profile", PROFILE, "--spec", "moe tokens=1000000000000"],
     "error: --spec must be a configuration whose index data fits in this machine's memory to be listed: point "
     "'concentrated / loop' draws about"),
    (["predict", "--profile", PROFILE, "--test", "b", "--scale", "batch=2"],
     "error: --scale applies only with --trace (it rescales the trace's shapes) (got 'batch=2')"),
    (["predict", "--profile", PROFILE, "--test", "b", "--top", "3"],
     "error: --top applies only with --spec or --trace (the op rows of their breakdown) (got 3)"),
    (["run", "moe", "--routing", "dispresed"], "did you mean 'dispersed'?"),
    (["run", "gnn", "--graph", "rmta"], "did you mean 'rmat'?"),
    (["run", "gemm", "--device", "cdua"], "did you mean 'cuda'?"),
    (["sweep", "workloads/gem_same_flops.toml"], "did you mean 'workloads/gemm_same_flops.toml'?"),
    # a folder got 'must be an existing study file' and, for a folder named *.toml, 'did you mean' itself
    (["sweep", "workloads"], "error: STUDY_FILE must be a study file (TOML), not a folder (got 'workloads'); "
                             "its study files: workloads/*.toml"),
    (["place", "workloads/mixes", "--gpus", "2"],
     "error: MIX_FILE must be a mix file (TOML), not a folder (got 'workloads/mixes')"),
    (["report", "--workload", "mo"], "--workload must be one of elementwise, gemm, gnn, halo, ingest, layers, mlp, moe, optim (got 'mo')"),
])
def test_usage_errors_are_one_line_with_a_close_match(args, needle, tmp_path):
    res = invoke(*args, *(["--traces", tmp_path] if args[0] in ("report", "show") else []))
    assert res.exit_code == 2, res.output
    assert needle in res.output, res.output
    assert len([line for line in res.output.splitlines() if line.strip()]) == 1, res.output
    assert "Traceback" not in res.output and "╭" not in res.output


def test_a_folder_named_like_a_study_file_is_not_offered_as_its_own_match(tmp_path):
    (tmp_path / "s.toml").mkdir()
    (tmp_path / "s.toml" / "pyproject.toml").write_text("[project]\n")  # no study: no 'its study files' hint
    res = invoke("sweep", tmp_path / "s.toml")
    assert res.exit_code == 2
    assert res.output.strip() == f"error: STUDY_FILE must be a study file (TOML), not a folder (got '{tmp_path / 's.toml'}')"


def test_a_far_option_gets_no_wrong_suggestion():
    res = invoke("report", "--bogus")
    assert "did you mean" not in res.output  # click's own picked --out
    assert close_option("--bogus", ["--out", "-o", "--traces", "--workload"]) is None
    assert close_option("--trace", ["--traces", "--out"]) == "--traces"
    assert close_option("--Top_K", ["--top-k"]) == "--top-k"


def test_a_far_study_file_gets_no_wrong_suggestion():
    # the '.toml' every study file shares made any short name close to one: 'nope.toml' got 'gnn_pyg.toml'
    studies = Path(__file__).resolve().parents[2] / "workloads"
    res = invoke("sweep", studies / "nope.toml")
    assert res.exit_code == 2 and "did you mean" not in res.output, res.output
    res = invoke("sweep", studies / "moe_zpf.toml")
    assert f"did you mean {str(studies / 'moe_zipf.toml')!r}?" in res.output, res.output
    res = invoke("sweep", studies / "moe_zipf")
    assert f"did you mean {str(studies / 'moe_zipf.toml')!r}?" in res.output, res.output


def test_dtype_error_lists_what_help_lists():
    res = invoke("run", "gemm", "--dtype", "fp8")
    assert res.exit_code == 2
    listed = res.output.split("must be one of ", 1)[1].split(" (also")[0]
    assert listed == "bfloat16, float16, float32, float64"
    help_text = " ".join(invoke("run", "gemm", "--help").output.split())
    assert "bfloat16, float16, float32 or float64" in help_text


def test_predict_names_a_missing_test_run_first(tmp_path):
    copy_h200_runs(tmp_path)
    res = invoke("predict", "--test", "no-such-run", "--traces", tmp_path)
    assert res.exit_code == 2
    assert "error: --test must name runs in" in res.output and "(got 'no-such-run')" in res.output
    near = sorted(p.name for p in tmp_path.iterdir())[0]
    res = invoke("predict", "--test", near[:-1] + "x", "--traces", tmp_path)
    assert f"did you mean {near!r}?" in res.output


def test_an_output_under_a_file_is_named_as_given_and_as_what_it_is(tmp_path):
    (tmp_path / "afile").write_text("x")
    res = invoke("roofline", "RUN", "-o", tmp_path / "afile" / "r.png", "--traces", tmp_path)
    # was: "--out must be a folder wlprof can write traces into, not a file (got '.../afile')"
    assert res.exit_code == 2
    assert (f"error: --out must be a .png file in a folder wlprof can write into ('{tmp_path / 'afile'}' is a "
            f"file) (got '{tmp_path / 'afile' / 'r.png'}')") in res.output
    res = invoke("report", "--out", tmp_path / "afile", "--traces", tmp_path)
    assert res.exit_code == 2
    assert (f"error: --out must be a folder wlprof can write the report into, not a file "
            f"(got '{tmp_path / 'afile'}')") in res.output
    assert (tmp_path / "afile").read_text() == "x" and sorted(p.name for p in tmp_path.iterdir()) == ["afile"]


@pytest.mark.parametrize("args,rule", [
    (["predict", "--profile", PROFILE, "--spec", "gemm shapes=8x8x8", "--out", "{file}/x.md"],
     "--out must be a Markdown file in a folder wlprof can write into ('{file}' is a file) (got '{file}/x.md')"),
    (["predict", "--profile", PROFILE, "--spec", "gemm shapes=8x8x8", "--out", "{dir}"],
     "--out must be a Markdown file, not a folder (got '{dir}')"),
    (["calibrate", "--show", "--out", "{dir}"], "--out must be a JSON file, not a folder (got '{dir}')"),
    (["place", "workloads/mixes/mix_dense.toml", "--gpus", "2", "--out", "{file}/p"],
     "--out must be a folder wlprof can write into ('{file}' is a file) (got '{file}/p')"),
    (["profile", "--device", "cpu", "-o", "{file}/p", "--budget-minutes", "0.1"],
     "--out must be a folder wlprof can write into ('{file}' is a file) (got '{file}/p')"),
    (["profile", "--device", "cpu", "-o", "{file}", "--budget-minutes", "0.1"],
     "--out must be a new or empty folder (it names a file) (got '{file}')"),
], ids=["predict-under-file", "predict-folder", "calibrate-folder", "place-under-file", "profile-under-file",
        "profile-file"])
def test_an_output_that_cannot_be_written_is_refused_before_any_work(args, rule, tmp_path, monkeypatch):
    # each raised NotADirectoryError or IsADirectoryError with a traceback (predict only after its fit)
    monkeypatch.chdir(Path(__file__).resolve().parents[2])
    (tmp_path / "afile").write_text("x")
    (tmp_path / "adir").mkdir()
    fill = {"file": str(tmp_path / "afile"), "dir": str(tmp_path / "adir")}
    res = invoke(*[a.format(**fill) for a in args])
    assert res.exit_code == 2, res.output
    assert "error: " + rule.format(**fill) in " ".join(res.output.split()), res.output
    assert (tmp_path / "afile").read_text() == "x" and sorted(p.name for p in tmp_path.rglob("*")) == ["adir", "afile"]


@pytest.mark.parametrize("command", ["predict", "place"])
def test_help_examples_name_the_shipped_profile(command):
    # the examples named profiles/h200, which no checkout has (the shipped one is benchmarks/profiles/h200)
    res = invoke(command, "--help")
    named = re.findall(r"--profile (\S+)", res.output)
    root = Path(__file__).resolve().parents[2]
    assert named and all((root / p / "profile.json").is_file() for p in named), named


def test_the_docs_command_lines_name_the_shipped_profile_or_one_they_write():
    # docs/placement.md named profiles/h200, which no checkout has: `place` then refused it
    root = Path(__file__).resolve().parents[2]
    for doc in [root / "README.md", *sorted((root / "docs").glob("*.md"))]:
        text = doc.read_text()
        written = set(re.findall(r"wlprof profile [^\n]*?-o (\S+)", text))
        for line in text.splitlines():
            if not line.lstrip().startswith("wlprof "):
                continue
            for named in re.findall(r"--profile (\S+)", line):
                assert named in written or (root / named / "profile.json").is_file(), (doc.name, line)


def test_top_level_help_lists_run_first_and_each_summary_as_one_paragraph():
    res = runner.invoke(app, ["--help"], terminal_width=100)
    listed = re.findall(r"^│ (\w+) ", res.output, flags=re.M)
    assert listed == ["run", "sweep", "ls", "show", "compare", "report", "roofline", "calibrate", "ingest",
                      "overlap", "predict", "profile", "place"]
    flat = " ".join(res.output.replace("│", " ").split())
    # the docstring's line break inside roofline's summary used to start a new line mid-sentence
    assert any("roof per dtype) with every op call" in line for line in res.output.splitlines())
    assert "with --profile, predict runs, a --spec configuration or a --trace never profiled" in flat


def test_an_unknown_profile_section_is_named_as_its_option_with_a_close_match(tmp_path):
    res = invoke("profile", "--device", "cpu", "-o", tmp_path / "p", "--section", "gemm", "--section", "moe")
    # was: "--sections must be sections of the grid (...) (got ['gemm'])", from the --help's own example
    assert res.exit_code == 2
    assert ("error: --section must be sections of the grid (gemm nn, gemm nt, gemm linear, elementwise, gnn, mlp, "
            "moe) (got 'gemm'); did you mean 'gemm nn' or 'gemm nt' or 'gemm linear'?") in res.output
    assert not (tmp_path / "p").exists()
    assert "--section 'gemm nn' --section moe" in invoke("profile", "--help").output


def test_overlap_offers_the_closest_variant_as_show_does(tmp_path):
    copy_h200_runs(tmp_path)
    moe = next(p.name for p in tmp_path.iterdir() if p.name.startswith("moe-"))
    for cmd in ("show", "overlap"):
        res = invoke(cmd, moe, "--variant", "dispersed / grouepd", "--traces", tmp_path)
        assert res.exit_code == 2, res.output
        # overlap gave no close match where show did
        assert "(got 'dispersed / grouepd'); did you mean 'dispersed / grouped'?" in res.output, (cmd, res.output)
        # the variants quoted, not a Python list
        assert "'concentrated / loop'" in res.output and "['" not in res.output, (cmd, res.output)


def test_overlap_examples_show_the_flag_that_changes_something():
    out = invoke("overlap", "--help").output
    # the example passed --streams, which is the default
    assert "wlprof overlap RUN_ID --no-streams" in out and "RUN_ID --streams\n" not in out


def test_place_refuses_zero_gpus_before_noting_the_machines_load(monkeypatch):
    import wlprof.cli.execute as execute

    monkeypatch.setattr(execute, "busy_machine_note", lambda: "this machine's load average is 5.3 on 2 cores")
    mix = Path(__file__).resolve().parents[2] / "workloads" / "mixes" / "mix_dense.toml"
    res = invoke("place", mix, "--gpus", "0")
    assert res.exit_code == 2
    # was: the load note first, then the error
    assert res.output == "error: --gpus must be a positive integer (the GPUs to place the models on) (got 0)\n"
    # every other option too: each was refused after the note
    for args, error in ((["--planner", "bogus"], "error: --planner must be one of flops, roofline, profile, "
                         "oracle or all (got 'bogus')"), (["--reps", "0"], "error: --reps must be a positive "
                         "integer (got 0)"), (["--search", "greedy"], "error: --search must be auto, exhaustive or "
                         "heuristic (got 'greedy')")):
        res = invoke("place", mix, "--gpus", "2", *args)
        assert res.exit_code == 2 and res.output.startswith(error) and "load average" not in res.output, res.output


def test_python_dash_m_wlprof_names_the_wlprof_command_in_its_messages(tmp_path):
    import os
    import subprocess
    import sys

    # `python -m wlprof` (and `torchrun ... -m wlprof`) pointed at `wlprof -m wlprof run gemm --help`
    env = {**os.environ, "COLUMNS": "200"}
    res = subprocess.run([sys.executable, "-m", "wlprof", "run", "gemm", "--steps", "abc", "--traces", tmp_path],
                         capture_output=True, text=True, env=env, timeout=HUNG_S)
    assert res.returncode == 2
    assert res.stderr.strip() == "error: --steps must be an integer (got 'abc') (see `wlprof run gemm --help`)"
    res = subprocess.run([sys.executable, "-m", "wlprof", "run", "gemm", "--help"], capture_output=True, text=True,
                         env=env, timeout=HUNG_S)
    assert "Usage: wlprof run gemm [OPTIONS]" in res.stdout


@pytest.mark.parametrize("args", [
    ("show", "gemm-x"), ("overlap", "gemm-x"), ("compare", "a:b", "c:d"), ("roofline", "gemm-x"),
    ("report", "--out", "REP"), ("predict", "--train", "a", "--test", "b"),
])
def test_a_missing_traces_folder_is_named_as_the_traces_option(tmp_path, args):
    # `show RUN -t /missing` said "RUN_ID must name a run in /missing/": the folder was wrong, not the id
    missing = tmp_path / "nope"
    res = invoke(*[str(tmp_path / "rep") if a == "REP" else a for a in args], "--traces", str(missing))
    assert res.exit_code == 2, res.output
    assert f"--traces must be an existing traces folder (got '{missing}')" in " ".join(res.output.split())
    assert not missing.exists() and not (tmp_path / "rep").exists()


def test_a_missing_train_traces_folder_is_named(tmp_path):
    res = invoke("predict", "--train-traces", str(tmp_path / "off"), "--test", "b", "--traces", str(tmp_path))
    assert res.exit_code == 2, res.output
    assert "--train-traces must be an existing traces folder" in " ".join(res.output.split())


def test_a_misspelt_study_section_gets_the_close_one(tmp_path):
    study = tmp_path / "s.toml"
    study.write_text('[study]\nworkload = "gemm"\ndevice = "cpu"\n[parms]\nshapes = ["8x8x8"]\n')
    res = invoke("sweep", study, "--traces", tmp_path / "t")
    assert res.exit_code == 2
    assert "[parms] is not a section of a study file" in res.output and "did you mean 'params'?" in res.output
    assert not (tmp_path / "t").exists() or not any((tmp_path / "t").iterdir())


@pytest.mark.parametrize("spec", ["mlp batch=1e3", "mlp batch=1000.0"])
def test_spec_refuses_an_integer_written_as_a_float(spec):
    res = invoke("predict", "--profile", PROFILE, "--spec", spec)
    value = spec.split("=")[1]
    assert res.exit_code == 2, res.output
    assert (f"error: --spec's batch must be a positive integer (got {value}); an integer is written in digits: "
            "1000") in res.output


@pytest.mark.parametrize("args", [[], ["run"]])
def test_a_group_given_no_command_shows_its_help_and_no_empty_error(args):
    res = subprocess.run([sys.executable, "-m", "wlprof.cli.main", *args], capture_output=True, text=True,
                         env={**os.environ, "COLUMNS": "100"}, timeout=HUNG_S)
    assert res.returncode == 0
    assert "Usage: " in res.stdout and ("COMMAND" if not args else "run") in res.stdout
    assert "error:" not in res.stderr


def test_of_several_study_files_the_one_an_error_is_in_is_named_and_nothing_runs(tmp_path):
    head = '[study]\nname = "s"\nworkload = "gemm"\ndevice = "cpu"\n'
    good, bad, keyless = tmp_path / "good.toml", tmp_path / "bad.toml", tmp_path / "keyless.toml"
    good.write_text(head + '[params]\nshapes = ["8x8x8"]\n')
    bad.write_text(head + '[params]\nshapes = ["0x1x1"]\n')
    keyless.write_text(head + "foo = 1\n")
    traces = tmp_path / "traces"
    res = invoke("sweep", good, bad, "--traces", traces)
    assert res.exit_code == 2 and not traces.exists()
    assert f"error: {bad}'s params.shapes must be shapes MxKxN" in res.output
    res = invoke("sweep", good, keyless, "--traces", traces)
    assert res.exit_code == 2 and f"error: {keyless}'s study.foo is not a study key" in res.output
    # one file: the key alone, as before; an override on the command line keeps the flag's name
    assert "error: params.shapes must be" in invoke("sweep", bad, "--traces", traces).output
    res = invoke("sweep", good, bad, "--set", "shapes=0x2x2", "--traces", traces)
    assert "error: --set shapes must be shapes MxKxN" in res.output


def test_predict_names_a_missing_trace_as_missing_and_a_folder_as_a_folder(tmp_path):
    prof = Path(__file__).resolve().parents[2] / "benchmarks" / "profiles" / "h200"
    res = invoke("predict", "--profile", prof, "--trace", tmp_path / "none.json")
    assert res.exit_code == 2 and "--trace must be an existing torch.profiler trace file (no such file)" in res.output
    res = invoke("predict", "--profile", prof, "--trace", tmp_path)
    assert res.exit_code == 2 and "(it names a folder: pass one of its traces)" in res.output

"""What a Ctrl-C says it left behind: only what is true of the command it stopped."""

from __future__ import annotations

import shutil

import pytest
from conftest import FIXTURES

import wlprof.ingest

RAW = FIXTURES / "cpu" / "mlp-20261129-101232-e8e6" / "_chrome" / "p000-batch-4.raw.json.gz"


def test_an_ingest_interrupted_after_its_first_file_says_nothing_was_written(tmp_path, cli, monkeypatch):
    folder = tmp_path / "ranks"
    folder.mkdir()
    for r in (0, 1):
        shutil.copy(RAW, folder / f"rank{r}.json.gz")
    real = wlprof.ingest._run_all

    def first_then_interrupt(tasks, pool):
        for i, done in enumerate(real(tasks, pool)):
            if i == 1:
                raise KeyboardInterrupt
            yield done

    monkeypatch.setattr(wlprof.ingest, "_run_all", first_then_interrupt)
    out = tmp_path / "traces"
    res = cli("ingest", folder, "-t", out, "-j", "1", "-q")
    assert res.exit_code == 130, res.output
    assert f"interrupted: nothing was written to {out}/" in res.output, res.output
    assert "finished points" not in res.output and "incomplete" not in res.output
    assert not out.exists()  # the staged run and the folder the ingest made are gone


def test_a_run_interrupted_before_its_first_point_says_no_run_was_written(tmp_path, cli, monkeypatch, cpu_ceilings):
    import wlprof.ceilings

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(wlprof.ceilings, "get_ceilings", interrupted)  # a cold cache calibrates here, for seconds
    out = tmp_path / "traces"
    res = cli("run", "gemm", "--shapes", "8x8x8", "--device", "cpu", "-t", out, "-q")
    assert res.exit_code == 130, res.output
    assert f"interrupted: no run was written in {out}/" in res.output, res.output
    assert "--resume" not in res.output and "incomplete" not in res.output
    assert not any(out.iterdir())


def test_a_calibration_interrupted_says_the_cache_is_as_it_was(tmp_path, cli, monkeypatch, cpu_ceilings):
    import wlprof.ceilings

    path = next(p for p in wlprof.ceilings.cache_path("cpu", "x").parent.glob("ceilings-cpu-*.json"))
    before = path.read_bytes()

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(wlprof.ceilings, "calibrate", interrupted)
    res = cli("calibrate", "--device", "cpu")
    assert res.exit_code == 130, res.output
    assert f"interrupted: the ceilings cache is as it was ({path})" in res.output, res.output
    assert path.read_bytes() == before


@pytest.mark.parametrize(("command", "module", "reader"), [("ls", "wlprof.store.runs", "list_runs"),
                                                       ("report", "wlprof.store.selection", "load_runs")])
def test_an_interrupted_command_that_writes_no_run_claims_none(tmp_path, cli, monkeypatch, command, module, reader):
    # reading the traces folder is where the interrupt lands; the message says no more than "interrupted"
    import importlib

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(importlib.import_module(module), reader, interrupted)
    (tmp_path / "traces").mkdir()
    res = cli(command, "-t", tmp_path / "traces")
    assert res.exit_code == 130, res.output
    assert res.output.strip().splitlines()[-1] == "interrupted", res.output


def test_a_sweep_of_several_files_interrupted_names_the_resume_command_of_that_file(tmp_path, cli, monkeypatch):
    import wlprof.cli.execute
    from wlprof.study import RunInterrupted

    files = []
    for name in ("a", "b", "c"):
        f = tmp_path / f"{name}.toml"
        f.write_text(f'[study]\nname = "{name}"\nworkload = "gemm"\n[params]\nshapes = ["8x8x8"]\n')
        files.append(f)
    ran = []

    def execute(study, traces, quiet, **kw):
        ran.append(study.source)
        if len(ran) == 2:
            raise RunInterrupted("gemm-20261207-000000-abcd", tmp_path)
        return "complete"

    monkeypatch.setattr(wlprof.cli.execute, "execute", execute)
    out = tmp_path / "my traces"
    res = cli("sweep", *files, "-t", out, "--device", "cpu")
    assert res.exit_code == 130, res.output
    said = " ".join(res.output.split())
    # it said "the same command with `--resume RUN` finishes it": with three files that command is refused
    # ("--resume finishes one run: pass one study file with it")
    assert (f"`wlprof sweep {files[1]} --traces '{out}' --device cpu --resume gemm-20261207-000000-abcd` "
            f"finishes it; not run: {files[2]}") in said, said


def test_an_ingest_interrupted_once_its_run_is_published_says_it_was_written(tmp_path, cli, monkeypatch):
    # the run is published by a rename at the end of `finish`; an interrupt the interpreter raises right after
    # it (the signal came during the rename) said "nothing was written" beside a complete run
    import wlprof.store.runs

    real = wlprof.store.runs.RunWriter._publish

    def publish_then_interrupt(self):
        real(self)
        raise KeyboardInterrupt

    monkeypatch.setattr(wlprof.store.runs.RunWriter, "_publish", publish_then_interrupt)
    out = tmp_path / "traces"
    res = cli("ingest", RAW, "-t", out, "-j", "1", "-q")
    assert res.exit_code == 130, res.output
    runs = [p.name for p in out.iterdir()]
    assert len(runs) == 1 and runs[0].startswith("ingest-"), runs
    assert f"interrupted: run {runs[0]} was written whole to {out}/ before the interrupt" in res.output, res.output
    assert "nothing was written" not in res.output
    monkeypatch.undo()
    res = cli("ls", "-t", out)
    assert res.exit_code == 0 and "complete" in res.output and runs[0] in res.output


def test_an_interrupt_while_the_commands_load_is_one_line_not_a_traceback(monkeypatch, capsys):
    # a Ctrl-C in the first second (pandas, torch and typer loading) printed Python's traceback of the import
    import wlprof.cli.main as M

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(M, "_build", interrupted)
    monkeypatch.setattr(M.sys, "argv", ["wlprof", "ls"])
    with pytest.raises(SystemExit) as exc:
        M.main()
    assert exc.value.code == 130
    assert capsys.readouterr().err == ("interrupted (while loading, before the command started: nothing was "
                                       "written)\n")

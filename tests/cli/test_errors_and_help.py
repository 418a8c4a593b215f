"""The CLI's answers to bad input (exit 2, one line naming what to do, nothing recorded is
damaged), the hints it prints, and its ``--help``."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from graphs.cli import app

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, list(args))


def _error_line(result) -> str:
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


def test_missing_trajectory(tmp_path: Path) -> None:
    r = invoke("replay", str(tmp_path / "nope.jsonl"), "--db", str(tmp_path / "t.sqlite"))
    assert r.exit_code == 2
    assert "trajectory file not found" in _error_line(r)


def test_malformed_trajectory(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x", "task": "t"}\n{"step": 1, "action": \n')
    r = invoke("replay", str(bad), "--db", str(tmp_path / "t.sqlite"))
    assert r.exit_code == 2
    line = _error_line(r)
    assert f"{bad}:2: not valid JSON" in line


def test_unknown_task(tmp_path: Path) -> None:
    db = tmp_path / "t.sqlite"
    assert invoke("demo", "--db", str(db), "--task-id", "d1", "--out", str(tmp_path / "o")).exit_code == 0
    for cmd in ("resume", "inspect"):
        r = invoke(cmd, "nosuch", "--db", str(db))
        assert r.exit_code == 2
        assert re.search(r"no task 'nosuch' in .*\(tasks: d1\)", _error_line(r))
    r = invoke("resume", "t1", "--db", str(tmp_path / "missing.sqlite"))
    assert r.exit_code == 2 and "no database at" in _error_line(r)


def test_unknown_model_provider(tmp_path: Path) -> None:
    r = invoke("run", "do it", "--model", "nosuchprovider:m1", "--db", str(tmp_path / "t.sqlite"))
    assert r.exit_code == 2
    assert "nosuchprovider:m1" in _error_line(r)
    r = invoke("run", "do it", "--model", "gpt-4o", "--db", str(tmp_path / "t.sqlite"))
    assert r.exit_code == 2 and "provider:model" in _error_line(r)


def test_run_without_model_points_to_replay_and_demo(tmp_path: Path) -> None:
    db, out = tmp_path / "t.sqlite", tmp_path / "runs"
    r = invoke("run", "do it", "--db", str(db), "--out", str(out))
    assert r.exit_code == 2
    # the commands it suggests carry the --db and --out given
    assert _error_line(r) == (
        "error: no model given: pass --model provider:name (e.g. openai:gpt-4o); to run offline use "
        f"`taskctx demo --db {db} --out {out}` or `taskctx replay FILE --db {db} --out {out}`"
    )


@pytest.mark.parametrize("kind", ["directory", "not-sqlite"])
def test_database_that_cannot_be_opened(tmp_path: Path, kind: str) -> None:
    target = tmp_path / "db"
    if kind == "directory":
        target.mkdir()
    else:
        target.write_bytes(b"precious notes, not a database\n")
    r = invoke("demo", "--db", str(target), "--out", str(tmp_path / "o"))
    assert r.exit_code == 2
    assert str(target) in _error_line(r)
    if kind == "not-sqlite":
        assert target.read_bytes() == b"precious notes, not a database\n"


@pytest.mark.parametrize("bad", ["a b", "x" * 129, "../x", ".hidden", "", "-x"])
def test_task_ids_are_checked_before_anything_runs(tmp_path: Path, bad: str) -> None:
    r = invoke(
        "demo", "--approve-all", "--db", str(tmp_path / "t.sqlite"), "--task-id", bad, "--out", str(tmp_path / "o")
    )
    assert r.exit_code == 2
    assert "is not a valid task id" in _error_line(r)
    assert not (tmp_path / "t.sqlite").exists()


def test_resume_of_a_task_that_never_started(trajectories_dir: Path, tmp_path: Path) -> None:
    from graphs import open_project

    db = tmp_path / "t.sqlite"
    traj = str(trajectories_dir / "taubench-airline-t17-r3.jsonl")
    open_project(str(db)).stores.tasks.register("ns", {"kind": "replay", "source": traj, "budget": 8000})
    r = invoke("resume", "ns", "--db", str(db), "--out", str(tmp_path / "o"))
    assert r.exit_code == 2
    assert "was registered but never started" in _error_line(r)


def test_eval_unknown_case_is_an_error(tmp_path: Path) -> None:
    from graphs.eval.cases import default_cases_dir

    r = invoke("eval", "--case", "no-such-case")
    assert r.exit_code == 2
    assert _error_line(r) == (
        f"error: no case with id no-such-case in {default_cases_dir()}; `taskctx eval --json` lists the case ids"
    )
    # the listing it suggests reads the same --cases folder
    (tmp_path / "cases").mkdir()
    shutil.copy(next(default_cases_dir().glob("*.json")), tmp_path / "cases")
    r = invoke("eval", "--cases", str(tmp_path / "cases"), "--case", "x")
    assert _error_line(r) == (
        f"error: no case with id x in {tmp_path / 'cases'}; `taskctx eval --cases {tmp_path / 'cases'} --json` "
        "lists the case ids"
    )


def test_bench_refuses_bad_input_before_running(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("x")
    r = invoke("bench", str(tmp_path), "--out", str(tmp_path / "afile" / "sub"))
    assert r.exit_code == 2
    assert (
        _error_line(r)
        == f"error: --out {tmp_path / 'afile' / 'sub'} cannot be created (Not a directory); pass a writable folder"
    )
    (tmp_path / "empty").mkdir()
    r = invoke("bench", str(tmp_path / "empty"), "--out", str(tmp_path / "o"))
    assert r.exit_code == 2
    assert _error_line(r) == (
        f"error: no trajectories (*.jsonl) to run in {tmp_path / 'empty'}; pass a folder of "
        "recorded runs or one .jsonl file (default ../shared/data/trajectories)"
    )


def test_hints_name_the_db_quoted_and_without_its_password() -> None:
    """The approval view's and inspect's hint is built by command_hint (no second fragment builder)."""
    import graphs.cli.core
    from graphs.project import DEFAULT_DB
    from graphs.report.approval import inspect_hint

    assert not hasattr(graphs.cli.core, "_db_opt")
    tail = " (control.pending_approval.arguments)"
    assert inspect_hint("t1", DEFAULT_DB) == "`taskctx inspect t1 --json`" + tail
    assert (
        inspect_hint("t1", "/tmp/my runs/t.sqlite") == "`taskctx inspect t1 --json --db '/tmp/my runs/t.sqlite'`" + tail
    )
    assert (
        inspect_hint("t 2", "postgresql://app:s3cret@127.0.0.1:5433/tasks")
        == "`taskctx inspect 't 2' --json --db 'postgresql://app:***@127.0.0.1:5433/tasks'`" + tail
    )


def test_flags_show_no_type_in_help() -> None:
    """A flag takes no value: ``--help`` of every command shows it without typer's ``<bool>``
    type column (``metavar=""``); typer's own ``--help`` line is the one that keeps it."""
    import typer

    root = typer.main.get_command(app)

    def commands(cmd, path):
        yield path, cmd
        for name, sub in getattr(cmd, "commands", {}).items():
            yield from commands(sub, [*path, name])

    flags, noisy = [], []
    for path, cmd in commands(root, []):
        flags += [(" ".join(path), o) for p in cmd.params if getattr(p, "is_flag", False) for o in p.opts]
        res = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "120"})
        assert res.exit_code == 0, res.output
        noisy += [(" ".join(path), ln.split()[1]) for ln in res.stdout.splitlines() if "<bool>" in ln]
    assert sorted(flags) == [
        ("", "--version"),
        ("bench", "--agents"),
        ("bench", "--split"),
        ("bench", "--stress"),
        ("demo", "--approve-all"),
        ("demo", "--deny-all"),
        ("eval", "--json"),
        ("fork", "--workspace-at-fork"),
        ("inspect", "--all"),
        ("inspect", "--calls"),
        ("inspect", "--json"),
        ("list", "--json"),
        ("memory list", "--json"),
        ("memory show", "--json"),
        ("report", "--full"),
        ("resume", "--approve-all"),
        ("resume", "--deny-all"),
        ("run", "--approve-all"),
        ("run", "--deny-all"),
    ]
    assert {opt for _, opt in noisy} == {"--help"}

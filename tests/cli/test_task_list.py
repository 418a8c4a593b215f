"""The CLI's one list of tasks (``taskctx list``, ``context.find_task``), read-only commands that
never write, budget errors that name the budget that works, and ``taskctx --version``."""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
import tomllib
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from context import load_trajectory
from context.sqlite_store import SqliteStores
from graphs.cli import app

REPO = Path(__file__).resolve().parents[2]
PONYC = "openhands-ponyc-4588.jsonl"  # the task-start check asks 3,440 tokens for it
DJANGO = "moatless-django-15695.jsonl"  # 11 steps

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, list(args))


def _error_line(result) -> str:
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _python_api_task(db: Path, trajectories_dir: Path, task_id: str) -> None:
    """Run a recorded trajectory through the Python API (no registry entry), as a notebook does."""
    from graphs import open_project
    from graphs.orchestrator import build_orchestrator, new_task
    from graphs.runner import run_graph
    from nodes import ReplayChatModel, ReplayTools

    traj = load_trajectory(trajectories_dir / DJANGO)
    with open_project(str(db)) as p:
        g = build_orchestrator(
            ReplayChatModel(trajectory=traj), tools=ReplayTools(traj), checkpointer=p.checkpointer, stores=p.stores
        )
        assert run_graph(g, p.stores, task_id, new_task(traj.request, task_id)).finished


# ---- budget -----------------------------------------------------------------------------------


def test_budget_error_names_the_budget_the_task_needs(trajectories_dir: Path, tmp_path: Path) -> None:
    db, out = str(tmp_path / "t.sqlite"), str(tmp_path / "runs")
    traj = str(trajectories_dir / PONYC)
    r = invoke("replay", traj, "--task-id", "t1", "--budget", "1000", "--db", db, "--out", out)
    assert r.exit_code == 2
    message = (
        "task t1 needs a budget of at least 3440 tokens, refused at its start before any side effect: its request "
        "and the floor of every executor call, degraded, take 2440 + reserve 1000; the budget 1000 is too small, "
        "rerun with --budget 3440 or more"
    )
    assert _error_line(r) == (
        f"error: {message}: `taskctx resume t1 --budget 3440 --db {db} --out {out}`; 3440 carries every call of "
        "the task (its required blocks degrade to fit; the default --budget is 8000)"
    )
    # stopped before recording anything: list and inspect still say why and how to go on
    (row,) = json.loads(invoke("list", "--db", db, "--json").stdout)
    assert (row["status"], row["stopped"]) == ("not started", "budget")
    assert SqliteStores(db).tasks.get("t1")["stopped"] == {
        "reason": "budget",
        "message": message,
        "budget": 3440,
        "out": out,
    }
    assert invoke("inspect", "t1", "--db", db).stdout == (
        f"task t1: not started; stopped: {message}; continue with `taskctx resume t1 --budget 3440 --db {db} --out {out}`\n"
    )
    # exact: one token less is refused at the start again, before the planner's model call ...
    r = invoke("resume", "t1", "--budget", "3439", "--db", db, "--out", out)
    assert r.exit_code == 2 and "task t1 needs a budget of at least 3440 tokens" in _error_line(r)
    assert list(SqliteStores(db).events.read("t1")) == []
    # ... and the budget it names carries the whole run: it never stops later for its budget
    r = invoke("resume", "t1", "--budget", "3440", "--db", db, "--out", out)
    assert r.exit_code == 0, r.output
    assert "task t1: completed; 50 executor steps" in r.stdout
    assert "stopped" not in SqliteStores(db).tasks.get("t1")  # it went on: the stop is gone
    (row,) = json.loads(invoke("list", "--db", db, "--json").stdout)
    assert "stopped" not in row and "stopped:" not in invoke("inspect", "t1", "--db", db).stdout


def test_budget_auto_is_the_models_window_capped_by_the_cost_target(trajectories_dir: Path, tmp_path: Path) -> None:
    db, out = str(tmp_path / "t.sqlite"), str(tmp_path / "runs")
    traj = str(trajectories_dir / PONYC)
    r = invoke("replay", traj, "--task-id", "a1", "--budget", "auto", "--max-steps", "2", "--db", db, "--out", out)
    assert r.exit_code == 0, r.output
    assert "50 recorded steps, budget 16000 tokens (auto: the model's window, cost target 16000), task a1" in r.stdout
    assert SqliteStores(db).tasks.get("a1")["budget"] == 16_000  # a resume keeps the number
    built = [e for e in SqliteStores(db).events.read("a1") if e.kind == "context.built"]
    assert {e.payload["budget"] for e in built} == {16_000}
    args = ("--budget", "auto", "--budget-cap", "12000", "--max-steps", "1", "--db", db, "--out", out)
    r = invoke("replay", traj, "--task-id", "a2", *args)
    assert r.exit_code == 0 and "budget 12000 tokens (auto: the model's window, cost target 12000)" in r.stdout
    r = invoke("replay", traj, "--task-id", "a3", "--budget", "lots", "--db", db)
    assert r.exit_code == 2
    assert _error_line(r) == (
        "error: --budget lots is neither a number of tokens nor auto; pass --budget 8000 (tokens) or --budget auto "
        "(the model's context window, capped by --budget-cap)"
    )


def test_budget_auto_needs_a_model_that_declares_its_window() -> None:
    from context import ModelConfigError
    from nodes import AUTO_BUDGET_CAP, ScriptedChatModel, auto_budget

    assert auto_budget(ScriptedChatModel(script=[]), reserve_for_output=1_000) == AUTO_BUDGET_CAP == 16_000
    small = ScriptedChatModel(script=[], profile={"max_input_tokens": 9_000})
    assert auto_budget(small, reserve_for_output=1_000) == 9_000
    with pytest.raises(ModelConfigError) as err:
        auto_budget(ScriptedChatModel(script=[], profile=None), reserve_for_output=1_000)
    assert str(err.value) == (
        "--budget auto needs the model's context window, and ScriptedChatModel declares none (its profile has no "
        "max_input_tokens); pass --budget N in tokens"
    )
    with pytest.raises(ModelConfigError, match="no more than the 1000 reserved for the answer"):
        auto_budget(small, reserve_for_output=1_000, cap=1_000)
    # a provider's model: its profile comes with the client package (no network call)
    from langchain_openai import ChatOpenAI

    gpt = ChatOpenAI(model="gpt-4o", api_key="sk-test", base_url="http://127.0.0.1:9")
    assert auto_budget(gpt, reserve_for_output=1_000, cap=1_000_000) == 128_000
    assert auto_budget(gpt, reserve_for_output=1_000) == 16_000


@pytest.mark.parametrize("cmd", ["replay", "resume", "run"])
def test_budget_below_the_reserve_is_refused_while_parsing(cmd: str, tmp_path: Path) -> None:
    db = tmp_path / "t.sqlite"
    first = {"replay": str(tmp_path / "x.jsonl"), "resume": "t1", "run": "do it"}[cmd]
    r = invoke(cmd, first, "--budget", "999", "--db", str(db))
    assert r.exit_code == 2
    assert _error_line(r) == (
        "error: --budget 999 is below the minimum, 1000 tokens (the reserve for the model's answer); pass at least "
        "--budget 1000 and the task says the budget it needs at its start (the default is 8000; --budget auto "
        "takes the model's context window)"
    )
    assert not db.exists()


# ---- one list of tasks ------------------------------------------------------------------------


def test_a_task_that_failed_at_its_planner_is_one_task_to_every_command(trajectories_dir: Path, tmp_path: Path) -> None:
    db, out = str(tmp_path / "t.sqlite"), str(tmp_path / "runs")
    assert invoke("replay", str(trajectories_dir / PONYC), "--task-id", "t1", "--budget", "1000", "--db", db).exit_code
    r = invoke("list", "--db", db, "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout) == [
        {
            "task_id": "t1",
            "status": "not started",
            "executor_steps": 0,
            "last_activity": None,
            "events": 0,
            "registered": True,
            "stopped": "budget",  # why, kept by the command that stopped it
        }
    ]
    r = invoke("inspect", "t1", "--db", db)
    assert r.exit_code == 0, r.output
    assert r.stdout == (
        "task t1: not started; stopped: task t1 needs a budget of at least 3440 tokens, refused at its start "
        "before any side effect: its request and the floor of every executor call, degraded, take 2440 + reserve "
        "1000; the budget 1000 is too small, rerun with --budget 3440 or more; continue with "
        f"`taskctx resume t1 --budget 3440 --db {db}`\n"
    )
    r = invoke("inspect", "t1", "--db", db, "--json")  # the input it was started with
    assert r.exit_code == 0 and json.loads(r.stdout)["identity"]["task_id"] == "t1"
    r = invoke("report", "t1", "--db", db, "--html", str(tmp_path / "r.html"))
    assert r.exit_code == 2 and _error_line(r).endswith(
        f"has not started (registered, no events): nothing to report yet; continue it with "
        f"`taskctx resume t1 --db {db}`"
    )
    r = invoke("resume", "t1", "--budget", "8000", "--max-steps", "2", "--db", db, "--out", out)
    assert r.exit_code == 0, r.output
    r = invoke("list", "--db", db, "--json")
    (row,) = json.loads(r.stdout)
    last = SqliteStores(db).events.read("t1")[-1]
    assert (row["status"], row["executor_steps"], row["last_activity"]) == ("running", 2, last.timestamp)


def test_list_reconciles_registry_and_event_log(trajectories_dir: Path, tmp_path: Path) -> None:
    db = tmp_path / "t.sqlite"
    _python_api_task(db, trajectories_dir, "api1")  # events, no registry entry
    r = invoke("replay", str(trajectories_dir / PONYC), "--task-id", "cli1", "--max-steps", "1", "--db", str(db))
    assert r.exit_code == 0, r.output
    invoke("replay", str(trajectories_dir / PONYC), "--task-id", "cli0", "--budget", "1000", "--db", str(db))
    stores = SqliteStores(db)
    rows = json.loads(invoke("list", "--db", str(db), "--json").stdout)
    assert [(x["task_id"], x["status"], x["executor_steps"], x["registered"]) for x in rows] == [
        ("cli1", "running", 1, True),  # most recent activity first
        ("api1", "completed", 11, False),
        ("cli0", "not started", 0, True),  # no events: last
    ]
    assert [x["last_activity"] for x in rows] == [
        stores.events.read("cli1")[-1].timestamp,
        stores.events.read("api1")[-1].timestamp,
        None,
    ]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", rows[0]["last_activity"])
    table = invoke("list", "--db", str(db)).stdout
    assert re.search(r"│ api1 +│ completed \(Python API\) +│ +11 │ " + re.escape(rows[1]["last_activity"]), table)
    assert re.search(r"│ cli0 +│ stopped: budget +│ +0 │ - ", table)  # not started: its planner's budget
    assert table.index("cli1") < table.index("api1") < table.index("cli0")
    # every command names the same tasks when one is unknown
    for cmd in ("inspect", "resume", "approve", "report"):
        r = invoke(cmd, "nosuch", "--db", str(db))
        assert r.exit_code == 2
        assert f"no task 'nosuch' in {db}; check the id and --db (tasks: cli1, api1, cli0)" in r.stderr
    # a Python API task can be inspected, not resumed from the CLI
    assert invoke("inspect", "api1", "--db", str(db)).exit_code == 0
    r = invoke("resume", "api1", "--db", str(db))
    assert r.exit_code == 2 and "was run through the Python API, not a taskctx command" in _error_line(r)
    assert _error_line(r).endswith(f"or see it with `taskctx inspect api1 --db {db}`")


def test_doctor_takes_a_python_api_task_for_sound(trajectories_dir: Path, tmp_path: Path) -> None:
    """A task run through the Python API has events and no registry row (and here its checkpoints
    in the same database): not damaged. A registered task that lost its row still is."""
    db = tmp_path / "t.sqlite"
    _python_api_task(db, trajectories_dir, "api1")
    n = SqliteStores(db).events.last_seq("api1")
    r = invoke("doctor", "--db", str(db))
    assert r.exit_code == 0, r.output
    assert r.stdout == f"task api1: ok ({n} events; started through the Python API)\n"
    # the same database with a task a command started, whose registry row is then deleted
    r = invoke("replay", str(trajectories_dir / PONYC), "--task-id", "cli1", "--max-steps", "1", "--db", str(db))
    assert r.exit_code == 0, r.output
    conn = sqlite3.connect(db)
    conn.execute("DELETE FROM taskctx_tasks WHERE task_id = 'cli1'")
    conn.commit()
    conn.close()
    r = invoke("doctor", "--db", str(db))
    assert r.exit_code == 2
    assert r.stdout.splitlines()[:3] == [
        f"task api1: ok ({n} events; started through the Python API)",
        "task cli1: 1 problem",
        "  - task registry: no row for this task (how it was started is lost): it can be inspected, not resumed",
    ]


def test_doctor_takes_a_python_api_task_without_checkpoints_for_sound(trajectories_dir: Path, tmp_path: Path) -> None:
    """Run with an in-memory checkpointer (as tests and notebooks often do): events only."""
    from langgraph.checkpoint.memory import InMemorySaver

    from graphs.orchestrator import build_orchestrator, new_task
    from graphs.runner import run_graph
    from nodes import ReplayChatModel, ReplayTools

    db = tmp_path / "t.sqlite"
    traj = load_trajectory(trajectories_dir / PONYC)
    stores = SqliteStores(db)
    g = build_orchestrator(
        ReplayChatModel(trajectory=traj), tools=ReplayTools(traj), checkpointer=InMemorySaver(), stores=stores
    )
    run_graph(g, stores, "mem1", new_task(traj.request, "mem1"), stop_after=2)
    n = stores.events.last_seq("mem1")
    stores.close()
    r = invoke("doctor", "mem1", "--db", str(db))
    assert r.exit_code == 0, r.output
    assert r.stdout == f"task mem1: ok ({n} events; started through the Python API)\n"


def test_list_shows_every_task_and_marks_the_damaged(trajectories_dir: Path, tmp_path: Path) -> None:
    db = tmp_path / "t.sqlite"
    for tid in ("a1", "b2", "c3"):
        r = invoke("replay", str(trajectories_dir / PONYC), "--task-id", tid, "--max-steps", "2", "--db", str(db))
        assert r.exit_code == 0, r.output
    conn = sqlite3.connect(db)
    conn.execute("DELETE FROM taskctx_events WHERE task_id = 'b2' AND seq = 5")
    conn.execute("UPDATE taskctx_events SET kind = 'tool.exploded' WHERE task_id = 'c3' AND seq = 6")
    conn.commit()
    conn.close()
    r = invoke("list", "--db", str(db), "--json")
    assert r.exit_code == 0, r.output
    rows = {x["task_id"]: x for x in json.loads(r.stdout)}
    assert sorted(rows) == ["a1", "b2", "c3"]
    assert rows["a1"]["status"] == "running" and "damaged" not in rows["a1"]
    assert rows["b2"]["status"] == "damaged"
    assert rows["b2"]["damaged"] == ["event log: event seq 5 is missing (seq 4 is followed by 6)"]
    assert rows["c3"]["status"] == "damaged"
    assert any("unknown kind 'tool.exploded'" in f for f in rows["c3"]["damaged"])
    r = invoke("list", "--db", str(db))
    assert r.exit_code == 0, r.output
    assert re.search(r"│ a1 +│ running +│ +2 │ ", r.stdout)
    assert re.search(r"│ b2 +│ damaged +│ +- │ ", r.stdout)
    assert (
        f"task b2 is damaged: event log: event seq 5 is missing (seq 4 is followed by 6); see `taskctx doctor b2 --db {db}`"
        in r.stdout
    )


def test_list_of_an_empty_database(tmp_path: Path) -> None:
    db = tmp_path / "t.sqlite"
    SqliteStores(db).close()
    r = invoke("list", "--db", str(db))
    assert r.exit_code == 0 and r.stdout == f"no tasks in {db}\n"
    assert invoke("list", "--db", str(db), "--json").stdout == "[]\n"


def test_version_is_the_distributions() -> None:
    r = invoke("--version")
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert r.exit_code == 0 and r.stdout == f"taskctx {version('taskctx')}\n" == f"taskctx {pyproject}\n"


# ---- read-only commands -----------------------------------------------------------------------

READ_ONLY = [("inspect", "t1"), ("list",), ("report", "t1")]


@pytest.mark.parametrize("cmd", READ_ONLY, ids=lambda c: c[0])
def test_read_only_command_leaves_an_unrelated_sqlite_file_unchanged(cmd: tuple[str, ...], tmp_path: Path) -> None:
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
        conn.execute("INSERT INTO notes VALUES ('mine')")
    conn.close()
    before = _sha(other)
    html = tmp_path / "r.html"
    r = invoke(*cmd, "--db", str(other), *(["--html", str(html)] if cmd[0] == "report" else []))
    assert r.exit_code == 2
    assert f"error: {other} is not a taskctx database (no taskctx tables); pass the --db a task was started with" in (
        r.stderr.strip().splitlines()
    )
    assert _sha(other) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.sqlite"]  # no journal, no HTML
    with sqlite3.connect(f"file:{other}?mode=ro", uri=True) as conn:
        assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master")] == ["notes"]


@pytest.mark.parametrize("cmd", [*READ_ONLY, ("resume", "t1"), ("approve", "t1")], ids=lambda c: c[0])
def test_missing_or_foreign_database_is_not_created_or_changed(cmd: tuple[str, ...], tmp_path: Path) -> None:
    missing = tmp_path / "sub" / "missing.sqlite"
    r = invoke(*cmd, "--db", str(missing))
    assert r.exit_code == 2
    assert f"no database at {missing}; pass the --db the task was started with" in r.stderr
    assert not (tmp_path / "sub").exists()
    text = tmp_path / "notes.txt"
    text.write_text("not a database\n")
    r = invoke(*cmd, "--db", str(text))
    assert r.exit_code == 2
    assert f"{text} is not a taskctx database (no taskctx tables)" in r.stderr
    assert text.read_text() == "not a database\n"


def test_read_only_commands_leave_a_taskctx_database_byte_identical(trajectories_dir: Path, tmp_path: Path) -> None:
    db = tmp_path / "t.sqlite"
    r = invoke("replay", str(trajectories_dir / PONYC), "--task-id", "t1", "--max-steps", "2", "--db", str(db))
    assert r.exit_code == 0, r.output
    # connections of the in-process runs that only the garbage collector closes (in reference
    # cycles) checkpoint the WAL when collected: collect now, not during the read-only commands
    import gc

    gc.collect()
    # the file and its write-ahead log (the -shm file is SQLite's shared-memory index, where
    # readers mark what they read; it holds no data)
    files = [p for p in (db, tmp_path / "t.sqlite-wal") if p.exists()]
    before = {p.name: _sha(p) for p in files}
    assert invoke("inspect", "t1", "--db", str(db)).exit_code == 0
    assert invoke("inspect", "t1", "--db", str(db), "--json").exit_code == 0
    assert invoke("list", "--db", str(db)).exit_code == 0
    assert invoke("report", "t1", "--db", str(db), "--html", str(tmp_path / "r.html")).exit_code == 0
    assert {p.name: _sha(p) for p in files} == before


# ---- the docs and the tests tell the truth ----------------------------------------------------


def test_the_docs_name_exactly_the_commands_that_take_db() -> None:
    import typer.main

    group = typer.main.get_command(app)

    def db_opt(cmd: Any) -> bool:  # a command group (``memory``): every one of its commands takes it
        subs = getattr(cmd, "commands", None)
        return all(map(db_opt, subs.values())) if subs else any("--db" in p.opts for p in cmd.params)

    takes_db = {name for name, cmd in group.commands.items() if db_opt(cmd)}
    page = " ".join((REPO / "docs" / "reference" / "cli.md").read_text(encoding="utf-8").split())
    m = re.search(r"((?:`[a-z]+`(?:, | and ))+`[a-z]+`) take `--db`", page)
    assert m, "docs/reference/cli.md lost its sentence naming the commands that take --db"
    named = set(re.findall(r"`([a-z]+)`", m.group(1)))
    assert (
        named
        == takes_db
        == {"demo", "replay", "resume", "fork", "run", "approve", "inspect", "list", "report", "doctor", "memory"}
    )
    assert set(group.commands) - takes_db == {"bench", "eval", "tokens"}
    assert "`bench`, `eval` and `tokens` take no `--db`" in page
    assert "All commands take `--db`" not in page


def test_no_test_hard_codes_the_shared_folder() -> None:
    """Recorded data comes from ``trajectories_dir`` / ``trajectory_file`` (tests/conftest.py),
    which honour TASKCTX_TRAJECTORIES; a path built from "shared" elsewhere would ignore it."""
    pattern = re.compile(r"""/\s*["']shared["']|["']\.\./shared/data/trajectories["']\s*\)""")
    offenders = [
        p.name
        for p in sorted((REPO / "tests").rglob("*.py"))
        if p.name != "conftest.py" and pattern.search(p.read_text(encoding="utf-8"))
    ]
    assert offenders == []


# ---- where tests write, and the commands the CLI suggests -------------------------------------


def test_tests_run_in_their_tmp_path_so_default_paths_stay_out_of_the_checkout(
    trajectories_dir: Path, tmp_path: Path
) -> None:
    """tests/conftest.py chdirs every test into its tmp_path: a command without --db/--out
    writes there, never into the repository the tests run from."""
    assert Path.cwd() == tmp_path and tmp_path != REPO
    r = invoke("replay", str(trajectories_dir / PONYC), "--task-id", "g1", "--max-steps", "1")
    assert r.exit_code == 0, r.output
    assert (tmp_path / ".taskctx" / "taskctx.sqlite").is_file()
    assert (tmp_path / ".taskctx" / "runs" / "g1" / "state.json").is_file()
    # default --db and --out: the hint names neither
    assert "Continue with: taskctx resume g1\n" in r.stdout


def test_hints_name_db_and_out_when_they_are_not_the_defaults(trajectories_dir: Path, tmp_path: Path) -> None:
    db, out = str(tmp_path / "my db.sqlite"), str(tmp_path / "exports")
    traj = str(trajectories_dir / PONYC)
    r = invoke("replay", traj, "--task-id", "h1", "--max-steps", "1", "--db", db, "--out", out)
    assert r.exit_code == 0, r.output
    assert f"Continue with: taskctx resume h1 --db '{db}' --out {out}\n" in r.stdout
    r = invoke("replay", traj, "--task-id", "h1", "--db", db, "--out", out)
    assert r.exit_code == 2
    assert _error_line(r) == (
        f"error: task 'h1' already exists in {db}; continue it with `taskctx resume h1 --db '{db}' --out {out}` "
        "or pick another --task-id"
    )
    r = invoke("approve", "h1", "--db", db, "--out", out)
    assert _error_line(r) == (
        f"error: task 'h1' has no pending approval; nothing to answer (see `taskctx inspect h1 --db '{db}'`)"
    )


def test_command_hint() -> None:
    from graphs.project import DEFAULT_DB, DEFAULT_OUT
    from graphs.report.hints import command_hint

    assert command_hint("resume", "t1") == "taskctx resume t1"
    assert command_hint("resume", "t1", DEFAULT_DB, DEFAULT_OUT) == "taskctx resume t1"
    assert command_hint("resume", "t1", "a.sqlite", "runs", "--budget", "2631") == (
        "taskctx resume t1 --budget 2631 --db a.sqlite --out runs"
    )
    assert command_hint("inspect", "t1", "postgresql://u:secret@h:5432/d") == (
        "taskctx inspect t1 --db 'postgresql://u:***@h:5432/d'"
    )


def test_one_executor_step_is_said_in_the_singular(trajectories_dir: Path, tmp_path: Path) -> None:
    """A run stopped after one step, its resume and a fork at step 1 say "1 executor step"."""
    from context.text import counted

    assert [counted(n, "executor step") for n in (0, 1, 2)] == [
        "0 executor steps",
        "1 executor step",
        "2 executor steps",
    ]
    db, out = str(tmp_path / "t.sqlite"), str(tmp_path / "runs")
    traj = str(trajectories_dir / DJANGO)
    r = invoke("replay", traj, "--task-id", "s1", "--max-steps", "1", "--db", db, "--out", out)
    assert r.exit_code == 0, r.output
    assert f"stopped after 1 executor step; next: executor. Continue with: taskctx resume s1 --db {db} --out {out}" in (
        r.stdout.replace("\n", " ")
    )
    f = invoke("fork", "s1", "--at-step", "1", "--task-id", "s1-b", "--db", db)
    assert f.exit_code == 0, f.output
    assert re.match(
        r"forked s1 at seq \d+ into s1-b \(1 executor step done; next: executor\)$", f.stdout.splitlines()[0]
    )
    r = invoke("resume", "s1", "--max-steps", "1", "--db", db, "--out", out)
    assert r.exit_code == 0, r.output
    assert re.search(r"resume s1 at checkpoint \S+ \(1 executor step done; next: executor\)", r.stdout), r.stdout
    assert "stopped after 2 executor steps; next: executor." in r.stdout


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_fork_not_run_yet_shows_forked(trajectories_dir: Path, tmp_path: Path, backend: str, request: Any) -> None:
    """list, list --json, inspect, inspect --json and the report say "forked" until the child runs."""
    db = request.getfixturevalue("pg_db") if backend == "postgres" else str(tmp_path / "t.sqlite")
    out = str(tmp_path / "runs")
    r = invoke(
        "replay", str(trajectories_dir / DJANGO), "--task-id", "p1", "--max-steps", "3", "--db", db, "--out", out
    )
    assert r.exit_code == 0, r.output
    assert invoke("fork", "p1", "--at-step", "1", "--task-id", "c1", "--db", db).exit_code == 0
    # a fork of that fork, at its fork point: its own status too, not the parent's rows'
    assert invoke("fork", "c1", "--at-step", "1", "--task-id", "g1", "--db", db).exit_code == 0

    def statuses() -> dict[str, str]:
        return {t["task_id"]: t["status"] for t in json.loads(invoke("list", "--db", db, "--json").stdout)}

    assert statuses() == {"p1": "running", "c1": "forked", "g1": "forked"}
    table = invoke("list", "--db", db).stdout
    assert re.search(r"c1\s+│\s+forked\s+│\s+1\s+│", table), table
    assert "task c1  status: forked  plan v1 (executing)\n" in invoke("inspect", "c1", "--db", db).stdout
    assert json.loads(invoke("inspect", "c1", "--db", db, "--json").stdout)["control"]["status"] == "forked"
    report = invoke("report", "c1", "--db", db, "--html", str(tmp_path / "c1.html"))
    assert report.exit_code == 0, report.output
    page = (tmp_path / "c1.html").read_text(encoding="utf-8")
    assert 'data-status="forked"' in page
    # an edit of its state is not a run: still forked; once it runs, its own status
    import graphs.demo  # noqa: F401  (task kinds)
    from graphs import open_project

    with open_project(db) as p:
        p.task_graph("c1").update_state({"configurable": {"thread_id": "c1"}}, {"identity": {"non_goals": ["speed"]}})
    assert statuses()["c1"] == "forked"
    r = invoke("resume", "c1", "--max-steps", "1", "--db", db, "--out", out)
    assert r.exit_code == 0, r.output
    assert statuses() == {"p1": "running", "c1": "running", "g1": "forked"}
    assert "task c1  status: running  plan v2 (executing)\n" in invoke("inspect", "c1", "--db", db).stdout

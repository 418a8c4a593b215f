"""The one-line messages of ``--budget``, ``--budget-cap`` and a task held by another run of this process."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from context import LeaseHeldError
from context.sqlite_store import SqliteStores
from graphs.cli import app
from graphs.cli.core import describe

PONYC = "openhands-ponyc-4588.jsonl"


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def _error_line(result) -> str:
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.parametrize("budget", ["-5", "0"])
def test_a_budget_below_the_minimum_says_it_is_one(budget: str, tmp_path: Path) -> None:
    db = tmp_path / "t.sqlite"
    r = invoke("replay", str(tmp_path / "x.jsonl"), "--budget", budget, "--db", str(db))
    assert r.exit_code == 2
    assert _error_line(r) == (
        f"error: --budget {budget} is below the minimum, 1000 tokens (the reserve for the model's answer); pass at "
        "least --budget 1000 and the task says the budget it needs at its start (the default is 8000; "
        "--budget auto takes the model's context window)"
    )
    assert not db.exists()


@pytest.mark.parametrize("cmd", ["replay", "resume", "run"])
def test_a_budget_cap_without_budget_auto_is_refused(cmd: str, tmp_path: Path) -> None:
    db = tmp_path / "t.sqlite"
    first = {"replay": str(tmp_path / "x.jsonl"), "resume": "t1", "run": "do it"}[cmd]
    model = ["--model", "openai:gpt-4o"] if cmd == "run" else []
    r = invoke(cmd, first, *model, "--budget-cap", "5000", "--db", str(db))
    assert r.exit_code == 2
    kept = "the task's own budget" if cmd == "resume" else "the default, 8000 tokens"
    given = f"no --budget (so {kept})"
    assert _error_line(r) == (
        f"error: --budget-cap 5000 is the cost target of --budget auto, and this command has {given}, so it "
        "would be ignored; pass --budget auto --budget-cap 5000, or drop --budget-cap"
    )
    r = invoke(cmd, first, *model, "--budget", "9000", "--budget-cap", "5000", "--db", str(db))
    assert r.exit_code == 2 and "this command has --budget 9000, so it would be ignored" in _error_line(r)
    assert not db.exists()


def test_resume_budget_auto_takes_the_window_of_the_tasks_model(trajectories_dir: Path, tmp_path: Path) -> None:
    db, out = str(tmp_path / "t.sqlite"), str(tmp_path / "runs")
    traj = str(trajectories_dir / PONYC)
    r = invoke("replay", traj, "--task-id", "r1", "--max-steps", "1", "--db", db, "--out", out)
    assert r.exit_code == 0, r.output
    assert SqliteStores(db).tasks.get("r1")["budget"] == 8_000
    args = ("--budget", "auto", "--budget-cap", "12000", "--max-steps", "1", "--db", db, "--out", out)
    r = invoke("resume", "r1", *args)
    assert r.exit_code == 0, r.output
    assert "task r1: budget 12000 tokens (auto: the model's window, cost target 12000)" in r.stdout
    assert SqliteStores(db).tasks.get("r1")["budget"] == 12_000  # the next resume keeps the number
    r = invoke("resume", "r1", "--budget", "auto", "--max-steps", "1", "--db", db, "--out", out)
    assert r.exit_code == 0 and "budget 16000 tokens (auto: the model's window, cost target 16000)" in r.stdout
    built = [e.payload["budget"] for e in SqliteStores(db).events.read("r1") if e.kind == "context.built"]
    assert built[0] == 8_000 and built[-1] == 16_000 and set(built) == {8_000, 12_000, 16_000}


def test_the_cli_line_of_a_lease_held_in_this_process_says_so() -> None:
    holder = f"this process (pid {os.getpid()}, through another store on the same database, lease token 1a2b3c4d)"
    same = LeaseHeldError("t1", holder, pid=os.getpid(), host="h", same_process=True)
    assert describe(same, "t.sqlite", "t1") == (
        f"task 't1' is being run by another run in this process, {holder}; nothing was run or recorded; run the "
        "task through one project (one store object), one run at a time, or wait for the other run to end, then "
        "`taskctx resume t1 --db t.sqlite` (a holder that ended is taken over at once)"
    )
    other = LeaseHeldError("t1", "pid 41 on host h (last heartbeat 3 s ago)", pid=41, host="h")
    assert describe(other, "t.sqlite", "t1") == (
        "task 't1' is being run by another process, pid 41 on host h (last heartbeat 3 s ago); nothing was run or "
        "recorded; wait for it to end (or stop it), then `taskctx resume t1 --db t.sqlite` (a holder that ended is "
        "taken over at once)"
    )
    # a refused approve: the next step is approve again, which shows the request the task then waits on
    assert describe(other, "t.sqlite", "t1", command="approve") == (
        "task 't1' is being run by another process, pid 41 on host h (last heartbeat 3 s ago); nothing was run or "
        "recorded; wait for it to end (or stop it), then `taskctx approve t1 --db t.sqlite` (it shows the request the "
        "task waits on then, which may be a new one, before it answers) (a holder that ended is taken over at once)"
    )

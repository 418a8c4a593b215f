"""One run of a task at a time within a process too, and a holder that loses its lease is told so.

Two ``aresume`` of one paused task at once (``asyncio.gather``) or two threads' ``resume`` on one
project: the lease belongs to one run (an owner token), so the second run is refused at once with
one line and the task's tool runs once; the winner's own nested holds (``resume`` ->
``run_with_approvals`` -> ``run_graph``) are one run's and go on. A holder whose lease is taken
over (as by another host after it stalled) or whose row is removed mid-command is refused its next
append with :class:`LeaseLostError`: the line says what it had recorded and who has the task now.
On SQLite and Postgres.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import graphs
import nodes
from context import InvalidInputError, LeaseHeldError, LeaseLostError, Permissions
from graphs.cli.core import describe
from nodes.testing import complete, plan, review, tool_call

REFUSED = (
    r"task 'r1' is being run by another run in this process, run [0-9a-f]{8} of this process through the same "
    r"store \(holding the lease for \d+ s\): a task runs one run at a time; wait for the other run to end \(await "
    r"it, or join its thread\), then resume the task"
)


class Count:
    """A side-effecting tool that counts its runs, then waits until ``go`` is set (30 s at most)."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        self.go = threading.Event()
        #: called inside the command, before it returns (a takeover while it runs)
        self.during: Any = None

    def schemas(self) -> list[dict[str, Any]]:
        return [nodes.function_schema("count", "Count a run.", {"n": {"type": "string"}}, ["n"])]

    def has_side_effects(self, tool: str) -> bool:
        return True

    def execute(self, call_id: str, tool: str, arguments: dict[str, Any]) -> str:
        self.ran.append(f"execute {call_id}")
        if self.during is not None:
            self.during()
        self.go.wait(30)
        return "counted"

    async def aexecute(self, call_id: str, tool: str, arguments: dict[str, Any]) -> str:
        self.ran.append(f"aexecute {call_id}")
        deadline = time.monotonic() + 30
        while not self.go.is_set() and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        return "counted"


def _graph(project: graphs.Project) -> tuple[Any, Count]:
    """A graph whose task calls ``count`` once; the graph and its tool."""
    model = nodes.ScriptedChatModel(
        script={
            "planner": [plan("Count once")],
            "executor": [tool_call("count", {"n": "1"}, id="c1"), complete("counted once")],
            "reviewer": [review("approve", "counted")],
        }
    )
    tools = Count()
    return project.graph(model, tools=tools, memory=False), tools


def _in_two_threads(run: Any, tools: Count, refusals: tuple[type[Exception], ...]) -> list[Any]:
    """What ``run()`` returned or raised in each of two threads started at once."""
    start = threading.Barrier(2)
    results: list[Any] = []

    def one() -> None:
        start.wait()
        try:
            results.append(run())
        except refusals as exc:
            tools.go.set()  # the winner's command ends once the loser was refused
            results.append(exc)

    threads = [threading.Thread(target=one) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return results


def _paused(project: graphs.Project) -> tuple[Any, Count]:
    """Task ``r1`` paused at the approval of its one tool call; its graph and tool."""
    g, tools = _graph(project)
    first = project.run(g, "Count once.", task_id="r1", permissions=Permissions(requires_approval=["count"]))
    assert first.waiting is not None and tools.ran == []
    return g, tools


def _approve(request: dict[str, Any]) -> dict[str, Any]:
    return {"action": "approve"}


def _ran_once(project: graphs.Project, tools: Count, way: str) -> None:
    assert tools.ran == [f"{way} c1"]  # the command ran once
    kinds = [e.kind for e in project.stores.events.read("r1")]
    assert kinds.count("resume.started") == 1 and kinds.count("permission.granted") == 1
    assert kinds.count("tool.result.received") == 1 and kinds[-1] == "task.completed"
    assert project.stores.leases.holder("r1") is None  # released at the end


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh SQLite file, then (``[postgres]``) a fresh Postgres database."""
    return str(tmp_path / "t.sqlite") if request.param == "sqlite" else str(request.getfixturevalue("pg_db"))


def test_two_aresumes_at_once_in_one_process_run_the_task_once(db: str) -> None:
    with graphs.open_project(db) as project:
        g, tools = _paused(project)

        async def one() -> Any:
            try:
                return await project.aresume("r1", graph=g, approvals=_approve)
            except LeaseHeldError as exc:
                tools.go.set()  # the winner's command ends once the loser was refused
                return exc

        async def both() -> list[Any]:
            return await asyncio.wait_for(asyncio.gather(one(), one()), 120)

        results = asyncio.run(both())
        lost = [r for r in results if isinstance(r, LeaseHeldError)]
        won = [r for r in results if not isinstance(r, LeaseHeldError)]
        assert len(lost) == 1 and len(won) == 1, results
        assert won[0].state.control.status == "completed"
        assert lost[0].same_process and lost[0].same_store and lost[0].pid == os.getpid()
        assert "\n" not in str(lost[0]) and re.fullmatch(REFUSED, str(lost[0])), str(lost[0])
        copy = pickle.loads(pickle.dumps(lost[0]))  # a worker process's error reaches its parent whole
        assert str(copy) == str(lost[0]) and copy.same_store
        _ran_once(project, tools, "aexecute")


def test_two_threads_resuming_one_project_run_the_task_once(db: str) -> None:
    with graphs.open_project(db) as project:
        g, tools = _paused(project)
        results = _in_two_threads(lambda: project.resume("r1", graph=g, approvals=_approve), tools, (LeaseHeldError,))
        lost = [r for r in results if isinstance(r, LeaseHeldError)]
        assert len(results) == 2 and len(lost) == 1, results
        assert re.fullmatch(REFUSED, str(lost[0])), str(lost[0])
        assert next(r for r in results if r not in lost).state.control.status == "completed"
        _ran_once(project, tools, "execute")
        # after the run, the task's lease is free for the next run of this process
        assert project.resume("r1", graph=g).already_finished


def _take_over(project: graphs.Project, delete: bool) -> None:
    """Take ``r1``'s lease as another host's process would (or remove its row), on a connection of its own."""
    sql = (
        "DELETE FROM taskctx_leases WHERE task_id = 'r1'"
        if delete
        else "UPDATE taskctx_leases SET host = 'elsewhere', pid = 4242, started = '', token = 'thief', "
        "heartbeat = {now}, expires = {now} + 60 WHERE task_id = 'r1'"
    )
    with project.stores._connect() as conn:
        conn.execute(sql.format(now=time.time()))


@pytest.mark.parametrize("delete", [False, True], ids=["taken-over", "row-removed"])
def test_a_holder_that_loses_its_lease_mid_command_is_told_what_it_recorded(db: str, delete: bool) -> None:
    with graphs.open_project(db) as project:
        g, tools = _paused(project)
        before: list[Any] = []

        def during() -> None:
            before.extend(project.stores.events.read("r1"))
            _take_over(project, delete)
            tools.go.set()

        tools.during = during
        with pytest.raises(LeaseLostError) as ei:
            project.resume("r1", graph=g, approvals=_approve)
        exc = ei.value
        after = project.stores.events.read("r1")
        assert [e.id for e in after] == [e.id for e in before]  # nothing written after the loss
        last = before[-1]
        assert (exc.seq, exc.kind, exc.step) == (last.seq, last.kind, "s1") and last.kind == "permission.granted"
        now = "no one holds it now (its lease row was removed)" if delete else "pid 4242 on host elsewhere"
        head = (
            re.escape(f"task 'r1': this process (pid {os.getpid()}) lost its lease on the task while running it: {now}")
            + ("" if delete else r" \(last heartbeat \d+ s ago\) has the task now")
            + re.escape(
                f"; what it recorded stays: events up to seq {last.seq} (permission.granted, plan step s1); "
                "this process wrote no event after that (this append was refused); "
            )
        )
        tail = (
            "resume the task to continue from what is recorded"
            if delete
            else "let the other holder go on with the task; when it has ended, resume the task to continue"
        )
        assert re.fullmatch(head + re.escape(tail), str(exc)), str(exc)
        cli = (
            "`taskctx resume r1 --db t.sqlite` continues from what is recorded"
            if delete
            else "let the other holder go on with the task; when it has ended, `taskctx resume r1 --db t.sqlite`"
        )
        assert re.fullmatch(head + re.escape(cli), describe(exc, "t.sqlite", "r1")), describe(exc, "t.sqlite", "r1")
        copy = pickle.loads(pickle.dumps(exc))
        assert isinstance(copy, LeaseLostError) and str(copy) == str(exc) and copy.seq == last.seq
        assert tools.ran == ["execute c1"]
        held = project.stores.leases.holder("r1")
        assert (held is None) if delete else (held is not None and held.token == "thief")  # the thief's row stays
        if not delete:
            _take_over(project, delete=True)  # the other holder ended
        asked: list[str] = []
        tools.during = None
        done = project.resume("r1", graph=g, approvals=_approve, on_request=lambda r: asked.append(r["reason"]))
        assert done.state.control.status == "completed"  # the resume continues from what is recorded
        assert len(asked) == 1 and asked[0].startswith("interrupted before its result was recorded"), asked
        assert tools.ran == ["execute c1", "execute c1"]  # asked first, as a call cut off, then run


def test_two_threads_starting_one_task_id_on_one_project_run_it_once(db: str) -> None:
    with graphs.open_project(db) as project:
        g, tools = _graph(project)
        results = _in_two_threads(
            lambda: project.run(g, "Count once.", task_id="r1"), tools, (LeaseHeldError, InvalidInputError)
        )
        refused = [r for r in results if isinstance(r, Exception)]
        assert len(results) == 2 and len(refused) == 1, results
        # refused by the lease (as every time here), or, had the winner written first, as a task that exists
        assert "\n" not in str(refused[0]) and (
            re.fullmatch(REFUSED, str(refused[0])) or "task 'r1' already exists" in str(refused[0])
        ), str(refused[0])
        assert next(r for r in results if r not in refused).state.control.status == "completed"
        assert tools.ran == ["execute c1"]
        kinds = [e.kind for e in project.stores.events.read("r1")]
        assert kinds.count("task.created") == 1 and kinds.count("tool.result.received") == 1

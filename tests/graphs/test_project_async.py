"""``Project.arun`` and ``Project.aresume``, the async twins of ``run`` and ``resume``, on SQLite and
Postgres: the same event log as the sync methods (ids and timestamps aside), approvals answered
by a coroutine, the model and the tool called through their async APIs, a resume recorded once."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

import graphs
import nodes
from context import Permissions, UnknownTaskError
from nodes.testing import complete, plan, review, tool_call

REQUEST = "Shout hello, then bye."
#: Each shout is approved first.
ASK = Permissions(requires_approval=["shout"])


class AsyncModel(nodes.ScriptedChatModel):
    """The scripted model, noting which API each call came through."""

    apis: list[str] = []  # noqa: RUF012  (a pydantic field: each instance gets its own copy)

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any) -> Any:
        self.apis.append("sync")
        return super()._generate(messages, stop, run_manager, **kw)

    async def _agenerate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        self.apis.append("async")
        await asyncio.sleep(0)
        meta = dict(run_manager.metadata) if run_manager and run_manager.metadata else {}
        return ChatResult(generations=[ChatGeneration(message=self._answer(messages, meta))])


class Shout:
    """A tool with side effects (each call approved), sync and async; it notes which way ran."""

    def __init__(self) -> None:
        self.ran: list[str] = []

    def schemas(self) -> list[dict[str, Any]]:
        return [nodes.function_schema("shout", "Shout a text.", {"text": {"type": "string"}}, ["text"])]

    def has_side_effects(self, tool: str) -> bool:
        return True

    def execute(self, call_id: str, tool: str, arguments: dict[str, Any]) -> str:
        self.ran.append(f"execute {call_id}")
        return arguments["text"].upper()

    async def aexecute(self, call_id: str, tool: str, arguments: dict[str, Any]) -> str:
        await asyncio.sleep(0)
        self.ran.append(f"aexecute {call_id}")
        return arguments["text"].upper()


def _model() -> AsyncModel:
    return AsyncModel(
        script={
            "planner": [plan("Shout hello", "Shout bye")],
            "executor": [
                *(tool_call("shout", {"text": "hello"}, id="c1"), complete("shouted hello")),
                *(tool_call("shout", {"text": "bye"}, id="c2"), complete("shouted bye")),
            ],
            "reviewer": [review("approve", "both were shouted")],
        },
        apis=[],
    )


def _strip(x: Any) -> Any:
    if isinstance(x, dict):
        drop = ("timestamp", "token", "checkpoint_id", "from_checkpoint", "latency_ms", "request_id")
        return {k: _strip(v) for k, v in x.items() if k not in drop}
    if isinstance(x, list):
        return [_strip(v) for v in x]
    return x


def _log(project: graphs.Project, task_id: str) -> list[tuple[str, str, str]]:
    return [
        (e.kind, e.actor, json.dumps(_strip(e.payload), sort_keys=True)) for e in project.stores.events.read(task_id)
    ]


def _sync(db: str) -> tuple[list[tuple[str, str, str]], list[Any], list[str]]:
    with graphs.open_project(db) as project:
        model, tools = _model(), Shout()
        g = project.graph(model, tools=tools, memory=False)
        asked: list[Any] = []
        first = project.run(
            g, REQUEST, task_id="t1", max_steps=1, permissions=ASK, approvals=lambda r: {"action": "approve"}
        )
        asked.append((first.stopped_early, first.state.progress.executor_steps))
        last = project.resume("t1", graph=g, approvals=lambda r: {"action": "approve"}, on_request=asked.append)
        asked.append(last.state.control.status)
        return _log(project, "t1"), [a if not isinstance(a, dict) else a["tool"] for a in asked], tools.ran


async def _async(db: str) -> tuple[Any, ...]:
    with graphs.open_project(db) as project:
        model, tools = _model(), Shout()
        g = project.graph(model, tools=tools, memory=False)
        asked: list[Any] = []

        async def approve(request: dict[str, Any]) -> dict[str, Any]:
            await asyncio.sleep(0)
            return {"action": "approve"}

        first = await project.arun(g, REQUEST, task_id="t1", max_steps=1, permissions=ASK, approvals=approve)
        asked.append((first.stopped_early, first.state.progress.executor_steps))
        points: list[Any] = []
        last = await project.aresume("t1", graph=g, approvals=approve, on_request=asked.append, on_resume=points.append)
        asked.append(last.state.control.status)
        again = await project.aresume("t1", graph=g)
        with pytest.raises(UnknownTaskError):
            await project.aresume("nope", graph=g)
        shown = [a if not isinstance(a, dict) else a["tool"] for a in asked]
        return _log(project, "t1"), shown, tools.ran, model.apis, points, again.already_finished


def _check(sync_db: str, async_db: str) -> None:
    log, asked, ran = _sync(sync_db)
    alog, aasked, aran, apis, points, finished = asyncio.run(_async(async_db))
    assert alog == log
    kinds = [k for k, _, _ in alog]
    assert kinds.count("resume.started") == 1 and kinds.count("tool.result.received") == 2
    assert kinds[-1] == "task.completed" and json.loads(alog[-1][2])["status"] == "completed"
    assert asked == [(True, 1), "shout", "completed"]  # c1 approved in the run, c2 in the resume
    assert aasked == asked
    assert ran == ["execute c1", "execute c2"] and aran == ["aexecute c1", "aexecute c2"]
    assert apis == ["async"] * 6
    assert [(p.executor_steps, p.next_nodes) for p in points] == [(1, ("executor",))]
    assert finished is True


def test_arun_and_aresume_on_sqlite_equal_run_and_resume(tmp_path: Path) -> None:
    _check(str(tmp_path / "sync.sqlite"), str(tmp_path / "async.sqlite"))


@pytest.mark.postgres
def test_arun_and_aresume_on_postgres_equal_run_and_resume(tmp_path: Path, pg_db: str) -> None:
    _check(str(tmp_path / "sync.sqlite"), pg_db)

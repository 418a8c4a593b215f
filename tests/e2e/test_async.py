"""``ainvoke``/``astream`` on a project's checkpointer (SQLite, Postgres), the default graph and a custom one.

Each async run's event log equals the sync ``invoke``'s (ids and timestamps aside); the model is
called with ``ainvoke`` (its ``_agenerate``), a tool's ``aexecute`` is awaited, and no event-log
or checkpoint write runs on the event loop's thread.
"""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.graph import START, StateGraph

import graphs
import nodes
from graphs.checkpoint import checkpoint_serde
from nodes.testing import complete, plan, review, tool_call


class CountingModel(nodes.ScriptedChatModel):
    """The scripted model, noting which API each call came through."""

    apis: list[str] = []  # noqa: RUF012  (a pydantic field: each instance gets its own copy)

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        self.apis.append("sync")
        return super()._generate(messages, stop, run_manager, **kw)

    async def _agenerate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        self.apis.append("async")
        await asyncio.sleep(0)  # a real await on the loop
        meta = dict(run_manager.metadata) if run_manager and run_manager.metadata else {}
        return ChatResult(generations=[ChatGeneration(message=self._answer(messages, meta))])


class Shout:
    """A tool with a sync and an async way; it notes which one ran."""

    def __init__(self) -> None:
        self.ran: list[str] = []

    def schemas(self) -> list[dict[str, Any]]:
        return [nodes.function_schema("shout", "Shout a text.", {"text": {"type": "string"}}, ["text"])]

    def has_side_effects(self, tool: str) -> bool:
        return tool == "shout"

    def execute(self, call_id: str, tool: str, arguments: dict[str, Any]) -> str:
        self.ran.append(f"execute {call_id}")
        return arguments["text"].upper()

    async def aexecute(self, call_id: str, tool: str, arguments: dict[str, Any]) -> str:
        await asyncio.sleep(0)
        self.ran.append(f"aexecute {call_id}")
        return arguments["text"].upper()


def _model() -> CountingModel:
    return CountingModel(
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


REQUEST = "Shout hello, then bye. Do not whisper."


def _custom_graph(project: graphs.Project, model: Any, tools: Any) -> Any:
    env = graphs.NodeEnv(events=project.stores.events, artifacts=project.stores.artifacts)
    g = StateGraph(graphs.TaskContext)
    g.add_node("planner", graphs.make_planner_node(model, env))
    g.add_node("executor", graphs.make_executor_node(model, env, tools))
    g.add_node("tools", graphs.make_tool_node(env, tools))
    g.add_node("reviewer", graphs.make_reviewer_node(model, env))
    g.add_node("recovery", graphs.make_recovery_node(model, env))
    g.add_edge(START, "planner")
    for node in ("planner", "executor", "tools", "recovery", "reviewer"):
        g.add_conditional_edges(node, getattr(graphs, f"after_{node}"))
    return graphs.compile_graph(g, checkpointer=project.checkpointer)


def _graph(kind: str, project: graphs.Project, model: Any, tools: Any) -> Any:
    if kind == "default":
        return project.graph(model, tools=tools, memory=False)
    return _custom_graph(project, model, tools)


def _strip(x: Any) -> Any:
    """``x`` without ids, timestamps and latencies (a checkpoint's id, a resume's token, a model call's ms)."""
    if isinstance(x, dict):
        return {k: _strip(v) for k, v in x.items() if k not in ("timestamp", "token", "checkpoint_id", "latency_ms")}
    if isinstance(x, list):
        return [_strip(v) for v in x]
    return x


def _log(project: graphs.Project, task_id: str) -> list[tuple[str, str, str]]:
    """The task's events as ``(kind, actor, payload JSON)``, without ids and timestamps."""
    return [
        (e.kind, e.actor, json.dumps(_strip(e.payload), sort_keys=True)) for e in project.stores.events.read(task_id)
    ]


def _state(values: Any) -> dict[str, Any]:
    """A final state without its event window, ids and timestamps."""
    return _strip(graphs.TaskContext.model_validate(values).model_dump(mode="json", exclude={"events"}))


def _watch_threads(project: graphs.Project) -> list[str]:
    """Note the thread of every event-log append and checkpoint write of ``project``."""
    seen: list[str] = []
    events, saver = project.stores.events, project.checkpointer
    append, put, put_writes = events.append, saver.put, saver.put_writes

    def wrap(fn: Any, what: str) -> Any:
        def noted(*a: Any, **kw: Any) -> Any:
            seen.append(f"{what}:{threading.current_thread().name}")
            return fn(*a, **kw)

        return noted

    events.append = wrap(append, "append")  # type: ignore[method-assign]
    saver.put = wrap(put, "put")  # type: ignore[method-assign]
    saver.put_writes = wrap(put_writes, "put_writes")  # type: ignore[method-assign]
    return seen


def _sync_run(db: str, kind: str) -> tuple[list[tuple[str, str, str]], dict[str, Any], list[str], list[str]]:
    with graphs.open_project(db) as project:
        model, tools = _model(), Shout()
        graph = _graph(kind, project, model, tools)
        out = graph.invoke(graphs.new_task(REQUEST, "t1"), graphs.thread_config("t1"), durability="sync")
        return _log(project, "t1"), out, model.apis, tools.ran


async def _async_run(db: str, kind: str, how: str) -> tuple[Any, ...]:
    with graphs.open_project(db) as project:
        seen = _watch_threads(project)
        model, tools = _model(), Shout()
        graph = _graph(kind, project, model, tools)
        task, cfg = graphs.new_task(REQUEST, "t1"), graphs.thread_config("t1")
        if how == "ainvoke":
            out = await graph.ainvoke(task, cfg, durability="sync")
        else:
            updates = [u async for u in graph.astream(task, cfg, stream_mode="updates", durability="sync")]
            assert [next(iter(u)) for u in updates][:3] == ["planner", "executor", "tools"]
            out = (await graph.aget_state(cfg)).values
        loop_thread = threading.current_thread().name
        return _log(project, "t1"), out, model.apis, tools.ran, seen, loop_thread


def _check_async_equals_sync(sync_db: str, async_db: str, kind: str, how: str) -> None:
    sync_log, sync_out, sync_apis, sync_ran = _sync_run(sync_db, kind)
    log, out, apis, ran, seen, loop_thread = asyncio.run(_async_run(async_db, kind, how))
    assert log == sync_log
    assert [k for k, _, _ in log].count("tool.result.received") == 2
    assert _state(out)["control"]["status"] == "completed"
    assert _state(out) == _state(sync_out)
    # sync: invoke and execute; async: ainvoke and aexecute, the writes off the event loop's thread
    assert sync_apis == ["sync"] * 6 and apis == ["async"] * 6
    assert sync_ran == ["execute c1", "execute c2"] and ran == ["aexecute c1", "aexecute c2"]
    assert {w.split(":")[0] for w in seen} == {"append", "put", "put_writes"}
    assert [w for w in seen if w.endswith(f":{loop_thread}")] == []


@pytest.mark.parametrize("how", ["ainvoke", "astream"])
@pytest.mark.parametrize("kind", ["default", "custom"])
def test_async_run_on_sqlite_equals_invoke(tmp_path: Path, kind: str, how: str) -> None:
    _check_async_equals_sync(str(tmp_path / "sync.sqlite"), str(tmp_path / "async.sqlite"), kind, how)


@pytest.mark.postgres
@pytest.mark.parametrize("how", ["ainvoke", "astream"])
@pytest.mark.parametrize("kind", ["default", "custom"])
def test_async_run_on_postgres_equals_invoke(tmp_path: Path, pg_db: str, kind: str, how: str) -> None:
    # the same task on SQLite, sync, and on Postgres, async: one log
    _check_async_equals_sync(str(tmp_path / "sync.sqlite"), pg_db, kind, how)


def test_langgraph_async_sqlite_saver_runs_a_custom_graph(tmp_path: Path) -> None:
    """A custom graph compiled with LangGraph's own ``AsyncSqliteSaver`` runs the nodes the same."""
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    sync_log, _, _, _ = _sync_run(str(tmp_path / "sync.sqlite"), "custom")

    async def run() -> list[tuple[str, str, str]]:
        with graphs.open_project(tmp_path / "stores.sqlite") as project:
            async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "aio.sqlite")) as saver:
                saver.serde = checkpoint_serde()
                project.checkpointer = saver
                graph = _custom_graph(project, _model(), Shout())
                await graph.ainvoke(graphs.new_task(REQUEST, "t1"), graphs.thread_config("t1"), durability="sync")
                assert (await graph.aget_state(graphs.thread_config("t1"))).values["control"].status == "completed"
            return _log(project, "t1")

    assert asyncio.run(run()) == sync_log


def test_concurrent_async_tasks_on_one_sqlite_project(tmp_path: Path) -> None:
    """Tasks gathered on one event loop share the project's file: each log is the sync run's."""
    sync_log, _, _, _ = _sync_run(str(tmp_path / "sync.sqlite"), "default")

    async def run() -> dict[str, list[tuple[str, str, str]]]:
        with graphs.open_project(tmp_path / "shared.sqlite") as project:
            # the stores and the checkpointer queue for one lock (no busy wait between the two)
            assert project.checkpointer.lock is project.stores.lock  # type: ignore[attr-defined]

            async def one(tid: str) -> None:
                graph = project.graph(_model(), tools=Shout(), memory=False)
                await graph.ainvoke(graphs.new_task(REQUEST, tid), graphs.thread_config(tid), durability="sync")

            tids = [f"t{i}" for i in range(8)]
            await asyncio.gather(*(one(t) for t in tids))
            return {t: _log(project, t) for t in tids}

    logs = asyncio.run(run())
    # the sync run's events in its order (their payloads name their own task), each result once
    shape = [(k, a) for k, a, _ in sync_log]
    results = [p for k, _, p in sync_log if k == "tool.result.received"]
    assert {t: [(k, a) for k, a, _ in log] for t, log in logs.items()} == {t: shape for t in logs}
    assert {t: [p for k, _, p in log if k == "tool.result.received"] for t, log in logs.items()} == {
        t: results for t in logs
    }

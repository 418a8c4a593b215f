"""Every LangGraph stream mode runs a task as ``invoke`` does.

The acceptance matrix: each stream mode (``values``, ``updates``, ``messages``, ``custom``,
``debug``, several at once, ``subgraphs=True``, ``astream_events(version="v2")``) x {the default
graph, a graph of one's own} x {SQLite, Postgres} x {sync, async}. Every run's event log and final
state equal those of ``invoke`` on the same stores (timestamps and ids aside: :func:`comparable`),
and each mode carries what it should: ``messages`` the scripted model's tokens, several chunks a
call, tagged with the role node and call; ``custom`` the tool node's progress records.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessageChunk
from langgraph.graph import START, StateGraph
from run_compare import comparable

import graphs
import nodes
from context import TaskContext, replay
from nodes.testing import complete, plan, review, tool_call

TASK_ID = "s1"
REQUEST = "Shout hello, then bye. Do not whisper."
#: The node each superstep runs, as ``updates`` reports it.
NODE_ORDER = ["planner", "executor", "tools", "executor", "executor", "tools", "executor", "reviewer"]

# -- the task: two scripted steps, each a tool call then complete_step -----------------------


class Shout:
    """A tool executor with one read-only tool, ``shout``."""

    def schemas(self) -> list[dict[str, Any]]:
        return [nodes.function_schema("shout", "Shout a text.", {"text": {"type": "string"}}, ["text"])]

    def has_side_effects(self, tool: str) -> bool:
        return False

    def execute(self, call_id: str, tool: str, arguments: dict[str, Any]) -> str:
        return arguments["text"].upper()


def model() -> nodes.ScriptedChatModel:
    return nodes.ScriptedChatModel(
        script={
            "planner": [plan("Shout hello", "Shout bye", goal="hello and bye shouted")],
            "executor": [
                tool_call("shout", {"text": "hello"}, id="c1", content="Shout hello at once."),
                complete("shouted hello", findings=["HELLO came back"]),
                tool_call("shout", {"text": "bye"}, id="c2", content="Now bye."),
                complete("shouted bye"),
            ],
            "reviewer": [review("approve", "both were shouted")],
        }
    )


def default_graph(project: Any, checkpointer: Any) -> Any:
    return graphs.build_orchestrator(model(), tools=Shout(), checkpointer=checkpointer, stores=project.stores)


def own_graph(project: Any, checkpointer: Any) -> Any:
    """The README's "Your own workflow": the role nodes wired into a StateGraph of one's own."""
    m, tools = model(), Shout()
    env = graphs.NodeEnv(events=project.stores.events, artifacts=project.stores.artifacts)
    g = StateGraph(graphs.TaskContext)
    g.add_node("planner", graphs.make_planner_node(m, env))
    g.add_node("executor", graphs.make_executor_node(m, env, tools))
    g.add_node("tools", graphs.make_tool_node(env, tools))
    g.add_node("reviewer", graphs.make_reviewer_node(m, env))
    g.add_node("recovery", graphs.make_recovery_node(m, env))
    g.add_edge(START, "planner")
    for node in ("planner", "executor", "tools", "recovery", "reviewer"):
        g.add_conditional_edges(node, getattr(graphs, f"after_{node}"))
    return graphs.compile_graph(g, checkpointer=checkpointer)


def nested_graph(project: Any, checkpointer: Any) -> Any:
    """A graph whose one node, ``work``, is the own workflow: a subgraph."""
    outer = StateGraph(graphs.TaskContext)
    outer.add_node("work", own_graph(project, None))  # (the subgraph uses its parent's checkpointer)
    outer.add_edge(START, "work")
    return graphs.compile_graph(outer, checkpointer=checkpointer)


GRAPHS = {"default": default_graph, "own": own_graph, "nested": nested_graph}

# -- stores: SQLite (the project's) or Postgres, with a sync or async LangGraph saver -----------


@contextlib.contextmanager
def sync_saver(backend: str, db: str, tmp: Path) -> Iterator[Any]:
    if backend == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        conn = sqlite3.connect(tmp / "checkpoints.sqlite", check_same_thread=False)
        try:
            yield SqliteSaver(conn, serde=graphs.checkpoint_serde())
        finally:
            conn.close()
    else:
        from langgraph.checkpoint.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(db) as saver:
            saver.serde = graphs.checkpoint_serde()
            saver.setup()
            yield saver


@contextlib.asynccontextmanager
async def async_saver(backend: str, db: str, tmp: Path) -> AsyncIterator[Any]:
    if backend == "sqlite":
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        async with AsyncSqliteSaver.from_conn_string(str(tmp / "checkpoints.sqlite")) as saver:
            saver.serde = graphs.checkpoint_serde()
            yield saver
    else:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

        async with AsyncPostgresSaver.from_conn_string(db) as saver:
            saver.serde = graphs.checkpoint_serde()
            await saver.setup()
            yield saver


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str, str]]:
    """``(backend, db of the invoke run, db of the streamed run)``: two fresh SQLite files, or
    (``[postgres]``) two fresh Postgres databases, dropped afterwards."""
    if request.param == "sqlite":
        yield "sqlite", str(tmp_path / "invoke.sqlite"), str(tmp_path / "stream.sqlite")
        return
    import psycopg

    first: str = request.getfixturevalue("pg_db")
    base, name = first.rsplit("/", 1)
    with psycopg.connect(first, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}_s"')
    yield "postgres", first, f"{base}/{name}_s"
    with psycopg.connect(first, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}_s" WITH (FORCE)')


def run_log(project: Any, cfg: Any, graph: Any) -> tuple[list[dict[str, Any]], Any]:
    state = graph.get_state(cfg).values
    events = project.stores.events.read(TASK_ID)
    assert replay(events) == TaskContext.model_validate(state)  # the log folds to the checkpoint
    return comparable(events, state)


def baseline(backend: str, db: str, tmp: Path, which: str) -> tuple[list[dict[str, Any]], Any]:
    """What ``invoke`` records: the log and final state of the task on its own database."""
    base = tmp / "invoke"
    base.mkdir()
    with graphs.open_project(db) as project, sync_saver(backend, db, base) as saver:
        g = GRAPHS[which](project, saver)
        cfg = graphs.thread_config(TASK_ID)
        g.invoke(graphs.new_task(REQUEST, TASK_ID), cfg)
        return run_log(project, cfg, g)


# -- the modes ---------------------------------------------------------------------------------

#: ``id: (stream keyword arguments, async only)``; ``events`` is ``astream_events(version="v2")``.
MODES: dict[str, tuple[dict[str, Any], bool]] = {
    "values": ({"stream_mode": "values"}, False),
    "updates": ({"stream_mode": "updates"}, False),
    "messages": ({"stream_mode": "messages"}, False),
    "custom": ({"stream_mode": "custom"}, False),
    "debug": ({"stream_mode": "debug"}, False),
    "several": ({"stream_mode": ["updates", "messages", "custom"]}, False),
    "subgraphs": ({"stream_mode": ["updates", "custom"], "subgraphs": True}, False),
    "events": ({}, True),
}
CASES = [
    pytest.param(mode, flavour, id=f"{mode}-{flavour}")
    for mode, (_, async_only) in MODES.items()
    for flavour in ("sync", "async")
    if flavour == "async" or not async_only
]


def stream_chunks(backend: str, db: str, tmp: Path, which: str, mode: str, flavour: str) -> tuple[list[Any], Any]:
    """Stream the task with ``mode``: ``(every chunk, its comparable log and state)``."""
    kwargs, _ = MODES[mode]
    run = tmp / "stream"
    run.mkdir()
    url = db
    task, cfg = graphs.new_task(REQUEST, TASK_ID), graphs.thread_config(TASK_ID)
    with graphs.open_project(url) as project:
        if flavour == "sync":
            with sync_saver(backend, url, run) as saver:
                g = GRAPHS[which](project, saver)
                chunks = list(g.stream(task, cfg, **kwargs))
                return chunks, run_log(project, cfg, g)

        async def go() -> tuple[list[Any], Any]:
            async with async_saver(backend, url, run) as saver:
                g = GRAPHS[which](project, saver)
                if mode == "events":
                    chunks = [e async for e in g.astream_events(task, cfg, version="v2")]
                else:
                    chunks = [c async for c in g.astream(task, cfg, **kwargs)]
                state = (await g.aget_state(cfg)).values
                events = project.stores.events.read(TASK_ID)
                assert replay(events) == TaskContext.model_validate(state)
                return chunks, comparable(events, state)

        return asyncio.run(go())


@pytest.mark.parametrize("which", ["default", "own"])
@pytest.mark.parametrize(("mode", "flavour"), CASES)
def test_stream_mode_records_what_invoke_records(
    database: tuple[str, str, str],
    tmp_path: Path,
    which: str,
    mode: str,
    flavour: str,
) -> None:
    backend, invoked_db, streamed_db = database
    expected = baseline(backend, invoked_db, tmp_path, which)
    chunks, got = stream_chunks(backend, streamed_db, tmp_path, which, mode, flavour)
    assert got[1]["control"]["status"] == "completed"
    assert got == expected
    check_chunks(mode, chunks, got[0])


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_subgraph_streams_in_its_namespace(database: tuple[str, str, str], tmp_path: Path, flavour: str) -> None:
    """The own workflow as a node of another graph: ``subgraphs=True`` streams the inner nodes'
    updates and progress under the subgraph's namespace; the log is invoke's."""
    backend, invoked_db, streamed_db = database
    expected = baseline(backend, invoked_db, tmp_path, "nested")
    chunks, got = stream_chunks(backend, streamed_db, tmp_path, "nested", "subgraphs", flavour)
    assert got == expected and got[1]["control"]["status"] == "completed"
    spaces = {ns for ns, _, _ in chunks}
    (inner,) = spaces - {()}
    assert spaces == {(), inner} and len(inner) == 1 and inner[0].startswith("work:")
    assert [n for ns, kind, d in chunks if kind == "updates" and ns == inner for n in d] == NODE_ORDER
    assert [n for ns, kind, d in chunks if kind == "updates" and ns == () for n in d] == ["work"]
    assert [d for ns, kind, d in chunks if kind == "custom" and ns == inner] == PROGRESS


# -- what each mode carries --------------------------------------------------------------------

PROGRESS = [
    {"kind": "tool.started", "call_id": "c1", "tool": "shout"},
    {"kind": "tool.finished", "call_id": "c1", "tool": "shout", "status": "ok", "output_chars": 5},
    {"kind": "tool.started", "call_id": "c2", "tool": "shout"},
    {"kind": "tool.finished", "call_id": "c2", "tool": "shout", "status": "ok", "output_chars": 3},
]


def model_calls(log: list[dict[str, Any]]) -> list[tuple[str, int]]:
    """``(role, role call)`` of each model call of the log, in order (a role's first call is 1)."""
    out, per_role = [], dict[str, int]()
    for e in log:
        if e["kind"] == "context.built":
            role = e["payload"]["role"]
            per_role[role] = per_role.get(role, 0) + 1
            out.append((role, per_role[role]))
    return out


def check_messages(pairs: list[tuple[Any, dict[str, Any]]], log: list[dict[str, Any]]) -> None:
    """``messages``: several chunks per call, each tagged with its node, role and call; added up
    per call, they are the answer the log recorded."""
    calls: dict[tuple[str, int], list[AIMessageChunk]] = {}
    for chunk, meta in pairs:
        assert isinstance(chunk, AIMessageChunk)
        assert meta["langgraph_node"] == meta["role"]
        calls.setdefault((meta["role"], meta["role_call"]), []).append(chunk)
    assert list(calls) == model_calls(log)
    assert all(len(c) > 2 for c in calls.values())
    first = calls[("executor", 1)]
    assert [c.content for c in first if c.content] == ["Shout", " hello", " at", " once."]
    whole = first[0]
    for c in first[1:]:
        whole = whole + c
    assert whole.content == "Shout hello at once."
    assert [(t["name"], t["args"], t["id"]) for t in whole.tool_calls] == [("shout", {"text": "hello"}, "c1")]
    plan_call = calls[("planner", 1)]
    summed = plan_call[0]
    for c in plan_call[1:]:
        summed = summed + c
    (submitted,) = summed.tool_calls
    assert submitted["name"] == "submit_plan"
    assert [s["title"] for s in submitted["args"]["steps"]] == ["Shout hello", "Shout bye"]


def check_chunks(mode: str, chunks: list[Any], log: list[dict[str, Any]]) -> None:
    """Each mode's chunks carry what that mode promises."""
    if mode == "values":
        assert TaskContext.model_validate(chunks[-1]).control.status == "completed"
    elif mode == "updates":
        assert [n for c in chunks for n in c] == NODE_ORDER
    elif mode == "messages":
        check_messages(chunks, log)
    elif mode == "custom":
        assert chunks == PROGRESS
    elif mode == "debug":
        assert [c["payload"]["name"] for c in chunks if c["type"] == "task"] == NODE_ORDER
    elif mode == "several":
        by: dict[str, list[Any]] = {}
        for kind, data in chunks:
            by.setdefault(kind, []).append(data)
        assert sorted(by) == ["custom", "messages", "updates"]
        assert [n for c in by["updates"] for n in c] == NODE_ORDER
        assert by["custom"] == PROGRESS
        check_messages(by["messages"], log)
    elif mode == "subgraphs":
        assert {ns for ns, _, _ in chunks} == {()}
        assert [d for _, kind, d in chunks if kind == "custom"] == PROGRESS
        assert [n for _, kind, d in chunks if kind == "updates" for n in d] == NODE_ORDER
    else:  # astream_events v2: the chat model's stream events, tagged like ``messages``
        streamed = [e for e in chunks if e["event"] == "on_chat_model_stream"]
        check_messages([(e["data"]["chunk"], e["metadata"]) for e in streamed], log)
        assert [e["name"] for e in chunks if e["event"] == "on_chain_start" and e["name"] in NODE_ORDER] == NODE_ORDER


def test_run_command_streams_its_output_lines_as_they_come(tmp_path: Path) -> None:
    """The workspace's ``run_command`` sends each output line as a ``tool.output`` record while
    the command runs; the call's output is the same streamed or not, and outside a graph the
    records go nowhere."""
    from typing_extensions import TypedDict

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "count.py").write_text("import sys\nfor i in range(3):\n    print('line', i, flush=True)\nsys.exit(2)\n")
    tools = nodes.WorkspaceTools(ws)
    argv = {"argv": ["python", "count.py"]}

    class State(TypedDict):
        output: str

    def run(state: State) -> State:
        return {"output": tools.execute("c9", "run_command", argv).output}

    g = StateGraph(State)
    g.add_node("run", run)
    g.add_edge(START, "run")
    chunks = list(g.compile().stream({"output": ""}, stream_mode=["custom", "values"]))
    custom = [d for kind, d in chunks if kind == "custom"]
    assert custom == [
        {"kind": "tool.output", "call_id": "c9", "tool": "run_command", "line": f"line {i}\n"} for i in range(3)
    ]
    streamed = chunks[-1][1]["output"]
    assert streamed == "$ python count.py\nline 0\nline 1\nline 2\n[exit code 2]\n"
    assert tools.execute("c10", "run_command", argv).output == streamed  # not in a graph: no records, same output

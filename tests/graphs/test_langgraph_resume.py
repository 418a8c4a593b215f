"""A resume the LangGraph way (``graph.invoke(None, cfg)``, ``Command(resume=...)``) from another
graph object (a new process) is recorded as ``taskctx resume`` records it: the stored data is
checked, ``resume.started`` is recorded once, and the facts whose files changed while the task
was paused are marked stale. ``update_state`` on a graph compiled with ``compile_graph`` is
recorded as ``state.edited``, and the task resumes after it."""

from __future__ import annotations

import asyncio
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from context import DamagedStoreError, Permissions, SqliteStores, TaskContext, replay
from graphs import build_orchestrator, checkpoint_serde, new_task, open_project, thread_config
from nodes import ScriptedChatModel, WorkspaceTools
from nodes.testing import complete, plan, review, tool_call

SCRIPT = {
    "planner": [plan("Read the config")],
    "executor": [
        tool_call("read_file", {"path": "conf.txt"}, id="r1"),
        complete("read it", findings=["conf.txt sets port 80"]),
    ],
    "reviewer": [review("approve", "the port is read from conf.txt")],
}


def _ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "conf.txt").write_text("port = 80\n")
    return ws


def _graph(db: str, ws: Path, script: dict[str, Any] = SCRIPT) -> tuple[Any, Any]:
    """A graph on ``db``, built as a new process builds it (its own project, model and tools)."""
    project = open_project(db)
    tools = WorkspaceTools(ws, receipts_dir=ws.parent / "receipts")
    g = build_orchestrator(
        ScriptedChatModel(script=script), tools=tools, checkpointer=project.checkpointer, stores=project.stores
    )
    return g, project


def _paused(tmp_path: Path, tid: str, before: str) -> tuple[Path, str, Any, Any, Any]:
    """A task of :data:`SCRIPT` run to ``interrupt_before=[before]``: ``(ws, db, cfg, graph, project)``."""
    ws, db, cfg = _ws(tmp_path), str(tmp_path / "t.sqlite"), thread_config(tid)
    g, project = _graph(db, ws)
    g.invoke(new_task("Read the config.", tid), cfg, interrupt_before=[before], durability="sync")
    return ws, db, cfg, g, project


def _kinds(events: list[Any]) -> list[str]:
    return [e.kind for e in events]


def test_invoke_none_from_a_new_process_records_the_resume_and_the_stale_fact(tmp_path: Path) -> None:
    ws, db, cfg, a, pa = _paused(tmp_path, "p1", "reviewer")
    paused = a.get_state(cfg)
    assert paused.next == ("reviewer",)
    seen = pa.stores.events.last_seq("p1")
    pa.close()
    (ws / "conf.txt").write_text("port = 8080\n")  # changed while the task is paused

    b, pb = _graph(db, ws)
    b.invoke(None, cfg, durability="sync")
    events = pb.stores.events.read("p1")
    new = events[seen:]
    assert _kinds(new)[:2] == ["resume.started", "fact.stale"]
    started = new[0].payload
    assert started["node"] == "reviewer" and re.fullmatch(r"[0-9a-f]{32}", started["token"])
    assert started["from_checkpoint"] == paused.config["configurable"]["checkpoint_id"]
    stale = [(e.payload["path"], e.payload["cause"]) for e in new if e.kind == "fact.stale"]
    assert stale and set(stale) == {("conf.txt", "resume")}
    assert _kinds(events).count("resume.started") == 1
    state = TaskContext.model_validate(b.get_state(cfg).values)
    assert state.control.status == "completed" and replay(events) == state
    assert state.events.last_resume_token == started["token"]
    pb.close()


def test_a_resume_through_several_nodes_is_recorded_once_and_each_resume_anew(tmp_path: Path) -> None:
    ws, db, cfg, a, pa = _paused(tmp_path, "p2", "executor")
    pa.close()
    b, pb = _graph(db, ws)
    b.invoke(None, cfg, interrupt_before=["reviewer"], durability="sync")  # executor, tools, executor: one resume
    first = [e for e in pb.stores.events.read("p2") if e.kind == "resume.started"]
    assert [e.payload["node"] for e in first] == ["executor"]
    pb.close()
    c, pc = _graph(db, ws)
    c.invoke(None, cfg, durability="sync")
    events = pc.stores.events.read("p2")
    starts = [e for e in events if e.kind == "resume.started"]
    assert [e.payload["node"] for e in starts] == ["executor", "reviewer"]
    assert len({e.payload["token"] for e in starts}) == 2
    assert TaskContext.model_validate(c.get_state(cfg).values).control.status == "completed"
    pc.close()


def test_the_graph_that_paused_the_thread_goes_on_without_a_resume(tmp_path: Path) -> None:
    ws, db, cfg, a, pa = _paused(tmp_path, "p3", "reviewer")
    a.invoke(None, cfg, durability="sync")  # the same caller goes on: not a resume
    assert "resume.started" not in _kinds(pa.stores.events.read("p3"))
    assert TaskContext.model_validate(a.get_state(cfg).values).control.status == "completed"
    pa.close()


def test_command_resume_from_a_new_process_records_the_resume(tmp_path: Path) -> None:
    ws, db, cfg = _ws(tmp_path), str(tmp_path / "t.sqlite"), thread_config("p4")
    script = {
        "planner": [plan("Write the note")],
        "executor": [tool_call("write_file", {"path": "note.txt", "content": "hi\n"}, id="w1"), complete("wrote")],
        "reviewer": [review("approve", "written")],
    }
    a, pa = _graph(db, ws, script)
    task = new_task("Write the note.", "p4", permissions=Permissions(requires_approval=["write_file"]))
    a.invoke(task, cfg, durability="sync")
    (ask,) = a.get_state(cfg).interrupts
    seen = pa.stores.events.last_seq("p4")
    pa.close()

    b, pb = _graph(db, ws, script)
    b.invoke(Command(resume={"action": "approve", "request_id": ask.value["request_id"]}), cfg, durability="sync")
    new = pb.stores.events.read("p4")[seen:]
    assert _kinds(new)[:2] == ["resume.started", "permission.granted"]
    assert new[0].payload["node"] == "tools" and _kinds(new).count("resume.started") == 1
    assert (ws / "note.txt").read_text() == "hi\n"
    assert TaskContext.model_validate(b.get_state(cfg).values).control.status == "completed"
    pb.close()


def test_a_resume_of_damaged_data_is_refused_before_any_node_runs(tmp_path: Path) -> None:
    ws, db, cfg, a, pa = _paused(tmp_path, "p5", "reviewer")
    seen = pa.stores.events.last_seq("p5")
    pa.close()
    with sqlite3.connect(db) as conn:  # the log changed behind taskctx's back
        conn.execute("UPDATE taskctx_events SET payload = replace(payload, 'Read the config.', 'Something else.')")
    b, pb = _graph(db, ws)
    with pytest.raises(DamagedStoreError, match=r"^task 'p5' is damaged: "):
        b.invoke(None, cfg, durability="sync")
    assert SqliteStores(db).events.last_seq("p5") == seen
    pb.close()


def test_update_state_on_a_compile_graph_graph_is_recorded_and_the_task_resumes(tmp_path: Path) -> None:
    from langgraph.graph import START, StateGraph

    from graphs import compile_graph, routing
    from graphs.orchestrator import NoTools
    from nodes import (
        NodeEnv,
        make_executor_node,
        make_planner_node,
        make_recovery_node,
        make_reviewer_node,
        make_tool_node,
    )

    model = ScriptedChatModel(
        script={"planner": [plan("Do it")], "executor": [complete("done")], "reviewer": [review("approve", "ok")]}
    )
    stores = SqliteStores(str(tmp_path / "e.sqlite"))
    env = NodeEnv(events=stores.events, artifacts=stores.artifacts)
    g = StateGraph(TaskContext)
    for name, node in {
        "planner": make_planner_node(model, env),
        "executor": make_executor_node(model, env, NoTools()),
        "tools": make_tool_node(env, NoTools()),
        "recovery": make_recovery_node(model, env),
        "reviewer": make_reviewer_node(model, env),
    }.items():
        g.add_node(name, node)
    g.add_edge(START, "planner")
    for name in ("planner", "executor", "tools", "recovery", "reviewer"):
        g.add_conditional_edges(name, getattr(routing, f"after_{name}"))
    graph = compile_graph(g, checkpointer=InMemorySaver(serde=checkpoint_serde()), interrupt_before=["executor"])
    cfg = thread_config("e1")
    graph.invoke(new_task("Do it.\nDo not touch auth.go.", "e1"), cfg, durability="sync")
    ident = TaskContext.model_validate(graph.get_state(cfg).values).identity
    assert ident.constraints == ["Do not touch auth.go."]
    graph = graph.with_config({"tags": ["mine"]})  # a copy (as the LangGraph Server makes one) keeps the log
    graph.update_state(cfg, {"identity": ident.model_copy(update={"constraints": []})})
    edited = stores.events.read("e1")[-1]
    assert (edited.kind, edited.actor, edited.payload) == (
        "state.edited",
        "user",
        {"changes": {"identity": {"constraints": []}}, "as_node": None},
    )
    graph.invoke(None, cfg, durability="sync")  # no "restore the database from a backup": the edit is in the log
    events = stores.events.read("e1")
    state = TaskContext.model_validate(graph.get_state(cfg).values)
    assert state.control.status == "completed" and state.identity.constraints == [] and replay(events) == state
    assert [e.payload["node"] for e in events if e.kind == "resume.started"] == ["executor"]  # resumed after the edit


def test_ainvoke_none_from_a_new_graph_records_the_resume(tmp_path: Path) -> None:
    ws = _ws(tmp_path)
    stores, saver, cfg = SqliteStores(":memory:"), InMemorySaver(serde=checkpoint_serde()), thread_config("p6")

    def graph() -> Any:
        tools = WorkspaceTools(ws, receipts_dir=tmp_path / "receipts")
        return build_orchestrator(ScriptedChatModel(script=SCRIPT), tools=tools, checkpointer=saver, stores=stores)

    async def run() -> None:
        await graph().ainvoke(new_task("Read the config.", "p6"), cfg, interrupt_before=["reviewer"], durability="sync")
        await graph().ainvoke(None, cfg, durability="sync")

    asyncio.run(run())
    events = stores.events.read("p6")
    assert [e.payload["node"] for e in events if e.kind == "resume.started"] == ["reviewer"]
    assert events[-1].kind == "task.completed" and events[-1].payload["status"] == "completed"


@pytest.mark.parametrize(("resume", "starts"), [(None, ["reviewer"]), (False, [])])
def test_run_graph_lets_the_graph_decide_unless_told(tmp_path: Path, resume: bool | None, starts: list[str]) -> None:
    from graphs.runner import run_graph

    ws, db, cfg, a, pa = _paused(tmp_path, "p7", "reviewer")
    pa.close()
    b, pb = _graph(db, ws)
    done = run_graph(b, pb.stores, "p7", None, resume=resume)
    assert done.state.control.status == "completed"
    assert [e.payload["node"] for e in pb.stores.events.read("p7") if e.kind == "resume.started"] == starts
    pb.close()


def _hand_graph(db: str, ws: Path) -> tuple[Any, Any]:
    """:func:`_graph`'s task on a graph wired by hand, as own-workflow.md does: a NodeEnv of the
    project's events and artifacts, the tools given to the executor and tool nodes only."""
    from langgraph.graph import START, StateGraph

    from graphs import compile_graph, routing
    from nodes import (
        NodeEnv,
        make_executor_node,
        make_planner_node,
        make_recovery_node,
        make_reviewer_node,
        make_tool_node,
    )

    project = open_project(db)
    model, tools = ScriptedChatModel(script=SCRIPT), WorkspaceTools(ws, receipts_dir=ws.parent / "receipts")
    env = NodeEnv(events=project.stores.events, artifacts=project.stores.artifacts)
    g = StateGraph(TaskContext)
    g.add_node("planner", make_planner_node(model, env))
    g.add_node("executor", make_executor_node(model, env, tools))
    g.add_node("tools", make_tool_node(env, tools))
    g.add_node("recovery", make_recovery_node(model, env))
    g.add_node("reviewer", make_reviewer_node(model, env))
    g.add_edge(START, "planner")
    for name in ("planner", "executor", "tools", "recovery", "reviewer"):
        g.add_conditional_edges(name, getattr(routing, f"after_{name}"))
    assert env.workspace is tools  # (the nodes given the tools took them as the workspace to fingerprint)
    return compile_graph(g, checkpointer=project.checkpointer), project


def test_a_graph_wired_by_hand_marks_what_changed_while_paused_stale_on_resume(tmp_path: Path) -> None:
    ws, db, cfg = _ws(tmp_path), str(tmp_path / "h.sqlite"), thread_config("h1")
    a, pa = _hand_graph(db, ws)
    a.invoke(new_task("Read the config.", "h1"), cfg, interrupt_before=["reviewer"], durability="sync")
    seen = pa.stores.events.last_seq("h1")
    pa.close()
    (ws / "conf.txt").write_text("port = 8080\n")  # changed while the task is paused

    b, pb = _hand_graph(db, ws)
    b.invoke(None, cfg, durability="sync")
    new = pb.stores.events.read("h1")[seen:]
    assert _kinds(new)[:2] == ["resume.started", "fact.stale"]
    assert {(e.payload["path"], e.payload["cause"]) for e in new if e.kind == "fact.stale"} == {("conf.txt", "resume")}
    assert "file.modified" not in _kinds(new)  # (nothing blamed on the agent)
    pb.close()

"""LangGraph's time travel on a taskctx graph. ``get_state_history`` is derived from the event log:
every step of a task, also after its checkpoints were pruned. ``invoke(None, past_config)`` and
``update_state(past_config, ...)`` fork the task: a child task from that step, the parent left as
it was. On the default graph and on a graph of one's own, sync and async, SQLite and Postgres."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from langgraph.graph import END, START, StateGraph

import graphs
from context import TaskContext, replay
from graphs import new_task, open_project, thread_config
from graphs.checkpoint import prune_thread
from graphs.runner import run_graph
from graphs.time_travel import (
    PastCheckpointError,
    point_checkpoint_id,
    point_seq,
)
from nodes import ScriptedChatModel, ToolOutcome, function_schema
from nodes.testing import complete, plan, review, tool_call


class Probe:
    """One read-only tool, ``probe``, that answers ``probe says 42``."""

    def schemas(self) -> list[dict[str, Any]]:
        return [function_schema("probe", "Probe something.")]

    def has_side_effects(self, tool: str) -> bool:
        return False

    def execute(self, call_id: str, tool: str, arguments: dict[str, Any]) -> Any:
        return ToolOutcome("ok", "probe says 42\n")


def _model() -> ScriptedChatModel:
    return ScriptedChatModel(
        script={
            "planner": [plan("Probe", "Report")],
            "executor": [
                tool_call("probe", {}, id="c-1"),
                complete("probed: 42"),
                tool_call("probe", {}, id="c-2"),
                complete("reported 42"),
            ],
            "reviewer": [review("approve", "42 it is")],
        }
    )


def _custom(project: Any, model: ScriptedChatModel) -> Any:
    """The default roles wired by hand, the executor's review sent through a path map."""
    env = graphs.NodeEnv(events=project.stores.events, artifacts=project.stores.artifacts, stores=project.stores)
    tools = Probe()
    g = StateGraph(TaskContext)
    g.add_node("planner", graphs.make_planner_node(model, env))
    g.add_node("executor", graphs.make_executor_node(model, env, tools))
    g.add_node("tools", graphs.make_tool_node(env, tools))
    g.add_node("reviewer", graphs.make_reviewer_node(model, env))
    g.add_node("recovery", graphs.make_recovery_node(model, env))
    g.add_edge(START, "planner")
    g.add_conditional_edges("planner", graphs.after_planner)
    g.add_conditional_edges(
        "executor",
        graphs.after_executor,
        {"tools": "tools", "recovery": "recovery", "executor": "executor", "reviewer": "reviewer", END: END},
    )
    g.add_conditional_edges("tools", graphs.after_tools)
    g.add_conditional_edges("reviewer", graphs.after_reviewer)
    g.add_conditional_edges("recovery", graphs.after_recovery)
    return graphs.compile_graph(g, checkpointer=project.checkpointer)


def _run(tmp_path: Any, kind: str, tid: str = "h1", db: str | None = None) -> tuple[Any, Any]:
    project = open_project(db or str(tmp_path / "h.sqlite"))
    model = _model()
    g = project.graph(model, tools=Probe()) if kind == "default" else _custom(project, model)
    result = run_graph(g, project.stores, tid, new_task("Probe it and report.", tid))
    assert result.state.control.status == "completed"
    return g, project


def _steps(events: list[Any]) -> list[tuple[int, str]]:
    """(last seq, node) of each node run, from the events' attempt keys: what the history must list."""
    out: list[tuple[int, str]] = []
    for e in events:
        node = e.causation_id.split(":", 1)[1]
        if out and events[out[-1][0] - 1].causation_id == e.causation_id:
            out[-1] = (e.seq, node)
        else:
            out.append((e.seq, node))
    return out


@pytest.mark.parametrize("kind", ["default", "custom"])
def test_history_after_pruning_is_every_step_of_the_log(tmp_path: Any, kind: str) -> None:
    _check_history(*_run(tmp_path, kind))


@pytest.mark.postgres
def test_history_after_pruning_on_postgres(tmp_path: Any, pg_db: str) -> None:
    g, project = _run(tmp_path, "default", db=pg_db)
    try:
        _check_history(g, project)
    finally:
        project.close()


def _check_history(g: Any, project: Any) -> None:
    cfg = {"configurable": {"thread_id": "h1"}}
    kept = list(g.get_state_history(cfg))  # LangGraph's own checkpoints, all of them (run_graph did not prune)
    assert prune_thread(project.checkpointer, "h1")
    events = project.stores.events.read("h1")
    steps = _steps(events)
    hist = list(g.get_state_history(cfg))
    gone = kept[3].config["configurable"]["checkpoint_id"]
    with pytest.raises(PastCheckpointError, match=f"^checkpoint {gone} of task 'h1' is not kept"):
        g.invoke(None, kept[3].config)
    assert len(list(project.checkpointer.list(cfg))) == 1
    # one snapshot per node run, newest first; the newest is the checkpoint LangGraph kept
    assert [s.metadata["taskctx_seq"] for s in hist] == [seq for seq, _ in reversed(steps)]
    assert hist[0].config == kept[0].config and hist[0].next == ()
    assert [point_seq(s.config["configurable"]["checkpoint_id"]) for s in hist[1:]] == [
        seq for seq, _ in reversed(steps[:-1])
    ]
    nodes = [n for _, n in steps]
    assert [s.next for s in hist] == [()] + [(n,) for n in reversed(nodes[1:])]
    assert [s.metadata["taskctx_node"] for s in hist[1:]] == list(reversed(nodes[:-1]))
    assert nodes == ["planner", "executor", "tools", "executor", "executor", "tools", "executor", "reviewer"]
    for s in hist:  # each state is the fold of the log up to its seq, as LangGraph had checkpointed it
        seq = s.metadata["taskctx_seq"]
        assert TaskContext.model_validate(s.values) == replay(events[:seq])
        (same,) = [k for k in kept if k.values and k.values["events"].cursor == seq]
        assert TaskContext.model_validate(same.values) == TaskContext.model_validate(s.values)
        assert s.next == same.next and s.metadata["step"] == same.metadata["step"]
    assert [s.parent_config for s in hist[:-1]] == [s.config for s in hist[1:]] and hist[-1].parent_config is None
    assert hist[1].created_at == str(events[steps[-2][0] - 1].timestamp)
    assert hist[1].tasks[0].name == "reviewer"
    # get_state of a log point: the same snapshot
    assert g.get_state(hist[3].config) == hist[3]._replace(parent_config=None)
    # before, limit, filter as LangGraph has them
    before = list(g.get_state_history(cfg, before=hist[2].config, limit=2))
    assert before == hist[3:5]
    assert [s.metadata["taskctx_seq"] for s in g.get_state_history(cfg, filter={"taskctx_node": "tools"})] == [
        seq for seq, n in reversed(steps) if n == "tools"
    ]

    async def both() -> tuple[list[Any], Any]:
        got = [s async for s in g.aget_state_history(cfg)]
        return got, await g.aget_state(hist[3].config)

    ahist, astate = asyncio.run(both())
    assert ahist == hist and astate == hist[3]._replace(parent_config=None)


def test_a_checkpoint_id_names_its_seq() -> None:
    assert point_checkpoint_id(17) == "00000000-0000-4000-8000-000000000011"
    assert point_seq(point_checkpoint_id(17)) == 17 and point_seq("1f1ee1d3-4204-6284-8020-1502d796afe9") is None


def _past(g: Any, project: Any, tid: str = "h1") -> Any:
    """The state after the first probe's result (the executor runs next), from the log: the checkpoints were pruned."""
    assert prune_thread(project.checkpointer, tid)
    hist = list(g.get_state_history(thread_config(tid)))
    (snap,) = [s for s in hist if s.metadata["taskctx_node"] == "tools"][-1:]
    assert snap.next == ("executor",) and snap.metadata["taskctx_seq"] == 7
    return snap


def _parent(project: Any, tid: str = "h1") -> tuple[list[str], Any]:
    return [e.id for e in project.stores.events.read(tid)], project.checkpointer.get_tuple(thread_config(tid)).config


@pytest.mark.parametrize("kind", ["default", "custom"])
def test_invoke_from_a_past_step_forks_and_the_child_completes(tmp_path: Path, kind: str) -> None:
    g, project = _run(tmp_path, kind)
    past = _past(g, project)
    before = _parent(project)
    out = g.invoke(None, past.config, durability="sync")
    child = TaskContext.model_validate(out)
    assert child.identity.task_id == "h1-fork-7" and child.control.status == "completed"
    parent_events = project.stores.events.read("h1")
    events = project.stores.events.read("h1-fork-7")
    # the child's log: the parent's first 7 events (the same ones), its task.forked, then its own run
    assert [e.id for e in events[:7]] == [e.id for e in parent_events[:7]]
    assert events[7].seq == 8 and events[7].kind == "task.forked"
    assert events[7].payload["parent_task_id"] == "h1" and events[7].payload["fork_seq"] == 7
    assert [e.kind for e in events[8:]].count("tool.result.received") == 1  # c-2 only: c-1 ran in the prefix
    assert replay(events) == child
    assert _parent(project) == before  # the parent: its log and its checkpoint as they were
    # again from the same step: another child
    again = TaskContext.model_validate(g.invoke(None, past.config, durability="sync"))
    assert again.identity.task_id == "h1-fork-7-2" and again.control.status == "completed"
    # the child's history goes back through the parent's prefix
    hist = list(g.get_state_history(thread_config("h1-fork-7")))
    assert [s.metadata["taskctx_seq"] for s in hist][-3:] == [7, 6, 3]


@pytest.mark.parametrize("kind", ["default", "custom"])
def test_update_state_at_a_past_step_forks_with_the_edit(tmp_path: Path, kind: str) -> None:
    g, project = _run(tmp_path, kind)
    past = _past(g, project)
    before = _parent(project)
    cfg = g.update_state(past.config, {"identity": {"constraints": ["do not probe twice"]}})
    assert cfg["configurable"]["thread_id"] == "h1-fork-7"
    events = project.stores.events.read("h1-fork-7")
    assert [e.kind for e in events[7:]] == ["task.forked", "state.edited"]
    assert events[8].actor == "user" and events[8].payload["changes"] == {
        "identity": {"constraints": ["do not probe twice"]}
    }
    snap = g.get_state(cfg)
    assert snap.values["identity"].constraints == ["do not probe twice"] and snap.next == ("executor",)
    out = TaskContext.model_validate(g.invoke(None, cfg, durability="sync"))
    assert out.identity.task_id == "h1-fork-7" and out.control.status == "completed"
    assert out.identity.constraints == ["do not probe twice"]
    assert _parent(project) == before
    # async: the same, into the next child
    acfg = asyncio.run(g.aupdate_state(past.config, {"identity": {"non_goals": ["speed"]}}))
    assert acfg["configurable"]["thread_id"] == "h1-fork-7-2"
    aout = TaskContext.model_validate(asyncio.run(g.ainvoke(None, acfg, durability="sync")))
    assert aout.identity.non_goals == ["speed"] and aout.control.status == "completed"


def test_a_named_child_and_refusals(tmp_path: Path) -> None:
    g, project = _run(tmp_path, "default")
    past = _past(g, project)
    named = {**past.config, "configurable": {**past.config["configurable"], "fork_task_id": "retry-1"}}
    out = TaskContext.model_validate(asyncio.run(g.ainvoke(None, named, durability="sync")))
    assert out.identity.task_id == "retry-1" and out.control.status == "completed"
    from graphs import new_task

    with pytest.raises(PastCheckpointError, match=r"a run from there forks the task and takes input None \(got"):
        g.invoke(new_task("again", "h1"), past.config)
    # the latest step named by its log point is the thread's latest: nothing forks
    head = list(g.get_state_history(thread_config("h1"), limit=1))[0]
    assert g.get_state(head.config).values["events"].cursor == head.metadata["taskctx_seq"]
    assert project.stores.events.last_seq("h1-fork-7") == 0


@pytest.mark.postgres
def test_langgraph_fork_on_postgres(tmp_path: Path, pg_db: str) -> None:
    g, project = _run(tmp_path, "default", db=pg_db)
    try:
        past = _past(g, project)
        before = _parent(project)
        cfg = g.update_state(past.config, {"identity": {"constraints": ["do not probe twice"]}})
        out = TaskContext.model_validate(g.invoke(None, cfg, durability="sync"))
        assert out.identity.task_id == "h1-fork-7" and out.control.status == "completed"
        assert replay(project.stores.events.read("h1-fork-7")) == out
        assert _parent(project) == before
    finally:
        project.close()


def test_an_edit_says_why_the_log_is_past_its_checkpoint(tmp_path: Path) -> None:
    from context import InvalidInputError, SqliteStores
    from graphs.edits import record_edit

    _, project = _run(tmp_path, "default")
    events = project.stores.events.read("h1")
    assert [e.causation_id for e in events[3:6]] == ["h1#3:executor"] * 3
    inflight = SqliteStores(":memory:")
    inflight.events.append("h1", events[:6])  # the executor's run on seq 3 has begun, not ended
    edit = {"identity": {"interpreted_goal": "another goal"}}
    with pytest.raises(InvalidInputError, match=r"^update_state: node 'executor' of task 'h1' has run on this "):
        record_edit(inflight.events, replay(events[:3]), edit, None)
    with pytest.raises(InvalidInputError) as moved:  # later node runs: the log has moved past the checkpoint
        record_edit(project.stores.events, replay(events[:3]), edit, None)
    assert str(moved.value) == (
        f"update_state: the event log of task 'h1' is at seq {len(events)} but this checkpoint knows seq 3 (the log "
        f"has moved past it: seq 4-{len(events)}); edit the task's latest state (a config without checkpoint_id)"
    )
    assert inflight.events.last_seq("h1") == 6 and project.stores.events.last_seq("h1") == len(events)


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_every_snapshot_of_the_history_carries_its_seq(tmp_path: Path, backend: str, request: Any) -> None:
    """Kept checkpoints (none pruned) and log points alike carry ``taskctx_seq`` and ``taskctx_node``."""
    db = request.getfixturevalue("pg_db") if backend == "postgres" else None
    g, project = _run(tmp_path, "default", db=db)
    try:
        cfg = thread_config("h1")
        steps = _steps(project.stores.events.read("h1"))
        hist = list(g.get_state_history(cfg))
        assert all({"taskctx_seq", "taskctx_node"} <= set(s.metadata) for s in hist)
        # the kept checkpoints: one per node run, the input's (step 0, seq 0) and LangGraph's first
        # (step -1, before the input was written: no task state, so None)
        assert [(s.metadata["step"], s.metadata["taskctx_seq"], s.metadata["taskctx_node"]) for s in hist] == [
            *((i, seq, node) for i, (seq, node) in reversed(list(enumerate(steps, 1)))),
            (0, 0, None),
            (-1, None, None),
        ]
        assert [s.metadata["taskctx_seq"] for s in g.get_state_history(cfg, filter={"taskctx_seq": None})] == [None]
        assert prune_thread(project.checkpointer, "h1")  # pruned: the log points carry them as the kept one does
        pruned = list(g.get_state_history(cfg))
        assert [s.metadata["taskctx_seq"] for s in pruned] == [seq for seq, _ in reversed(steps)]
        assert [s.metadata["taskctx_node"] for s in pruned] == [n for _, n in reversed(steps)]
    finally:
        project.close()

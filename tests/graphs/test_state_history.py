"""``get_state_history`` derived from the event log: every step of a task, also after its
checkpoints were pruned, on the default graph and on a graph of one's own (sync and async)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langgraph.graph import END, START, StateGraph

import graphs
from context import TaskContext, replay
from graphs import new_task, open_project
from graphs.checkpoint import prune_thread
from graphs.runner import run_graph
from graphs.time_travel import (
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
    env = graphs.NodeEnv(events=project.stores.events, artifacts=project.stores.artifacts)
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

"""A newcomer's own workflow (issue 10): an executor that returns a plain ``str`` (or something
else), a custom graph missing a node its routers need, and custom roles in the views."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from context import SqliteStores, TaskContext, replay
from graphs import build_orchestrator, checkpoint_serde, new_task
from graphs.runner import run_graph
from nodes import ScriptedChatModel, ToolOutcome, complete, function_schema, plan, recover, review, tool_call


class ReturnsAnything:
    """An executor whose ``execute`` returns ``value`` as it is (not always a ToolOutcome)."""

    def __init__(self, value: Any):
        self.value = value
        self.calls: list[str] = []

    def schemas(self) -> list[dict[str, Any]]:
        return [function_schema("probe", "Probe something.")]

    def has_side_effects(self, tool: str) -> bool:
        return False

    def execute(self, call_id: str, tool: str, arguments: dict[str, Any]) -> Any:
        self.calls.append(call_id)
        return self.value


def _probe_run(tools: ReturnsAnything, tid: str) -> tuple[TaskContext, list[Any], SqliteStores]:
    model = ScriptedChatModel(
        script={
            "planner": [plan("Probe")],
            "executor": [tool_call("probe", {}, id="c-1"), complete("probed")],
            "recovery": [recover("retry", "try the step again")],
            "reviewer": [review("approve", "probed")],
        }
    )
    stores = SqliteStores(":memory:")
    g = build_orchestrator(model, tools=tools, checkpointer=InMemorySaver(serde=checkpoint_serde()), stores=stores)
    result = run_graph(g, stores, tid, new_task("Probe it.", tid))
    events = stores.events.read(tid)
    assert replay(events) == result.state
    return result.state, events, stores


def test_execute_returning_a_str_is_an_ok_result() -> None:
    tools = ReturnsAnything("probe says 42\n")
    state, events, stores = _probe_run(tools, "str1")
    assert state.control.status == "completed"
    assert tools.calls == ["c-1"]
    (res,) = [e for e in events if e.kind == "tool.result.received"]
    assert res.payload["status"] == "ok"
    assert res.payload["raw_chars"] == len("probe says 42\n")
    assert stores.artifacts.get(res.payload["raw_ref"]) == b"probe says 42\n"
    assert [e.kind for e in events if e.kind.startswith("error.")] == []


@pytest.mark.parametrize(
    ("value", "what"),
    [
        (b"probe says 42\n", "bytes"),
        (None, "NoneType"),
        ({"output": "42"}, "dict"),
        (ToolOutcome("ok", b"42"), "a ToolOutcome whose output is bytes"),  # type: ignore[arg-type]
    ],
)
def test_execute_returning_another_type_is_the_calls_error_result(value: Any, what: str) -> None:
    tools = ReturnsAnything(value)
    state, events, stores = _probe_run(tools, "bad1")
    msg = (
        f"error: ReturnsAnything.execute returned {what} for tool 'probe'; "
        'return a str (the output) or ToolOutcome("ok" or "error", output: str) from execute'
    )
    assert tools.calls == ["c-1"]  # run once; the task went on through recovery
    (res,) = [e for e in events if e.kind == "tool.result.received"]
    assert res.payload["status"] == "error"
    assert stores.artifacts.get(res.payload["raw_ref"]) == msg.encode()
    assert msg in res.payload["result_summary"]
    assert [e.kind for e in events if e.kind in ("error.occurred", "recovery.decided", "task.completed")] == [
        "error.occurred",
        "recovery.decided",
        "task.completed",
    ]
    assert state.control.status == "completed"
    assert state.errors.error_history[0].call_id == "c-1"
    assert state.errors.error_history[0].source == "tool:probe"


# --- 2. a custom graph is checked when it is compiled ----------------------------------------


def _builder(*, reviewer: bool, path_map: Any = None) -> Any:
    from langgraph.graph import START, StateGraph

    from graphs import routing
    from graphs.orchestrator import NoTools
    from nodes import (
        NodeEnv,
        make_executor_node,
        make_planner_node,
        make_recovery_node,
        make_reviewer_node,
        make_tool_node,
    )

    model = ScriptedChatModel(script={"planner": [plan("Do it")], "executor": [complete("done")]})
    env = NodeEnv.sqlite(":memory:")
    g = StateGraph(TaskContext)
    g.add_node("planner", make_planner_node(model, env))
    g.add_node("executor", make_executor_node(model, env, NoTools()))
    g.add_node("tools", make_tool_node(env, NoTools()))
    g.add_node("recovery", make_recovery_node(model, env))
    g.add_conditional_edges("recovery", routing.after_recovery)
    if reviewer:
        g.add_node("reviewer", make_reviewer_node(model, env))
        g.add_conditional_edges("reviewer", routing.after_reviewer)
    g.add_edge(START, "planner")
    g.add_conditional_edges("planner", routing.after_planner)
    if path_map is None:
        g.add_conditional_edges("executor", routing.after_executor)
    else:
        g.add_conditional_edges("executor", routing.after_executor, path_map)
    g.add_conditional_edges("tools", routing.after_tools)
    return g


def test_routers_declare_their_targets() -> None:
    from graphs import TARGETS, router_targets, routing

    assert TARGETS["after_executor"] == ("tools", "recovery", "executor", "reviewer", "__end__")
    assert router_targets(routing.after_reviewer) == ("planner", "__end__")
    assert router_targets(lambda s: "x") is None


def test_graph_without_the_reviewer_fails_at_compile_with_the_fix() -> None:
    from graphs import GraphWiringError, compile_graph

    g = _builder(reviewer=False)
    # LangGraph's own validation already refuses it (the router's Literal annotation is the path map)
    with pytest.raises(ValueError, match=r"^At 'executor' node, 'after_executor' branch found unknown target"):
        g.compile()
    with pytest.raises(GraphWiringError) as exc:
        compile_graph(_builder(reviewer=False))
    assert str(exc.value) == (
        "router after_executor (after node 'executor') can return 'reviewer', but the graph has no node 'reviewer'; "
        "add it (g.add_node('reviewer', nodes.make_reviewer_node(model, env))) or send 'reviewer' to a node you "
        "have with a path map: g.add_conditional_edges('executor', after_executor, {..., 'reviewer': 'other_node'})"
    )


def test_a_path_map_missing_a_router_target_fails_at_compile() -> None:
    from graphs import GraphWiringError, compile_graph

    g = _builder(reviewer=False, path_map=["tools", "executor", "reviewer", "recovery", "__end__"])
    with pytest.raises(GraphWiringError, match="has no node 'reviewer'; add it"):
        compile_graph(g)
    g = _builder(reviewer=True, path_map={"tools": "tools", "executor": "executor", "reviewer": "reviewer"})
    with pytest.raises(GraphWiringError) as exc:
        compile_graph(g)
    assert str(exc.value) == (
        "router after_executor (after node 'executor') can return 'recovery', but the path map of "
        "add_conditional_edges('executor', after_executor, ...) has no 'recovery' key; add 'recovery': "
        "<a node of the graph> to it, or leave the path map out"
    )
    ok = {
        "tools": "tools",
        "executor": "executor",
        "reviewer": "reviewer",
        "recovery": "reviewer",
        "__end__": "__end__",
    }
    compile_graph(_builder(reviewer=True, path_map=ok))  # every target mapped to a node it has


def test_default_graph_still_compiles_with_the_same_edges() -> None:
    g = build_orchestrator(ScriptedChatModel(script={}))
    edges = sorted((e.source, e.target) for e in g.get_graph().edges)
    assert edges == [
        ("__start__", "planner"),
        ("executor", "__end__"),
        ("executor", "executor"),
        ("executor", "recovery"),
        ("executor", "reviewer"),
        ("executor", "tools"),
        ("planner", "__end__"),
        ("planner", "executor"),
        ("recovery", "__end__"),
        ("recovery", "executor"),
        ("recovery", "planner"),
        ("reviewer", "__end__"),
        ("reviewer", "planner"),
        ("tools", "__end__"),
        ("tools", "executor"),
        ("tools", "recovery"),
        ("tools", "tools"),
    ]

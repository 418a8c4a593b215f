"""No silent divergence: a node of a graph compiled with ``compile_graph`` that returns state the
event log does not record, appends events it does not return, or routes to a node the graph
lacks fails the task with an error naming the node and the fix; the log and the checkpoint agree.

The graph is a newcomer's: planner -> executor -> a plain LangGraph ``tester`` node -> reviewer.
Each case is also run on ``g.compile()`` (LangGraph alone) to show what it does there.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command

from context import LogAheadError, TaskContext, replay
from context.events import MemoryNoted
from graphs import checkpoint_serde, compile_graph, new_task, routing, thread_config
from graphs.diagnosis import diagnose
from graphs.orchestrator import NoTools
from nodes import (
    NodeEnv,
    NodeRun,
    ScriptedChatModel,
    make_executor_node,
    make_planner_node,
    make_recovery_node,
    make_reviewer_node,
    make_tool_node,
)
from nodes.testing import complete, plan, review

REQUEST = "Check the KV store."
FIX = "record it as events with nodes.NodeRun (run.commit([...])) and return run.update()"


def _graph(
    tester: Any,
    *,
    router: Any = None,
    plain: bool = False,
    edge: str | None = "reviewer",
    destinations: tuple[str, ...] | None = None,
) -> tuple[Any, NodeEnv]:
    """planner -> executor -> tester -> reviewer (or ``router``, or a plain edge to ``edge``, after the tester)."""
    model = ScriptedChatModel(
        script={
            "planner": [plan("Check the store")],
            "executor": [complete("checked")],
            "reviewer": [review("approve", "fine")],
        }
    )
    env = NodeEnv.sqlite(":memory:")
    g = StateGraph(TaskContext)
    g.add_node("planner", make_planner_node(model, env))
    g.add_node("executor", make_executor_node(model, env, NoTools()))
    g.add_node("tools", make_tool_node(env, NoTools()))
    g.add_node("recovery", make_recovery_node(model, env))
    g.add_node("tester", tester, destinations=destinations)
    g.add_node("reviewer", make_reviewer_node(model, env))
    g.add_edge(START, "planner")
    g.add_conditional_edges("planner", routing.after_planner)
    ends = {"tools": "tools", "recovery": "recovery", "executor": "executor", "reviewer": "tester", END: END}
    g.add_conditional_edges("executor", routing.after_executor, ends)
    g.add_conditional_edges("tools", routing.after_tools)
    g.add_conditional_edges("recovery", routing.after_recovery)
    if router is None and edge is not None:
        g.add_edge("tester", edge)
    elif router is not None:
        g.add_conditional_edges("tester", router)
    g.add_conditional_edges("reviewer", routing.after_reviewer)
    saver = InMemorySaver(serde=checkpoint_serde())
    graph = g.compile(checkpointer=saver) if plain else compile_graph(g, checkpointer=saver)
    return graph, env


def _run(graph: Any, env: NodeEnv, tid: str) -> tuple[TaskContext, list[Any]]:
    cfg = thread_config(tid)
    graph.invoke(new_task(REQUEST, tid), cfg, durability="sync")
    return TaskContext.model_validate(graph.get_state(cfg).values), env.events.read(tid)


def _refused(state: TaskContext, events: list[Any], env: NodeEnv, graph: Any, message: str) -> None:
    """The task failed on ``message`` (error.occurred from graph:tester, task.completed failed), the
    reviewer never ran, and the checkpoint is the log's fold."""
    tid = state.identity.task_id
    assert [e.kind for e in events[-2:]] == ["error.occurred", "task.completed"]
    err, done = events[-2].payload, events[-1].payload
    assert err == {"error_id": "err-1", "source": "graph:tester", "message": message, "step_id": None, "call_id": None}
    assert done == {"status": "failed", "summary": message}
    assert {e.causation_id for e in events[-2:]} == {f"{tid}#{events[-3].seq}:tester"}
    assert state.control.status == "failed" and state.errors.last_error.message == message  # type: ignore[union-attr]
    assert [e.payload["role"] for e in events if e.kind == "context.built"] == ["planner", "executor"]
    assert replay(events) == state
    assert diagnose(env.stores, graph.checkpointer, tid) == []


def test_a_key_the_state_lacks_is_refused_not_dropped() -> None:
    def tester(state: TaskContext) -> dict[str, Any]:
        return {"test_result": "pass"}

    # LangGraph alone drops the key without a word and the task completes
    graph, env = _graph(tester, plain=True)
    state, events = _run(graph, env, "k0")
    assert state.control.status == "completed" and "test_result" not in graph.get_state(thread_config("k0")).values

    graph, env = _graph(tester)
    state, events = _run(graph, env, "k1")
    message = (
        "node 'tester' returned 'test_result', which the TaskContext has no part for (LangGraph would drop it "
        f"without a word): a node's result belongs in the event log; {FIX}"
    )
    _refused(state, events, env, graph, message)


def test_a_field_changed_without_an_event_is_refused_naming_it() -> None:
    def tester(state: TaskContext) -> dict[str, Any]:
        return {"identity": state.identity.model_copy(update={"interpreted_goal": "HACKED"})}

    # LangGraph alone: the task completes with the goal changed, and the log's fold disagrees
    graph, env = _graph(tester, plain=True)
    state, events = _run(graph, env, "h0")
    assert state.control.status == "completed" and state.identity.interpreted_goal == "HACKED"
    assert replay(events).identity.interpreted_goal != "HACKED"

    graph, env = _graph(tester)
    state, events = _run(graph, env, "h1")
    message = (
        "node 'tester' returned identity.interpreted_goal without an event recording it (the checkpoint would no "
        f"longer be the event log's fold): a node changes the task only through the event log; {FIX}; to edit a "
        "task from outside a node, use graph.update_state (recorded as state.edited)"
    )
    _refused(state, events, env, graph, message)
    assert state.identity.interpreted_goal != "HACKED"


def _appends_only(env_box: list[NodeEnv]) -> Any:
    def tester(state: TaskContext, config: RunnableConfig) -> dict[str, Any]:
        run = NodeRun(env_box[0], state, "tester", config)
        run.commit([run.make("memory.proposed", MemoryNoted(kind="fact", text="the KV check passed"))])
        return {}  # the update (run.update()) is not returned

    return tester


def test_events_appended_but_not_returned_are_refused_at_the_node() -> None:
    box: list[NodeEnv] = []
    graph, env = _graph(_appends_only(box))
    box.append(env)
    state, events = _run(graph, env, "a1")
    noted = next(e for e in events if e.kind == "memory.proposed")
    message = (
        f"node 'tester' appended events to the event log (seq {noted.seq}: memory.proposed) but did not return "
        "the state they make (events, memory): return the update the events make (with nodes.NodeRun: "
        "return run.update())"
    )
    assert [e.kind for e in events[noted.seq - 1 :]] == ["memory.proposed", "error.occurred", "task.completed"]
    assert events[-2].payload["message"] == message and events[-2].payload["source"] == "graph:tester"
    assert state.control.status == "failed" and state.memory.working_memory == ["the KV check passed"]
    assert replay(events) == state and diagnose(env.stores, graph.checkpointer, "a1") == []


def test_events_appended_but_not_returned_name_the_node_on_plain_langgraph() -> None:
    box: list[NodeEnv] = []
    graph, env = _graph(_appends_only(box), plain=True)
    box.append(env)
    with pytest.raises(LogAheadError) as ei:
        _run(graph, env, "a0")
    noted = next(e for e in env.events.read("a0") if e.kind == "memory.proposed")
    assert str(ei.value) == (
        f"task 'a0': node 'tester' appended events to the event log (seq {noted.seq}: memory.proposed) but did not "
        f"return them as its state update, so node 'reviewer' got a checkpoint at seq {noted.seq - 1} that does not "
        "include them; return the update the events make from node 'tester' (with nodes.NodeRun: return run.update())"
    )


def _tester_ok(state: TaskContext) -> dict[str, Any]:
    return {}


def route(state: TaskContext) -> str:
    return "reveiwer"


def test_a_router_returning_a_node_the_graph_lacks_fails_the_task(caplog: pytest.LogCaptureFixture) -> None:
    # LangGraph alone: a warning, the run ends, the task stays running
    graph, env = _graph(_tester_ok, router=route, plain=True)
    with caplog.at_level(logging.WARNING):
        state, _ = _run(graph, env, "r0")
    assert state.control.status == "running"
    assert "wrote to unknown channel branch:to:reveiwer, ignoring it" in caplog.text
    caplog.clear()

    graph, env = _graph(_tester_ok, router=route)
    with caplog.at_level(logging.WARNING):
        state, events = _run(graph, env, "r1")
    message = (
        "router route (after node 'tester') returned 'reveiwer', but the graph has no node 'reveiwer' (LangGraph "
        "would drop the route and end the run with the task running); its nodes: 'executor', 'planner', 'recovery', "
        "'reviewer', 'tester', 'tools'; return one of them or END, and type the router -> Literal[...] so that "
        "compile_graph checks its targets"
    )
    _refused(state, events, env, graph, message)
    assert "unknown channel" not in caplog.text
    assert graph.get_state(thread_config("r1")).next == ()


def _to_end(state: TaskContext) -> str:
    return END  # a wrong condition: ends the run before the review


STRANDED = (
    "{how} (after node 'tester') sent task '{tid}' to END while it is still running (no node recorded "
    "task.completed; LangGraph would end the run with the task left running and nothing to run next); route an "
    "unfinished task to a node that goes on with it (the reviewer records task.completed), and return END only "
    "once control.status is completed or failed"
)


def test_a_router_that_sends_an_unfinished_task_to_end_fails_the_task() -> None:
    # LangGraph alone: the run ends, the task stays running with nothing to run next
    graph, env = _graph(_tester_ok, router=_to_end, plain=True)
    state, _ = _run(graph, env, "e0")
    assert state.control.status == "running" and graph.get_state(thread_config("e0")).next == ()

    graph, env = _graph(_tester_ok, router=_to_end)
    state, events = _run(graph, env, "e1")
    _refused(state, events, env, graph, STRANDED.format(how="router _to_end", tid="e1"))
    assert graph.get_state(thread_config("e1")).next == ()


def test_a_plain_edge_or_command_to_end_of_an_unfinished_task_fails_it() -> None:
    graph, env = _graph(_tester_ok, edge=END)
    state, events = _run(graph, env, "e2")
    _refused(state, events, env, graph, STRANDED.format(how="a plain edge", tid="e2"))

    graph, env = _graph(lambda state: Command(goto=END), edge=None, destinations=("reviewer", END))
    state, events = _run(graph, env, "e3")
    _refused(state, events, env, graph, STRANDED.format(how="Command(goto=END)", tid="e3"))

    graph, env = _graph(_tester_ok, edge=None)  # no edge out of the tester at all
    state, events = _run(graph, env, "e5")
    _refused(
        state,
        events,
        env,
        graph,
        "node 'tester' has no edge out of it, so LangGraph ended the run there with task 'e5' still running (no "
        "node recorded task.completed); add an edge or a router after 'tester' to the node that goes on with the "
        "task (the reviewer records task.completed)",
    )

    graph, env = _graph(
        lambda state: Command(goto="reviewer"), edge=None, destinations=("reviewer", END)
    )  # the right way: completed
    assert _run(graph, env, "e4")[0].control.status == "completed"


def test_an_unfinished_task_sent_to_end_fails_under_astream_and_ainvoke() -> None:
    import asyncio

    async def go(tid: str, how: str) -> TaskContext:
        graph, env = _graph(_tester_ok, router=_to_end)
        cfg = thread_config(tid)
        if how == "ainvoke":
            await graph.ainvoke(new_task(REQUEST, tid), cfg, durability="sync")
        else:
            async for _ in graph.astream(new_task(REQUEST, tid), cfg, stream_mode=["updates", "messages"]):
                pass
        state = TaskContext.model_validate((await graph.aget_state(cfg)).values)
        _refused(state, env.events.read(tid), env, graph, STRANDED.format(how="router _to_end", tid=tid))
        return state

    assert asyncio.run(go("a1", "ainvoke")).control.status == "failed"
    assert asyncio.run(go("a2", "astream")).control.status == "failed"


def test_a_subgraph_that_ends_with_the_task_running_hands_it_back_to_its_parent() -> None:
    """Inside a subgraph END returns to the parent graph: the task goes on there, nothing is refused."""
    model = ScriptedChatModel(
        script={
            "planner": [plan("Check the store")],
            "executor": [complete("checked")],
            "reviewer": [review("approve", "ok")],
        }
    )
    env = NodeEnv.sqlite(":memory:")
    inner = StateGraph(TaskContext)
    inner.add_node("planner", make_planner_node(model, env))
    inner.add_edge(START, "planner")
    inner.add_edge("planner", END)  # the plan is made; the parent runs it
    outer = StateGraph(TaskContext)
    outer.add_node("planning", compile_graph(inner))
    outer.add_node("executor", make_executor_node(model, env, NoTools()))
    outer.add_node("tools", make_tool_node(env, NoTools()))
    outer.add_node("recovery", make_recovery_node(model, env))
    outer.add_node("reviewer", make_reviewer_node(model, env))
    outer.add_edge(START, "planning")
    outer.add_edge("planning", "executor")
    outer.add_conditional_edges("executor", routing.after_executor)
    outer.add_conditional_edges("tools", routing.after_tools)
    outer.add_conditional_edges(
        "recovery", routing.after_recovery, {"planner": "planning", "executor": "executor", END: END}
    )
    outer.add_conditional_edges("reviewer", routing.after_reviewer, {"planner": "planning", END: END})
    graph = compile_graph(outer, checkpointer=InMemorySaver(serde=checkpoint_serde()))
    state, events = _run(graph, env, "s1")
    assert state.control.status == "completed"
    assert [e.payload["role"] for e in events if e.kind == "context.built"] == ["planner", "executor", "reviewer"]
    assert "error.occurred" not in [e.kind for e in events]


def _after_subgraph(after: Any) -> tuple[Any, NodeEnv]:
    """planner -> a compile_graph subgraph ``work`` (executor, tools, recovery) -> ``after`` (an edge target or a router)."""
    model = ScriptedChatModel(
        script={
            "planner": [plan("Check the store")],
            "executor": [complete("checked")],
            "reviewer": [review("approve")],
        }
    )
    env = NodeEnv.sqlite(":memory:")
    sub = StateGraph(TaskContext)
    sub.add_node("executor", make_executor_node(model, env, NoTools()))
    sub.add_node("tools", make_tool_node(env, NoTools()))
    sub.add_node("recovery", make_recovery_node(model, env))
    sub.add_edge(START, "executor")
    sub.add_conditional_edges(
        "executor",
        routing.after_executor,
        {"reviewer": END, "tools": "tools", "recovery": "recovery", "executor": "executor", END: END},
    )
    sub.add_conditional_edges("tools", routing.after_tools)
    sub.add_conditional_edges("recovery", routing.after_recovery, {"planner": END, "executor": "executor", END: END})
    g = StateGraph(TaskContext)
    g.add_node("planner", make_planner_node(model, env))
    g.add_node("work", compile_graph(sub))
    g.add_node("reviewer", make_reviewer_node(model, env))
    g.add_edge(START, "planner")
    g.add_edge("planner", "work")
    if isinstance(after, str):
        g.add_edge("work", after)
    else:
        g.add_conditional_edges("work", after)
    g.add_conditional_edges("reviewer", routing.after_reviewer, {"planner": "planner", END: END})
    return compile_graph(g, checkpointer=InMemorySaver(serde=checkpoint_serde())), env


def test_routes_after_a_subgraph_node_are_checked_too() -> None:
    graph, env = _after_subgraph("reviewer")  # the right way: the parent goes on to the review
    assert _run(graph, env, "w0")[0].control.status == "completed"
    for tid, after, message in [
        ("w1", route, "router route (after node 'work') returned 'reveiwer', but the graph has no node 'reveiwer'"),
        ("w2", _to_end, "router _to_end (after node 'work') sent task 'w2' to END while it is still running"),
        ("w3", END, "a plain edge (after node 'work') sent task 'w3' to END while it is still running"),
    ]:
        graph, env = _after_subgraph(after)
        state, events = _run(graph, env, tid)
        assert state.control.status == "failed" and [e.kind for e in events[-2:]] == [
            "error.occurred",
            "task.completed",
        ]
        assert events[-2].payload["message"].startswith(message) and events[-2].payload["source"] == "graph:work"
        assert replay(events) == state and graph.get_state(thread_config(tid)).next == ()


def test_a_node_that_records_its_result_passes() -> None:
    box: list[NodeEnv] = []

    def tester(state: TaskContext, config: RunnableConfig) -> dict[str, Any]:
        run = NodeRun(box[0], state, "tester", config)
        run.commit([run.make("memory.proposed", MemoryNoted(kind="fact", text="the KV check passed"))])
        return run.update()

    graph, env = _graph(tester)
    box.append(env)
    state, events = _run(graph, env, "ok1")
    assert state.control.status == "completed" and state.memory.working_memory == ["the KV check passed"]
    assert [e.kind for e in events if e.kind.startswith("error.")] == []
    assert replay(events) == state

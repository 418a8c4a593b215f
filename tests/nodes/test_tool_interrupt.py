"""A tool's own ``interrupt()`` pauses the graph; ``Command(resume=...)`` answers it, the result recorded once."""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command, interrupt

from context import SqliteStores
from graphs import build_orchestrator, new_task
from graphs.checkpoint import checkpoint_serde
from graphs.runner import run_graph
from nodes import ScriptedChatModel, ToolOutcome
from nodes.testing import complete, plan, review, tool_call
from nodes.tools import function_schema, scoped_execute


class AskTools:
    """A hand-written executor whose read-only ``ask`` tool asks the user through ``interrupt()``."""

    def __init__(self) -> None:
        self.runs: list[Any] = []

    def schemas(self) -> list[dict[str, Any]]:
        return [function_schema("ask", "Ask the user a question.", {"question": {"type": "string"}})]

    def has_side_effects(self, tool: str) -> bool:
        return False

    def execute(self, call_id: str, tool: str, arguments: dict[str, Any]) -> ToolOutcome:
        answer = interrupt({"question": arguments["question"]})
        self.runs.append(answer)
        return ToolOutcome("ok", f"the user said: {answer}\n")


def test_a_tools_interrupt_pauses_the_graph_and_resume_answers_it() -> None:
    stores = SqliteStores(":memory:")
    tools = AskTools()
    model = ScriptedChatModel(
        script={
            "planner": [plan("Ask the user")],
            "executor": [tool_call("ask", {"question": "Which port?"}, id="q1"), complete("asked")],
            "reviewer": [review("approve")],
        }
    )
    g = build_orchestrator(model, tools=tools, checkpointer=InMemorySaver(serde=checkpoint_serde()), stores=stores)
    first = run_graph(g, stores, "ti", new_task("Ask which port.", "ti"))
    # the interrupt reached LangGraph: the graph paused in the tool node, no error result recorded
    assert first.interrupts == [{"question": "Which port?"}]
    assert g.get_state({"configurable": {"thread_id": "ti"}}).next == ("tools",)
    assert [e.payload["call_id"] for e in stores.events.read("ti", kinds=["tool.result.received"])] == []
    assert tools.runs == []
    done = run_graph(g, stores, "ti", Command(resume="8080"))
    assert done.state.control.status == "completed"
    assert tools.runs == ["8080"]
    results = [e.payload for e in stores.events.read("ti", kinds=["tool.result.received"])]
    assert [(r["call_id"], r["status"], r["result_summary"]) for r in results] == [
        ("q1", "ok", "the user said: 8080\n")
    ]


def test_scoped_execute_lets_graph_bubble_up_through() -> None:
    from langgraph.errors import GraphBubbleUp, GraphInterrupt

    class Raises:
        def execute(self, call_id: str, tool: str, arguments: dict[str, Any]) -> str:
            raise GraphInterrupt(())

    try:
        scoped_execute(Raises(), "c", "t", {}, [])
    except GraphBubbleUp as exc:
        assert type(exc) is GraphInterrupt
    else:
        raise AssertionError("GraphInterrupt was caught as a tool error")
    boom = type("Boom", (), {"execute": lambda self, c, t, a: 1 / 0})()
    assert scoped_execute(boom, "c", "t", {}, []).output == "error: tool t raised ZeroDivisionError: division by zero"


def test_two_read_only_calls_that_ask_run_at_once_and_are_asked_in_turn() -> None:
    # read-only calls of one answer run at once (in threads); each one's interrupt() reaches
    # LangGraph in turn, and each result is recorded once, when every question was answered
    from langchain_core.messages import AIMessage

    stores, tools = SqliteStores(":memory:"), AskTools()
    calls = [
        {"name": "ask", "args": {"question": q}, "id": cid, "type": "tool_call"}
        for q, cid in (("A?", "q1"), ("B?", "q2"))
    ]
    model = ScriptedChatModel(
        script={
            "planner": [plan("Ask twice")],
            "executor": [AIMessage(content="", tool_calls=calls), complete("asked")],
            "reviewer": [review("approve")],
        }
    )
    g = build_orchestrator(model, tools=tools, checkpointer=InMemorySaver(serde=checkpoint_serde()), stores=stores)
    cfg = {"configurable": {"thread_id": "two"}}
    assert run_graph(g, stores, "two", new_task("Ask two things.", "two")).interrupts == [{"question": "A?"}]
    (first,) = g.get_state(cfg).interrupts
    assert run_graph(g, stores, "two", Command(resume={first.id: "a"})).interrupts == [{"question": "B?"}]
    assert stores.events.read("two", kinds=["tool.result.received"]) == []
    (second,) = g.get_state(cfg).interrupts
    done = run_graph(g, stores, "two", Command(resume={second.id: "b"}))
    assert done.state.control.status == "completed"
    results = [
        (e.payload["call_id"], e.payload["result_summary"])
        for e in stores.events.read("two")
        if e.kind == "tool.result.received"
    ]
    assert results == [("q1", "the user said: a\n"), ("q2", "the user said: b\n")]

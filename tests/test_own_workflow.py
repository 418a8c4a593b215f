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

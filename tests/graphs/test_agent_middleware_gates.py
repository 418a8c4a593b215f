"""TaskContextMiddleware beside HumanInTheLoopMiddleware: which calls were gated, and the agent's tools."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, HumanInTheLoopMiddleware
from langchain_core.messages import ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from graphs.middleware import TaskContextMiddleware

sys.path.insert(0, str(Path(__file__).parent))
from agent_example import REQUEST, TOOLS, answer  # noqa: E402

from nodes import ScriptedChatModel  # noqa: E402

PERMS = ("permission.requested", "permission.granted", "permission.denied")


def _model() -> ScriptedChatModel:
    return ScriptedChatModel(script={}, fallback={"agent": answer, "*": answer})


def _run(mw: TaskContextMiddleware, hitl: HumanInTheLoopMiddleware, thread: str, decision: Any = None) -> Any:
    agent = create_agent(_model(), TOOLS, middleware=[mw, hitl], checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": thread}}
    out = agent.invoke({"messages": [{"role": "user", "content": REQUEST}]}, cfg)
    if decision is not None:
        assert out["__interrupt__"]
        out = agent.invoke(Command(resume={"decisions": [decision]}), cfg)
    assert out["messages"][-1].content == "Recorded: worker-271 failed."
    return [(e.kind, e.payload.get("call_id"), e.actor) for e in mw.events(thread) if e.kind in PERMS]


@pytest.mark.parametrize("gate", [False, {"allowed_decisions": ["approve"], "when": lambda r: False}])
def test_a_call_the_reviewer_does_not_gate_is_not_recorded_as_approved(gate: Any) -> None:
    # given the agent's HumanInTheLoopMiddleware, taskctx reads what it gates: kv_set set to False
    # (or passed by its when predicate) runs unreviewed, and no approval is recorded for it
    hitl = HumanInTheLoopMiddleware(interrupt_on={"kv_set": gate, "kv_get": True})
    mw = TaskContextMiddleware(":memory:", side_effects=["kv_set"], requires_approval=hitl)
    assert _run(mw, hitl, "ungated") == []
    called = [(e.payload["tool"], e.payload["call_id"]) for e in mw.events("ungated") if e.kind == "tool.called"]
    assert called == [("read_log", "call-read"), ("kv_set", "call-set")]


def test_a_call_the_reviewer_gates_records_its_decision() -> None:
    hitl = HumanInTheLoopMiddleware(interrupt_on={"kv_set": True})
    mw = TaskContextMiddleware(":memory:", side_effects=["kv_set"], requires_approval=hitl)
    assert mw.requires_approval == ("kv_set",)
    assert _run(mw, hitl, "gated", {"type": "approve"}) == [
        ("permission.requested", "call-set", "system"),
        ("permission.granted", "call-set", "user"),
    ]
    assert mw.events("gated")[0].payload["requires_approval"] == ["kv_set"]


@pytest.mark.parametrize("interrupt_on", [{"kv_get": True}, {"kv_set": False}])
def test_a_name_the_reviewer_given_does_not_gate_is_refused(interrupt_on: dict[str, Any]) -> None:
    hitl = HumanInTheLoopMiddleware(interrupt_on=interrupt_on)
    with pytest.raises(ValueError) as err:
        TaskContextMiddleware(":memory:", requires_approval=["kv_set", hitl])
    assert str(err.value) == (
        "requires_approval names 'kv_set', which the HumanInTheLoopMiddleware does not gate; "
        "add 'kv_set': True to its interrupt_on, or drop the name (the middleware's gates are enough)"
    )


class HideTool(AgentMiddleware):  # type: ignore[type-arg]
    """Filters the tools per model call: ``name`` is not offered until a tool result is in the messages."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.hidden = name
        self.offered: list[list[str]] = []

    def wrap_model_call(self, request: Any, handler: Any) -> Any:
        if not any(isinstance(m, ToolMessage) for m in request.messages):
            request = request.override(tools=[t for t in request.tools if t.name != self.hidden])
        self.offered.append(sorted(t.name for t in request.tools))
        return handler(request)


def test_a_tool_a_filtering_middleware_hides_at_first_is_not_refused() -> None:
    hide = HideTool("kv_set")
    mw = TaskContextMiddleware(":memory:", side_effects=["kv_set"], requires_approval=["kv_set"])
    agent = create_agent(_model(), TOOLS, middleware=[hide, mw])
    out = agent.invoke({"messages": [{"role": "user", "content": REQUEST}]}, {"configurable": {"thread_id": "f"}})
    assert out["messages"][-1].content == "Recorded: worker-271 failed."
    assert hide.offered[0] == ["kv_get", "read_artifact", "read_log"]  # kv_set hidden at the first call
    called = [(e.payload["tool"], e.payload["has_side_effects"]) for e in mw.events("f") if e.kind == "tool.called"]
    assert called == [("read_log", False), ("kv_set", True)]


def test_a_wrong_name_behind_a_filtering_middleware_is_refused_before_any_tool_runs() -> None:
    mw = TaskContextMiddleware(":memory:", side_effects=["kv_sett"])
    agent = create_agent(_model(), TOOLS, middleware=[HideTool("kv_set"), mw])
    with pytest.raises(ValueError) as err:
        agent.invoke({"messages": [{"role": "user", "content": REQUEST}]}, {"configurable": {"thread_id": "w"}})
    assert str(err.value) == (
        "side_effects names 'kv_sett', which is not one of the agent's tools (kv_get, kv_set, read_log); fix the name"
    )
    assert [e.kind for e in mw.events("w")] == ["task.created", "context.built"]


def _kv_tools(ran: list[tuple[str, Any]]) -> list[Any]:
    from langchain_core.tools import tool

    @tool
    def kv_get(key: str) -> str:
        """Read a key of the key-value store."""
        ran.append(("kv_get", key))
        return f"{key} is unset"

    @tool
    def kv_set(key: str, value: str) -> str:
        """Set a key of the key-value store (a side effect)."""
        ran.append(("kv_set", (key, value)))
        return f"stored {key}={value}"

    return [TOOLS[0], kv_get, kv_set]


def _called(mw: TaskContextMiddleware, thread: str) -> list[tuple[str, str]]:
    return [(e.payload["tool"], e.payload["arguments"]) for e in mw.events(thread) if e.kind == "tool.called"][1:]


def _paused(order: str, mode: Any, ran: list[tuple[str, Any]]) -> tuple[Any, TaskContextMiddleware, Any]:
    """An agent whose HITL gates kv_set (in ``order`` beside taskctx), paused at the kv_set call."""
    hitl = HumanInTheLoopMiddleware(interrupt_on={"kv_set": True}, interrupt_mode=mode)
    mw = TaskContextMiddleware(":memory:", side_effects=["kv_set"], requires_approval=hitl)
    agent = create_agent(
        _model(),
        _kv_tools(ran),
        middleware=[mw, hitl] if order == "taskctx-first" else [hitl, mw],
        checkpointer=InMemorySaver(),
    )
    cfg = {"configurable": {"thread_id": "e"}}
    agent.invoke({"messages": [{"role": "user", "content": REQUEST}]}, cfg)
    return agent, mw, cfg


@pytest.mark.parametrize("order", ["taskctx-first", "hitl-first"])
@pytest.mark.parametrize("mode", ["batched", "per_call"])
def test_an_edit_is_recorded_as_it_ran_in_either_order_and_mode(order: str, mode: str) -> None:
    ran: list[tuple[str, Any]] = []
    agent, mw, cfg = _paused(order, mode, ran)
    edit = {"type": "edit", "edited_action": {"name": "kv_set", "args": {"key": "failed", "value": "w-271"}}}
    out = agent.invoke(Command(resume={"decisions": [edit]} if mode == "batched" else edit), cfg)
    assert ran == [("kv_set", ("failed", "w-271"))]
    assert _called(mw, "e") == [("kv_set", '{"key": "failed", "value": "w-271"}')]
    # the tool's own output is stored, not HITL's note on it; the note stays before the quoted
    # output the agent gets, in either order
    res = [e.payload for e in mw.events("e") if e.kind == "tool.result.received"][-1]
    assert (res["result_summary"], res["raw_chars"]) == ("stored failed=w-271", 19)
    assert mw.env.artifacts.get(res["raw_ref"]) == b"stored failed=w-271"
    shown = next(m.content for m in out["messages"] if isinstance(m, ToolMessage) and m.name == "kv_set")
    note, _, quoted = shown.partition('<external_content source="tool:kv_set"')
    assert note.startswith("Note: a human reviewer replaced this tool call") and note.endswith("Tool response:\n")
    assert quoted.endswith(">\nstored failed=w-271\n</external_content>")


@pytest.mark.parametrize("order", ["taskctx-first", "hitl-first"])
def test_an_edit_that_names_another_tool_is_recorded_as_that_tool(order: str) -> None:
    ran: list[tuple[str, Any]] = []
    agent, mw, cfg = _paused(order, "batched", ran)
    edit = {"type": "edit", "edited_action": {"name": "kv_get", "args": {"key": "failed"}}}
    agent.invoke(Command(resume={"decisions": [edit]}), cfg)
    assert ran == [("kv_get", "failed")]
    assert _called(mw, "e") == [("kv_get", '{"key": "failed"}')]
    res = [e.payload for e in mw.events("e") if e.kind == "tool.result.received"][-1]
    assert res["status"] == "ok" and res["result_summary"].endswith("failed is unset")


class StaleKey(AgentMiddleware):  # type: ignore[type-arg]
    """Writes HumanInTheLoopMiddleware's private state key with an edit nobody applies."""

    def after_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        return {"hitl_edited_tool_calls": {"call-set": {"name": "kv_get", "args": {"key": "x"}}}}


def test_the_record_does_not_read_hitls_private_state() -> None:
    # what the tool ran with is recorded, not what HITL's private state key says (per_call HITL
    # never reads it: a value left there is applied by nobody)
    ran: list[tuple[str, Any]] = []
    hitl = HumanInTheLoopMiddleware(interrupt_on={"kv_get": True}, interrupt_mode="per_call")
    mw = TaskContextMiddleware(":memory:", side_effects=["kv_set"])
    agent = create_agent(_model(), _kv_tools(ran), middleware=[mw, StaleKey(), hitl])
    agent.invoke({"messages": [{"role": "user", "content": REQUEST}]}, {"configurable": {"thread_id": "k"}})
    assert ran == [("kv_set", ("failed", "worker-271"))]
    assert _called(mw, "k") == [("kv_set", '{"key": "failed", "value": "worker-271"}')]


def test_a_cut_output_of_an_agent_tool_is_labelled_as_that_tool() -> None:
    # as the graph labels a LangChain tool's: not as a shell command's output
    mw = TaskContextMiddleware(":memory:")
    agent = create_agent(_model(), TOOLS, middleware=[mw])
    out = agent.invoke({"messages": [{"role": "user", "content": REQUEST}]}, {"configurable": {"thread_id": "l"}})
    shown = next(m.content for m in out["messages"] if isinstance(m, ToolMessage) and m.name == "read_log")
    assert "\n[tool output: read_log, 400 lines" in shown and "command output" not in shown

"""TaskContextMiddleware beside HumanInTheLoopMiddleware: which calls were gated, and the agent's tools."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
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

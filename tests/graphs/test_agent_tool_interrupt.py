"""A tool's own ``interrupt()`` under the middleware: paused, answered with ``Command(resume=...)``, run once."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command, interrupt

from graphs.middleware import NOT_FINISHED, PAUSED, TaskContextMiddleware
from nodes import ScriptedChatModel


def _agent(mw: TaskContextMiddleware, ran: list[str], name: str) -> Any:
    @tool
    def deploy(env: str) -> str:
        """Deploy to an environment (asks a human first; a side effect)."""
        ok = interrupt({"deploy": env})
        ran.append(f"deploy:{env}:{ok}")
        return f"deployed {env}: {ok}"

    @tool
    def look(env: str) -> str:
        """Look at an environment (asks a human first)."""
        ok = interrupt({"look": env})
        ran.append(f"look:{env}:{ok}")
        return f"looked at {env}: {ok}"

    def answer(messages: list[BaseMessage], meta: dict[str, Any]) -> AIMessage:
        if isinstance(messages[-1], ToolMessage):
            return AIMessage(content="done")
        call = {"name": name, "args": {"env": "prod"}, "id": "c1", "type": "tool_call"}
        return AIMessage(content="", tool_calls=[call])

    model = ScriptedChatModel(script={}, fallback={"agent": answer, "*": answer})
    return create_agent(model, [deploy, look], middleware=[mw], checkpointer=InMemorySaver())


CFG: Any = {"configurable": {"thread_id": "t"}}
GO = {"messages": [{"role": "user", "content": "go"}]}


def _record(mw: TaskContextMiddleware) -> list[tuple[str, str | None]]:
    return [(e.kind, e.payload.get("reason")) for e in mw.events("t") if e.payload.get("call_id") == "c1"]


@pytest.mark.parametrize("name", ["deploy", "look"])
def test_a_tool_that_asks_a_human_runs_once_its_answer_given(name: str) -> None:
    mw, ran = TaskContextMiddleware(":memory:", side_effects=["deploy"]), []
    agent = _agent(mw, ran, name)
    paused = agent.invoke(GO, CFG)
    assert [i.value for i in paused["__interrupt__"]] == [{name: "prod"}]
    assert agent.invoke(None, CFG)["__interrupt__"]  # resumed with no answer: it asks again
    out = agent.invoke(Command(resume="yes"), CFG)
    assert ran == [f"{name}:prod:yes"]
    verb = "deployed" if name == "deploy" else "looked at"
    assert f"{verb} prod: yes" in out["messages"][2].content and out["messages"][2].status == "success"
    assert _record(mw) == [
        ("tool.called", None),
        ("permission.requested", PAUSED),  # once, however often it is resumed unanswered
        ("permission.granted", PAUSED),
        ("tool.result.received", None),
    ]
    mw.close()


def test_async_a_tool_that_asks_a_human_runs_once() -> None:
    mw, ran = TaskContextMiddleware(":memory:", side_effects=["deploy"]), []
    agent = _agent(mw, ran, "deploy")

    async def go() -> list[BaseMessage]:
        await agent.ainvoke(GO, CFG)
        return (await agent.ainvoke(Command(resume="ok"), CFG))["messages"]

    out = asyncio.run(go())
    assert ran == ["deploy:prod:ok"] and "deployed prod: ok" in out[2].content
    assert [k for k, _ in _record(mw)] == [
        "tool.called",
        "permission.requested",
        "permission.granted",
        "tool.result.received",
    ]
    mw.close()


def test_a_new_message_instead_of_the_answer_is_told_the_call_did_not_finish() -> None:
    mw, ran = TaskContextMiddleware(":memory:", side_effects=["deploy"]), []
    agent = _agent(mw, ran, "deploy")
    agent.invoke(GO, CFG)
    out = agent.invoke({"messages": [{"role": "user", "content": "never mind"}]}, CFG)["messages"]
    # the paused call is answered in place (it was not cut off mid-run), then the new turn runs
    assert isinstance(out[2], ToolMessage) and out[2].status == "error"
    assert NOT_FINISHED.format(call_id="c1", tool="deploy") in out[2].content
    assert ran == []
    mw.close()

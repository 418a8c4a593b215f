"""A call is its answer's: a provider that reuses call ids, or two agents on one thread, get their own results."""

from __future__ import annotations

import re
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, HumanInTheLoopMiddleware
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, RemoveMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from context.verify import check_events
from graphs.middleware import INTERRUPTED, NOT_FINISHED, TaskContextMiddleware
from nodes import ScriptedChatModel


def _agent(
    mw: TaskContextMiddleware, ran: list[str], saver: Any, crash_on: str = "", more: list[Any] | None = None
) -> Any:
    @tool
    def read_log(name: str) -> str:
        """Read a log by name."""
        ran.append(f"read:{name}")
        return f"log of {name}: all ok"

    @tool
    def kv_set(key: str, value: str) -> str:
        """Set a key (a side effect)."""
        ran.append(f"set:{key}={value}")
        if value == crash_on:
            raise KeyboardInterrupt  # the process stops mid-run (no result recorded)
        return f"stored {key}"

    def answer(messages: list[BaseMessage], meta: dict[str, Any]) -> AIMessage:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            return AIMessage(content="done: " + str(last.content)[-60:])
        verb, word = re.findall(r"\b(read|set) (app|db|one|two)\b", str(last.content))[-1]  # the rendered turn
        if verb == "set":
            call = {"name": "kv_set", "args": {"key": "k", "value": word}}
        else:
            call = {"name": "read_log", "args": {"name": word}}
        return AIMessage(content="", tool_calls=[{**call, "id": "call_0", "type": "tool_call"}])  # always call_0

    model = ScriptedChatModel(script={}, fallback={"agent": answer, "*": answer})
    return create_agent(model, [read_log, kv_set], middleware=[*(more or []), mw], checkpointer=saver)


def _ask(agent: Any, thread: str, text: str) -> list[BaseMessage]:
    out = agent.invoke({"messages": [{"role": "user", "content": text}]}, {"configurable": {"thread_id": thread}})
    return out["messages"]


def test_a_reused_call_id_in_a_later_answer_runs_its_own_call() -> None:
    mw, ran = TaskContextMiddleware(":memory:", side_effects=["kv_set"]), []
    agent = _agent(mw, ran, InMemorySaver())
    _ask(agent, "t", "read app")
    second = _ask(agent, "t", "read db")
    assert ran == ["read:app", "read:db"]
    assert "log of db: all ok" in [m for m in second if isinstance(m, ToolMessage)][-1].content
    called = [e.payload for e in mw.events("t") if e.kind == "tool.called"]
    assert [c["call_id"] for c in called] == ["call_0", "call_0"]
    ais = [m for m in second if isinstance(m, AIMessage) and m.tool_calls]
    assert [c["idempotency_key"] for c in called] == [f"{ais[0].id}:call_0", f"{ais[1].id}:call_0"]
    assert check_events(mw.events("t")) == []  # two calls of one id: not damage to the log's readers
    mw.close()


def test_two_agents_on_one_thread_get_their_own_results() -> None:
    mw, ran = TaskContextMiddleware(":memory:", side_effects=["kv_set"]), []
    first, second = _agent(mw, ran, InMemorySaver()), _agent(mw, ran, InMemorySaver())
    a = _ask(first, "shared", "read app")
    b = _ask(second, "shared", "read db")
    assert ran == ["read:app", "read:db"]
    assert "log of app" in a[2].content and "log of db" in b[2].content
    mw.close()


def test_a_reused_call_id_cut_off_mid_run_is_not_answered_with_an_older_result() -> None:
    saver, ran = InMemorySaver(), []
    mw = TaskContextMiddleware(":memory:", side_effects=["kv_set"])
    _ask(_agent(mw, ran, saver), "t", "set one")
    with pytest.raises(KeyboardInterrupt):
        _ask(_agent(mw, ran, saver, crash_on="two"), "t", "set two")
    # the resume re-runs the tool node: call_0 of the second answer is cut off, not "stored k"
    out = _agent(mw, ran, saver).invoke(None, {"configurable": {"thread_id": "t"}})["messages"]
    assert ran == ["set:k=one", "set:k=two"]
    cut = [m for m in out if isinstance(m, ToolMessage)][-1]
    assert cut.status == "error" and INTERRUPTED.format(call_id="call_0", tool="kv_set") in cut.content
    results = [(e.payload["call_id"], e.payload["status"]) for e in mw.events("t") if e.kind == "tool.result.received"]
    assert results == [("call_0", "ok"), ("call_0", "error")]
    mw.close()


class _KeepLastTurn(AgentMiddleware):  # type: ignore[type-arg]
    """Before each model call, remove every message before the last human one (a trimming middleware)."""

    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        msgs = state["messages"]
        humans = [i for i, m in enumerate(msgs) if isinstance(m, HumanMessage)]
        if not humans or humans[-1] == 0:
            return None
        return {"messages": [RemoveMessage(id=m.id) for m in msgs[: humans[-1]]]}


def test_a_repeated_request_after_trimming_is_asked_anew() -> None:
    # each turn's trimmed messages have the count and last text of turn 1's: its answer is not given again
    mw, ran = TaskContextMiddleware(":memory:", side_effects=["kv_set"]), []
    agent = _agent(mw, ran, InMemorySaver(), more=[_KeepLastTurn()])
    for _ in range(3):
        _ask(agent, "t", "set one")
    assert ran == ["set:k=one"] * 3
    assert [e.kind for e in mw.events("t")].count("context.built") == 6
    mw.close()


def test_a_new_message_while_a_tool_step_is_pending_answers_its_calls_first() -> None:
    saver, ran = InMemorySaver(), []
    mw = TaskContextMiddleware(":memory:", side_effects=["kv_set"])
    cfg = {"configurable": {"thread_id": "t"}}
    with pytest.raises(KeyboardInterrupt):
        _agent(mw, ran, saver, crash_on="one").invoke(
            {"messages": [{"role": "user", "content": "set one"}]}, cfg, durability="sync"
        )
    agent = _agent(mw, ran, saver)
    assert agent.get_state(cfg).next == ("tools",)
    out = _ask(agent, "t", "read app")  # a new message, not a resume
    assert ran == ["set:k=one", "read:app"]  # kv_set not run again
    shape = [(type(m).__name__, getattr(m, "status", None)) for m in out]
    assert shape == [
        ("HumanMessage", None),
        ("AIMessage", None),
        ("ToolMessage", "error"),  # right after its call, as a provider requires
        ("HumanMessage", None),
        ("AIMessage", None),
        ("ToolMessage", "success"),
        ("AIMessage", None),
    ]
    assert INTERRUPTED.format(call_id="call_0", tool="kv_set") in out[2].content
    assert [m.id for m in out[:2]] == [m.id for m in agent.get_state(cfg).values["messages"][:2]]
    mw.close()


def test_a_reused_call_id_left_unanswered_by_a_crash_is_answered_at_the_next_message() -> None:
    # turn 1's read_log answered call_0; turn 2's kv_set (call_0 again) was cut off mid-run
    saver, ran = InMemorySaver(), []
    mw = TaskContextMiddleware(":memory:", side_effects=["kv_set"])
    cfg = {"configurable": {"thread_id": "t"}}
    _ask(_agent(mw, ran, saver), "t", "read app")
    with pytest.raises(KeyboardInterrupt):
        _agent(mw, ran, saver, crash_on="two").invoke(
            {"messages": [{"role": "user", "content": "set two"}]}, cfg, durability="sync"
        )
    out = _ask(_agent(mw, ran, saver), "t", "read db")
    assert ran == ["read:app", "set:k=two", "read:db"]
    kinds = [(type(m).__name__, getattr(m, "status", None)) for m in out]
    assert kinds[4:7] == [("HumanMessage", None), ("AIMessage", None), ("ToolMessage", "error")]
    assert INTERRUPTED.format(call_id="call_0", tool="kv_set") in out[6].content
    mw.close()


def test_another_middlewares_stand_in_for_a_cut_off_call_is_replaced_by_the_log() -> None:
    # deepagents' PatchToolCallsMiddleware answers a dangling call "did not complete" before the
    # agent's other before_agent hooks: the log says kv_set ran and was cut off
    from deepagents.middleware.patch_tool_calls import PatchToolCallsMiddleware

    saver, ran = InMemorySaver(), []
    mw = TaskContextMiddleware(":memory:", side_effects=["kv_set"])
    cfg = {"configurable": {"thread_id": "t"}}
    with pytest.raises(KeyboardInterrupt):
        _agent(mw, ran, saver, crash_on="one", more=[PatchToolCallsMiddleware()]).invoke(
            {"messages": [{"role": "user", "content": "set one"}]}, cfg, durability="sync"
        )
    agent = _agent(mw, ran, saver, more=[PatchToolCallsMiddleware()])
    out = _ask(agent, "t", "read app")
    assert ran == ["set:k=one", "read:app"]
    cut = out[2]
    assert isinstance(cut, ToolMessage) and cut.status == "error"
    assert cut.content.count("interrupted while it ran") == 1 and "did not complete" not in cut.content
    results = [(e.payload["status"], e.actor) for e in mw.events("t") if e.kind == "tool.result.received"]
    assert results == [("error", "system"), ("ok", "tool")]
    assert not [e for e in mw.events("t") if e.kind.startswith("permission.")]
    mw.close()


def _gated() -> tuple[TaskContextMiddleware, list[str], Any, dict[str, Any]]:
    """An agent whose HumanInTheLoopMiddleware gates kv_set: its middleware, runs, agent and config."""
    hitl = HumanInTheLoopMiddleware(interrupt_on={"kv_set": True})
    mw, ran = TaskContextMiddleware(":memory:", side_effects=["kv_set"], requires_approval=hitl), []
    return mw, ran, _agent(mw, ran, InMemorySaver(), more=[hitl]), {"configurable": {"thread_id": "t"}}


def test_a_rejected_call_with_a_reused_id_is_recorded_once() -> None:
    mw, ran, agent, cfg = _gated()
    _ask(agent, "t", "read app")  # call_0 of read_log: run, its result recorded
    assert agent.invoke({"messages": [{"role": "user", "content": "set one"}]}, cfg)["__interrupt__"]
    agent.invoke(Command(resume={"decisions": [{"type": "reject", "message": "not now"}]}), cfg)
    _ask(agent, "t", "read db")  # a later model call records nothing of it again
    assert ran == ["read:app", "read:db"]
    record = [(e.kind, e.payload.get("status")) for e in mw.events("t") if e.payload.get("call_id") == "call_0"]
    assert record == [
        ("tool.called", None),
        ("tool.result.received", "ok"),
        ("permission.requested", None),
        ("permission.denied", None),
        ("tool.result.received", "denied"),
        ("tool.called", None),
        ("tool.result.received", "ok"),
    ]
    assert check_events(mw.events("t")) == []
    mw.close()


def test_an_approval_left_for_a_new_message_is_answered_and_the_log_stays_whole() -> None:
    mw, ran, agent, cfg = _gated()
    assert agent.invoke({"messages": [{"role": "user", "content": "set one"}]}, cfg)["__interrupt__"]
    out = _ask(agent, "t", "read app")  # not a decision: a new message
    assert ran == ["read:app"]
    assert out[2].status == "error" and NOT_FINISHED.format(call_id="call_0", tool="kv_set") in out[2].content
    kinds = [(e.kind, e.actor) for e in mw.events("t") if e.payload.get("call_id") == "call_0"]
    assert kinds == [("tool.result.received", "system"), ("tool.called", "agent"), ("tool.result.received", "tool")]
    assert check_events(mw.events("t")) == []
    mw.close()

"""A crash that loses the model step whose side effect was running: the new turn is told, nothing runs twice.

LangGraph's ``state.next`` is empty when the last checkpoint's step has all its writes pending (the
checkpoint after it was never written), so the usual "resume or start anew" check starts a new
turn over the older checkpoint: the middleware puts the lost answer back with its calls' results.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver

from context import new_event
from context.events import ContextBuilt, ToolCalled, ToolResultReceived
from graphs.middleware import INTERRUPTED, NOT_FINISHED, TaskContextMiddleware
from graphs.middleware.answers import answer_of, lost_answers

sys.path.insert(0, str(Path(__file__).parent))
from agent_example import REQUEST, TOOLS, model  # noqa: E402

SCRIPT = Path(__file__).parent / "agent_example.py"


def _run(db: Path, env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    full = {**os.environ, **env}
    return subprocess.run([sys.executable, str(SCRIPT), str(db), "lost"], env=full, capture_output=True, timeout=120)


def _crash_then_run(tmp_path: Path, first: dict[str, str], then: dict[str, str]) -> tuple[Path, Path, Path]:
    db, kv, asked = tmp_path / "agent.db", tmp_path / "kv.txt", tmp_path / "asked.txt"
    base = {"AGENT_EXAMPLE_KV": str(kv), "AGENT_EXAMPLE_UNIQUE": str(asked)}
    crashed = _run(db, {**base, "AGENT_EXAMPLE_KILL": "kill-in-tool", **first})
    assert crashed.returncode == -9, crashed.stderr.decode()[-2000:]
    again = _run(db, {**base, "AGENT_EXAMPLE_KILL": "", "AGENT_EXAMPLE_LOSE_STEP": "", **then})
    assert again.returncode == 0, again.stderr.decode()[-2000:]
    assert again.stdout.decode().strip() == "Recorded: worker-271 failed."
    return db, kv, asked


def _agent(db: Path) -> object:
    saver = SqliteSaver(sqlite3.connect(str(db) + ".checkpoints", check_same_thread=False))
    return create_agent(model(), TOOLS, middleware=[TaskContextMiddleware(str(db))], checkpointer=saver)


def _shape(messages: list[object]) -> list[str]:
    out = []
    for m in messages:
        if isinstance(m, AIMessage):
            out.append("ai:" + ",".join(tc["name"] for tc in m.tool_calls))
        elif isinstance(m, ToolMessage):
            out.append(f"tool:{m.name}:{m.status}")
        else:
            out.append(type(m).__name__)
    return out


def test_a_new_turn_over_a_lost_model_step_runs_the_side_effect_once(tmp_path: Path) -> None:
    lose = {"AGENT_EXAMPLE_LOSE_STEP": "1", "AGENT_EXAMPLE_DURABILITY": "sync"}
    db, kv, asked = tmp_path / "agent.db", tmp_path / "kv.txt", tmp_path / "asked.txt"
    base = {"AGENT_EXAMPLE_KV": str(kv), "AGENT_EXAMPLE_UNIQUE": str(asked)}
    assert _run(db, {**base, "AGENT_EXAMPLE_KILL": "kill-in-tool", **lose}).returncode == -9
    # the shape LangGraph leaves: the model step's writes pending, no step "next"
    state = _agent(db).get_state({"configurable": {"thread_id": "lost"}})  # type: ignore[attr-defined]
    assert (state.next, [t.name for t in state.tasks]) == ((), ["model"])
    assert _run(db, {**base, "AGENT_EXAMPLE_KILL": ""}).returncode == 0
    assert kv.read_text() == "failed=worker-271\n"  # kv_set ran once
    assert asked.read_text().splitlines() == ["call-read", "call-set"]  # no model call named kv_set again
    final = _agent(db).get_state({"configurable": {"thread_id": "lost"}}).values["messages"]  # type: ignore[attr-defined]
    assert _shape(final) == [
        "HumanMessage",
        "ai:read_log",
        "tool:read_log:success",
        "ai:kv_set",  # the lost answer, put back with its call id before the new message
        "tool:kv_set:error",
        "HumanMessage",
        "ai:",
    ]
    set_id = final[3].tool_calls[0]["id"]
    assert set_id.startswith("call-set-") and final[4].tool_call_id == set_id
    assert INTERRUPTED.format(call_id=set_id, tool="kv_set") in final[4].content
    mw = TaskContextMiddleware(str(db))
    events = [(e.kind, e.payload.get("call_id")) for e in mw.events("lost")]
    assert [k for k, _ in events] == [
        "task.created",
        "context.built",
        "tool.called",
        "tool.result.received",
        "context.built",
        "tool.called",
        "resume.started",  # a new message over a run that did not finish
        "tool.result.received",  # the cut-off side effect, recorded as the new turn starts
        "context.built",
        "task.completed",
    ]
    assert events[5][1] == events[7][1] == set_id
    mw.close()


REPLAYED = ["HumanMessage", "ai:read_log", "tool:read_log:success", "ai:kv_set", "tool:kv_set:error", "ai:"]


def _ran_once(db: Path, kv: Path, asked: Path, shape: list[str] = REPLAYED) -> list[object]:
    """The thread's messages, once kv_set ran once and no model call named a tool twice."""
    assert kv.read_text() == "failed=worker-271\n"
    assert asked.read_text().splitlines() == ["call-read", "call-set"]
    final = _agent(db).get_state({"configurable": {"thread_id": "lost"}}).values["messages"]  # type: ignore[attr-defined]
    assert _shape(final) == shape
    return final


def test_a_resume_that_runs_the_whole_turn_again_gives_each_answer_again(tmp_path: Path) -> None:
    # no checkpoint with a reply was kept: invoke(None) runs the turn from its request; each model
    # call gets its recorded answer (a tool message answered from the log has a new id)
    lose = {"AGENT_EXAMPLE_LOSE_STEP": "all", "AGENT_EXAMPLE_DURABILITY": "sync"}
    db, kv, asked = _crash_then_run(tmp_path, lose, {"AGENT_EXAMPLE_RESUME": "none"})
    final = _ran_once(db, kv, asked)
    assert INTERRUPTED.format(call_id=final[3].tool_calls[0]["id"], tool="kv_set") in final[4].content
    mw = TaskContextMiddleware(str(db))
    first = next(e for e in mw.events("lost") if e.kind == "context.built").payload["answer"]
    assert final[0].id == first["last_id"]  # the request the killed run answered, run again
    mw.close()


def test_a_new_message_after_the_request_was_kept_and_its_answers_lost(tmp_path: Path) -> None:
    # the checkpoint holds the request only; the answers go back right after it, the new message last
    lose = {"AGENT_EXAMPLE_LOSE_STEP": "all", "AGENT_EXAMPLE_DURABILITY": "sync"}
    db, kv, asked = _crash_then_run(tmp_path, lose, {"AGENT_EXAMPLE_RESUME": "new", "AGENT_EXAMPLE_ASK": "Done?"})
    final = _ran_once(db, kv, asked, [*REPLAYED[:-1], "HumanMessage", "ai:"])
    assert (final[0].content, final[5].content) == (REQUEST, "Done?")
    assert [type(m).__name__ for m in final].count("HumanMessage") == 2


def test_a_new_question_after_a_crash_is_told_of_the_cut_off_side_effect(tmp_path: Path) -> None:
    # durability "exit": the killed run wrote no checkpoint; the next run asks something else
    first = {"AGENT_EXAMPLE_DURABILITY": "exit"}
    then = {"AGENT_EXAMPLE_ASK": "Is the failed worker recorded?"}
    db, kv, asked = _crash_then_run(tmp_path, first, then)
    # the killed run's answers were put back, read_log's result with them: the model was not asked again
    # the killed run's request and answers (its checkpoints all lost) before the new question
    final = _ran_once(db, kv, asked, [*REPLAYED[:-1], "HumanMessage", "ai:"])
    assert (final[0].content, final[5].content) == (REQUEST, "Is the failed worker recorded?")


def _events(*items: tuple[str, object]) -> list[object]:
    return [
        new_event(kind, payload, actor="system").model_copy(update={"seq": i})
        for i, (kind, payload) in enumerate(items, 1)
    ]


def _built(call: int, answered: list[object], ai: AIMessage) -> ContextBuilt:
    return ContextBuilt(call=call, role="agent", budget=1000, prompt_tokens=10, answer=answer_of(answered, ai))


def test_lost_answers_puts_back_only_a_cut_off_side_effect_not_in_the_messages() -> None:
    h = HumanMessage("record it")
    two = AIMessage(
        "both",
        tool_calls=[{"name": "kv_set", "args": {"k": "v"}, "id": "s1"}, {"name": "kv_get", "args": {}, "id": "g1"}],
    )
    called = ToolCalled(call_id="s1", tool="kv_set", arguments="{}", has_side_effects=True)
    log = _events(("context.built", _built(1, [h], two)), ("tool.called", called))
    ask = HumanMessage("and now?")
    lost = lost_answers([h, ask], log, {"kv_set"})
    assert [(m.content, [tc["id"] for tc in m.tool_calls]) for m in lost] == [("both", ["s1", "g1"])]
    # the same messages the answer belongs to: it is given again at the model call, not put back
    assert lost_answers([h], log, {"kv_set"}) == []
    # the answer in the messages already (the checkpoint kept it)
    assert lost_answers([h, two, ask], log, {"kv_set"}) == []
    # only read-only calls lost: nothing put back (they can run again)
    assert lost_answers([h, ask], log, {"kv_get"}) == []
    # a side effect that finished is put back too: the agent must know it ran
    done = ToolResultReceived(call_id="s1", status="ok", result_summary="stored")
    assert len(lost_answers([h, ask], [*log, *_events(("tool.result.received", done))], {"kv_set"})) == 1


def test_lost_answers_keeps_to_the_answers_after_the_last_one_the_messages_hold() -> None:
    h, ask = HumanMessage("record it"), HumanMessage("and now?")
    read = AIMessage("read", id="m1", tool_calls=[{"name": "read_log", "args": {}, "id": "call_0"}])
    put = AIMessage("set", id="m2", tool_calls=[{"name": "kv_set", "args": {}, "id": "call_0"}])
    again = AIMessage("set again", id="m3", tool_calls=[{"name": "kv_set", "args": {}, "id": "call_0"}])
    tm = ToolMessage("ok", tool_call_id="call_0", name="read_log")

    def called(tool: str, msg: str) -> ToolCalled:
        return ToolCalled(call_id="call_0", tool=tool, idempotency_key=f"{msg}:call_0")

    ok = ToolResultReceived(call_id="call_0", status="ok", result_summary="ok")
    log = _events(
        ("context.built", _built(1, [h], read)),
        ("tool.called", called("read_log", "m1")),
        ("tool.result.received", ok),
        ("context.built", _built(2, [h, read, tm], put)),
        ("tool.called", called("kv_set", "m2")),
        ("tool.result.received", ok),
        ("context.built", _built(3, [h, read, tm, put, tm], again)),
        ("tool.called", called("kv_set", "m3")),
    )
    # the same call id in every answer (a provider that reuses ids): each answer is its own
    assert [m.id for m in lost_answers([h, ask], log, {"kv_set"})] == ["m1", "m2", "m3"]
    # the messages hold m2 (m1 summarized away): only what came after it is lost
    assert [m.id for m in lost_answers([h, put, tm, ask], log, {"kv_set"})] == ["m3"]
    assert lost_answers([h, again, ask], log, {"kv_set"}) == []


def test_every_call_of_a_lost_answer_is_answered_once() -> None:
    mw = TaskContextMiddleware(":memory:", side_effects=["kv_set"])
    h = HumanMessage(REQUEST)
    two = AIMessage(
        "both",
        tool_calls=[
            {"name": "kv_set", "args": {"key": "failed", "value": "worker-271"}, "id": "s1"},
            {"name": "kv_get", "args": {"key": "failed"}, "id": "g1"},
        ],
    )
    called = ToolCalled(call_id="s1", tool="kv_set", arguments="{}", has_side_effects=True)
    mw.stores.events.append("t", [new_event("context.built", _built(1, [h], two), actor="system")])
    mw.stores.events.append("t", [new_event("tool.called", called, actor="agent")])
    agent = create_agent(model(), TOOLS, middleware=[mw], checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": "t"}}
    for _ in range(2):  # a second turn puts nothing back again
        out = agent.invoke({"messages": [{"role": "user", "content": "Is it recorded?"}]}, cfg)
    msgs = out["messages"]
    assert _shape(msgs)[:4] == ["ai:kv_set,kv_get", "tool:kv_set:error", "tool:kv_get:error", "HumanMessage"]
    assert _shape(msgs).count("ai:kv_set,kv_get") == 1
    assert INTERRUPTED.format(call_id="s1", tool="kv_set") in msgs[1].content
    assert NOT_FINISHED.format(call_id="g1", tool="kv_get") in msgs[2].content
    results = [(e.payload["call_id"], e.payload["status"]) for e in mw.events("t") if e.kind == "tool.result.received"]
    assert results[:2] == [("s1", "error"), ("g1", "error")]
    assert [c for c, _ in results].count("s1") == 1
    mw.close()

"""A model step the checkpoint lost: its recorded answer, found again in the event log.

Each ``context.built`` of a model answer that calls tools keeps the answer (its content and
calls, ids included) and where it belongs: the length of the messages it answered and a digest
of the last one. A crash can stop the agent after a call of that answer was recorded and before
the model step's checkpoint was written (LangGraph's default ``durability="async"`` writes it in
the background). Then either the resume asks the model again for the same messages (the answer is
given again: :func:`recorded_answer`), or the thread gets a new turn on top of the older
checkpoint (a ``state.next`` that is empty while the step's writes are pending looks finished):
the answer and its calls' results are put back first (:func:`lost_answers`), so the agent is told
that a side effect was cut off instead of being asked anew.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from context import Event

from .prompt import message_text

__all__ = ["answer_of", "lost_answers", "recorded_answer"]


def _digest(m: BaseMessage) -> str:
    """A short digest of a message's type and text (where a recorded answer belongs)."""
    return hashlib.sha256(f"{m.type}:{message_text(m)}".encode("utf-8", "replace")).hexdigest()[:16]


def answer_of(messages: Sequence[BaseMessage], ai: AIMessage | None) -> dict[str, Any] | None:
    """What ``context.built`` keeps of a model answer that calls tools.

    Args:
        messages: The messages the model answered.
        ai: Its answer (None: no AI message came back).

    Returns:
        ``{"at", "last", "id", "content", "tool_calls"}`` (``at``: the number of messages
        answered; ``last``: the digest of the last one), or None when the answer calls no tool.
    """
    if ai is None or not ai.tool_calls:
        return None
    calls = [{"name": tc["name"], "args": tc.get("args") or {}, "id": tc.get("id")} for tc in ai.tool_calls]
    return {
        "at": len(messages),
        "last": _digest(messages[-1]) if messages else "",
        "id": ai.id,
        "content": ai.content,
        "tool_calls": calls,
    }


def _message(a: dict[str, Any]) -> AIMessage:
    calls = [{**tc, "type": "tool_call"} for tc in a["tool_calls"]]
    return AIMessage(content=a["content"], tool_calls=calls, id=a.get("id"))


def recorded_answer(messages: Sequence[BaseMessage], events: list[Event]) -> AIMessage | None:
    """The recorded answer to these messages whose tool calls started, when the messages lack it.

    Args:
        messages: The messages of the model call about to be made.
        events: The task's events (``context.built`` and ``tool.called`` are read).

    Returns:
        The recorded answer, its call ids included, or None (the model is asked).
    """
    at, last = len(messages), (_digest(messages[-1]) if messages else "")
    called = {e.payload["call_id"] for e in events if e.kind == "tool.called"}
    have = {tc.get("id") for m in messages if isinstance(m, AIMessage) for tc in m.tool_calls}
    for e in reversed(events):
        a = e.payload.get("answer") if e.kind == "context.built" else None
        if not a or a["at"] != at or a["last"] != last:
            continue
        ids = [tc["id"] for tc in a["tool_calls"]]
        if any(i in called for i in ids) and not any(i in have for i in ids):
            return _message(a)
        return None
    return None


def lost_answers(messages: Sequence[BaseMessage], events: list[Event], side_effects: set[str]) -> list[AIMessage]:
    """The recorded answers a new turn must put back: each holds a side effect cut off mid-run.

    An answer is lost when none of its calls is in the messages and one of them is a side effect
    that started (``tool.called``) with no result. Nothing is lost when the messages are the ones
    a recorded answer belongs to (:func:`recorded_answer` gives it again, in order).

    Args:
        messages: The agent's messages as the turn starts (its new input included).
        events: The task's events (``context.built``, ``tool.called``, ``tool.result.received``).
        side_effects: The names of the tools with side effects.

    Returns:
        The answers, oldest first.
    """
    if recorded_answer(messages, events) is not None:
        return []
    have = {tc.get("id") for m in messages if isinstance(m, AIMessage) for tc in m.tool_calls}
    done = {e.payload["call_id"] for e in events if e.kind == "tool.result.received"}
    cut = {
        e.payload["call_id"]
        for e in events
        if e.kind == "tool.called" and e.payload["tool"] in side_effects and e.payload["call_id"] not in done
    }
    out: list[AIMessage] = []
    for e in events:
        a = e.payload.get("answer") if e.kind == "context.built" else None
        ids = {tc["id"] for tc in a["tool_calls"]} if a else set()
        if ids & cut and not ids & have:
            out.append(_message(a))  # type: ignore[arg-type]
    return out

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
from typing import Any, NamedTuple

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from context import Event

from .prompt import message_text

__all__ = [
    "CallRecord",
    "PAUSED",
    "answer_key",
    "answer_of",
    "answer_seqs",
    "call_key",
    "key_of",
    "lost_answers",
    "made_by",
    "recorded_answer",
    "recorded_result",
    "resume_point",
    "unanswered",
]


#: The reason of the ``permission.requested`` recorded when a call's tool stops at its own
#: ``interrupt()`` (and of the ``permission.granted`` when its run goes on).
PAUSED = "interrupt() in the tool: waiting for Command(resume=...)"


def _digest(m: BaseMessage) -> str:
    """A short digest of a message's type and text (where a recorded answer belongs)."""
    return hashlib.sha256(f"{m.type}:{message_text(m)}".encode("utf-8", "replace")).hexdigest()[:16]


def answer_of(messages: Sequence[BaseMessage], ai: AIMessage | None) -> dict[str, Any] | None:
    """What ``context.built`` keeps of a model answer that calls tools.

    Args:
        messages: The messages the model answered.
        ai: Its answer (None: no AI message came back).

    Returns:
        ``{"at", "last", "last_id", "id", "content", "tool_calls"}`` (``at``: the number of
        messages answered; ``last`` and ``last_id``: the digest and the id of the last one), or
        None when the answer calls no tool.
    """
    if ai is None or not ai.tool_calls:
        return None
    calls = [{"name": tc["name"], "args": tc.get("args") or {}, "id": tc.get("id")} for tc in ai.tool_calls]
    return {
        "at": len(messages),
        "last": _digest(messages[-1]) if messages else "",
        "last_id": messages[-1].id if messages else None,
        "id": ai.id,
        "content": ai.content,
        "tool_calls": calls,
    }


def _message(a: dict[str, Any]) -> AIMessage:
    calls = [{**tc, "type": "tool_call"} for tc in a["tool_calls"]]
    return AIMessage(content=a["content"], tool_calls=calls, id=a.get("id"))


def answer_key(answer_id: str | None, call_id: str) -> str:
    """The :func:`call_key` a recorded answer's call had (``""``: the answer had no id: any call of that id)."""
    return f"{answer_id}:{call_id}" if answer_id else ""


def _key(a: dict[str, Any], call_id: str) -> str:
    return answer_key(a.get("id"), call_id)


def _present(a: dict[str, Any], messages: Sequence[BaseMessage]) -> bool:
    """Whether the messages hold the recorded answer: its message id, else one of its call ids."""
    ais = [m for m in messages if isinstance(m, AIMessage)]
    if a.get("id"):
        return any(m.id == a["id"] for m in ais)
    ids = {tc["id"] for tc in a["tool_calls"]}
    return any(tc.get("id") in ids for m in ais for tc in m.tool_calls)


def _open(events: list[Event]) -> list[dict[str, Any]]:
    """The recorded answers of the run not yet completed: those after the last ``task.completed``."""
    done = max((i for i, e in enumerate(events) if e.kind == "task.completed"), default=-1)
    return [
        {**a, "seq": e.seq} for e in events[done + 1 :] if e.kind == "context.built" and (a := e.payload.get("answer"))
    ]


def answer_seqs(events: Sequence[Event]) -> dict[str, int]:
    """The seq of each recorded answer's ``context.built``, by the answer's message id.

    A call's events come after the ``context.built`` of the answer that made it (also when that
    answer is given again on a resume): what comes before belongs to other calls.

    Args:
        events: ``context.built`` events (their ``answer`` is read).

    Returns:
        ``{message id: seq}``.
    """
    return {
        a["id"]: e.seq for e in events if e.kind == "context.built" and (a := e.payload.get("answer")) and a.get("id")
    }


def _belongs(a: dict[str, Any], messages: Sequence[BaseMessage]) -> bool:
    """Whether the recorded answer answered these messages (their count, and the last one's digest).

    A human message's id counts too: the same words asked again (a trimmed history repeats a
    turn) are another request. A tool message's id does not: a re-run's tool message, answered
    from the log, gets a new id.
    """
    last = messages[-1] if messages else None
    if a["at"] != len(messages) or a["last"] != (_digest(last) if last is not None else ""):
        return False
    return not isinstance(last, HumanMessage) or not a.get("last_id") or a["last_id"] == last.id


def recorded_answer(messages: Sequence[BaseMessage], events: list[Event]) -> AIMessage | None:
    """The recorded answer to these messages whose tool calls started, when the messages lack it.

    Args:
        messages: The messages of the model call about to be made.
        events: The task's events (``context.built``, ``tool.called``,
            ``tool.result.received`` and ``task.completed`` are read): only the answers after
            the last ``task.completed`` are given again.

    Returns:
        The recorded answer, its message and call ids included, or None (the model is asked).
    """
    tools = [e for e in events if e.kind in ("tool.called", "tool.result.received")]
    for a in reversed(_open(events)):
        if not _belongs(a, messages):
            continue
        started = any(recorded_result(tools, tc["id"], _key(a, tc["id"]), a["seq"]).started for tc in a["tool_calls"])
        return _message(a) if started and not _present(a, messages) else None
    return None


def lost_answers(messages: Sequence[BaseMessage], events: list[Event], side_effects: set[str]) -> list[AIMessage]:
    """The recorded answers a new turn must put back, when one of them holds a side effect that ran.

    An answer is lost when it comes after the last ``task.completed`` and after the last answer
    the messages hold (older ones may have been summarized away or trimmed), the messages do not
    hold it, and one of its calls started
    (``tool.called``). The lost answers are put back, in order, when one of those calls is a side
    effect (finished or cut off): the agent must know it ran. Nothing is lost when the messages
    are the ones a recorded answer belongs to (:func:`recorded_answer` gives it again, in order).

    Args:
        messages: The agent's messages as the turn starts (its new input included).
        events: The task's events (``context.built``, ``tool.called``, ``tool.result.received``,
            ``task.completed``).
        side_effects: The names of the tools with side effects.

    Returns:
        The answers, oldest first.
    """
    if recorded_answer(messages, events) is not None:
        return []
    tools = [e for e in events if e.kind in ("tool.called", "tool.result.received")]
    answers = _open(events)
    kept = [i for i, a in enumerate(answers) if _present(a, messages)]
    lost: list[tuple[dict[str, Any], set[str]]] = []
    for a in answers[kept[-1] + 1 if kept else 0 :]:  # after the last answer the messages hold
        ran = {
            tc["name"]
            for tc in a["tool_calls"]
            if recorded_result(tools, tc["id"], _key(a, tc["id"]), a["seq"]).started
        }
        if ran and not _present(a, messages):
            lost.append((a, ran))
    if not any(ran & side_effects for _, ran in lost):
        return []  # only read-only calls were lost: running them again does no harm
    return [_message(a) for a, _ in lost]


def resume_point(messages: Sequence[BaseMessage], events: list[Event], ai: AIMessage) -> int | None:
    """Where a lost answer goes back: right after the messages it answered, when they are there.

    Args:
        messages: The agent's messages.
        events: The task's events (its ``context.built`` are read).
        ai: The lost answer (:func:`lost_answers`).

    Returns:
        The index to put it at, or None (the messages it answered are not all there).
    """
    for a in _open(events):
        if ai.id is not None and a.get("id") == ai.id:
            at = a["at"]
            return at if 0 < at <= len(messages) and _digest(messages[at - 1]) == a["last"] else None
    return None


def made_by(state: Any, call_id: str) -> tuple[int, AIMessage] | None:
    """The AI message that made a call (the last naming its id) and its index in the messages.

    Args:
        state: The agent's state (its ``messages``).
        call_id: The tool call's id.

    Returns:
        ``(index, message)``, or None when no message of the state made the call.
    """
    messages = state.get("messages", []) if isinstance(state, dict) else []
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if isinstance(m, AIMessage) and any(tc.get("id") == call_id for tc in m.tool_calls):
            return i, m
    return None


def call_key(state: Any, call_id: str) -> str:
    """The key of one call: the id of the AI message that made it (its index without one) and the call id.

    A provider may give the same call id in two answers (``call_0`` each time), and two agents
    on one thread may both; a resume re-runs the same answer. The key tells these apart.

    Args:
        state: The agent's state (its ``messages``).
        call_id: The tool call's id.

    Returns:
        ``"<message id>:<call id>"``, or ``""`` when no message of the state made the call.
    """
    made = made_by(state, call_id)
    return key_of(made[1], made[0], call_id) if made is not None else ""


def key_of(ai: AIMessage, at: int, call_id: str) -> str:
    """The :func:`call_key` of a call of ``ai``, the message at index ``at`` of the agent's messages."""
    return f"{ai.id or f'#{at}'}:{call_id}"


class CallRecord(NamedTuple):
    """What the log holds of one call: whether it started, its result, whether it is paused."""

    started: bool
    #: The payload of its ``tool.result.received`` (None: none recorded).
    result: dict[str, Any] | None
    #: Its last event is the pause at its tool's own ``interrupt()`` (``permission.requested``
    #: with reason :data:`PAUSED`).
    paused: bool


def recorded_result(seen: Sequence[Event], call_id: str, key: str, since: int = 0) -> CallRecord:
    """What the log holds of this call.

    A ``tool.called`` of the same call id made by another answer (another key) is another call;
    an older log's ``tool.called`` without a key, and a result recorded without a run (a
    reviewer's rejection), belong to any call of that id.

    Args:
        seen: The task's ``tool.called``, ``tool.result.received`` (and, for ``paused``,
            ``permission.requested``) events, in order.
        call_id: The call's id.
        key: Its :func:`call_key` (``""``: any call of that id).
        since: The seq of the ``context.built`` of the answer that made the call
            (:func:`answer_seqs`; 0: not known): the events before it are other calls'.

    Returns:
        The call's record.
    """
    started, mine, result, last = False, None, None, None
    for e in seen:
        if e.payload.get("call_id") != call_id or e.seq <= since:
            continue
        if e.kind == "tool.called":
            k = e.payload.get("idempotency_key") or ""
            mine = not k or not key or k == key
            if mine:  # its run starts: an earlier result of the id is not its own
                started, result = True, None
        elif e.kind == "tool.result.received" and result is None and mine is not False:
            result = e.payload  # (not a result of another answer's call)
        if mine:
            last = e
    paused = last is not None and last.kind == "permission.requested" and last.payload.get("reason") == PAUSED
    return CallRecord(started, result, started and result is None and paused)


def unanswered(messages: Sequence[BaseMessage]) -> list[tuple[int, dict[str, Any]]]:
    """The tool calls of AI messages no tool message answers: ``(index of the AI message, call)``.

    A call is answered by a tool message of its id that comes after its AI message and before
    the next AI message (a provider's reused id, ``call_0``, is answered anew in each answer).
    A new turn started while a step's tool messages were pending (or lost) leaves calls so; a
    provider refuses a call without its result.

    Args:
        messages: The agent's messages.

    Returns:
        The calls, in order.
    """
    out: list[tuple[int, dict[str, Any]]] = []
    at, pending = -1, {}  # the last AI message's index, and its calls not answered yet
    for i, m in enumerate([*messages, None]):
        if m is None or isinstance(m, AIMessage):
            out += [(at, tc) for tc in pending.values()]
            at, pending = i, ({tc.get("id"): dict(tc) for tc in m.tool_calls} if m is not None else {})
        elif isinstance(m, ToolMessage):
            pending.pop(m.tool_call_id, None)
    return out

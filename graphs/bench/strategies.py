"""The five context strategies ``taskctx bench`` compares, replayed over one recorded trajectory.

Every strategy yields one :class:`Call` per executor model call, counted by :data:`COUNT`
(o200k_base) as the taskctx graph counts; all share the system text and the tool schemas, so
only the context strategy differs.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from copy import deepcopy
from dataclasses import dataclass, field
from typing import Any

from langchain.agents.middleware import SummarizationMiddleware
from langchain.agents.middleware.context_editing import ClearToolUsesEdit
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, RemoveMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableLambda
from langgraph.checkpoint.memory import InMemorySaver

from context import Event, SqliteStores, Trajectory
from context.held_secrets import hold_secrets, secret_note
from context.secrets import take_secrets
from context.tokens import counter_for_model
from nodes import ReplayChatModel, ReplayTools
from nodes.message_tokens import message_tokens
from nodes.render.executor import EXECUTOR_SYSTEM
from nodes.runtime import fingerprints

from ..checkpoint import checkpoint_serde
from ..orchestrator import build_orchestrator, new_task
from ..runner import run_graph

__all__ = [
    "BASELINES",
    "Call",
    "MASK_N",
    "CLEAR_KEEP",
    "SUMMARY_CHARS",
    "STRATEGIES",
    "TaskctxRun",
    "baseline_calls",
    "messages_text",
    "orphan_tool_results",
    "prompt_orphans",
    "run_taskctx",
    "summarizer_middleware",
]

STRATEGIES = ("naive", "masking", "clearing", "summarization", "taskctx")
BASELINES = STRATEGIES[:4]
MASK_N = 5
CLEAR_KEEP = 3
SUMMARY_TRIGGER = 0.85


def COUNT(text: str) -> int:  # noqa: N802 (the bench's counter, named as the constant it was)
    """The bench's text counter, o200k_base: the default counter of the taskctx graph.

    Its encoding loads on the first count, not when the CLI starts.

    Args:
        text: A text.

    Returns:
        Its tokens.
    """
    return counter_for_model(None)(text)


COUNT.__name__ = "o200k_base"


def count_messages(messages: Sequence[BaseMessage], tools: Sequence[dict[str, Any]] | None = None) -> int:
    """Tokens of ``messages``, and ``tools``, by :data:`COUNT`.

    Args:
        messages: Chat messages.
        tools: Tool schemas, or None.

    Returns:
        Tokens.
    """
    return message_tokens(messages, COUNT, tools)


SUMMARY_KEEP = 0.10
#: Size of the extractive stand-in summary (about 500 tokens by the approximate counter).
SUMMARY_CHARS = 2_000
SUMMARY_LABEL = "[extractive stand-in for an LLM summary (no model offline); fixed size {n} chars]\n"


@dataclass
class Call:
    """One executor model call of one strategy."""

    index: int
    prompt_tokens: int
    fingerprints: list[str]
    text: str  # every message's content (and tool-call args), for retention checks
    orphans: int = 0  # tool results in the prompt whose call is not in it
    elided: int = 0  # observations in the prompt not in full (masked / cleared / summarised)
    role: str = "executor"
    payload: dict[str, Any] = field(default_factory=dict)  # taskctx: the context.built payload


def step_messages(t: Trajectory, upto: int) -> list[BaseMessage]:
    """An AI and a tool message per recorded step before ``upto``, observations in full.

    Args:
        t: The recorded run.
        upto: Steps (0-based, exclusive).

    Returns:
        The messages.
    """
    out: list[BaseMessage] = []
    for i, s in enumerate(t.steps[:upto], start=1):
        cid = f"rec-{i}"
        out.append(
            AIMessage(
                content=s.thought, tool_calls=[{"name": s.tool, "args": s.arguments, "id": cid, "type": "tool_call"}]
            )
        )
        out.append(ToolMessage(content=s.observation, tool_call_id=cid, name=s.tool))
    return out


def orphan_tool_results(messages: Sequence[BaseMessage]) -> int:
    """Tool messages with no earlier AI message carrying their call id.

    Args:
        messages: A prompt's messages.

    Returns:
        How many.
    """
    seen: set[str] = set()
    n = 0
    for m in messages:
        if isinstance(m, AIMessage):
            seen.update(tc.get("id") or "" for tc in m.tool_calls)
        elif isinstance(m, ToolMessage) and m.tool_call_id not in seen:
            n += 1
    return n


def prompt_orphans(prompt: str) -> int:
    """Tool results with no earlier call, in a stored taskctx prompt text.

    Args:
        prompt: The prompt text (:func:`nodes.runtime.prompt_text` layout).

    Returns:
        How many.
    """
    n = 0
    for section in prompt.split("\n\n### ")[1:]:
        if section.startswith("tool (tool_call_id="):
            cid = section.split("tool_call_id=", 1)[1].split(")", 1)[0]
            if f"(id={cid})" not in prompt:
                n += 1
    return n


def messages_text(messages: Sequence[BaseMessage]) -> str:
    """Every message's content (a content list as JSON) and its tool calls' arguments, one per line.

    Args:
        messages: A prompt's messages.

    Returns:
        The text the retention checks search.
    """
    parts = []
    for m in messages:
        parts.append(m.content if isinstance(m.content, str) else json.dumps(m.content, ensure_ascii=False))
        for tc in getattr(m, "tool_calls", None) or []:
            parts.append(json.dumps(tc["args"], sort_keys=True, ensure_ascii=False))
    return "\n".join(parts)


def _mask(history: list[BaseMessage], n: int) -> tuple[list[BaseMessage], int]:
    """SWE-agent ``LastNObservations`` with ``polling=1``."""
    obs = [i for i, m in enumerate(history) if isinstance(m, ToolMessage)]
    omit = set(obs[: max(0, len(obs) - n)])
    out: list[BaseMessage] = []
    for i, m in enumerate(history):
        if i in omit:
            text = m.content if isinstance(m.content, str) else json.dumps(m.content, ensure_ascii=False)
            out.append(
                m.model_copy(update={"content": f"Old environment output: ({text.count(chr(10)) + 1} lines omitted)"})
            )
        else:
            out.append(m)
    return out, len(omit)


def _extractive_summary(messages: Sequence[BaseMessage]) -> str:
    """Fixed-size stand-in: the head of each summarised message, in order, cut/padded to size."""
    head = SUMMARY_LABEL.format(n=SUMMARY_CHARS)
    bits = []
    for m in messages:
        text = m.content if isinstance(m.content, str) else json.dumps(m.content, ensure_ascii=False)
        calls = " ".join(
            f"{tc['name']}({json.dumps(tc['args'], sort_keys=True, ensure_ascii=False)[:80]})"
            for tc in getattr(m, "tool_calls", None) or []
        )
        line = " ".join(f"{m.type}: {text} {calls}".split())[:160]
        bits.append(line)
    body = "\n".join(bits)
    return (head + body)[:SUMMARY_CHARS].ljust(SUMMARY_CHARS)


def summarizer_middleware(budget: int) -> Any:
    """LangChain's ``SummarizationMiddleware`` with deepagents' fractions and the extractive stand-in summary.

    Args:
        budget: The window (tokens) the fractions are of.

    Returns:
        The middleware.
    """
    model = GenericFakeChatModel(messages=iter(()), profile={"max_input_tokens": budget})
    return SummarizationMiddleware(
        model=model,
        trigger=("fraction", SUMMARY_TRIGGER),
        keep=("fraction", SUMMARY_KEEP),
        summarizer=RunnableLambda(_extractive_summary),
        token_counter=count_messages,
    )


def baseline_calls(t: Trajectory, strategy: str, budget: int, tools: list[dict[str, Any]]) -> list[Call]:
    """One :class:`Call` per recorded step for a baseline strategy.

    For step k: system + the request, then an AI message (thought + tool call ``rec-<i>``) and a
    tool message per earlier step, per the strategy: ``naive`` keeps everything; ``masking`` is
    SWE-agent's ``LastNObservations(n=5)``; ``clearing`` LangChain's ``ClearToolUsesEdit(keep=3)``
    at the budget; ``summarization`` LangChain's ``SummarizationMiddleware`` with deepagents'
    settings (85% / keep 10%) and an extractive stand-in summary of fixed size.

    Args:
        t: The recorded run.
        strategy: One of :data:`BASELINES`.
        budget: The token budget.
        tools: The recorded tool schemas.

    Returns:
        The calls.

    Raises:
        ValueError: ``strategy`` is not a baseline.
    """
    system = SystemMessage(content=EXECUTOR_SYSTEM)
    request = HumanMessage(content=t.request)
    full = [request, *step_messages(t, len(t.steps))]
    summ = summarizer_middleware(budget) if strategy == "summarization" else None
    state: list[BaseMessage] = [request]
    calls: list[Call] = []
    for k in range(len(t.steps)):
        history = full[: 1 + 2 * k]
        elided = 0
        summarized = False
        if strategy == "naive":
            msgs = list(history)
        elif strategy == "masking":
            msgs, elided = _mask(history, MASK_N)
        elif strategy == "clearing":
            msgs = deepcopy(history)
            ClearToolUsesEdit(trigger=budget, keep=CLEAR_KEEP).apply(msgs, count_tokens=count_messages)
            elided = sum(
                1
                for m in msgs
                if isinstance(m, ToolMessage) and m.response_metadata.get("context_editing", {}).get("cleared")
            )
        elif strategy == "summarization":
            if k > 0:
                state.extend(full[2 * k - 1 : 2 * k + 1])
            upd = summ.before_model({"messages": state}, None)
            summarized = bool(upd)
            if upd:
                state = [m for m in upd["messages"] if not isinstance(m, RemoveMessage)]
            msgs = list(state)
            kept = sum(1 for m in msgs if isinstance(m, ToolMessage))
            elided = k - kept
        else:
            raise ValueError(f"unknown baseline strategy {strategy!r}; expected one of {BASELINES}")
        prompt = [system, *msgs]
        calls.append(
            Call(
                index=k,
                prompt_tokens=count_messages(prompt, tools or None),
                fingerprints=fingerprints(prompt, tools, COUNT),
                text=messages_text(prompt),
                orphans=orphan_tool_results(prompt),
                elided=elided,
                payload={"summarized": summarized},
            )
        )
    return calls


@dataclass
class TaskctxRun:
    """The real graph's run of one trajectory: its stores, event log and model calls."""

    trajectory: Trajectory
    stores: SqliteStores
    events: list[Event]
    calls: list[Call]  # executor calls
    other_calls: list[Call]  # planner / reviewer / recovery calls
    finished: bool
    #: the request as the task holds it: verbatim, its secrets as placeholders (retention's measure)
    request: str = ""


def run_taskctx(t: Trajectory, budget: int) -> TaskctxRun:
    """Replay ``t`` through ``graphs.build_orchestrator`` and collect every ``context.built``.

    Args:
        t: The recorded run (``ReplayChatModel`` and ``ReplayTools``).
        budget: The token budget.

    The request's secrets are held for the run, as :meth:`graphs.Project.run` holds them
    (:func:`context.secrets.take_secrets`).

    Returns:
        The run (its stores stay open: close them).
    """
    request, held = take_secrets(t.request)
    with hold_secrets(held):
        return _run_taskctx(t, budget, request, held)


def _run_taskctx(t: Trajectory, budget: int, request: str, held: dict[str, str]) -> TaskctxRun:
    """:func:`run_taskctx` with the request's secrets held."""
    stores = SqliteStores(":memory:")
    g = build_orchestrator(
        ReplayChatModel(trajectory=t),
        tools=ReplayTools(t),
        stores=stores,
        budget=budget,
        checkpointer=InMemorySaver(serde=checkpoint_serde()),
    )
    task = new_task(request, t.id, constraints=[secret_note(n) for n in held])
    res = run_graph(g, stores, t.id, task)
    events = stores.events.read(t.id)
    execs: list[Call] = []
    others: list[Call] = []
    for e in events:
        if e.kind != "context.built":
            continue
        p = e.payload
        text = stores.artifacts.get(p["prompt_ref"]).decode("utf-8") if p.get("prompt_ref") else ""
        c = Call(
            index=0,
            prompt_tokens=p["prompt_tokens"],
            fingerprints=list(p.get("fingerprints") or []),
            text=text,
            orphans=prompt_orphans(text),
            role=p["role"],
            payload={**p, "seq": e.seq},
        )
        if p["role"] == "executor":
            c.index = len(execs)
            execs.append(c)
        else:
            c.index = len(others)
            others.append(c)
    return TaskctxRun(t, stores, events, execs, others, res.finished, task.identity.original_request)

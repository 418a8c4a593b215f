"""The prompt :class:`~graphs.middleware.TaskContextMiddleware` sends: an agent's messages as budgeted blocks.

An agent's message list becomes candidate blocks: the core layer (the request verbatim, the hard
constraints) pinned first, one block per turn of the history (a human message, an AI message
with the tool results that answer its calls, kept together so no result loses its call), and
the index of the turns left out (their refs). :func:`agent_prompt` fits them into the budget
over the whole request (system message and tool schemas counted as overhead) with
``nodes.assemble``. A turn left out stays out on every later call, and a cut goes below the
budget by a margin, so the prompt's prefix stays the same (cached) from one cut to the next.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from context import ContextBlock, ManifestEntry, TaskContext, make_block
from context.blocks import Priority, Trust
from nodes import EXTERNAL_RULE, NodeEnv, Rendered, assemble, core_blocks
from nodes.render.quoting import quote_agent

__all__ = [
    "AGENT_ROLE",
    "MIDDLEWARE_RULE",
    "PromptInputs",
    "Turn",
    "agent_prompt",
    "message_text",
    "system_text",
    "turns_of",
]

#: The role the middleware's ``context.built`` events and manifests name.
AGENT_ROLE = "agent"

#: What the middleware adds to the agent's system message: the quoting rule and the refs.
MIDDLEWARE_RULE = (
    EXTERNAL_RULE + " A long tool output is shown compressed with its ref (artifact://sha256:...): "
    "call read_artifact with the ref, optionally ending in #L<start>-<end>, for the exact text."
)

#: Layout: the core layer, the index of the turns left out, then the turns as chat messages.
LAYOUT = ["msg:core", "msg:index", "seq:turns"]


def message_text(m: BaseMessage) -> str:
    """A message's text: its content (a list of parts as JSON) and its tool calls' arguments.

    Args:
        m: A chat message.

    Returns:
        The text.
    """
    text = m.content if isinstance(m.content, str) else json.dumps(m.content, ensure_ascii=False)
    calls = getattr(m, "tool_calls", None) or []
    return "\n".join([text, *(json.dumps(tc.get("args", {}), sort_keys=True, ensure_ascii=False) for tc in calls)])


@dataclass
class Turn:
    """One turn of an agent's history: a human message, an AI message and its calls' results, or a lone message."""

    id: str
    messages: list[BaseMessage]
    trust: Trust
    #: The calls of the turn's AI message: ``(call id, tool name, arguments)``.
    calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)

    @property
    def kind(self) -> str:
        """``user``, ``tool_result`` or ``state`` (the agent's own note)."""
        return {"user_claim": "user", "external_content": "tool_result"}.get(self.trust, "state")


def _turn_id(m: BaseMessage, i: int) -> str:
    return f"turn.{m.id}" if m.id else f"turn.{i}"


def turns_of(messages: Sequence[BaseMessage], request: str) -> list[Turn]:
    """The turns of an agent's messages (the system message excluded), oldest first.

    The first human message that is the pinned request is left out (the core layer holds it). A
    tool message joins the AI message that called it; one whose call is not in the history is a
    turn of its own.

    Args:
        messages: The agent's messages (``ModelRequest.messages``).
        request: The task's original request.

    Returns:
        The turns.
    """
    out: list[Turn] = []
    open_calls: dict[str, Turn] = {}
    pinned = False
    for i, m in enumerate(messages):
        if isinstance(m, ToolMessage) and m.tool_call_id in open_calls:
            open_calls[m.tool_call_id].messages.append(m)
            if isinstance(m, ToolMessage):
                open_calls[m.tool_call_id].trust = "external_content"
            continue
        if isinstance(m, HumanMessage):
            if not pinned and message_text(m).strip() == request.strip():
                pinned = True
                continue
            out.append(Turn(_turn_id(m, i), [m], "user_claim"))
        elif isinstance(m, AIMessage):
            calls = [(tc.get("id") or "", tc["name"], dict(tc.get("args") or {})) for tc in m.tool_calls]
            t = Turn(_turn_id(m, i), [m], "agent_claim", calls)
            open_calls.update({cid: t for cid, _n, _a in calls if cid})
            out.append(t)
        elif isinstance(m, ToolMessage):
            out.append(Turn(_turn_id(m, i), [m], "external_content"))
        else:  # a system or other message another middleware put in the history
            out.append(Turn(_turn_id(m, i), [m], "trusted_app"))
    return out


def _priority(t: Turn, i: int, n: int, keep_last: int, side_effects: Sequence[str]) -> Priority:
    """The newest turns, the user's later messages and the turns that changed something: high."""
    if i >= n - keep_last or t.trust == "user_claim" or any(name in side_effects for _c, name, _a in t.calls):
        return "high"
    return "normal"


def _index_text(left_out: Sequence[Turn], results: dict[str, dict[str, Any]]) -> str | None:
    """The index of the turns left out of the prompt: one line per tool call, with its ref."""
    lines = []
    for t in left_out:
        for cid, name, args in t.calls:
            r = results.get(cid, {})
            ref = r.get("raw_ref") or "(no output stored)"
            status = "" if r.get("status", "ok") == "ok" else f", {r['status']}"
            shown = json.dumps(args, sort_keys=True, ensure_ascii=False)
            shown = shown if len(shown) <= 60 else shown[:57] + "..."
            lines.append(f"- {cid} {name}({shown}) -> {ref} ({r.get('raw_chars', 0)} chars{status})")
    if not lines:
        return None
    head = "## Earlier tool calls (left out of this prompt; read_artifact(ref) fetches any output exactly)\n"
    return head + quote_agent("\n".join(lines), source="tool calls left out")


@dataclass
class PromptInputs:
    """What one prompt is built from (besides the env): the agent's request parts and the task's log."""

    ctx: TaskContext
    system: str
    messages: list[BaseMessage]
    tools: list[dict[str, Any]]
    #: Turn ids left out at an earlier call (they stay out: a stable prefix).
    left_out: set[str]
    #: call id -> its ``tool.result.received`` payload.
    results: dict[str, dict[str, Any]]
    side_effects: Sequence[str] = ()
    keep_last: int = 3
    #: A cut leaves the history this share of the budget's room (the rest: room to grow cached).
    low_water: float = 0.0


def _candidates(p: PromptInputs, env: NodeEnv, turns: list[Turn]) -> tuple[list[ContextBlock], dict[str, Any]]:
    """The candidate blocks and each turn's messages, the turns left out earlier excluded."""
    core = core_blocks(p.ctx, env, criteria=False, permissions=bool(p.ctx.permissions.requires_approval))
    out: list[ContextBlock] = list(core)
    gone = [t for t in turns if t.id in p.left_out]
    index = _index_text(gone, p.results)
    if index is not None:
        out.append(
            make_block(
                "history.index",
                index,
                kind="state",
                layer="audit",
                source="tool.result.received",
                count_tokens=env.count_tokens,
                priority="normal",  # below the turns ranked high, above the others
                trust="agent_claim",
                relevance=1.0,
                slot="msg:index",
            )
        )
    live = [t for t in turns if t.id not in p.left_out]
    extra: dict[str, Any] = {}
    for i, t in enumerate(live):
        extra[t.id] = t.messages
        b = ContextBlock(
            id=t.id,
            kind=t.kind,  # type: ignore[arg-type]
            layer="recent",
            source="agent messages",
            priority=_priority(t, i, len(live), p.keep_last, p.side_effects),
            trust=t.trust,
            token_estimate=env.count_messages(t.messages),
            text="\n".join(message_text(m) for m in t.messages),
            relevance=(i + 1) / len(live),
            slot="seq:turns",
        )
        out.append(b)
    return out, extra


def _build(p: PromptInputs, env: NodeEnv, turns: list[Turn], left_out: set[str], system: str) -> Rendered:
    cands, extra = _candidates(replace(p, left_out=left_out), env, turns)
    return assemble(
        role=AGENT_ROLE, env=env, system=system, candidates=cands, layout=LAYOUT, tools=p.tools, extra_messages=extra
    )


def _kept_at_cuts(p: PromptInputs, turns: list[Turn], left_out: set[str]) -> set[str]:
    """The turns a cut keeps whatever its depth: the newest, the user's, those that changed something."""
    live = [t for t in turns if t.id not in left_out]
    keep = {live[-1].id} if live else set()
    return keep | {
        t.id for t in live if t.trust == "user_claim" or any(name in p.side_effects for _c, name, _a in t.calls)
    }


def _dropped_turns(r: Rendered) -> set[str]:
    return {e.id for e in r.manifest.entries if not e.included and e.id.startswith("turn.")}


def agent_prompt(p: PromptInputs, env: NodeEnv) -> tuple[Rendered, list[ManifestEntry]]:
    """The prompt of one model call of an agent: the blocks chosen within the budget, laid out.

    When a turn has to leave, the cut is made at ``low_water`` of the room the history has (the
    newest turn, the user's and those that changed something stay unless the budget itself has
    no room for them), so the calls after it
    add to a prefix that stays the same; the turns left out (at this call or earlier) stay out,
    the manifest lists them and the index block their refs.

    Args:
        p: The request's parts and the task's log (:class:`PromptInputs`).
        env: The node environment (budget, reserve and counter: tokens).

    Returns:
        ``(rendered prompt, manifest entries of the turns left out by a cut)``.

    Raises:
        BudgetError: The core layer, system message and tool schemas alone do not fit the budget.
    """
    turns = turns_of(p.messages, p.ctx.identity.original_request)
    system = f"{p.system}\n\n{MIDDLEWARE_RULE}" if p.system else MIDDLEWARE_RULE
    left_out = set(p.left_out)
    r = _build(p, env, turns, left_out, system)
    cut_now: set[str] = set()
    low = 0
    if r.manifest.dropped:  # a cut: deep enough for the next calls to grow on a stable prefix
        m = r.manifest
        fixed = sum(e.tokens for e in m.entries if not e.id.startswith("turn.") and e.included)
        low = m.overhead_tokens + m.reserve_for_output + fixed + int(p.low_water * (m.available - fixed))
        deep = _build(p, replace(env, budget=min(low, m.budget)), turns, left_out, system)
        cut_now = (_dropped_turns(deep) - _kept_at_cuts(p, turns, left_out)) | _dropped_turns(r)
        r = _build(p, env, turns, left_out | cut_now, system)
    why_now = f"left out at this call: the history cut to {low} tokens so the next calls keep a cached prefix"
    why_then = "left out at an earlier call (stays out: the prompt's prefix stays cached)"
    earlier = [
        ManifestEntry(
            id=t.id,
            layer="recent",
            kind=t.kind,  # type: ignore[arg-type]
            trust=t.trust,
            priority="normal",
            tokens=env.count_messages(t.messages),
            included=False,
            reason=f"{why_now if t.id in cut_now else why_then}; its calls' refs are in history.index",
        )
        for t in turns
        if t.id in left_out or t.id in cut_now
    ]
    return r, earlier


def system_text(m: SystemMessage | None) -> str:
    """The text of the agent's system message (``""`` without one).

    Args:
        m: The system message, or None.

    Returns:
        Its text.
    """
    return "" if m is None else message_text(m).strip()

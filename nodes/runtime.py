"""What every role node shares: the stores, the catch-up rule, model calls with metadata.

**The catch-up rule.** A LangGraph node re-runs from its first line after a crash or resume.
Each node appends its events in one transaction (the tool node: one per call) *before* LangGraph
writes its checkpoint, so the only events the log can hold past the checkpoint's cursor are the
crashed attempt of this same node. :meth:`NodeRun.start` folds them; a role node that finds its
own earlier output returns it instead of calling the model again (never redo a finished step).

**Resume.** ``taskctx resume`` passes ``configurable.resume_token``; the first node that runs
emits ``resume.started`` with it (once: the token is folded into ``events.last_resume_token``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.runnables import RunnableConfig

from context import (
    ContextBlock,
    Event,
    LogAheadError,
    Manifest,
    SqliteStores,
    TaskContext,
    new_event,
    replay,
)
from context.events import ContextBuilt, FactStale, ResumeStarted
from context.freshness import find_stale
from context.store import ArtifactStoreProtocol, EventLogProtocol
from context.text import clean, has_surrogates

__all__ = [
    "DEFAULT_BUDGET",
    "DEFAULT_RESERVE",
    "NodeEnv",
    "NodeRun",
    "Rendered",
    "PARTS",
    "cached_prefix_tokens",
    "fingerprints",
    "prompt_text",
    "text_tokens",
]

DEFAULT_BUDGET = 8_000
DEFAULT_RESERVE = 1_000
PARTS = (
    "identity",
    "plan",
    "current_step",
    "progress",
    "control",
    "permissions",
    "evidence",
    "events",
    "memory",
    "errors",
)


def text_tokens(text: str) -> int:
    """Tokens of ``text`` by langchain-core's approximate counter, less its per-message overhead."""
    return max(0, count_tokens_approximately([AIMessage(content=text)]) - 3 - 1)


@dataclass
class NodeEnv:
    """The stores and budget every node of one graph uses.

    ``budget`` and ``reserve_for_output`` are in tokens (counted with langchain-core's
    approximate counter unless ``count_tokens`` is given).
    """

    events: EventLogProtocol
    artifacts: ArtifactStoreProtocol
    budget: int = DEFAULT_BUDGET
    reserve_for_output: int = DEFAULT_RESERVE
    count_tokens: Any = field(default=text_tokens)
    #: The stores object when built by :meth:`sqlite` (``env.stores.close()`` closes it).
    stores: Any = None
    #: Freshness (:mod:`context.freshness`): record ``fact.stale`` when a write, a re-read, a
    #: HEAD move or a change made while paused leaves a fact resting on other bytes. False
    #: switches the mechanism off (facts are then never marked stale).
    freshness: bool = True
    #: The ToolExecutor whose ``fingerprint(paths)`` the first node after a resume compares
    #: with what the task's facts rest on (``build_orchestrator`` sets it to the task's tools).
    workspace: Any = None
    #: The context policies (:mod:`nodes.policy`): None, the defaults
    #: (:func:`~nodes.policy.default_policies`); a list replaces them (``[]``: none).
    policies: Any = None

    @classmethod
    def sqlite(cls, path: str = ":memory:", **kw: Any) -> NodeEnv:
        """An env on a SQLite file (or ``:memory:``); ``env.stores`` keeps the connection."""
        stores = SqliteStores(path)
        return cls(events=stores.events, artifacts=stores.artifacts, stores=stores, **kw)


@dataclass
class Rendered:
    """A rendered prompt: messages, tool schemas, the manifest and the token measures."""

    messages: list[BaseMessage]
    tools: list[dict[str, Any]]
    manifest: Manifest
    blocks: list[ContextBlock]
    prompt_tokens: int
    transcript_reset: bool = False
    keep_last: int = 0
    #: Executor: the state delta this prompt appends to the transcript (None: unchanged).
    delta_note: str | None = None


def fingerprints(messages: Sequence[BaseMessage], tools: Sequence[dict[str, Any]]) -> list[str]:
    """``<sha256[:16]>:<tokens>`` for the tool schemas, then for each message (in order)."""
    out = []
    if tools:
        blob = json.dumps(list(tools), sort_keys=True)
        out.append(
            f"{hashlib.sha256(blob.encode()).hexdigest()[:16]}:{count_tokens_approximately([], tools=list(tools))}"
        )
    for m in messages:
        blob = json.dumps(
            {
                "type": m.type,
                "content": m.content,
                "tool_calls": getattr(m, "tool_calls", None),
                "tool_call_id": getattr(m, "tool_call_id", None),
            },
            sort_keys=True,
            default=str,
        )
        out.append(f"{hashlib.sha256(blob.encode()).hexdigest()[:16]}:{count_tokens_approximately([m])}")
    return out


def cached_prefix_tokens(previous: Sequence[str], current: Sequence[str]) -> int:
    """Tokens of the longest common prefix (whole messages) of two fingerprint lists."""
    total = 0
    for a, b in zip(previous, current):
        if a != b:
            break
        total += int(a.rsplit(":", 1)[1])
    return total


def prompt_text(messages: Sequence[BaseMessage], tools: Sequence[dict[str, Any]] = ()) -> str:
    """The prompt as a person reads it (Markdown): one section per message."""
    parts = []
    if tools:
        names = ", ".join(t.get("function", t).get("name", "?") for t in tools)
        parts.append(f"### tools\n{names}")
    for m in messages:
        head = f"### {m.type}"
        if getattr(m, "tool_call_id", None):
            head += f" (tool_call_id={m.tool_call_id})"
        body = m.content if isinstance(m.content, str) else json.dumps(m.content)
        calls = getattr(m, "tool_calls", None)
        if calls:
            body += "".join(
                f"\n-> tool call {c['name']} {json.dumps(c['args'], sort_keys=True)} (id={c['id']})" for c in calls
            )
        parts.append(f"{head}\n{body}")
    return "\n\n".join(parts) + "\n"


class NodeRun:
    """One attempt of one node over one state: catch-up, emit, commit.

    Every event the attempt appends carries ``causation_id = attempt`` =
    ``"<task_id>#<input cursor>:<node>"``. ``own`` holds the events an earlier, crashed attempt of
    this same node on this same checkpoint already appended; they are folded, not redone. Any
    other event past the checkpoint's cursor means the graph was started from an older
    checkpoint than the log (time travel, a fork): ``LogAheadError`` is raised, because the log is
    append-only per task and cannot branch.
    """

    def __init__(self, env: NodeEnv, state: TaskContext | dict[str, Any], node: str, config: RunnableConfig | None):
        self.env = env
        self.node = node
        self.config = config or {}
        self.input = state if isinstance(state, TaskContext) else TaskContext.model_validate(state)
        task_id = self.input.identity.task_id
        if not task_id:
            raise ValueError("TaskContext.identity.task_id is empty; start a task with graphs.new_task(...)")
        self.task_id = task_id
        cursor = self.input.events.cursor
        self.attempt = f"{task_id}#{cursor}:{node}"
        past = env.events.read(task_id, after=cursor)
        foreign = [e for e in past if e.causation_id != self.attempt]
        if foreign:
            raise LogAheadError(
                f"task {task_id!r}: the event log is at seq {past[-1].seq} but this checkpoint knows seq {cursor} "
                f"(event {foreign[0].seq} {foreign[0].kind} came from another node run): continuing from an older "
                "checkpoint (time travel, a fork) is not supported; resume from the latest checkpoint"
            )
        self.own: list[Event] = past
        self.ctx = replay(self.own, self.input)
        self._new: list[Event] = []

    @property
    def replayed(self) -> bool:
        """True when an earlier attempt of this node already recorded its output."""
        return bool(self.own)

    def event(self, kind: str, payload: Any, actor: str = "agent") -> Event:
        """Append one event now (own transaction) and fold it into ``ctx``."""
        return self.commit([self.make(kind, payload, actor)])[0]

    def make(self, kind: str, payload: Any, actor: str = "agent") -> Event:
        """A new event of this attempt (not yet appended): ``causation_id`` is the attempt key."""
        return new_event(
            kind,  # type: ignore[arg-type]
            payload,
            actor=actor,  # type: ignore[arg-type]
            correlation_id=self.task_id,
            causation_id=self.attempt,
        )

    def commit(self, events: Sequence[Event]) -> list[Event]:
        """Append ``events`` in one transaction, fold them, and return them with ``seq`` set."""
        numbered = [e.model_copy(update={"seq": self.ctx.events.cursor + 1 + i}) for i, e in enumerate(events)]
        appended = self.env.events.append(self.task_id, numbered)
        self.ctx = replay(appended, self.ctx)
        self._new.extend(appended)
        return appended

    def resume_events(self) -> list[Event]:
        """A ``resume.started`` event (naming this node) if this run was started by a resume not
        yet recorded, followed by the ``fact.stale`` events of :meth:`resume_fingerprint`."""
        token = (self.config.get("configurable") or {}).get("resume_token")
        if token and token != self.ctx.events.last_resume_token:
            cp = (self.config.get("configurable") or {}).get("resumed_from_checkpoint")
            started = ResumeStarted(token=token, from_checkpoint=cp, node=self.node)
            return [self.make("resume.started", started, actor="user"), *self.resume_fingerprint()]
        return []

    def resume_fingerprint(self) -> list[Event]:
        """On resume, the workspace is fingerprinted (``env.workspace.fingerprint`` over the
        files the task has seen): a fact resting on a file that changed while the task was
        paused, or on a HEAD that moved, gets ``fact.stale`` (``cause="resume"`` / ``"head"``)."""
        fp = getattr(self.env.workspace, "fingerprint", None)
        if not self.env.freshness or fp is None or not (self.ctx.evidence.world or self.ctx.evidence.head):
            return []
        now, head = fp(sorted(self.ctx.evidence.world))
        changes = {p: sha for p, sha in now.items() if sha != self.ctx.evidence.world.get(p)}
        stale = find_stale(self.ctx, changes, "resume", head=head)
        return [self.make("fact.stale", FactStale.model_validate(p), actor="system") for p in stale]

    def update(self) -> dict[str, Any]:
        """The state update: every part that differs from the node's input."""
        return {p: getattr(self.ctx, p) for p in PARTS if getattr(self.ctx, p) != getattr(self.input, p)}

    # model calls -----------------------------------------------------------------------
    def context_built(
        self, role: str, rendered: Rendered, step_id: str | None, ctx: TaskContext | None = None
    ) -> Event:
        """The ``context.built`` event for a prompt (not yet committed): manifest, tokens, refs."""
        ctx = ctx or self.ctx
        fps = fingerprints(rendered.messages, rendered.tools)
        prev = ctx.events.prompt_fingerprints.get(role, [])
        prompt_ref = self.env.artifacts.put(prompt_text(rendered.messages, rendered.tools))
        m = rendered.manifest
        payload = ContextBuilt(
            call=ctx.events.counts.get("context.built", 0) + 1,
            role=role,
            step_id=step_id,
            budget=m.budget,
            prompt_tokens=rendered.prompt_tokens,
            cached_prefix_tokens=cached_prefix_tokens(prev, fps),
            blocks_in=len(m.included),
            blocks_out=len(m.dropped),
            transcript_reset=rendered.transcript_reset,
            keep_last=rendered.keep_last,
            delta_note=rendered.delta_note,
            blocks=m.entries,
            prompt_ref=prompt_ref,
            fingerprints=fps,
        )
        return self.make("context.built", payload, actor="system")

    def call_model(
        self, model: BaseChatModel, role: str, rendered: Rendered, built: Event, ctx: TaskContext | None = None
    ) -> AIMessage:
        """Invoke ``model`` (with the rendered tools bound) under a config that names the role
        and carries the manifest as metadata (LangSmith shows it on the model run)."""
        ctx = ctx or self.ctx
        p = built.payload
        meta = {
            "task_id": self.task_id,
            "thread_id": self.task_id,
            "role": role,
            "step_id": p["step_id"],
            "call": p["call"],
            "role_call": ctx.events.counts.get(f"context.built:{role}", 0),
            "executor_steps": ctx.progress.executor_steps,
            "budget": p["budget"],
            "prompt_tokens": p["prompt_tokens"],
            "cached_prefix_tokens": p["cached_prefix_tokens"],
            "manifest": {
                "included": [b["id"] for b in p["blocks"] if b["included"]],
                "dropped": [{"id": b["id"], "reason": b["reason"]} for b in p["blocks"] if not b["included"]],
                "blocks": [
                    {k: b[k] for k in ("id", "layer", "kind", "trust", "tokens", "included")} for b in p["blocks"]
                ],
            },
        }
        bound = model.bind_tools(rendered.tools) if rendered.tools else model
        cfg: RunnableConfig = {"metadata": meta, "tags": [f"role:{role}"], "run_name": f"{role}.model"}
        messages = [
            m.model_copy(update={"content": clean(m.content)})
            if isinstance(m.content, str) and has_surrogates(m.content)
            else m
            for m in rendered.messages
        ]  # a prompt is UTF-8 text: a lone surrogate is sent as U+FFFD
        out = bound.invoke(messages, config=cfg)
        if not isinstance(out, AIMessage):
            out = AIMessage(content=str(getattr(out, "content", out)))
        return out

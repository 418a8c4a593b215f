"""What every node shares: :class:`NodeEnv` (stores, budget, counter) and :class:`NodeRun` (one attempt).

A node re-runs from its first line after a crash or resume; :class:`NodeRun` folds what its
crashed attempt already recorded, so a finished step is never redone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage, BaseMessage

from context import (
    ContextBlock,
    Event,
    Manifest,
    SqliteStores,
    TaskContext,
    new_event,
    replay,
)
from context.events import ContextBuilt, FactStale, ResumeStarted, TranscriptReset
from context.freshness import Cause, find_stale
from context.store import ArtifactStoreProtocol, EventLogProtocol
from context.text import clean, has_surrogates
from context.tokens import TokenCounter, counter_for_model, counter_name

from .attempts import NODE_RUNS, attempt_key, log_ahead_error
from .chat_models import model_error, request_timeout
from .message_tokens import message_tokens
from .pricing import FLAT, PricingRule
from .prompt_parts import cached_prefix_tokens, fingerprints, prompt_text

if TYPE_CHECKING:  # (annotations only: the chat-model classes are slow to import)
    from langchain_core.language_models import BaseChatModel
    from langchain_core.runnables import Runnable, RunnableConfig

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
    "provider_caching",
    "usage_of",
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


def _default_counter() -> TokenCounter:
    return counter_for_model(None)


@dataclass
class NodeEnv:
    """The stores, budget and token counter every node of one graph uses.

    ``budget`` and ``reserve_for_output`` are in tokens, counted by ``count_tokens`` (``str -> int``;
    default o200k_base; ``graphs`` passes the counter of ``--model``). That one counter counts
    blocks, transcript entries, the restart rule, ``prompt_tokens`` and the prompt fingerprints.
    ``cache_rule`` prices the executor's transcript restarts (:mod:`nodes.pricing`; default: flat).
    """

    events: EventLogProtocol
    artifacts: ArtifactStoreProtocol
    budget: int = DEFAULT_BUDGET
    reserve_for_output: int = DEFAULT_RESERVE
    count_tokens: TokenCounter = field(default_factory=_default_counter)
    cache_rule: PricingRule = FLAT
    #: The stores object when built by :meth:`sqlite` (``env.stores.close()`` closes it).
    stores: Any = None
    #: The long-term store of durable memories (:class:`nodes.memory_source.MemorySource`), or None:
    #: a new task then loads no memories, and confirmations stay in the event log only.
    memory: Any = None
    #: Freshness (:mod:`context.freshness`): record ``fact.stale`` when a write, a re-read, a
    #: HEAD move or a change made while paused leaves a fact resting on other bytes. False
    #: switches the mechanism off (facts are then never marked stale).
    freshness: bool = True
    #: The ToolExecutor whose ``fingerprint(paths)`` the first node after a resume compares
    #: with what the task's facts rest on (``build_orchestrator``, ``make_executor_node`` and
    #: ``make_tool_node`` set it to the task's tools when they fingerprint and it is None).
    workspace: Any = None
    #: The context policies (:mod:`context.policy`): None, the defaults
    #: (:func:`~context.policy.default_policies`); a list replaces them (``[]``: none).
    policies: Any = None
    #: Role reports in the prompts of the roles that take them (:mod:`nodes.render.role_reports`); False: none.
    reports: bool = True

    @classmethod
    def sqlite(cls, path: str = ":memory:", **kw: Any) -> NodeEnv:
        """An env on a SQLite file; ``env.stores`` keeps the connection (``env.stores.close()``).

        Args:
            path: The SQLite file, or ``:memory:``.
            **kw: Any other field of :class:`NodeEnv` (``budget``, ``count_tokens``...).

        Returns:
            The env, its event log and artifact store on ``path``.
        """
        stores = SqliteStores(path)
        return cls(events=stores.events, artifacts=stores.artifacts, stores=stores, **kw)

    def use_workspace(self, tools: Any) -> None:
        """Take ``tools`` as :attr:`workspace` when none is set and they can fingerprint files.

        Args:
            tools: The task's ToolExecutor.
        """
        if self.workspace is None and callable(getattr(tools, "fingerprint", None)):
            self.workspace = tools

    def count_messages(self, messages: Sequence[BaseMessage], tools: Sequence[dict[str, Any]] | None = None) -> int:
        """Tokens of chat messages, and tool schemas, by ``count_tokens``.

        Args:
            messages: The chat messages.
            tools: OpenAI-format tool schemas, counted as JSON; None: no schemas.

        Returns:
            Tokens, as :func:`nodes.message_tokens.message_tokens` counts them.
        """
        return message_tokens(messages, self.count_tokens, tools)

    @property
    def counter(self) -> str:
        """The counter's name: ``o200k_base``, ``cl100k_base``, ``estimate``..."""
        return counter_name(self.count_tokens)


@dataclass
class Rendered:
    """A rendered prompt: messages, tool schemas, the manifest and the token measures."""

    messages: list[BaseMessage]
    tools: list[dict[str, Any]]
    manifest: Manifest
    blocks: list[ContextBlock]
    prompt_tokens: int
    #: Executor: the restart decision's numbers when the transcript restarts here (``True``:
    #: a restart without them, as a caller may still pass).
    transcript_reset: bool | TranscriptReset = False
    keep_last: int = 0
    #: Executor: the state delta this prompt appends to the transcript (None: unchanged).
    delta_note: str | None = None
    #: Indices of the messages that end a stable part of the layout (core layer, checkpoint):
    #: where a provider with explicit cache breakpoints (Anthropic) gets one.
    breakpoints: list[int] = field(default_factory=list)


CACHE_CONTROL = {"type": "ephemeral"}


def provider_of(model: Any) -> str:
    """The model's provider as LangChain reports it (``ls_provider``).

    Args:
        model: A LangChain chat model.

    Returns:
        ``openai``, ``anthropic``..., or ``""`` when the model reports none.
    """
    try:
        return str(model._get_ls_params().get("ls_provider") or "")
    except Exception:
        return ""


def provider_caching(model: Any, rendered: Rendered, task_id: str) -> tuple[list[BaseMessage], dict[str, Any]]:
    """The messages and invoke arguments that make the provider cache the prompt's stable prefix.

    OpenAI caches prefixes by itself; ``prompt_cache_key`` (the task id) routes a task's calls to
    the same cache. Anthropic caches up to explicit ``cache_control`` breakpoints: one after the
    core layer, one after the checkpoint, one at the transcript's tail. Other providers: unchanged.

    Args:
        model: The chat model (its provider decides).
        rendered: The rendered prompt (its ``breakpoints`` mark the stable parts).
        task_id: The task's id.

    Returns:
        ``(messages, invoke keyword arguments)``.
    """
    provider = provider_of(model)
    if provider == "openai":
        return list(rendered.messages), {"prompt_cache_key": task_id}
    if provider != "anthropic":
        return list(rendered.messages), {}
    out = list(rendered.messages)
    for i in rendered.breakpoints:
        m = out[i]
        if isinstance(m.content, str):
            blocks: list[dict[str, Any]] = [{"type": "text", "text": m.content}]
        else:  # a str item of a content list is a text block
            blocks = [dict(b) if isinstance(b, dict) else {"type": "text", "text": b} for b in m.content]
        blocks[-1] = {**blocks[-1], "cache_control": dict(CACHE_CONTROL)}
        out[i] = m.model_copy(update={"content": blocks})
    return out, {"cache_control": dict(CACHE_CONTROL)}


def usage_of(ai: AIMessage) -> dict[str, int] | None:
    """What the provider reported for a call (LangChain's ``usage_metadata``).

    Args:
        ai: The model's reply.

    Returns:
        ``{input_tokens, output_tokens, cache_read, cache_creation}`` in tokens (``input_tokens``
        includes the cached ones), or None when the model reports none (scripted, replay).
    """
    um = ai.usage_metadata
    if not um:
        return None
    details = um.get("input_token_details") or {}
    return {
        "input_tokens": int(um.get("input_tokens") or 0),
        "output_tokens": int(um.get("output_tokens") or 0),
        "cache_read": int(details.get("cache_read") or 0),
        "cache_creation": int(details.get("cache_creation") or 0),
    }


class NodeRun:
    """One attempt of one node over one state: catch up, make events, commit them.

    Every event the attempt appends carries ``causation_id`` ``"<task_id>#<input cursor>:<node>"``.
    ``own`` holds the events an earlier, crashed attempt of this node on this checkpoint appended;
    they are folded, not redone.

    Args:
        env: The node environment.
        state: The node's input state (a TaskContext or its dict).
        node: The node's name (``planner``, ``tools``...).
        config: The LangGraph run config (``configurable.resume_token`` marks a resume).

    Raises:
        ValueError: The state has no task id.
        LogAheadError: The log holds other events past the checkpoint's cursor: a node appended
            events without returning them (named), or the graph was started from an older
            checkpoint (the log is append-only per task and cannot branch).
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
        self.attempt = attempt_key(task_id, cursor, node)
        past = env.events.read(task_id, after=cursor)
        foreign = [e for e in past if e.causation_id != self.attempt]
        if foreign:  # a node that did not return its events, or time travel (nodes.attempts)
            raise log_ahead_error(task_id, cursor, node, foreign)
        self.own: list[Event] = past
        self.ctx = replay(self.own, self.input)
        self._new: list[Event] = []
        if env.memory is not None and past:  # a crashed attempt may have died before its store write
            env.memory.apply(past, task_id)
        if (watching := NODE_RUNS.get()) is not None:  # a checked node (graphs.divergence)
            watching.append(self)

    @property
    def replayed(self) -> bool:
        """Whether an earlier attempt of this node already recorded its output."""
        return bool(self.own)

    def event(self, kind: str, payload: Any, actor: str = "agent") -> Event:
        """Append one event now, in its own transaction, and fold it into ``ctx``.

        Args:
            kind: The event kind (``plan.created``...).
            payload: Its payload model or dict.
            actor: Who acts: ``agent``, ``user``, ``system`` or ``tool``.

        Returns:
            The appended event, ``seq`` set.
        """
        return self.commit([self.make(kind, payload, actor)])[0]

    def make(self, kind: str, payload: Any, actor: str = "agent") -> Event:
        """A new event of this attempt, not yet appended; its ``causation_id`` is the attempt key.

        Args:
            kind: The event kind.
            payload: Its payload model or dict.
            actor: Who acts: ``agent``, ``user``, ``system`` or ``tool``.

        Returns:
            The event (``seq`` unset).
        """
        return new_event(
            kind,  # type: ignore[arg-type]
            payload,
            actor=actor,  # type: ignore[arg-type]
            correlation_id=self.task_id,
            causation_id=self.attempt,
        )

    def commit(self, events: Sequence[Event]) -> list[Event]:
        """Append ``events`` in one transaction and fold them into ``ctx``.

        Args:
            events: Events made by :meth:`make`.

        Returns:
            The events as appended, ``seq`` set.
        """
        numbered = [e.model_copy(update={"seq": self.ctx.events.cursor + 1 + i}) for i, e in enumerate(events)]
        appended = self.env.events.append(self.task_id, numbered)
        self.ctx = replay(appended, self.ctx)
        self._new.extend(appended)
        if self.env.memory is not None:  # confirmations reach the long-term store (nodes.memory_source)
            self.env.memory.apply(appended, self.task_id)
        return appended

    def resume_events(self) -> list[Event]:
        """The events a resume not yet recorded starts with; empty otherwise.

        Returns:
            ``resume.started`` (naming this node), then the ``fact.stale`` events of
            :meth:`resume_fingerprint`.
        """
        token = (self.config.get("configurable") or {}).get("resume_token")
        if token and token != self.ctx.events.last_resume_token:
            cp = (self.config.get("configurable") or {}).get("resumed_from_checkpoint")
            started = ResumeStarted(token=token, from_checkpoint=cp, node=self.node)
            return [self.make("resume.started", started, actor="user"), *self.resume_fingerprint()]
        return []

    def resume_fingerprint(self) -> list[Event]:
        """The ``fact.stale`` events of what changed while the task was paused.

        A fact resting on a file that changed, or on a HEAD that moved, gets ``fact.stale`` (cause
        ``resume``, ``approval`` when the pause was a wait for an approval, or ``head``).

        Returns:
            The events, not yet committed.
        """
        return self.fingerprint_events("approval" if self.ctx.control.pending_approval is not None else "resume")[0]

    def fingerprint_events(self, cause: Cause) -> tuple[list[Event], dict[str, str]]:
        """Fingerprint the workspace against the task's world (:meth:`world_changes`).

        Idempotent: a fact already marked for the same path and sha gets no second event, so a node
        that re-runs from its first line records each change once.

        Args:
            cause: The cause the events name (``resume``, ``approval``...; a HEAD move is ``head``).

        Returns:
            ``(fact.stale events not yet committed, {path: sha256 now, "" when gone})``.
        """
        changes, head = self.world_changes()
        stale = find_stale(self.ctx, changes, cause, head=head)
        return [self.make("fact.stale", FactStale.model_validate(p), actor="system") for p in stale], changes

    def world_changes(self) -> tuple[dict[str, str], str | None]:
        """The files of the task's world whose bytes the workspace no longer has, by ``env.workspace.fingerprint``.

        Returns:
            ``({path: sha256 now, "" when gone}, HEAD now)``; ``({}, None)`` with freshness off, no
            fingerprinting workspace or an empty world.
        """
        fp = getattr(self.env.workspace, "fingerprint", None)
        if not self.env.freshness or fp is None or not (self.ctx.evidence.world or self.ctx.evidence.head):
            return {}, None
        now, head = fp(sorted(self.ctx.evidence.world))
        return {p: sha for p, sha in now.items() if sha != self.ctx.evidence.world.get(p)}, head

    def update(self) -> dict[str, Any]:
        """The state update: every part of ``ctx`` that differs from the node's input.

        Returns:
            Part name -> its new value.
        """
        return {p: getattr(self.ctx, p) for p in PARTS if getattr(self.ctx, p) != getattr(self.input, p)}

    # model calls -----------------------------------------------------------------------
    def context_built(
        self, role: str, rendered: Rendered, step_id: str | None, ctx: TaskContext | None = None
    ) -> Event:
        """The ``context.built`` event of a prompt, not yet committed: manifest, tokens, refs.

        Args:
            role: The role the prompt is for.
            rendered: The rendered prompt (its text is stored as an artifact).
            step_id: The current plan step, or None.
            ctx: The state it was rendered from; default ``self.ctx``.

        Returns:
            The event.
        """
        ctx = ctx or self.ctx
        fps = fingerprints(rendered.messages, rendered.tools, self.env.count_tokens)
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

    def model_request(
        self, model: BaseChatModel, role: str, rendered: Rendered, built: Event, ctx: TaskContext | None = None
    ) -> tuple[Runnable[Any, Any], list[BaseMessage], RunnableConfig]:
        """What a model call sends: the model with the rendered tools bound, the messages, the run config.

        The config carries the role and the manifest as run metadata (LangSmith shows it on the
        model run), the tag ``role:<role>`` and the run name ``<role>.model``.

        Args:
            model: The chat model.
            role: The role calling it.
            rendered: The prompt.
            built: Its ``context.built`` event (the metadata's source).
            ctx: The state; default ``self.ctx``.

        Returns:
            ``(bound model, messages, config)``.
        """
        ctx = ctx or self.ctx
        p = built.payload
        meta = {
            "task_id": self.task_id,
            "thread_id": self.task_id,
            "role": role,
            "step_id": p["step_id"],
            "call": p["call"],
            "role_call": ctx.events.counts.get(f"context.built:{role}", 0) + 1,  # 1: the first (as ModelCall)
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
        bound: Runnable[Any, Any] = model.bind_tools(rendered.tools) if rendered.tools else model
        messages, cache_kw = provider_caching(model, rendered, self.task_id)
        if cache_kw:
            bound = bound.bind(**cache_kw)
        cfg: RunnableConfig = {"metadata": meta, "tags": [f"role:{role}"], "run_name": f"{role}.model"}
        return bound, [_utf8_message(m) for m in messages], cfg  # a lone surrogate goes as U+FFFD

    def call_model(
        self, model: BaseChatModel, role: str, rendered: Rendered, built: Event, ctx: TaskContext | None = None
    ) -> AIMessage:
        """Invoke ``model`` with the rendered tools bound, the role and manifest as run metadata (:meth:`model_request`).

        Nothing of a failed call is recorded.

        Args:
            model: The chat model.
            role: The role calling it.
            rendered: The prompt.
            built: Its ``context.built`` event (the metadata's source).
            ctx: The state; default ``self.ctx``.

        Returns:
            The model's reply.

        Raises:
            ModelCallError: The provider failed after its client's retries, named in one line
                (:func:`nodes.chat_models.model_error`); ``ContextLengthError`` for a prompt too long.
        """
        bound, messages, cfg = self.model_request(model, role, rendered, built, ctx)
        try:
            out = bound.invoke(messages, config=cfg)
        except Exception as exc:
            _raise_named(exc, role, model)
            raise
        return _reply(out)

    async def acall_model(
        self, model: BaseChatModel, role: str, rendered: Rendered, built: Event, ctx: TaskContext | None = None
    ) -> AIMessage:
        """:meth:`call_model` awaited: ``ainvoke`` on the bound model (the graph runs async).

        Args:
            model: The chat model.
            role: The role calling it.
            rendered: The prompt.
            built: Its ``context.built`` event (the metadata's source).
            ctx: The state; default ``self.ctx``.

        Returns:
            The model's reply.

        Raises:
            ModelCallError: As :meth:`call_model`.
        """
        bound, messages, cfg = self.model_request(model, role, rendered, built, ctx)
        try:
            out = await bound.ainvoke(messages, config=cfg)
        except Exception as exc:
            _raise_named(exc, role, model)
            raise
        return _reply(out)


def _reply(out: Any) -> AIMessage:
    """The model's output as an ``AIMessage`` (a model returning something else: its text)."""
    return out if isinstance(out, AIMessage) else AIMessage(content=str(getattr(out, "content", out)))


def _raise_named(exc: Exception, role: str, model: Any) -> None:
    """Raise the provider failure ``exc`` names (:func:`nodes.chat_models.model_error`), if it names one."""
    failure = model_error(exc, role=role, timeout=request_timeout(model))
    if failure is not None:
        raise failure from exc


def _utf8_message(m: BaseMessage) -> BaseMessage:
    """``m`` with lone surrogates in its text replaced by U+FFFD, so the provider client can encode it.

    ``m`` itself when it has none; a content list's ``text`` blocks are cleaned too.
    """
    if isinstance(m.content, str):
        return m.model_copy(update={"content": clean(m.content)}) if has_surrogates(m.content) else m
    blocks = [
        {**b, "text": clean(b["text"])} if isinstance(b, dict) and isinstance(b.get("text"), str) else b
        for b in m.content
    ]
    return m.model_copy(update={"content": blocks}) if blocks != m.content else m

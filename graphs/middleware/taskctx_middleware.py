"""``TaskContextMiddleware``: taskctx's context machinery for an existing LangChain agent, in one line.

``create_agent(model, tools, middleware=[TaskContextMiddleware("agent.db")])`` (or deepagents'
``create_deep_agent(..., middleware=[...])``) gets an event log and artifact store (a SQLite file,
or a ``postgresql://`` URL), the request pinned verbatim with its hard constraints on every call,
every tool output stored raw and shown compressed and quoted with its ref (``read_artifact`` is
added to the tools), the budget over the whole request, a ``context.built`` event per model call
whose manifest is also the LangSmith model run's metadata, and a prefix that stays cached.
The task is the agent's thread (``thread_id``); with the agent's checkpointer a resume records
nothing twice and runs no recorded tool call again.
"""

from __future__ import annotations

import functools
import json
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from pathlib import Path
from typing import Annotated, Any, NotRequired

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain.agents.middleware.types import PrivateStateAttr
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables.config import ensure_config, var_child_runnable_config
from langchain_core.tools import BaseTool, tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.config import get_config
from langgraph.errors import GraphBubbleUp

from context import Event, classify_result, compress_tool_result, extract_constraints, mask_secrets, new_event, replay
from context.events import (
    ContextBuilt,
    PermissionEvent,
    ResumeStarted,
    TaskCompleted,
    TaskCreated,
    ToolCalled,
    ToolResultReceived,
)
from context.models import SCHEMA_VERSION
from context.pg_store import is_postgres_url
from context.tokens import TokenCounter
from nodes import DEFAULT_BUDGET, DEFAULT_RESERVE, NodeEnv, cached_prefix_tokens, fingerprints, quote_external
from nodes.prompt_parts import prompt_text
from nodes.runtime import provider_of, usage_of
from nodes.tools import as_names
from nodes.tools.builtin import READ_ARTIFACT_SCHEMA, read_artifact
from nodes.tools.tool_bytes import bytes_kept, keeping_bytes

from .prompt import AGENT_ROLE, PromptInputs, agent_prompt, message_text, system_text

__all__ = ["TaskContextMiddleware"]

#: The message a side-effecting call gets when it was cut off mid-run (it is never run twice).
INTERRUPTED = (
    "The call {call_id} of {tool} was interrupted while it ran (the process stopped) and is not run "
    "again: it has side effects. Check its effect before calling it again."
)


#: The agent state's key of the task of a run without a ``thread_id`` (private to the middleware).
TASK_KEY = "taskctx_task_id"


class TaskContextState(AgentState):  # type: ignore[type-arg]
    """The agent's state, with the task of a run without a ``thread_id``."""

    taskctx_task_id: NotRequired[Annotated[str, PrivateStateAttr]]


def _open_stores(db: str) -> Any:
    """The event log and artifact store of ``db``: a SQLite file (its folder created) or a Postgres URL."""
    if is_postgres_url(db):
        from context.pg_store import PgStores

        return PgStores(db)
    from context import SqliteStores

    if db != ":memory:":
        Path(db).expanduser().parent.mkdir(parents=True, exist_ok=True)
    return SqliteStores(db)


def _thread_id() -> str | None:
    try:
        cfg = get_config()
    except RuntimeError:  # outside a graph run
        return None
    tid = (cfg.get("configurable") or {}).get("thread_id")
    return str(tid) if tid else None


class TaskContextMiddleware(AgentMiddleware):  # type: ignore[type-arg]
    """taskctx's context machinery for a ``create_agent`` / ``create_deep_agent`` agent.

    Put it first in ``middleware=[...]``, before or after a ``HumanInTheLoopMiddleware`` (a
    reviewer's edit is recorded as it ran in either order). Each thread (``thread_id``) is one
    task of the log.
    """

    state_schema = TaskContextState

    def __init__(
        self,
        db: str = "taskctx.db",
        *,
        budget: int = DEFAULT_BUDGET,
        reserve_for_output: int = DEFAULT_RESERVE,
        side_effects: str | Iterable[str | BaseTool] = (),
        requires_approval: str | Iterable[str | BaseTool] = (),
        constraints: Sequence[str] = (),
        count_tokens: TokenCounter | None = None,
        keep_last: int = 3,
        low_water: float = 0.0,
        task_id: str | None = None,
        stores: Any = None,
    ) -> None:
        """Open the stores; the agent's calls are recorded from its first run on.

        Args:
            db: The database: a SQLite file (created, with its folder), ``:memory:``, or a
                ``postgresql://`` URL. Ignored when ``stores`` is given.
            budget: Tokens of every model call's whole request (system message, tool schemas,
                messages) and its answer.
            reserve_for_output: Tokens of the budget kept for the answer.
            side_effects: The tools with side effects, by name or as the tools themselves (one
                ``str`` is one name): a call of one that was cut off mid-run is never run
                again, and its result stays in the prompt.
            requires_approval: The tools a ``HumanInTheLoopMiddleware`` gates, named as
                ``side_effects``: each decision is recorded (``permission.requested`` then
                ``granted`` or ``denied``).
            constraints: Hard constraints of every task, verbatim (those in the request's wording
                are found and kept too).
            count_tokens: The token counter (``str -> int``); default o200k_base.
            keep_last: The newest turns ranked high (kept before older ones).
            low_water: When turns must leave the prompt, the share of the history's room (tokens)
                the cut leaves filled, beyond the turns a cut always keeps (the newest, the
                user's, those of side-effecting tools); the rest is room the next calls grow into
                on a cached prefix. 0: only those turns stay.
            task_id: The task's id when the agent runs without a ``thread_id``; default a new
                ``agent-<hex>`` id per middleware.
            stores: Stores to use instead of opening ``db`` (``SqliteStores`` / ``PgStores``).

        Raises:
            StoreOpenError: The database cannot be opened.
            TypeError: ``side_effects`` or ``requires_approval`` holds an item that is neither a
                name nor a LangChain tool.
        """
        super().__init__()
        # checked before the stores open: a bad argument opens nothing
        side_effect_tools = as_names(side_effects)
        approval_tools = as_names(requires_approval, "requires_approval")
        self.stores = stores if stores is not None else _open_stores(db)
        env_kw: dict[str, Any] = {} if count_tokens is None else {"count_tokens": count_tokens}
        self.env = NodeEnv(
            events=self.stores.events,
            artifacts=self.stores.artifacts,
            budget=budget,
            reserve_for_output=reserve_for_output,
            stores=self.stores,
            **env_kw,
        )
        self.side_effects = tuple(side_effect_tools)
        self.requires_approval = tuple(approval_tools)
        self.constraints = list(constraints)
        self.keep_last = keep_last
        self.low_water = low_water
        self.default_task_id = task_id or f"agent-{uuid.uuid4().hex[:12]}"
        self._given: set[str] = set()  # the tasks given to conversations without a thread_id
        self._lock = threading.Lock()
        self.tools: list[BaseTool] = [self._read_artifact_tool()]

    # ---- public helpers -------------------------------------------------------------------
    def task_id(self, state: Any = None) -> str:
        """The task a call belongs to: the run's ``thread_id``, else its conversation's task id.

        A run without a ``thread_id`` is a conversation of its own: :meth:`before_agent` gives it
        a task (the middleware's ``task_id`` for the first, a new ``agent-<hex>`` id for each
        later one) and keeps it in the agent's state, so nothing recorded in one conversation
        answers a call or stands for an approval in another.

        Args:
            state: The agent's state (its task, when the run has no ``thread_id``).

        Returns:
            The task id.
        """
        tid = _thread_id()
        if tid:
            return tid
        own = state.get(TASK_KEY) if isinstance(state, dict) else None
        return str(own) if own else self.default_task_id

    def _new_conversation(self) -> str:
        """The task of a run without a ``thread_id`` that starts a conversation."""
        with self._lock:
            tid = self.default_task_id
            if tid in self._given or self.stores.events.read(tid, limit=1):
                tid = f"agent-{uuid.uuid4().hex[:12]}"
            self._given.add(tid)
            return tid

    def events(self, task_id: str) -> list[Event]:
        """The task's event log, in order.

        Args:
            task_id: The task (the agent's ``thread_id``).

        Returns:
            The events.
        """
        return list(self.stores.events.read(task_id))

    def close(self) -> None:
        """Close the stores (when the middleware opened them)."""
        self.stores.close()

    # ---- the task ------------------------------------------------------------------------
    def _ensure_task(self, task_id: str, messages: Sequence[BaseMessage]) -> None:
        """Record ``task.created`` from the first human message, once per task."""
        if self.stores.events.read(task_id, kinds=["task.created"], limit=1):
            return
        first = next((m for m in messages if isinstance(m, HumanMessage)), None)
        request = message_text(first) if first is not None else ""
        found = [c for c in extract_constraints(request) if c not in self.constraints]
        payload = TaskCreated(
            task_id=task_id,
            original_request=request,
            constraints=[*self.constraints, *found],
            constraint_sources={c: "request" for c in found},
            schema_version=SCHEMA_VERSION,
            requires_approval=list(self.requires_approval),
        )
        self._append(task_id, [new_event("task.created", payload, actor="user")])

    def _append(self, task_id: str, events: list[Event]) -> list[Event]:
        return list(self.stores.events.append(task_id, events)) if events else []

    def before_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Record ``task.created`` on the thread's first run (the request: its first human message).

        A later run of a thread whose agent had answered (a follow-up message) records
        ``resume.started``: the task runs again.

        Args:
            state: The agent's state.
            runtime: The LangGraph runtime.

        Returns:
            None, or for a run without a ``thread_id`` that starts a conversation, its task
            (kept in the agent's state: :meth:`task_id`).
        """
        update = None
        if not _thread_id() and not state.get(TASK_KEY):
            update = {TASK_KEY: self._new_conversation()}
        tid = self.task_id(update or state)
        self._ensure_task(tid, state.get("messages") or [])
        last = self.stores.events.read(tid, after=max(0, self.stores.events.last_seq(tid) - 1))
        if last and last[-1].kind == "task.completed":
            self._append(tid, [new_event("resume.started", ResumeStarted(node=AGENT_ROLE), actor="user")])
        return update

    def after_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Record ``task.completed`` when the agent answered (its last message calls no tool).

        Args:
            state: The agent's state.
            runtime: The LangGraph runtime.

        Returns:
            None (the state is unchanged).
        """
        messages = state.get("messages") or []
        if not messages or not isinstance(messages[-1], AIMessage) or messages[-1].tool_calls:
            return None
        tid = self.task_id(state)
        last = self.stores.events.read(tid, after=max(0, self.stores.events.last_seq(tid) - 1))
        if not last or last[-1].kind != "task.completed":  # (a resume re-running this hook records it once)
            done = TaskCompleted(summary=message_text(messages[-1])[:2_000])
            self._append(tid, [new_event("task.completed", done, actor="agent")])
        return None

    async def aafter_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Async :meth:`after_agent`.

        Args:
            state: The agent's state.
            runtime: The LangGraph runtime.

        Returns:
            None.
        """
        return self.after_agent(state, runtime)

    async def abefore_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Async :meth:`before_agent`.

        Args:
            state: The agent's state.
            runtime: The LangGraph runtime.

        Returns:
            None.
        """
        return self.before_agent(state, runtime)

    # ---- model calls ---------------------------------------------------------------------
    def _answers(self, task_id: str, messages: Sequence[BaseMessage], events: list[Event]) -> list[Event]:
        """Events for the tool messages the agent got without a tool run (an approval's rejection or answer)."""
        have = {e.payload["call_id"] for e in events if e.kind == "tool.result.received"}
        calls = {
            tc.get("id"): (tc["name"], tc.get("args") or {})
            for m in messages
            if isinstance(m, AIMessage)
            for tc in m.tool_calls
        }
        out: list[Event] = []
        for m in messages:
            if not isinstance(m, ToolMessage) or m.tool_call_id in have or m.tool_call_id not in calls:
                continue
            name, args = calls[m.tool_call_id]
            text = message_text(m)
            denied = m.status == "error"
            perm = PermissionEvent(
                call_id=m.tool_call_id, tool=name, arguments=json.dumps(args, sort_keys=True), reason=text[:500]
            )
            if name in self.requires_approval:
                out.append(new_event("permission.requested", perm, actor="system"))
                out.append(new_event("permission.denied" if denied else "permission.granted", perm, actor="user"))
            result = ToolResultReceived(
                call_id=m.tool_call_id, status="denied" if denied else "ok", result_summary=text, raw_chars=len(text)
            )
            out.append(new_event("tool.result.received", result, actor="user"))
        return out

    def check_tools(self, tools: Iterable[BaseTool | dict[str, Any]]) -> None:
        """Check that ``side_effects`` and ``requires_approval`` name only the agent's tools.

        The agent's tools are first known at its first model call (the request's tools): the
        middleware checks them there, before it records the call.

        Args:
            tools: The agent's tools (LangChain tools, or OpenAI-format tool dicts).

        Raises:
            ValueError: A name is not one of the agent's tools (naming it and the agent's tools).
        """
        known = {_tool_name(t) for t in tools} - {"read_artifact"}
        for argument, names in (("side_effects", self.side_effects), ("requires_approval", self.requires_approval)):
            unknown = [n for n in dict.fromkeys(names) if n not in known]
            if unknown:
                which = "is not one of" if len(unknown) == 1 else "are not among"
                raise ValueError(
                    f"{argument} names {', '.join(map(repr, unknown))}, which {which} the agent's tools "
                    f"({', '.join(sorted(known)) or 'none'}); fix the name"
                )

    def _prepare(self, request: ModelRequest) -> tuple[ModelRequest, dict[str, Any]]:
        """The request with taskctx's prompt, and what recording its ``context.built`` needs."""
        self.check_tools(request.tools)
        tid = self.task_id(request.state)
        self._ensure_task(tid, request.messages)
        events = self.events(tid)
        answers = self._answers(tid, request.messages, events)
        events += self._append(tid, answers)
        built = [e for e in events if e.kind == "context.built" and e.payload["role"] == AGENT_ROLE]
        last = built[-1].payload if built else None
        left_out = {b["id"] for b in last["blocks"] if not b["included"]} if last else set()
        tools = [t if isinstance(t, dict) else convert_to_openai_tool(t) for t in request.tools]
        inputs = PromptInputs(
            ctx=replay(events),
            system=system_text(request.system_message),
            messages=list(request.messages),
            tools=tools,
            left_out={i for i in left_out if i.startswith("turn.")},
            results={e.payload["call_id"]: e.payload for e in events if e.kind == "tool.result.received"},
            side_effects=self.side_effects,
            keep_last=self.keep_last,
            low_water=self.low_water,
        )
        rendered, earlier = agent_prompt(inputs, self.env)
        fps = fingerprints(rendered.messages, rendered.tools, self.env.count_tokens)
        m = rendered.manifest
        payload = ContextBuilt(
            call=len(built) + 1,
            role=AGENT_ROLE,
            budget=m.budget,
            prompt_tokens=rendered.prompt_tokens,
            cached_prefix_tokens=cached_prefix_tokens(last["fingerprints"], fps) if last else 0,
            blocks_in=len(m.included),
            blocks_out=len(m.dropped) + len(earlier),
            blocks=[*m.entries, *earlier],
            fingerprints=fps,
        )
        # a resume that re-runs the same call (its event was the last recorded) records it once
        again = bool(events) and events[-1].kind == "context.built" and events[-1].payload.get("fingerprints") == fps
        pending = {"task_id": tid, "payload": payload, "rendered": rendered, "again": again}
        sys_msg, *rest = rendered.messages
        return request.override(system_message=sys_msg, messages=rest), pending  # type: ignore[arg-type]

    def _metadata(self, pending: dict[str, Any]) -> dict[str, Any]:
        """The LangSmith metadata of the model run: the task, the call's tokens and its manifest."""
        p: ContextBuilt = pending["payload"]
        return {
            "task_id": pending["task_id"],
            "thread_id": pending["task_id"],
            "role": AGENT_ROLE,
            "call": p.call,
            "budget": p.budget,
            "prompt_tokens": p.prompt_tokens,
            "cached_prefix_tokens": p.cached_prefix_tokens,
            "manifest": {
                "included": [b.id for b in p.blocks if b.included],
                "dropped": [{"id": b.id, "reason": b.reason} for b in p.blocks if not b.included],
                "blocks": [
                    {
                        "id": b.id,
                        "layer": b.layer,
                        "kind": b.kind,
                        "trust": b.trust,
                        "tokens": b.tokens,
                        "included": b.included,
                    }
                    for b in p.blocks
                ],
            },
        }

    def _record_call(self, request: ModelRequest, pending: dict[str, Any], response: Any, ms: int) -> None:
        """Record the call's ``context.built``: manifest, prompt (an artifact), usage and latency."""
        if pending["again"]:
            return
        r = pending["rendered"]
        result = response.result if isinstance(response, ModelResponse) else [response]
        ai = next((x for x in result if isinstance(x, AIMessage)), None)
        p: ContextBuilt = pending["payload"]
        p = p.model_copy(
            update={
                "prompt_ref": self.env.artifacts.put(prompt_text(r.messages, r.tools)),
                "usage": usage_of(ai) if ai is not None else None,
                "model": _model_name(request.model),
                "provider": provider_of(request.model) or None,
                "latency_ms": ms,
                "reply_tokens": self.env.count_messages([ai]) if ai is not None else None,
            }
        )
        self._append(pending["task_id"], [new_event("context.built", p, actor="system")])

    def _traced(self, pending: dict[str, Any]) -> Any:
        """Set the run config's metadata for the model run the handler starts (returns the reset token)."""
        cfg = ensure_config()
        meta = {**(cfg.get("metadata") or {}), **self._metadata(pending)}
        return var_child_runnable_config.set({**cfg, "metadata": meta})  # type: ignore[typeddict-item]

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], Any]) -> Any:
        """Send taskctx's prompt of the agent's messages; record the call's ``context.built``.

        Args:
            request: The agent's model request (its system message, messages and tools).
            handler: The next handler (the model call).

        Returns:
            The handler's response.

        Raises:
            BudgetError: The request's fixed part (system message, tool schemas, core layer) does
                not fit the budget.
            ValueError: ``side_effects`` or ``requires_approval`` names a tool the agent does not
                have (:meth:`check_tools`); nothing of the call is recorded.
        """
        new, pending = self._prepare(request)
        token = self._traced(pending)
        t0 = time.perf_counter()
        try:
            response = handler(new)
        finally:
            var_child_runnable_config.reset(token)
        self._record_call(request, pending, response, int((time.perf_counter() - t0) * 1000))
        return response

    async def awrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[Any]]) -> Any:
        """Async :meth:`wrap_model_call`.

        Args:
            request: The agent's model request.
            handler: The next handler (the model call).

        Returns:
            The handler's response.
        """
        new, pending = self._prepare(request)
        token = self._traced(pending)
        t0 = time.perf_counter()
        try:
            response = await handler(new)
        finally:
            var_child_runnable_config.reset(token)
        self._record_call(request, pending, response, int((time.perf_counter() - t0) * 1000))
        return response

    # ---- tool calls ----------------------------------------------------------------------
    def _before_tool(self, request: Any) -> ToolMessage | None:
        """A recorded result, or for a cut-off side effect an error, answering the call (None: run it)."""
        cid, name, args = _as_run(request)
        tid = self.task_id(request.state)
        seen = self.stores.events.read(tid, kinds=["tool.called", "tool.result.received"])
        done = next((e.payload for e in seen if e.kind == "tool.result.received" and e.payload["call_id"] == cid), None)
        if done is not None:  # a resume re-runs the tool node: the recorded result answers
            return self._shown(cid, name, done)
        if any(e.kind == "tool.called" and e.payload["call_id"] == cid for e in seen):
            if name in self.side_effects:
                text = INTERRUPTED.format(call_id=cid, tool=name)
                p = ToolResultReceived(call_id=cid, status="error", result_summary=text, raw_chars=len(text))
                self._append(tid, [new_event("tool.result.received", p, actor="system")])
                return self._shown(cid, name, p.model_dump())
        return None

    def _record_start(self, request: Any, args: dict[str, Any] | None = None) -> None:
        """Record the call as it starts its run (and its approval: the approval step let it through)."""
        cid, name, asked = _as_run(request)
        tid = self.task_id(request.state)
        arguments = json.dumps(asked if args is None else args, sort_keys=True, ensure_ascii=False, default=str)
        out: list[Event] = []
        if name in self.requires_approval:  # the call reached its run: the approval step let it through
            perm = PermissionEvent(call_id=cid, tool=name, arguments=arguments, reason="approved")
            out += [new_event("permission.requested", perm, actor="system")]
            out += [new_event("permission.granted", perm, actor="user")]
        thought = _thought(request.state, cid)
        called = ToolCalled(
            call_id=cid, tool=name, arguments=arguments, thought=thought, has_side_effects=name in self.side_effects
        )
        self._append(tid, [*out, new_event("tool.called", called, actor="agent")])

    def _instrumented(self, request: Any, started: list[bool]) -> Any:
        """The request whose tool notes its ``bytes`` and records the call when its run starts.

        The call is recorded when the tool's function starts, not before the handler: a
        ``HumanInTheLoopMiddleware`` inside this middleware (listed after it, ``per_call``)
        decides in the handler, and a call it pauses or rejects never started. A tool without a
        function of its own (or redirected by a reviewer) is recorded before the handler.
        """
        tool_ = request.tool
        _, name, asked = _as_run(request)
        if tool_ is None or tool_.name != name:
            self._record_start(request)
            started.append(True)
            return request
        copy = keeping_bytes(tool_)
        func, coro = getattr(copy, "func", None), getattr(copy, "coroutine", None)
        if copy is tool_ or (func is None and coro is None):
            self._record_start(request)
            started.append(True)
            return request
        fields = set(getattr(getattr(tool_, "tool_call_schema", None), "model_fields", None) or {}) | set(asked)

        def start(kwargs: dict[str, Any]) -> None:
            if not started:
                started.append(True)
                ran = {k: v for k, v in kwargs.items() if k in fields}
                self._record_start(request, ran if ran or not asked else None)

        update: dict[str, Any] = {}
        if callable(func):
            sync_func = func

            @functools.wraps(sync_func)
            def run(*a: Any, **kw: Any) -> Any:
                start(kw)
                return sync_func(*a, **kw)

            update["func"] = run
        if callable(coro):
            async_func = coro

            @functools.wraps(async_func)
            async def arun(*a: Any, **kw: Any) -> Any:
                start(kw)
                return await async_func(*a, **kw)

            update["coroutine"] = arun
        return request.override(tool=copy.model_copy(update=update))

    def _unstarted(self, request: Any, result: Any) -> Any:
        """Record a gated call answered inside the handler without a run: a reviewer's rejection or answer."""
        cid, name, args = _as_run(request)
        text = message_text(result) if isinstance(result, ToolMessage) else ""
        denied = isinstance(result, ToolMessage) and result.status == "error"
        perm = PermissionEvent(call_id=cid, tool=name, arguments=json.dumps(args, sort_keys=True), reason=text[:500])
        out: list[Event] = []
        if name in self.requires_approval:
            out.append(new_event("permission.requested", perm, actor="system"))
            out.append(new_event("permission.denied" if denied else "permission.granted", perm, actor="user"))
        p = ToolResultReceived(
            call_id=cid, status="denied" if denied else "ok", result_summary=text, raw_chars=len(text)
        )
        written = self._append(self.task_id(request.state), [*out, new_event("tool.result.received", p, actor="user")])
        return self._shown(cid, name, written[-1].payload, base=result if isinstance(result, ToolMessage) else None)

    def _after_tool(self, request: Any, result: Any, kept: Sequence[bytes] = ()) -> Any:
        """Store the output raw, record its result, and give the agent the compressed, quoted form.

        ``kept``: the ``bytes`` the tool returned (stored as they are; the text is their UTF-8
        decoding, undecodable bytes as U+FFFD, as the graph's LangChain tools record them).
        """
        cid, name, args = _as_run(request)
        if not isinstance(result, ToolMessage):  # a Command: its update goes through as the tool made it
            self._command_result(self.task_id(request.state), cid, result)
            return result
        if kept and result.status != "error":
            raw = kept[-1].decode("utf-8", "replace")
            ref = self.env.artifacts.put(kept[-1])
        else:
            raw = result.content if isinstance(result.content, str) else json.dumps(result.content, ensure_ascii=False)
            ref = self.env.artifacts.put(raw)
        path = args.get("path") or args.get("file_path")
        comp = compress_tool_result(raw, classify_result(name, args), ref, path=path if isinstance(path, str) else None)
        p = ToolResultReceived(
            call_id=cid,
            status="error" if result.status == "error" else "ok",
            result_summary=comp.text,
            raw_ref=ref,
            raw_chars=len(raw),
            compressed=comp.compressed,
        )
        written = self._append(self.task_id(request.state), [new_event("tool.result.received", p, actor="tool")])
        return self._shown(cid, name, written[0].payload, base=result)

    def _command_result(self, tid: str, cid: str, command: Any) -> None:
        """Record the tool message a tool's ``Command`` carries (shown as it is: not compressed)."""
        update = getattr(command, "update", None)
        msgs = update.get("messages", []) if isinstance(update, dict) else []
        tm = next((m for m in msgs if isinstance(m, ToolMessage) and m.tool_call_id == cid), None)
        if tm is None:
            return
        raw = message_text(tm)
        p = ToolResultReceived(
            call_id=cid,
            status="error" if tm.status == "error" else "ok",
            result_summary=raw,
            raw_ref=self.env.artifacts.put(raw),
            raw_chars=len(raw),
        )
        self._append(tid, [new_event("tool.result.received", p, actor="tool")])

    def _failed(self, request: Any, exc: Exception) -> None:
        """Record a call whose tool raised: an error result, so a resume answers it from the log."""
        text = f"{type(exc).__name__}: {exc}"
        p = ToolResultReceived(call_id=request.tool_call.get("id") or "", status="error", result_summary=text)
        self._append(
            self.task_id(request.state),
            [new_event("tool.result.received", p.model_copy(update={"raw_chars": len(text)}), actor="tool")],
        )

    def _shown(self, cid: str, name: str, p: dict[str, Any], base: ToolMessage | None = None) -> ToolMessage:
        """The tool message the agent keeps: the recorded prompt form, quoted, with its ref."""
        text = quote_external(mask_secrets(p["result_summary"]).text, source=f"tool:{name}", ref=p.get("raw_ref"))
        status = "error" if p["status"] != "ok" else "success"
        if base is not None:
            return base.model_copy(update={"content": text, "status": status})
        return ToolMessage(content=text, tool_call_id=cid, name=name, status=status)

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """Record the call and its result; the agent gets the output compressed, quoted, with its ref.

        ``read_artifact`` (the middleware's own tool) is shown whole and not stored again. A tool
        that returns ``bytes`` has them stored as they are, its text their UTF-8 decoding
        (undecodable bytes as U+FFFD), as the graph's LangChain tools record them.

        Args:
            request: The tool call request (``ToolCallRequest``).
            handler: The next handler (the tool's run).

        Returns:
            The tool message (or the tool's ``Command``).
        """
        if request.tool_call["name"] == "read_artifact":
            return handler(request)
        answered = self._before_tool(request)
        if answered is not None:
            return answered
        started: list[bool] = []
        with bytes_kept() as kept:
            try:
                out = handler(self._instrumented(request, started))
            except GraphBubbleUp:  # an interrupt (a reviewer's decision to come): not a result
                raise
            except Exception as exc:  # recorded, then raised as the agent would have raised it
                if not started:
                    self._record_start(request)
                self._failed(request, exc)
                raise
        if not started:  # answered inside the handler, the tool not run
            if isinstance(out, ToolMessage) and _as_run(request)[1] in self.requires_approval:
                return self._unstarted(request, out)  # a reviewer's rejection or answer
            self._record_start(request)  # another middleware's answer: the call's result
        return self._after_tool(request, out, kept)

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        """Async :meth:`wrap_tool_call`.

        Args:
            request: The tool call request.
            handler: The next handler (the tool's run).

        Returns:
            The tool message (or the tool's ``Command``).
        """
        if request.tool_call["name"] == "read_artifact":
            return await handler(request)
        answered = self._before_tool(request)
        if answered is not None:
            return answered
        started: list[bool] = []
        with bytes_kept() as kept:
            try:
                out = await handler(self._instrumented(request, started))
            except GraphBubbleUp:  # an interrupt (a reviewer's decision to come): not a result
                raise
            except Exception as exc:  # recorded, then raised as the agent would have raised it
                if not started:
                    self._record_start(request)
                self._failed(request, exc)
                raise
        if not started:  # answered inside the handler, the tool not run
            if isinstance(out, ToolMessage) and _as_run(request)[1] in self.requires_approval:
                return self._unstarted(request, out)  # a reviewer's rejection or answer
            self._record_start(request)  # another middleware's answer: the call's result
        return self._after_tool(request, out, kept)

    def _read_artifact_tool(self) -> BaseTool:
        env = self.env

        @tool("read_artifact", description=READ_ARTIFACT_SCHEMA["function"]["description"])
        def read_artifact_tool(ref: str) -> str:
            """Fetch the exact text of an artifact ref."""
            out = read_artifact(env, {"ref": ref})
            return out.output if out.status == "ok" else f"error: {out.output}"

        return read_artifact_tool


#: The agent state's key where ``HumanInTheLoopMiddleware`` keeps a reviewer's edits, by call id.
HITL_EDITS = "hitl_edited_tool_calls"


def _as_run(request: Any) -> tuple[str, str, dict[str, Any]]:
    """The call id, tool and arguments the call runs with: a reviewer's edit, if one replaced it.

    ``HumanInTheLoopMiddleware`` substitutes an ``edit`` decision in its ``wrap_tool_call``, so a
    middleware outside it would see the model's call, not the one that runs.
    """
    tc = request.tool_call
    cid = tc.get("id") or ""
    state = request.state if isinstance(request.state, dict) else {}
    edit = (state.get(HITL_EDITS) or {}).get(cid) if cid else None
    if isinstance(edit, dict) and isinstance(edit.get("args"), dict):
        return cid, str(edit.get("name") or tc["name"]), dict(edit["args"])
    return cid, tc["name"], dict(tc.get("args") or {})


def _tool_name(t: BaseTool | dict[str, Any]) -> str:
    """A tool's name: a LangChain tool's ``.name``, or an OpenAI-format dict's."""
    if isinstance(t, BaseTool):
        return t.name
    return str((t.get("function") or {}).get("name") or t.get("name") or "")


def _thought(state: Any, call_id: str) -> str:
    """The text of the AI message that made the call (the agent's note, recorded with it)."""
    messages = state.get("messages", []) if isinstance(state, dict) else []
    for m in reversed(messages):
        if isinstance(m, AIMessage) and any(tc.get("id") == call_id for tc in m.tool_calls):
            return m.content if isinstance(m.content, str) else ""
    return ""


def _model_name(model: Any) -> str | None:
    try:
        return str(model._get_ls_params().get("ls_model_name") or type(model).__name__)
    except Exception:
        return type(model).__name__
